#!/usr/bin/env bash
# Lint, as CI runs it: ruff (pyflakes, pycodestyle errors, import order, bugbear, pyupgrade,
# blind excepts, noqa hygiene; configured in pyproject.toml) and the import layers
# (import-linter contracts in pyproject.toml). import-linter reads the package as it is
# installed, so the project is installed into a throwaway folder first (the checkout itself
# is left untouched: the copy is built elsewhere).
set -euo pipefail
cd "$(dirname "$0")/.."

ruff check .

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src"
cp -r setup.py pyproject.toml README.md sciga schemas transforms quality training explore publish pipelines samples "$work/src/"
python -m pip install -q --no-deps --no-build-isolation --target "$work/site" "$work/src" >/dev/null
(cd "$work" && PYTHONPATH="$work/site" lint-imports --config "$OLDPWD/pyproject.toml" | tail -n 4)
