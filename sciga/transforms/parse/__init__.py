"""LaTeXML HTML (ar5iv, arxiv.org/html, local conversions) -> Paper records.

The parser is imported on first use (``sciga.transforms.parse.parse_latexml_html``): the
package is also where the parse options live, which the launcher reads before it knows
whether any page is to be parsed (a rebuild with nothing to do never imports lxml's parser
stack, ~0.25 s)."""

from __future__ import annotations

from typing import Any

__all__ = ["ParseError", "parse_latexml_html"]


def __getattr__(name: str) -> Any:
    if name == "ParseError":
        from sciga.transforms.parse.errors import ParseError

        return ParseError
    if name == "parse_latexml_html":
        from sciga.transforms.parse.latexml_html import parse_latexml_html

        return parse_latexml_html
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
