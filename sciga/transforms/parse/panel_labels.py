"""Printed panel labels next to the graphics of a figure: "(a) Input: 21.3dB" under an image.

Authors lay panels out without subfigure captions in several ways, all seen in real
papers: a minipage per image holding the image and its label (``\\centerline{(a) ...}``),
a ``\\subfigure`` / ``\\subfloat`` used as a caption-less row container around such
minipages, a tabular whose cells hold the image and its label, or a tabular / minipage
row of images followed by a row of labels. LaTeXML keeps the label as ordinary text in
the HTML; this module finds, for each graphic, the label printed for it:

1. its own cell: the largest element around the graphic (inside the figure) that holds no
   other graphic; if that cell's text starts with a panel label ("(a)", "(A)", "a)"),
   that label and the text after it belong to the graphic;
2. otherwise, when no graphic has a label of its own, label cells printed apart from the
   images (a text cell that is exactly one label item) are paired with the graphics in
   document order, but only when there are exactly as many labels as graphics.

The labels of one figure must run in increasing letter order in reading order (a, b, c
... or d, e, f for later rows); anything else ("(1)", repeated letters, letters out of
order) is not a panel labelling and yields no labels at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from sciga.transforms.parse.images import collect_graphics
from sciga.transforms.parse.text import RenderOptions, TextBuilder, css_classes, render_into

# "(a) Input: 21.3dB", "(B)", "c) Ours". The label must be followed by the end or a space.
_LABEL_RE = re.compile(r"^\s*(?P<label>\(\s*(?P<l1>[A-Za-z])\s*\)|(?P<l2>[A-Za-z])\))(?=\s|$)\s*(?P<rest>.*)$", re.S)
# A second label inside the same text: a cell that lists several labels is not one label.
_MORE_LABEL_RE = re.compile(r"(?:^|\s)\(\s*[A-Za-z]\s*\)(?=\s|$)")
_CELL_CLASSES = frozenset(
    {"ltx_td", "ltx_minipage", "ltx_flex_cell", "ltx_p", "ltx_para", "ltx_inline-block", "ltx_inline-para", "ltx_block"}
)
_CELL_TAGS = frozenset({"td", "th", "p", "div"})


@dataclass(frozen=True)
class PanelLabel:
    label: str  # as printed: "(a)", "b)"
    letter: str  # lower case: "a"
    text: str  # what follows the label, SciGA-tokenized ("" when the label stands alone)


def _is_skipped(el) -> bool:
    """Captions and nested figures are not layout: their text is never a printed label."""
    if el.tag == "figcaption":
        return True
    return "ltx_caption" in css_classes(el)


def _text_of(el) -> str:
    tb = TextBuilder()
    render_into(el, tb, RenderOptions(skip_floats=False, notes=False))
    return tb.text()


def parse_label(text: str) -> Optional[PanelLabel]:
    """'(a) Input: 21.3dB' -> PanelLabel('(a)', 'a', 'Input: 21.3dB'); None if the text
    does not start with exactly one panel label."""
    m = _LABEL_RE.match(text)
    if not m:
        return None
    rest = " ".join(m.group("rest").split())
    if _MORE_LABEL_RE.search(rest):
        return None
    letter = (m.group("l1") or m.group("l2")).lower()
    label = "(" + (m.group("l1")) + ")" if m.group("l1") else m.group("label")
    return PanelLabel(label=label, letter=letter, text=rest)


def _graphic_counts(container, graphics: list) -> dict:
    """For every element between a graphic and ``container``: how many graphics it holds."""
    counts: dict = {}
    for g in graphics:
        p = g.getparent()
        while p is not None and p is not container:
            counts[p] = counts.get(p, 0) + 1
            p = p.getparent()
    return counts


def _own_cell(graphic, container, counts: dict):
    """The largest element around ``graphic`` below ``container`` holding no other graphic."""
    cell = None
    p = graphic.getparent()
    while p is not None and p is not container and counts.get(p, 0) == 1:
        if _is_skipped(p):
            return None
        cell = p
        p = p.getparent()
    return cell


def _label_cells(container, counts: dict) -> list:
    """Text cells without a graphic that hold exactly one label item, in document order
    (the outermost such cell; captions and nested captioned figures are not entered)."""
    out: list = []

    def walk(el) -> None:
        for child in el:
            if not isinstance(child.tag, str) or _is_skipped(child):
                continue
            if counts.get(child, 0) == 0 and (
                child.tag in _CELL_TAGS or not _CELL_CLASSES.isdisjoint(css_classes(child))
            ):
                lab = parse_label(_text_of(child))
                if lab is not None:
                    out.append(lab)
                    continue
            walk(child)

    walk(container)
    return out


def printed_labels(container, graphics: list) -> list[Optional[PanelLabel]]:
    """Per graphic of ``graphics`` (document order, all inside ``container``) the label
    printed for it, or None. All None when the labels found do not read as a panel
    labelling (letters not increasing)."""
    if len(graphics) < 2:
        return [None] * len(graphics)
    everything: list = []
    collect_graphics(container, everything, skip_subfigures=False)
    counts = _graphic_counts(container, everything)
    labels: list[Optional[PanelLabel]] = []
    for g in graphics:
        cell = _own_cell(g, container, counts)
        labels.append(parse_label(_text_of(cell)) if cell is not None else None)
    if not any(labels):
        apart = _label_cells(container, counts)
        if len(apart) == len(graphics):
            labels = list(apart)
    letters = [lab.letter for lab in labels if lab is not None]
    if any(b <= a for a, b in zip(letters, letters[1:])):
        return [None] * len(graphics)
    return labels
