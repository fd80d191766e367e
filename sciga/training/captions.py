"""Caption text for the baselines, with everything that gives a figure's position away
removed (SciGA Sec. 4.2: "removing tags (e.g. Figure 1) to comply with the positional
bias constraints"). A model that can read "Figure 1" learns the answer "the first
figure" and nothing about graphical abstracts.

Removed: ``<TAG> ... </TAG>`` with its content (the printed label), the token markers of
``<MATH>`` / ``<NOTE>`` (their content is kept), and figure or table numbers anywhere in
the text ("Fig. 3", "Figure 2(a)", "Figures 1 and 2", "Table S1").
"""

from __future__ import annotations

import re

_TAG = re.compile(r"<TAG>.*?</TAG>", re.S)
_MARKERS = re.compile(r"</?(?:MATH|NOTE|TAG)>")
_NUM = r"(?:[A-Z]?\d+(?:\.\d+)*[a-z]?(?:\s*\([a-z0-9]+\))?)"
_FIG_REF = re.compile(
    rf"\b(?:Fig(?:ure)?s?|FIG(?:URE)?S?|Tab(?:le)?s?|TABLES?)\.?\s*{_NUM}(?:\s*(?:,|and|&|-|–|to)\s*{_NUM})*",
)
_LEAD_LABEL = re.compile(r"^\s*(?:\([a-z0-9]{1,3}\)|[a-z]\)|\[[a-z0-9]{1,3}\])\s*")
_SPACE = re.compile(r"\s+")
_SPACE_PUNCT = re.compile(r"\s+([.,;:)])")


def clean_caption(text: str | None) -> str:
    if not text:
        return ""
    t = _TAG.sub(" ", text)
    t = _MARKERS.sub(" ", t)
    t = _FIG_REF.sub(" ", t)
    t = _LEAD_LABEL.sub("", t)
    t = _SPACE.sub(" ", t).strip()
    t = _SPACE_PUNCT.sub(r"\1", t)
    return t.lstrip(":.;, ").strip()
