"""LaTeXML HTML (ar5iv, arxiv.org/html, local conversions) -> Paper records."""
from sciga.transforms.parse.errors import ParseError  # noqa: F401
from sciga.transforms.parse.latexml_html import parse_latexml_html  # noqa: F401
