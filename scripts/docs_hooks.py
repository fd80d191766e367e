"""MkDocs hooks of the docs site (mkdocs.yml ``hooks:``): the generated parts and the checks.

- Every ``<!-- sciga:NAME ARG -->`` marker of a page is replaced by the Markdown that
  scripts/docs_gen.py makes from the code (CLI reference, data reference, gate
  expectations, dead-letter reasons, image statuses, code map, the README as the home page).
- The CLI page gets a section for every `sciga` command it does not name yet.
- A repository path written in backticks on a page (`transforms/vision/decode.py`,
  `bench/scale.py`, `tests/pipelines/test_gcs_*.py`) must exist: a page that names a file the tree no
  longer has is stale.

Problems are logged as warnings, so ``mkdocs build --strict`` (CI) fails on them.
"""

from __future__ import annotations

import glob
import importlib.util
import logging
import re
import sys
from pathlib import Path

log = logging.getLogger("mkdocs.plugins.sciga")

_HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("docs_gen", _HERE / "docs_gen.py")
docs_gen = importlib.util.module_from_spec(_spec)
sys.modules["docs_gen"] = docs_gen
_spec.loader.exec_module(docs_gen)

# Folders of the repository: a backticked path starting with one of them names a tracked file.
_REPO_DIRS = (
    "schemas",
    "transforms",
    "explore",
    "quality",
    "training",
    "publish",
    "pipelines",
    "samples",
    "sciga",
    "bench",
    "tests",
    "scripts",
    "docker",
    "notebooks",
    "docs",
    ".ci",
)
_PATH_RE = re.compile(r"`((?:" + "|".join(re.escape(d) for d in _REPO_DIRS) + r")/[^`\s:]*)")
_FENCE_RE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)


def stale_paths(markdown: str) -> list[str]:
    """Repository paths named in backticks (outside code blocks) that do not exist."""
    text = _FENCE_RE.sub("", markdown)
    missing = []
    for path in dict.fromkeys(_PATH_RE.findall(text)):
        path = path.rstrip(".,;)")
        # `tests/pages/panels` names the page panels.html: a path may leave out the extension
        if not glob.glob(str(docs_gen.ROOT / path)) and not glob.glob(str(docs_gen.ROOT / path) + ".*"):
            missing.append(path)
    return missing


def on_page_markdown(markdown, page, config, files):
    src = page.file.src_uri
    try:
        if src == "reference/cli.md":
            markdown = docs_gen.cli_page(markdown)
        markdown = docs_gen.expand_markers(markdown)
    except docs_gen.DocsError as e:
        log.warning("docs/%s: %s", src, e)
    for path in stale_paths(markdown):
        log.warning("docs/%s names `%s`, which is not in the repository; update the page", src, path)
    return markdown
