"""Printed figure numbers and panel names -> our figure / subfigure ids.

Figures keep the printed number (``Figure.number``: "3", "S1", "A.2") apart from the
order-based id (``_F<k>``); a typed mention names the printed number, so this index is the
only place where the two meet. When two figures print the same number (a LaTeXML caption
duplicated in a multi-caption float) the first one wins.

Panels: a letter picks the subfigure whose label carries that letter ("(b)", "b)", "B"),
else, when no panel of the figure has a letter label, the subfigure at that position in
reading order ("b" = 2nd panel). A position ("left", "top right") picks the subfigure whose
label says so (split captions), else the obvious panel of a two-panel figure
(left/top = 1st, right/bottom = 2nd). Anything else stays on the whole figure.
"""

from __future__ import annotations

import re
from typing import Optional

from sciga.schemas.records import Figure, Paper
from sciga.transforms.link.grammar import Item

_LETTER_LABEL_RE = re.compile(r"^\W*([A-Za-z])\W*$")
_POS_TAIL_RE = re.compile(r"\s+(?:panels?|columns?|rows?|side|plots?|images?|parts?)$")
_FIRST = {"left", "top", "top left", "left top"}
_SECOND = {"right", "bottom", "bottom right", "right bottom"}


def _number_keys(number: str) -> list[str]:
    n = number.strip()
    return [n, n.replace(".", "")] if "." in n and n[:1].isalpha() else [n]


def letter_of(label: Optional[str]) -> Optional[str]:
    """'(b)' -> 'b', 'B)' -> 'b', '(top left)' -> None."""
    if not label:
        return None
    m = _LETTER_LABEL_RE.match(label)
    return m.group(1).lower() if m else None


class FigureIndex:
    def __init__(self, paper: Paper):
        self.by_number: dict[str, Figure] = {}
        self.by_id: dict[str, Figure] = {}
        for fig in paper.figures:
            self.by_id[fig.id] = fig
            if fig.number:
                for key in _number_keys(fig.number):
                    self.by_number.setdefault(key, fig)

    def figure(self, number: str, qualified: bool = False) -> Optional[Figure]:
        if qualified:
            # "Supplementary Figure 3" / "Extended Data Fig. 3": a separate sequence; only
            # accepted where the paper prints S-numbers.
            n = number if number.upper().startswith("S") else "S" + number
            return self.by_number.get(n)
        for key in _number_keys(number):
            fig = self.by_number.get(key)
            if fig is not None:
                return fig
        return None

    @staticmethod
    def panel(fig: Figure, name: str) -> Optional[str]:
        subs = fig.subfigures
        if not subs:
            return None
        if len(name) == 1:
            letters = [letter_of(s.label) for s in subs]
            for s, letter in zip(subs, letters):
                if letter == name:
                    return s.id
            if not any(letters):
                k = ord(name) - ord("a")
                if 0 <= k < len(subs):
                    return subs[k].id
            return None
        for s in subs:
            if s.label and _POS_TAIL_RE.sub("", s.label.strip("()[]: ").lower()) == name:
                return s.id
        if len(subs) == 2:
            if name in _FIRST:
                return subs[0].id
            if name in _SECOND:
                return subs[1].id
        return None

    def panel_targets(self, fig: Figure, panels: tuple[str, ...]) -> list[tuple[str, tuple[str, ...]]]:
        """(id, panels kept) for each panel named: its subfigure where one stands for it
        (nothing kept), else the figure itself keeping the panel names ("Figure 5a,b" of a
        figure without panel elements -> [(F5, ("a", "b"))])."""
        if not panels:
            return [(fig.id, ())]
        out: dict[str, list[str]] = {}
        for p in panels:
            ref = self.panel(fig, p)
            if ref is None:
                out.setdefault(fig.id, []).append(p)
            else:
                out.setdefault(ref, [])
        return [(ref, tuple(dict.fromkeys(ps))) for ref, ps in out.items()]

    def targets(self, item: Item, qualified: bool = False) -> list[str]:
        """Ids an item names: the subfigures of its panels where they resolve, else the
        figure; [] when the paper has no figure with that printed number."""
        fig = self.figure(item.number, qualified)
        if fig is None:
            return []
        if not item.panels:
            return [fig.id]
        out: list[str] = []
        for p in item.panels:
            ref = self.panel(fig, p) or fig.id
            if ref not in out:
                out.append(ref)
        return out

    def refine(self, ref_id: str, panels: tuple[str, ...]) -> list[str]:
        """An anchor to a whole figure followed by typed panels ("Figure <a>6</a>b")."""
        fig = self.by_id.get(ref_id)
        if fig is None or not panels:
            return [ref_id]
        out: list[str] = []
        for p in panels:
            ref = self.panel(fig, p) or ref_id
            if ref not in out:
                out.append(ref)
        return out
