#!/usr/bin/env bash
# Lint, as CI runs it: ruff (pyflakes, pycodestyle errors, import order, bugbear, pyupgrade,
# blind excepts, noqa hygiene; configured in pyproject.toml), the import layers
# (import-linter contracts in pyproject.toml), the types (mypy over the whole package,
# [tool.mypy] in pyproject.toml) and the docs site (`mkdocs build --strict`: a
# broken link or anchor, a page left out of the nav, a stale generated part or a path that no
# longer exists fails). import-linter and mypy read the checkout itself (the code is the
# package sciga/; the top-level folders are links into it); the site is built in a throwaway folder.
set -euo pipefail
cd "$(dirname "$0")/.."

ruff check .
ruff format --check .   # the one code style (pyproject.toml [tool.ruff])

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The checkout as it is: sciga.<folder> resolves from here without an install.
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" lint-imports | tail -n 4
# Every module under its import name (sciga.transforms...); the cache in
# .mypy_cache makes a rerun take seconds.
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" python -m mypy -p sciga
# Not --quiet: it hides the warnings that --strict counts. The log is shown only on failure.
if ! NO_MKDOCS_2_WARNING=1 python -m mkdocs build --strict --site-dir "$work/docs-site" >"$work/mkdocs.log" 2>&1; then
  grep -v '^INFO' "$work/mkdocs.log" >&2
  echo "lint: the docs site does not build with mkdocs build --strict (warnings above)" >&2
  exit 1
fi
echo "docs: mkdocs build --strict passed"
