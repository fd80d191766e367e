#!/usr/bin/env bash
# Lint, as CI runs it: ruff (pyflakes, pycodestyle errors, import order, bugbear, pyupgrade,
# blind excepts, noqa hygiene; configured in pyproject.toml), the import layers
# (import-linter contracts in pyproject.toml) and the docs site (`mkdocs build --strict`: a
# broken link or anchor, a page left out of the nav, a stale generated part or a path that no
# longer exists fails). import-linter reads the package as it is installed, so the project is
# installed into a throwaway folder first (the checkout itself is left untouched: the copy is
# built elsewhere); the site is built there too.
set -euo pipefail
cd "$(dirname "$0")/.."

ruff check .

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src"
cp -r setup.py pyproject.toml README.md sciga schemas transforms quality training explore publish pipelines samples "$work/src/"
python -m pip install -q --no-deps --no-build-isolation --target "$work/site" "$work/src" >/dev/null
(cd "$work" && PYTHONPATH="$work/site" lint-imports --config "$OLDPWD/pyproject.toml" | tail -n 4)
# Not --quiet: it hides the warnings that --strict counts. The log is shown only on failure.
if ! NO_MKDOCS_2_WARNING=1 python -m mkdocs build --strict --site-dir "$work/docs-site" >"$work/mkdocs.log" 2>&1; then
  grep -v '^INFO' "$work/mkdocs.log" >&2
  echo "lint: the docs site does not build with mkdocs build --strict (warnings above)" >&2
  exit 1
fi
echo "docs: mkdocs build --strict passed"
