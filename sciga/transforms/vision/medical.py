"""The MedICaT medical-image filter, as pure functions.

MedICaT (seed 004, Sec. 2 and Appendix B) keeps a figure as a *medical image* in two
stages: (1) a keyword from its Appendix B list appears in the caption or the inline
references (case-insensitive), then (2) a ResNet-101 trained on the 28 DocFigure classes
puts "Medical" among its top K = 4 labels (precision 96 %, recall 67 % in their tuning).

Here stage 1 runs on every figure (cheap, text only); stage 2 runs through RunInference
(``transforms/vision/stage.py``: ClassifyFigures) on the figures that passed stage 1 and have pixels. The
decision stored on the row (``medical.is_medical``):

* no keyword hit -> ``False`` (MedICaT discards it without looking at the image);
* keyword hit, classifier run -> "Medical" in the top K;
* keyword hit, classifier not run (no weights given, or no decodable image) -> ``None``
  (undecided: we never invent labels).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from sciga.schemas.ids import FIGURE_ID_RE
from sciga.schemas.records import FigureRow, Medical, Paper
from sciga.transforms.vision.defaults import DEFAULT_TOP_K

KEYWORDS_FILE = Path(__file__).with_name("medical_keywords.txt")

# The 28 DocFigure classes (Jobin, Mondal, Jawahar, ICDAR-WS 2019), in the paper's order.
DOCFIGURE_LABELS = (
    "Line graph",
    "Natural image",
    "Table",
    "3D object",
    "Bar plot",
    "Scatter plot",
    "Medical image",
    "Sketch",
    "Geographic map",
    "Flow chart",
    "Heat map",
    "Mask",
    "Block diagram",
    "Venn diagram",
    "Confusion matrix",
    "Histogram",
    "Box plot",
    "Vector plot",
    "Pie chart",
    "Surface plot",
    "Algorithm",
    "Contour plot",
    "Tree diagram",
    "Bubble chart",
    "Polar plot",
    "Area chart",
    "Pareto chart",
    "Radar chart",
)

_TAGS = re.compile(r"</?(?:TAG|MATH|NOTE)>")

# The only characters outside ASCII that Python's case-insensitive matching takes for an
# ASCII letter (a test checks this over all of Unicode). Folded to that letter, plus
# ``str.lower``, every text an ASCII keyword's pattern matches contains the lower-cased
# keyword as a plain substring.
ASCII_CASE_TWINS = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})


def load_keywords(path: Optional[str] = None) -> list[str]:
    """Keywords from a text file (one a line, ``#`` comments), default: MedICaT's list."""
    p = Path(path) if path else KEYWORDS_FILE
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise FileNotFoundError(
            f"medical keyword list {p} could not be read ({e.strerror}); give an existing file to --medical-keywords"
        ) from None
    words = []
    for line in text.splitlines():
        w = line.split("#", 1)[0].strip()
        if w and w not in words:
            words.append(w)
    if not words:
        raise ValueError(f"medical keyword list {p} holds no keywords; put one keyword on each line")
    return words


class KeywordMatcher:
    """Whole-word, case-insensitive matching of a keyword list. A word ends at any
    character that is not a letter or digit (so ``X-ray`` matches in "X-ray images" and
    ``MRI`` matches in "PET-MRI"), and ``scan`` does not match "scans": the list decides."""

    def __init__(self, keywords: Sequence[str]):
        self.keywords = list(keywords)
        # (keyword, its lower case when ASCII, its pattern). The regular expression decides;
        # a plain substring test on the case-folded text first skips the keywords that cannot
        # match (most of them, for most captions), which is ~10x cheaper than 47 searches.
        self._patterns = [
            (
                kw,
                kw.lower() if kw.isascii() else None,
                re.compile(r"(?<![0-9A-Za-z])" + re.escape(kw) + r"(?![0-9A-Za-z])", re.IGNORECASE),
            )
            for kw in self.keywords
        ]

    def hits(self, texts: Iterable[str]) -> list[str]:
        """The keywords found in any of the texts, in list order, each once."""
        blob = "\n".join(_TAGS.sub(" ", t) for t in texts if t)
        folded = blob.translate(ASCII_CASE_TWINS).lower()
        return [kw for kw, low, rx in self._patterns if (low is None or low in folded) and rx.search(blob)]


# A sentence ends at . ! ? followed by space and a capital / digit-free start, not after
# the abbreviations that precede figure numbers ("Fig. 2", "e.g. the", "et al. show").
_ABBREV = re.compile(
    r"(?:\b(?:Fig|Figs|Eq|Eqs|Sec|Secs|Ref|Refs|al|e\.g|i\.e|cf|vs|resp|approx|No|Tab)\.)$", re.IGNORECASE
)
_END = re.compile(r"[.!?](?=\s+[\"'(\[]?[A-Z])")


def sentence_around(text: str, start: int, end: int) -> str:
    """The sentence of ``text`` that contains the span [start, end)."""
    begin = 0
    for m in _END.finditer(text, 0, start):
        if not _ABBREV.search(text[max(0, m.start() - 8) : m.end()]):
            begin = m.end()
    stop = len(text)
    for m in _END.finditer(text, end):
        if not _ABBREV.search(text[max(0, m.start() - 8) : m.end()]):
            stop = m.end()
            break
    return text[begin:stop].strip()


def reference_sentences(paper: Paper) -> dict[str, list[str]]:
    """figure or subfigure id -> the sentences that reference it (paper order, each once)."""
    out: dict[str, list[str]] = {}
    for sec in paper.sections:
        for para in sec.paragraphs:
            for span in para.ref_spans:
                if not FIGURE_ID_RE.match(span.ref_id):
                    continue
                if span.sentence_start is not None and span.sentence_end is not None:
                    # The linking stage's scispaCy sentence (the same one `mentions` stores).
                    s = para.text[span.sentence_start : span.sentence_end].strip()
                else:  # linking ran without a sentencizer: a cheap splitter stands in
                    s = sentence_around(para.text, span.start, span.end)
                lst = out.setdefault(span.ref_id, [])
                if s and s not in lst:
                    lst.append(s)
    return out


def _related_ids(row: FigureRow, children: dict[str, list[str]]) -> list[str]:
    """A figure is referenced by its own id and its panels'; a panel by its own and its
    parent's (a sentence about "Figure 3" speaks about every panel of it)."""
    if row.kind == "subfigure" and row.parent_id:
        return [row.id, row.parent_id]
    return [row.id, *children.get(row.id, [])]


def annotate_keywords(paper: Paper, rows: list[FigureRow], matcher: KeywordMatcher) -> list[FigureRow]:
    """Stage 1 on every row of a paper: keyword hits on caption, subcaption and reference
    sentences; ``is_medical`` False without hits, None (undecided) with hits."""
    refs = reference_sentences(paper)
    children: dict[str, list[str]] = {}
    for r in rows:
        if r.kind == "subfigure" and r.parent_id:
            children.setdefault(r.parent_id, []).append(r.id)
    for r in rows:
        texts = [r.caption, r.subcaption or ""]
        for rid in _related_ids(r, children):
            texts.extend(refs.get(rid, []))
        hits = matcher.hits(texts)
        r.medical = Medical(keyword_hits=hits, classifier_run=False, is_medical=None if hits else False)
    return rows


def medical_label(labels: Sequence[str]) -> str:
    """The label of the medical class in a classifier's label list ("Medical image",
    "Medical images", "medical" ...)."""
    for lab in labels:
        if re.sub(r"[^a-z]", "", lab.lower()).startswith("medical"):
            return lab
    raise ValueError(
        f"the classifier's labels ({', '.join(labels)}) have no 'Medical' class; train it on DocFigure's 28 classes"
    )


def top_k(probs: Sequence[float], labels: Sequence[str], k: int) -> tuple[list[str], list[float]]:
    """The k most probable labels with their probabilities (ties: label order)."""
    order = sorted(range(len(labels)), key=lambda i: (-float(probs[i]), i))[: max(1, k)]
    return [labels[i] for i in order], [round(float(probs[i]), 4) for i in order]


@dataclass(frozen=True)
class MedicalRule:
    labels: tuple[str, ...]
    k: int = DEFAULT_TOP_K

    @property
    def medical(self) -> str:
        return medical_label(self.labels)

    def apply(self, row: FigureRow, probs: Sequence[float]) -> FigureRow:
        """Stage 2 on one row: top-K labels, and the decision "Medical in the top K"."""
        row.medical = self.decide(row.medical.keyword_hits, probs)
        return row

    def decide(self, keyword_hits: Sequence[str], probs: Sequence[float]) -> Medical:
        """Stage 2 for a row with these stage-1 ``keyword_hits`` and classifier ``probs``."""
        labels, scores = top_k(probs, self.labels, self.k)
        return Medical(
            keyword_hits=list(keyword_hits),
            classifier_run=True,
            topk_labels=labels,
            topk_scores=scores,
            is_medical=bool(keyword_hits) and self.medical in labels,
        )
