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

Spans that name several figures or panels:
- a range written as two links, "Figures <a>4</a>-<a>6</a>", names 5 too: the figures
  between the two ends get the whole range as their span (``resolution`` "range"); a range
  of two panel links ("<a>3a</a>-<a>3c</a>") names the panels between them;
- panels of a figure that has panel elements link each to its own subfigure ("Figures 3b
  and c" -> F3.2 "Figures 3b", F3.3 "c"); panels of a figure without panel elements give
  ONE span of the figure over the whole list, the panel names kept in ``panels``
  ("Figure 5a,b,c" -> F5, panels a, b, c).

A reference to the float whose caption is being read (``self_id``) is never a span. Typed
mentions of another work's figure ("Figure 1 of [12]", "their Figure 4", a mention inside
a citation element, whose spans the parser kept in ``citations``) are never spans; those
that name one of this paper's figure numbers are counted in ``stats["other_work"]``; a
``LABEL:`` leftover the TeX label map does not resolve is no mention at all, counted in
``stats["unresolved_label"]``.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from typing import Optional

from sciga.schemas.ids import FIGURE_ID_RE
from sciga.schemas.records import RefSpan
from sciga.transforms.link.grammar import (
    LABEL_RE,
    continue_panels,
    find_expressions,
    keyword_before,
    mask_tokens,
    parse_item,
    parse_panels,
)
from sciga.transforms.link.targets import FigureIndex
from sciga.transforms.parse.anchors import same_float


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


def _anchor_panels(masked: str, end: int) -> tuple[tuple[str, ...], int]:
    """Panels typed right after an anchor's number, with list continuations:
    "<a>6</a>b", "<a>3</a>b and c", "<a>4</a>(a)-(c)"."""
    panels, pend = parse_panels(masked, end)
    if not panels:
        return (), end
    out = list(panels)
    while len(out[-1]) == 1:
        cont = continue_panels(masked, pend, out[-1])
        if cont is None:
            break
        more, _, pend = cont
        out.extend(more)
    return tuple(dict.fromkeys(out)), pend


_RANGE_GAP_RE = re.compile(r"\s*(?:[-\u2013\u2014]|\bto\b)\s*$")
_MAX_LINKED_RANGE = 20


def _range_between(index: FigureIndex, a: str, b: str) -> list[str]:
    """Ids strictly between two linked ends of a range: figures by printed number
    ("Figures 4-6" -> F5), or panels of one figure by position ("3a-3c" -> F3.2)."""
    ma, mb = FIGURE_ID_RE.match(a), FIGURE_ID_RE.match(b)
    if not (ma and mb):
        return []
    if ma.group("sub") is None and mb.group("sub") is None:
        fa, fb = index.by_id.get(a), index.by_id.get(b)
        if not (fa and fb and fa.number and fb.number and fa.number.isdigit() and fb.number.isdigit()):
            return []
        lo, hi = int(fa.number), int(fb.number)
        if not 0 < hi - lo <= _MAX_LINKED_RANGE:
            return []
        mids = [index.figure(str(n)) for n in range(lo + 1, hi)]
        return [f.id for f in mids if f is not None]
    if ma.group("sub") is not None and mb.group("sub") is not None and ma.group("fig") == mb.group("fig"):
        parent = index.by_id.get(a.rsplit(".", 1)[0])
        if parent is None:
            return []
        ids = [sf.id for sf in parent.subfigures]
        if a in ids and b in ids and ids.index(a) < ids.index(b):
            return ids[ids.index(a) + 1 : ids.index(b)]
    return []


def link_text(
    text: str,
    anchor_spans: Iterable[RefSpan],
    index: FigureIndex,
    figure_labels: Optional[Mapping[str, str]] = None,
    self_id: Optional[str] = None,
    stats: Optional[MutableMapping[str, int]] = None,
    citations: Sequence[tuple[int, int]] = (),
) -> list[RefSpan]:
    masked = mask_tokens(text)
    out: list[RefSpan] = []
    taken = _Taken()

    def own(ref: str) -> bool:
        return bool(self_id and same_float(ref, self_id))

    # 1. anchors: widen to the human mention, refine by typed panels.
    linked: list[tuple[int, int, int, str]] = []  # (widened start, anchor start, end, ref) of plain anchors
    for s in sorted(anchor_spans, key=lambda s: (s.start, s.end, s.ref_id)):
        if s.resolution not in (None, "anchor"):
            continue  # spans of an earlier linking run are recomputed below
        start, end, refs = s.start, s.end, [(s.ref_id, tuple(s.panels or ()))]  # panels: an earlier run's
        kw = keyword_before(masked, start)
        if kw is not None:
            start = kw
        if _is_whole_figure(s.ref_id):
            panels, pend = _anchor_panels(masked, end)
            fig = index.by_id.get(s.ref_id)
            if panels and fig is not None:
                refs, end = index.panel_targets(fig, panels), pend
        if len(refs) == 1 and not refs[0][1]:
            linked.append((start, s.start, end, refs[0][0]))
        for ref, panels in refs:
            if own(ref):
                continue
            out.append(
                RefSpan(
                    start=start, end=end, text=text[start:end], ref_id=ref, resolution="anchor", panels=list(panels)
                )
            )
        if not taken.overlaps(start, end):
            taken.add(start, end)

    # 1b. a range written as two links names what lies between them.
    for (s1, _, e1, r1), (_, a2, e2, r2) in zip(linked, linked[1:]):
        if e1 > a2 or not _RANGE_GAP_RE.match(masked, e1, a2):
            continue
        for ref in _range_between(index, r1, r2):
            if not own(ref):
                out.append(RefSpan(start=s1, end=e2, text=text[s1:e2], ref_id=ref, resolution="range"))

    # 2. LABEL:fig:... leftovers through the TeX label map. A label the map does not resolve
    # names no figure: it is blanked out before pass 3 ("LABEL:fig1:direct" would read as
    # "fig 1") and counted in stats["unresolved_label"].
    if "LABEL:" in masked:
        blanks: list[tuple[int, int]] = []
        for m in LABEL_RE.finditer(masked):
            if taken.overlaps(m.start(), m.end()):
                continue
            blanks.append((m.start(), m.end()))
            printed = (figure_labels or {}).get(m.group("label"))
            item = parse_item(printed) if printed else None
            fig = index.figure(item.number) if item else None
            targets = index.panel_targets(fig, item.panels) if fig and item else []
            refs = [r for r in targets if not own(r[0])]
            if not targets:
                if stats is not None:
                    stats["unresolved_label"] = stats.get("unresolved_label", 0) + 1
                continue
            if not refs:
                continue
            kw = keyword_before(masked, m.start())
            start = m.start() if kw is None else kw
            for ref, panels in refs:
                out.append(
                    RefSpan(
                        start=start,
                        end=m.end(),
                        text=text[start : m.end()],
                        ref_id=ref,
                        resolution="label",
                        panels=list(panels),
                    )
                )
            taken.add(start, m.end())
        for a, b in blanks:
            masked = masked[:a] + " " * (b - a) + masked[b:]

    # 3. typed mentions not already covered.
    for expr in find_expressions(masked, foreign=True, citations=citations):
        items = [it for it in expr.items if not taken.overlaps(it.start, it.end)]
        if expr.foreign:
            named = {it.number for it in items if index.figure(it.number, expr.qualified) is not None}
            if named and stats is not None:
                stats["other_work"] = stats.get("other_work", 0) + len(named)
            continue
        # Runs of items naming the same figure ("3b", "c" in "Figures 3b and c").
        runs: list[list] = []
        for it in items:
            if runs and runs[-1][-1].number == it.number:
                runs[-1].append(it)
            else:
                runs.append([it])
        claimed: list[tuple[int, int]] = []
        for run in runs:
            fig = index.figure(run[0].number, expr.qualified)
            if fig is None or own(fig.id):
                claimed.extend((it.start, it.end) for it in run)
                continue
            if fig.subfigures:
                pieces = [(it.start, it.end, index.panel_targets(fig, it.panels)) for it in run]
            else:  # no panel elements: one mention of the figure, its panel names kept
                panels = tuple(dict.fromkeys(p for it in run for p in it.panels))
                pieces = [(run[0].start, run[-1].end, [(fig.id, panels)])]
            for a, b, refs in pieces:
                for ref, panels in refs:
                    if own(ref):
                        continue
                    out.append(
                        RefSpan(start=a, end=b, text=text[a:b], ref_id=ref, resolution="text", panels=list(panels))
                    )
                claimed.append((a, b))
        for a, b in dict.fromkeys(claimed):
            if not taken.overlaps(a, b):
                taken.add(a, b)

    out.sort(key=lambda s: (s.start, s.end, s.ref_id))
    return out
