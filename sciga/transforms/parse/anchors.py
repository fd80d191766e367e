"""Cross-reference anchors (``a.ltx_ref``) -> S2ORC-style ref spans on our record ids.

LaTeXML writes a reference to a figure as ``<a href="#S3.F2" title="Figure 2 ‣ ...">``;
arxiv.org pages may use absolute URLs (``https://arxiv.org/html/2401.13641v1#S3.F2``).
One LaTeXML element can hold two numbered figures (two minipages, one ``figure``); the
printed number in the anchor's title or text then picks the right one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Optional
from urllib.parse import urlsplit

from sciga.schemas.ids import FIGURE_ID_RE
from sciga.schemas.records import RefSpan

_NUM_RE = re.compile(r"(?:Figure|Fig\.?|Table|Tab\.?)\s*([A-Z]{0,2}\d+(?:[.\-]\d+)*)", re.I)


def anchor_target(href: str, paper_id: Optional[str]) -> Optional[str]:
    """The LaTeXML element id an href points at, if it points inside this paper."""
    if "#" not in href:
        return None
    url, frag = href.split("#", 1)
    if not frag:
        return None
    if url:
        path = urlsplit(url).path
        # Links into another paper are citations of it, not references to our figures.
        if (
            paper_id
            and paper_id not in path
            and "/html/submission" not in path
            and not path.endswith((".html", "/view"))
        ):
            return None
    return frag


def resolve_anchor(
    href: str, title: Optional[str], text: str, by_html_id: dict, numbers: dict, paper_id: Optional[str]
) -> Optional[str]:
    target = anchor_target(href, paper_id)
    if not target:
        return None
    cands = by_html_id.get(target)
    if not cands:
        return None
    if len(cands) == 1:
        return cands[0]
    for src in (title or "", text):
        m = _NUM_RE.search(src)
        if m:
            for c in cands:
                if numbers.get(c) == m.group(1):
                    return c
    m = re.search(r"\d+", text)
    if m:
        for c in cands:
            if numbers.get(c) == m.group(0):
                return c
    return cands[0]


def ref_spans(
    paragraph_text: str, anchors: Iterable, by_html_id: dict, numbers: dict, paper_id: Optional[str]
) -> list[RefSpan]:
    spans = []
    n = len(paragraph_text)
    for a in anchors:
        start, end = a.start, min(a.end, n)
        if end <= start:
            continue
        text = paragraph_text[start:end]
        ref = resolve_anchor(a.href, a.title, text, by_html_id, numbers, paper_id)
        if ref is not None:
            spans.append(RefSpan(start=start, end=end, text=text, ref_id=ref, resolution="anchor"))
    return spans


def same_float(a: str, b: str) -> bool:
    """Do two record ids name the same float (a figure and its subfigures are one float)?"""
    if a == b:
        return True
    ma, mb = FIGURE_ID_RE.match(a), FIGURE_ID_RE.match(b)
    return bool(ma and mb and ma.group("paper") == mb.group("paper") and ma.group("fig") == mb.group("fig"))


def caption_ref_spans(
    record, anchors: Iterable, by_html_id: dict, numbers: dict, paper_id: Optional[str]
) -> list[RefSpan]:
    """Ref spans of a figure / subfigure / table caption. A caption naming its own float
    ("Figure 3: ... (a) ... of Figure 3") is not a reference to it and is left out."""
    return [
        s
        for s in ref_spans(record.caption, anchors, by_html_id, numbers, paper_id)
        if not same_float(s.ref_id, record.id)
    ]
