"""Subcaptions for compound figures whose panels have none: split the parent caption.

MedICaT (Subramanian et al., 2020, sec. 3) aligns subcaptions to subfigures heuristically:
subcaptions in the order they occur in the caption, subfigures in reading order (row, then
column), paired in that order; when there are more subfigures than subcaptions, the last
subcaption serves the remaining subfigures. We do the same with rule-based segmentation
instead of their CRF, using the panel labels authors type:

- letters: "(a) ... (b) ...", "(a,b) ...", "a) ... b) ...", "a, ... b, ..." / "a | ..."
  (Nature style, at the start of a sentence or clause), "A: ... B: ...";
- positions leading a clause: "Left: ... Middle: ... Right: ...", "Top: ... Bottom: ...",
  "Top row: ... Bottom row: ...", "Top left: ...; top right: ...", "(left) ...";
- positions trailing a list item: "relief (top left), bowl (top right), ...".

A letter is aligned by its rank ("c" = 3rd panel in reading order); positions are sorted
into reading order (top before bottom, left before right) before pairing. Panels are only
labelled when the caption's labels plausibly describe them: letters must lie within the
panel count; the MedICaT fill rule applies only while at most half of the panels would be
filled by it (an 18-image grid described by five region labels is left alone), and a set of
positions must be of one kind (all "row col", all columns or all rows).

Each split subcaption is written like an HTML one, ``<TAG> (a) </TAG> T1-weighted MRI``,
with ``label`` "(a)" and ``caption_source`` "split_parent"; panels left without one keep
``caption_source`` "none". The last subcaption ends with its sentence: the sentences after
it usually describe the whole figure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from sciga.schemas.records import Figure
from sciga.transforms.link.grammar import mask_tokens

_LEAD_TAG_RE = re.compile(r"^\s*<TAG>.*?</TAG>\s*", re.S)
_DASHES = "-\u2013\u2014"

# Letter label styles, each a regex whose group "inner" holds the letters.
_PAREN_RE = re.compile(r"\(\s*(?P<inner>[A-Za-z](?:\s*(?:,|[" + _DASHES + r"]|and|&)\s*[A-Za-z])*)\s*\)")
_CLOSE_RE = re.compile(r"(?:^|(?<=[\s;:,.]))(?P<inner>[A-Za-z])\)\s")
_NATURE_RE = re.compile(r"(?:^|(?<=[.;:]\s))(?P<inner>[A-Za-z])(?:,|\s\|)\s")
_COLON_RE = re.compile(r"(?:^|(?<=[.;]\s))(?P<inner>[A-Za-z]):\s")
_LETTER_STYLES = (_PAREN_RE, _CLOSE_RE, _NATURE_RE, _COLON_RE)

_POS_WORD = r"(?:top|bottom|upper|lower|middle|center|centre|left|right)"
_POS = _POS_WORD + r"(?:[ \-]+" + _POS_WORD + r")?"
_POS_TAIL = r"(?:\s+(?:panels?|columns?|rows?|side|plots?|images?|parts?))?"
_LEAD_POS_RE = re.compile(
    r"(?:^|(?<=[.;:,]\s)|(?<=\sand\s))(?:\((?P<p1>"
    + _POS
    + r")"
    + _POS_TAIL
    + r"\)|(?P<p2>"
    + _POS
    + r")"
    + _POS_TAIL
    + r"\s*:)\s*",
    re.I,
)
_TRAIL_POS_RE = re.compile(r"\s*\((?P<pos>" + _POS + r")" + _POS_TAIL + r"\)", re.I)
_ITEM_SEP_RE = re.compile(r"(?:[,;:]\s*(?:and\s+)?|\s+and\s+)")
_SENTENCE_END_RE = re.compile(r"[.!?](?=\s+[A-Z<(]|\s*$)")
_STRIP_TAIL_RE = re.compile(r"(?:[\s,;:]|\band\b|\bor\b)+$")

_ROW = {"top": 0, "middle": 1, "bottom": 2}
_COL = {"left": 0, "middle": 1, "right": 2}


@dataclass(frozen=True)
class Subcaption:
    label: str  # as written: "(a)", "a", "Left", "top right"
    text: str
    panels: tuple[int, ...]  # 0-based panel indices in reading order (after alignment)


def _norm_pos(pos: str) -> tuple[str, ...]:
    words = re.split(r"[ \-]+", pos.lower().strip())
    return tuple({"upper": "top", "lower": "bottom", "centre": "middle", "center": "middle"}.get(w, w) for w in words)


def _letters(inner: str) -> Optional[list[str]]:
    parts = re.split(r"\s*(,|[" + _DASHES + r"]|and|&)\s*", inner.strip())
    out: list[str] = []
    for i in range(0, len(parts), 2):
        tok = parts[i]
        if len(tok) != 1 or not tok.isalpha():
            return None
        c = tok.lower()
        if i >= 2 and parts[i - 1] in _DASHES and out:
            if ord(c) <= ord(out[-1]):
                return None
            out.extend(chr(x) for x in range(ord(out[-1]) + 1, ord(c) + 1))
        else:
            out.append(c)
    return out


def _letter_sequence(masked: str, rx: re.Pattern) -> list[tuple[int, int, list[str]]]:
    """The first run of labels a, b, c, ... in order (each next label is the first match
    after the previous one that continues the sequence). [(start, end, letters)]"""
    seq: list[tuple[int, int, list[str]]] = []
    expected = "a"
    case = None
    for m in rx.finditer(masked):
        raw = m.group("inner")
        letters = _letters(raw)
        if not letters or letters[0] != expected:
            continue
        this_case = raw.strip()[0].isupper()
        if case is not None and this_case != case:
            continue
        case = this_case
        seq.append((m.start(), m.end(), letters))
        expected = chr(ord(letters[-1]) + 1)
    return seq


def _clean(text: str) -> str:
    t = " ".join(text.split())
    return _STRIP_TAIL_RE.sub("", t).strip()


def _end_of_sentence(masked: str, start: int) -> int:
    m = _SENTENCE_END_RE.search(masked, start)
    return m.end() if m else len(masked)


def _segments_leading(body: str, masked: str, labels: list[tuple[int, int]]) -> list[str]:
    """Text after each label up to the next label; the last one up to its sentence end."""
    out = []
    for k, (_s, e) in enumerate(labels):
        stop = labels[k + 1][0] if k + 1 < len(labels) else _end_of_sentence(masked, e)
        out.append(_clean(body[e:stop]))
    return out


def split_by_letters(body: str, masked: str) -> Optional[list[Subcaption]]:
    best: list = []
    for rx in _LETTER_STYLES:
        seq = _letter_sequence(masked, rx)
        if len(seq) >= 2 and len(seq) > len(best):
            best = seq
    if not best:
        return None
    texts = _segments_leading(body, masked, [(s, e) for s, e, _ in best])
    out = []
    for (s, e, letters), text in zip(best, texts):
        if not text:
            return None
        out.append(
            Subcaption(
                label=body[s:e].strip().rstrip(",|:").strip(),
                text=text,
                panels=tuple(ord(c) - ord("a") for c in letters),
            )
        )
    return out


def _pos_key(pos: tuple[str, ...]) -> Optional[tuple[str, tuple[int, int]]]:
    """('top', 'left') -> ('both', (0, 0)); ('left',) -> ('col', (0, 0)); None if odd."""
    rows = [w for w in pos if w in ("top", "bottom")]
    cols = [w for w in pos if w in ("left", "right")]
    mids = [w for w in pos if w == "middle"]
    if len(pos) == 2:
        if len(rows) == 1 and len(cols) == 1:
            return "both", (_ROW[rows[0]], _COL[cols[0]])
        if len(mids) == 1 and len(cols) == 1:
            return "both", (1, _COL[cols[0]])
        if len(mids) == 1 and len(rows) == 1:
            return "both", (_ROW[rows[0]], 1)
        return None
    w = pos[0]
    if w in ("left", "right"):
        return "col", (0, _COL[w])
    if w in ("top", "bottom"):
        return "row", (_ROW[w], 0)
    return "mid", (1, 1)


def _order_positions(items: list[tuple[str, str, tuple[str, ...]]]) -> Optional[list[Subcaption]]:
    """[(label, text, pos)] -> subcaptions in reading order, or None when the positions
    are not one consistent kind or repeat."""
    keyed = []
    kinds = set()
    for label, text, pos in items:
        k = _pos_key(pos)
        if k is None or not text:
            return None
        keyed.append((k, label, text))
        if k[0] != "mid":
            kinds.add(k[0])
    if len(kinds) != 1:
        return None
    kind = kinds.pop()
    resolved = []
    for (where, coords), label, text in keyed:
        if where == "mid":  # "middle" is a column among left/right, a row among top/bottom
            coords = (0, 1) if kind == "col" else (1, 0)
            if kind == "both":
                return None
        resolved.append((coords, label, text))
    if len({c for c, _, _ in resolved}) != len(resolved):
        return None
    resolved.sort(key=lambda r: r[0])
    return [Subcaption(label=label, text=text, panels=(i,)) for i, (_, label, text) in enumerate(resolved)]


def split_by_positions(body: str, masked: str) -> Optional[list[Subcaption]]:
    lead = list(_LEAD_POS_RE.finditer(masked))
    if len(lead) >= 2:
        texts = _segments_leading(body, masked, [(m.start(), m.end()) for m in lead])
        items = []
        for m, text in zip(lead, texts):
            pos = m.group("p1") or m.group("p2")
            label = body[m.start() : m.end()].strip().strip("():").strip()  # "Left", "Top row", "left"
            items.append((label, text, _norm_pos(pos)))
        got = _order_positions(items)
        if got:
            return got
    trail = list(_TRAIL_POS_RE.finditer(masked))
    if len(trail) >= 2:
        items = []
        prev_end = 0
        for m in trail:
            chunk_start = prev_end
            seg = masked[chunk_start : m.start()]
            seps = list(_ITEM_SEP_RE.finditer(seg))
            if seps and prev_end > 0:
                chunk_start += seps[0].end()
            elif seps:
                chunk_start += seps[-1].end()
            label = body[m.start() : m.end()].strip().strip("()").strip()  # "top left", "top row"
            items.append((label, _clean(body[chunk_start : m.start()]), _norm_pos(m.group("pos"))))
            prev_end = m.end()
        return _order_positions(items)
    return None


def align(subcaptions: list[Subcaption], n_panels: int) -> Optional[list[Optional[Subcaption]]]:
    """Per panel (reading order) the subcaption describing it, or None when the labels do
    not fit the panels."""
    out: list[Optional[Subcaption]] = [None] * n_panels
    for sc in subcaptions:
        for k in sc.panels:
            if k >= n_panels or out[k] is not None:
                return None
            out[k] = sc
    missing = [k for k, sc in enumerate(out) if sc is None]
    if missing:
        covered = n_panels - len(missing)
        # MedICaT: remaining subfigures take the last subcaption, but only for trailing
        # panels and only while it does not label most of the figure.
        if missing != list(range(covered, n_panels)) or len(missing) > covered:
            return None
        last = max(subcaptions, key=lambda sc: max(sc.panels))
        for k in missing:
            out[k] = last
    return out


def split_caption(caption: str, n_panels: int) -> Optional[list[Optional[Subcaption]]]:
    """Parent caption -> one subcaption per panel (reading order), or None."""
    if n_panels < 2 or not caption:
        return None
    m = _LEAD_TAG_RE.match(caption)
    body = caption[m.end() :] if m else caption
    masked = mask_tokens(body)
    for splitter in (split_by_letters, split_by_positions):
        subs = splitter(body, masked)
        if subs:
            aligned = align(subs, n_panels)
            if aligned:
                return aligned
    return None


def add_split_subcaptions(fig: Figure) -> int:
    """Fill the subcaptions of ``fig``'s panels from its caption when none of them has one
    from the HTML. Returns the number of panels labelled."""
    subs = fig.subfigures
    if len(subs) < 2 or any(s.caption_source == "html" for s in subs):
        return 0
    aligned = split_caption(fig.caption, len(subs))
    if not aligned:
        for s in subs:
            if s.caption_source != "split_parent":
                s.caption_source = "none"
        return 0
    n = 0
    for s, sc in zip(subs, aligned):
        if sc is None:
            s.caption_source = "none"
            continue
        s.label = sc.label
        s.caption = f"<TAG> {sc.label} </TAG> {sc.text}"
        s.caption_source = "split_parent"
        n += 1
    return n
