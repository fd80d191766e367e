"""Match TeX-source figures to HTML figures (MedICaT-style).

MedICaT aligned two caption extractions by figure index when both had one and they agreed,
else by caption token Jaccard above 0.8. We do the same with one guard: a number match
also needs a small caption overlap (``number_min_jaccard``, default 0.3), because a TeX
figure counter computed without running TeX can drift (``\\setcounter``, per-chapter
numbering, floats defined by macros) and a drifted counter must not swap images between
figures. Captions are compared as sets of lower-cased word tokens with accents, math,
reference tags and bare numbers removed from both sides (numbers come from ``\\ref``s that
only the HTML resolves). Assignment is greedy, one-to-one, best pair first, ties broken by
document order, so the result is deterministic.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

DEFAULT_THRESHOLD = 0.8
DEFAULT_NUMBER_MIN_JACCARD = 0.3
_TOKEN_RE = re.compile(r"[^\W_]+", re.U)
_HTML_TAG_RE = re.compile(r"<TAG>.*?</TAG>|<MATH>.*?</MATH>|<NOTE>.*?</NOTE>", re.S)


def _fold(text: str) -> str:
    text = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in text if not unicodedata.combining(ch)).lower()


def tokens(text: str) -> frozenset:
    return frozenset(t for t in _TOKEN_RE.findall(_fold(text or "")) if not t.isdigit())


def html_caption_tokens(caption: str) -> frozenset:
    """Tokens of a parsed caption (``<TAG> Figure 3: </TAG> text <MATH> x </MATH>``)."""
    return tokens(_HTML_TAG_RE.sub(" ", caption or ""))


def jaccard(a: frozenset, b: frozenset) -> float:
    if not a and not b:
        return 0.0
    return len(a & b) / len(a | b)


def normalize_number(n: Optional[str]) -> Optional[str]:
    if not n:
        return None
    n = n.strip().strip(".:")
    return n or None


@dataclass(frozen=True)
class Match:
    html_index: int
    tex_index: int
    by: str  # "number" | "caption"
    jaccard: float


def match_figures(
    html: Sequence[tuple[Optional[str], frozenset]],
    tex: Sequence[tuple[Optional[str], frozenset]],
    threshold: float = DEFAULT_THRESHOLD,
    number_min_jaccard: float = DEFAULT_NUMBER_MIN_JACCARD,
) -> list[Match]:
    """``html`` / ``tex``: (printed number, caption tokens) per figure, in document order."""
    cands = []
    for i, (hn, ht) in enumerate(html):
        hn = normalize_number(hn)
        for j, (tn, tt) in enumerate(tex):
            tn = normalize_number(tn)
            jac = jaccard(ht, tt)
            if hn is not None and hn == tn and jac >= number_min_jaccard:
                cands.append((2.0 + jac, i, j, "number", jac))
            elif jac >= threshold and jac > 0:
                cands.append((jac, i, j, "caption", jac))
    cands.sort(key=lambda c: (-c[0], c[1], c[2]))
    used_h, used_t, out = set(), set(), []
    for _, i, j, by, jac in cands:
        if i in used_h or j in used_t:
            continue
        used_h.add(i)
        used_t.add(j)
        out.append(Match(html_index=i, tex_index=j, by=by, jaccard=round(jac, 4)))
    out.sort(key=lambda m: m.html_index)
    return out
