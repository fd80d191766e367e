"""Whether a page is a usable LaTeXML conversion: what a failed or missing conversion looks
like (see ``sciga.transforms.fetch.html_pages``), checked by the fetcher on what it downloads
and by the build on the pages it reads.

A module of its own, beside no HTTP code, because the build's results depend on it (a
failed conversion becomes a dead-letter row): the results fingerprint
(``result_store.code_fingerprint``) covers the modules the stages import, and editing the
HTTP client must not recompute every paper.
"""

from __future__ import annotations

import re
import zlib
from typing import Optional
from urllib.parse import urlsplit

from sciga.transforms.common.decompress import InflatesTooFar, gunzip_at_most

MAX_PAGE_BYTES = 256 * 1024 * 1024
_GENERATOR_RE = re.compile(rb"Generated\s+(?:on\s+[^<>]{0,80}?\s+)?by\s+(LaTeXML(?:\s*oxide)?|latexml[-_ ]oxide)", re.I)
_TITLE_RE = re.compile(rb"<title[^>]*>\s*(.*?)\s*</title>", re.I | re.S)
_ARTICLE_RE = re.compile(rb"<article[^>]*ltx_document[^>]*>(.*?)</article>", re.I | re.S)
_TAG_RE = re.compile(rb"<[^>]+>")


def generator_of(body: bytes) -> Optional[str]:
    m = _GENERATOR_RE.search(body[-300_000:]) or _GENERATOR_RE.search(body[:300_000])
    if not m:
        return None
    return "LaTeXML oxide" if b"oxide" in m.group(1).lower() else "LaTeXML"


_FATAL_MARKERS = (b"ar5iv-severity-fatal", b"Conversion to HTML had a Fatal error", b"No content available")


def failed_conversion(body: bytes, max_bytes: int = MAX_PAGE_BYTES) -> Optional[str]:
    """Cheap check for a page whose conversion failed (looks at the head and tail only
    unless a marker is there): the reason, or None. A gzipped page is inflated to at most
    ``max_bytes``; one that inflates further is left to the parser, which refuses it."""
    if body[:2] == b"\x1f\x8b":
        try:
            body = gunzip_at_most(body, max_bytes)
        except (OSError, EOFError, zlib.error, InflatesTooFar):
            return None
    tail = max(0, len(body) - 200_000)  # searched in place: a copy of both ends cost more than the search
    if not any(body.find(m, 0, 200_000) >= 0 or body.find(m, tail) >= 0 for m in _FATAL_MARKERS):
        return None
    problem = conversion_problem(body)
    return problem[1] if problem and problem[0] == "conversion_failed" else None


def conversion_problem(body: bytes, url: str = "", max_bytes: int = MAX_PAGE_BYTES) -> Optional[tuple[str, str]]:
    """(error_type, reason) if the page is not a usable LaTeXML conversion, else None."""
    if body[:2] == b"\x1f\x8b":
        try:
            body = gunzip_at_most(body, max_bytes)
        except InflatesTooFar as e:
            return "too_large", f"the page is gzipped and {e}"
        except (OSError, EOFError, zlib.error):
            return "corrupt_page", "the page is a damaged gzip stream"
    if not body.strip():
        return "empty_page", "the server sent an empty page"
    head = body[:4096].lstrip()
    if head.startswith(b"%PDF"):
        return "not_latexml", "the server sent a PDF, not an HTML conversion"
    low = body.lower()
    fatal_marker = b"ar5iv-severity-fatal" in low or b"conversion to html had a fatal error" in low
    article = _ARTICLE_RE.search(body)
    text = b""
    if article:
        text = re.sub(rb"\s+", b" ", _TAG_RE.sub(b" ", article.group(1))).strip()
    title_m = _TITLE_RE.search(body[:100_000])
    title = title_m.group(1).strip().lower() if title_m else b""
    if (fatal_marker or title == b"no content available") and len(text) < 200:
        return "conversion_failed", "the LaTeXML conversion failed (fatal error, empty document)"
    if b"ltx_" not in body:
        path = urlsplit(url).path if url else ""
        if "/abs/" in path:
            return "no_html", f"there is no HTML conversion (redirected to the abstract page {url})"
        return "not_latexml", "the page is not LaTeXML output"
    return None
