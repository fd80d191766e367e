"""How many rows one page may make: the bounds that keep a single hostile page from taking
gigabytes (issue 43: a page with 1,000,000 references to one figure took 4.7 GB, one with
100,000 figures 4.6 GB and a 1.23 GB figures shard).

Two checks, both documented limits a real paper stays far below:

* before the page is parsed, on its decoded bytes (a regex count, ~0.1 s for 100 MB): more
  than ``MAX_FIGURE_ELEMENTS`` ``<figure>`` elements or more than ``MAX_INTERNAL_LINKS``
  links within the page (``href="#..."``: references to figures, tables, sections,
  equations and the bibliography) make the page a dead letter (``too_many_rows``, stage
  ``parse``) before lxml builds a tree of millions of elements;
* after parsing, the figure rows (figures and subfigures) are counted exactly against
  ``MAX_FIGURE_ROWS`` (same dead letter).

Mentions are not a reason to drop a paper: the linking stage keeps the first
``MAX_MENTIONS`` mention rows of a paper in reading order and counts the rest in the build's
``stats`` (``mentions_capped``; ``transforms/link/link_paper.py``).

For scale: the largest papers of the development corpus have a few hundred figures and
panels and a few thousand internal links; SciGA's 145k papers average under 10 figures.
"""

from __future__ import annotations

import re

from sciga.transforms.parse.errors import ParseError

MAX_FIGURE_ELEMENTS = 10_000  # <figure> elements in the page (figures, subfigures, tables)
MAX_INTERNAL_LINKS = 100_000  # <a href="#..."> in the page
MAX_FIGURE_ROWS = 5_000  # figures + subfigures of the parsed paper: rows of the figures config

_FIGURE_TAG = re.compile(rb"<figure[\s>/]", re.I)
_INTERNAL_LINK = re.compile(rb"""\shref\s*=\s*["']?#""", re.I)


def check_page_size(utf8: bytes, input_uri: str) -> None:
    """``ParseError("too_many_rows")`` for a page whose element counts no paper has."""
    figures = _count_above(_FIGURE_TAG, utf8, MAX_FIGURE_ELEMENTS)
    if figures > MAX_FIGURE_ELEMENTS:
        raise _too_many(input_uri, f"more than {MAX_FIGURE_ELEMENTS:,} <figure> elements")
    links = _count_above(_INTERNAL_LINK, utf8, MAX_INTERNAL_LINKS)
    if links > MAX_INTERNAL_LINKS:
        raise _too_many(input_uri, f'more than {MAX_INTERNAL_LINKS:,} links within the page (href="#...")')


def check_figure_rows(n_rows: int, input_uri: str) -> None:
    if n_rows > MAX_FIGURE_ROWS:
        raise _too_many(input_uri, f"{n_rows:,} figures and subfigures (the limit is {MAX_FIGURE_ROWS:,})")


def _count_above(pattern: re.Pattern, data: bytes, limit: int) -> int:
    """Matches of ``pattern`` in ``data``, counting stopped once past ``limit``."""
    n = 0
    for _ in pattern.finditer(data):
        n += 1
        if n > limit:
            break
    return n


def _too_many(input_uri: str, what: str) -> ParseError:
    return ParseError(
        "too_many_rows",
        f"{input_uri} has {what}, which no paper has; it was not built, so that one page cannot take the build's "
        "memory or fill a shard (a generated or hostile page?).",
    )
