"""One text (paragraph, caption or title) -> its S2ORC-style ref spans, in three passes.

1. ``a.ltx_ref`` anchors (resolved by href at parse time, ``anchors.py``) are widened to the
   mention a person reads. LaTeXML renders ``Figure~\\ref{x}`` as the typed word plus an
   anchor holding only the number, so the span would be "3"; we extend it over the keyword
   typed right before it ("Figure 3", "Fig. 3") and over panels typed right after it
   ("Figure <a>6</a>b" -> "Figure 6b", refined to the panel's subfigure when the figure has
   panels). The href still decides the target; only the surface grows. Anchors whose text
   already holds the keyword (ar5iv ``\\autoref``: "Figure 8") are unchanged. In a list
   ("Figures <a>1</a> and <a>2</a>") only the first anchor gets the keyword.
2. ``LABEL:fig:xyz`` leftovers (references LaTeXML could not resolve) are looked up in the
   TeX label map (label -> printed number) and mapped like typed mentions.
3. Typed mentions (``grammar.py``) that overlap no span of passes 1-2 are mapped by printed
   number. This is what keeps anchors from being counted twice.

A reference to the float whose caption is being read (``self_id``) is never a span.
"""
from __future__ import annotations

from bisect import bisect_right
from typing import Iterable, Mapping, Optional

from sciga.schemas.ids import FIGURE_ID_RE
from sciga.schemas.records import RefSpan
from sciga.transforms.link.anchors import same_float
from sciga.transforms.link.grammar import LABEL_RE, find_expressions, keyword_before, mask_tokens, parse_item, parse_panels
from sciga.transforms.link.targets import FigureIndex

def _is_whole_figure(ref_id: str) -> bool:
    m = FIGURE_ID_RE.match(ref_id)
    return bool(m and m.group("sub") is None)


class _Taken:
    """Sorted, non-overlapping character intervals already claimed by a span."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def overlaps(self, start: int, end: int) -> bool:
        i = bisect_right(self.starts, start)
        if i > 0 and self.ends[i - 1] > start:
            return True
        return i < len(self.starts) and self.starts[i] < end

    def add(self, start: int, end: int) -> None:
        i = bisect_right(self.starts, start)
        self.starts.insert(i, start)
        self.ends.insert(i, end)


def link_text(text: str, anchor_spans: Iterable[RefSpan], index: FigureIndex,
              figure_labels: Optional[Mapping[str, str]] = None, self_id: Optional[str] = None) -> list[RefSpan]:
    masked = mask_tokens(text)
    out: list[RefSpan] = []
    taken = _Taken()

    # 1. anchors: widen to the human mention, refine by typed panels.
    for s in sorted(anchor_spans, key=lambda s: (s.start, s.end, s.ref_id)):
        if s.resolution not in (None, "anchor"):
            continue  # spans of an earlier linking run are recomputed below
        start, end, refs = s.start, s.end, [s.ref_id]
        kw = keyword_before(masked, start)
        if kw is not None:
            start = kw
        if _is_whole_figure(s.ref_id):
            panels, pend = parse_panels(masked, end)
            if panels:
                refs, end = index.refine(s.ref_id, panels), pend
        for ref in refs:
            if self_id and same_float(ref, self_id):
                continue
            out.append(RefSpan(start=start, end=end, text=text[start:end], ref_id=ref, resolution="anchor"))
        if not taken.overlaps(start, end):
            taken.add(start, end)

    # 2. LABEL:fig:... leftovers through the TeX label map.
    if "LABEL:" in masked:
        for m in LABEL_RE.finditer(masked):
            if taken.overlaps(m.start(), m.end()):
                continue
            printed = (figure_labels or {}).get(m.group("label"))
            item = parse_item(printed) if printed else None
            refs = index.targets(item) if item else []
            refs = [r for r in refs if not (self_id and same_float(r, self_id))]
            if not refs:
                continue
            kw = keyword_before(masked, m.start())
            start = m.start() if kw is None else kw
            for ref in refs:
                out.append(RefSpan(start=start, end=m.end(), text=text[start:m.end()], ref_id=ref, resolution="label"))
            taken.add(start, m.end())

    # 3. typed mentions not already covered.
    for expr in find_expressions(masked):
        claimed = []
        for item in expr.items:
            if taken.overlaps(item.start, item.end):
                continue
            for ref in index.targets(item, expr.qualified):
                if self_id and same_float(ref, self_id):
                    continue
                out.append(RefSpan(start=item.start, end=item.end, text=text[item.start:item.end], ref_id=ref,
                                   resolution="text"))
            claimed.append((item.start, item.end))
        for a, b in dict.fromkeys(claimed):
            taken.add(a, b)

    out.sort(key=lambda s: (s.start, s.end, s.ref_id))
    return out
