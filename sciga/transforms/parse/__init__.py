"""LaTeXML HTML (ar5iv, arxiv.org/html, local conversions) -> Paper records."""

from sciga.transforms.parse.errors import ParseError
from sciga.transforms.parse.latexml_html import parse_latexml_html

__all__ = ["ParseError", "parse_latexml_html"]
