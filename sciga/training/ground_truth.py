"""Which figure of a paper is its graphical abstract (SciGA's I_GA), and the candidate
set of Intra-GA recommendation.

SciGA defines I_GA as "the GA of the paper or a figure that serves a similar role, such as
Figure 1 referenced in the Introduction or a teaser image". The build may or may not have
GA annotations (the vision stage fills them when GA images are supplied), so the ground
truth is taken from the first of these sources that says something, in this order:

1. ``papers.graphical_abstract`` (author GA or a de-facto GA the build flagged): the GA
   image itself when the ``figures`` config has a row for it (id ``<paper>_GA``) plus its
   ``components`` (the figures it reuses or modifies) -- all count as GT;
2. ``figures.ga_role``: any figure row with a role other than none/negative;
3. ``papers.teaser``: the teaser figure(s) (de facto GA);
4. the first figure referenced in the Introduction (de facto GA), subfigure references
   counting for their figure.

Papers where none applies have no GT and are outside the experiment subset.

Candidates are the paper's top-level figures that have at least one usable image (their
own or their subfigures'), plus the GA image when there is one. They are listed in a
canonical order that carries no position (a hash of the figure id), so the stable
tie-breaking of the metrics cannot reward a model for preferring Figure 1.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Optional

from sciga.schemas.ids import FIGURE_ID_RE, GA_ID_RE
from sciga.schemas.images import EMBEDDED, NO_IMAGES_FLAG, RASTERIZED_SVG
from sciga.training.captions import clean_caption

USABLE_STATUSES = (EMBEDDED, RASTERIZED_SVG, NO_IMAGES_FLAG)

NEGATIVE_ROLES = frozenset({"", "none", "negative", "non_ga", "not_ga", "no"})
_INTRO_RE = re.compile(r"^\s*(?:[\dIVX]+[.:]?\s+)?introduction\b", re.I)
_TAG_RE = re.compile(r"<TAG>.*?</TAG>", re.S)


@dataclass
class Unit:
    """One image that is scored: a figure's own image or one of its subfigures."""

    id: str  # the figures-config row id carrying the image
    caption: str  # cleaned; subfigures: parent caption + subcaption


@dataclass
class Candidate:
    figure_id: str
    caption: str  # cleaned figure caption
    units: list[Unit] = field(default_factory=list)
    is_ga_image: bool = False


@dataclass
class Example:
    paper_id: str
    title: str
    abstract: str
    primary_category: Optional[str]
    fields: list[str]
    candidates: list[Candidate]
    gt: list[int]  # indices into candidates
    ga_source: Optional[str]  # graphical_abstract | ga_role | teaser | intro_first_ref (de_facto: other rule)
    split: Optional[str] = None

    @property
    def ga_index(self) -> Optional[int]:
        """The representative GA (the GA image when there is one, else the first GT)."""
        for i in self.gt:
            if self.candidates[i].is_ga_image:
                return i
        return self.gt[0] if self.gt else None

    @property
    def field(self) -> Optional[str]:
        return self.primary_category or (self.fields[0] if self.fields else None)


def canonical_key(figure_id: str) -> bytes:
    return hashlib.blake2b(figure_id.encode("utf-8"), digest_size=8).digest()


def canonical_order(candidates: Iterable[Candidate]) -> list[Candidate]:
    return sorted(candidates, key=lambda c: (canonical_key(c.figure_id), c.figure_id))


def top_figure_id(fig_id: str) -> Optional[str]:
    """``P_F3.2`` -> ``P_F3``; a GA id stays itself."""
    if GA_ID_RE.match(fig_id or ""):
        return fig_id
    m = FIGURE_ID_RE.match(fig_id or "")
    if not m:
        return None
    return f"{m.group('paper')}_F{m.group('fig')}"


def is_usable_image_row(row: dict) -> bool:
    """A figures-config row whose image the models can read: one the build embedded (or
    found but left out with --no-images: text-only methods still rank it). Builds from
    before image_status: a raster (or an image the vision stage decoded, which records its
    size) without a recorded error."""
    status = row.get("image_status")
    if status is not None:
        return status in USABLE_STATUSES
    if row.get("image_error"):
        return False
    return row.get("image_kind") == "raster" or row.get("width") is not None


def intro_first_figure(sections: list[dict]) -> Optional[str]:
    """The first figure referenced in the Introduction (or its subsections)."""
    if not sections:
        return None
    intro_ids: set[str] = set()
    for s in sections:
        title = _TAG_RE.sub(" ", s.get("title") or "")
        if s.get("id") and (s.get("parent_id") in intro_ids or (_INTRO_RE.match(title) and not intro_ids)):
            intro_ids.add(s["id"])
    for s in sections:
        if s.get("id") not in intro_ids:
            continue
        for para in s.get("paragraphs") or []:
            spans = sorted(para.get("ref_spans") or [], key=lambda r: r.get("start") or 0)
            for span in spans:
                top = top_figure_id(span.get("ref_id") or "")
                if top and not GA_ID_RE.match(top):
                    return top
    return None


def _role(row: dict) -> str:
    return (row.get("ga_role") or "").strip().lower()


def shapes_example(row: dict) -> bool:
    """Whether ``build_example`` reads anything of this figures-config row: a unit to rank
    (its image is usable), or a GA role that names a figure. The others change nothing
    (``tests/training/test_training_splits.py``), so a loader need not keep them."""
    return is_usable_image_row(row) or _role(row) not in NEGATIVE_ROLES


def build_example(paper: dict, figure_rows: list[dict]) -> Example:
    """One paper row (papers config) + its figures-config rows (no image bytes needed)
    -> an Example with candidates and GT."""
    pid = paper["id"]
    usable = {r["id"]: r for r in figure_rows if is_usable_image_row(r)}
    roles = {r["id"]: _role(r) for r in figure_rows}

    candidates: list[Candidate] = []
    for fig in paper.get("figures") or []:
        cap = clean_caption(fig.get("caption"))
        units = []
        for sub in fig.get("subfigures") or []:
            if sub.get("id") in usable:
                subcap = clean_caption(sub.get("caption"))
                units.append(Unit(sub["id"], (cap + " " + subcap).strip()))
        if not units and fig.get("id") in usable:
            units.append(Unit(fig["id"], cap))
        if units:
            candidates.append(Candidate(fig["id"], cap, units))
    by_id = {c.figure_id: c for c in candidates}

    ga = paper.get("graphical_abstract") or None
    gt_ids: list[str] = []
    source = None
    if ga and ga.get("id"):
        ga_rows = [r for r in figure_rows if r["id"] == ga["id"] and r["id"] in usable]
        if ga_rows and ga["id"] not in by_id:
            cap = clean_caption(ga.get("caption"))
            cand = Candidate(ga["id"], cap, [Unit(ga["id"], cap)], is_ga_image=True)
            candidates.append(cand)
            by_id[cand.figure_id] = cand
        ids = ([ga["id"]] if ga["id"] in by_id else []) + [top_figure_id(c) for c in ga.get("components") or []]
        gt_ids = [i for i in ids if i in by_id]
        if gt_ids:
            # A de-facto GA written by the vision stage says which I_GA rule chose it: report
            # that rule, the same names as when this loader applies the rules itself.
            rule = {"teaser": "teaser", "first_intro_reference": "intro_first_ref"}.get(
                ga.get("source") or "", "de_facto"
            )
            source = rule if ga.get("de_facto") else "graphical_abstract"
    if not gt_ids:
        role_ids = [top_figure_id(i) for i, role in sorted(roles.items()) if role not in NEGATIVE_ROLES]
        gt_ids = [i for i in role_ids if i in by_id]
        source = "ga_role" if gt_ids else None
    if not gt_ids:
        gt_ids = [i for i in (top_figure_id(t) for t in paper.get("teaser") or []) if i in by_id]
        source = "teaser" if gt_ids else None
    if not gt_ids:
        first = intro_first_figure(paper.get("sections") or [])
        gt_ids = [first] if first in by_id else []
        source = "intro_first_ref" if gt_ids else None

    ordered = canonical_order(candidates)
    index = {c.figure_id: i for i, c in enumerate(ordered)}
    gt = sorted({index[i] for i in gt_ids})
    subjects = paper.get("subjects") or {}
    fields = [f for f in (subjects.get("arxiv") or []) if f]
    return Example(
        paper_id=pid,
        title=paper.get("title") or "",
        abstract=paper.get("abstract") or "",
        primary_category=paper.get("primary_category") or (fields[0] if fields else None),
        fields=fields,
        candidates=ordered,
        gt=gt,
        ga_source=source,
    )
