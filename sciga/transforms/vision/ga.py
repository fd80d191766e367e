"""Graphical abstracts and de-facto GAs on the Paper and its figure rows (pure functions).

``FigureRow.ga_role`` values (the ``figures`` config):

=================  ===========================================================================
``ga``             the row *is* the paper's graphical abstract (``kind = "graphical_abstract"``,
                   id ``<paper>_GA``), from ``--ga-manifest``
``ga_reused``      the figure a *Reused* GA copies
``ga_component``   a figure (or panel) used in a *Modified* GA
``de_facto_ga``    no GA was given: the figure standing in for it, as SciGA defines I_GA
                   ("Figure 1 referenced in the Introduction or a teaser image"): the first
                   teaser, else the figure the Introduction references first; its panels
                   carry the role too
null               none of these
=================  ===========================================================================

``Paper.graphical_abstract``: for a manifest GA ``{id, type Reused|Modified|Original,
paths [manifest path], components [figure ids], caption, de_facto False, source, score,
error}``; for a de-facto GA ``{type null, components [figure id], paths [its images],
de_facto True, source "teaser" | "first_intro_reference"}``. A manifest GA whose image could
not be fetched or decoded keeps its row in the ``figures`` config (``image_status`` says why:
``not_found``, ``outside_input``, ``undecodable`` ...); the paper keeps its de-facto GA when it
has one, with ``error`` saying why the manifest's GA was not used (a de-facto GA has an
``error`` only then), else the manifest GA with ``type null`` and ``error``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np

from sciga.schemas.ids import FIGURE_ID_RE, ga_id
from sciga.schemas.images import DECODE_KIND_STATUS, UNDECODABLE, UNREADABLE
from sciga.schemas.records import FIGURE_ROW_KINDS, FigureRow, GraphicalAbstract, Paper

ROLE_GA, ROLE_REUSED, ROLE_COMPONENT, ROLE_DE_FACTO = "ga", "ga_reused", "ga_component", "de_facto_ga"
GA_KIND = FIGURE_ROW_KINDS[2]

_INTRO = re.compile(r"^\s*(?:[ivx\d.]+\s*)?introduction\b", re.IGNORECASE)
_TAG = re.compile(r"<TAG>.*?</TAG>")


@dataclass
class GAInput:
    """A manifest GA after fetching: bytes or the reason there are none."""

    paper_id: str
    path: str
    source: Optional[str] = None
    caption: Optional[str] = None
    data: Optional[bytes] = None
    error: Optional[str] = None
    uri: Optional[str] = None  # where the GA image file is (the manifest's uri)
    status: Optional[str] = None  # the GA row's image_status when there are no bytes (default unreadable)


def _top_figure(fid: str) -> str:
    m = FIGURE_ID_RE.match(fid)
    return f"{m.group('paper')}_F{m.group('fig')}" if m else fid


def intro_section_ids(paper: Paper) -> list[str]:
    """The Introduction and its subsections (by title; the first top-level match)."""
    intro = next((s for s in paper.sections if _INTRO.match(_TAG.sub("", s.title or ""))), None)
    if intro is None:
        return []
    ids, frontier = [intro.id], {intro.id}
    for s in paper.sections:
        if s.parent_id in frontier:
            ids.append(s.id)
            frontier.add(s.id)
    return ids


def de_facto_ga(paper: Paper) -> Optional[tuple[str, str]]:
    """(figure id, how) of the figure that stands in for a GA, or None."""
    figs = {f.id for f in paper.figures}
    for t in paper.teaser:
        if t in figs:
            return t, "teaser"
    intro = set(intro_section_ids(paper))
    for sec in paper.sections:
        if sec.id not in intro:
            continue
        for para in sec.paragraphs:
            for span in sorted(para.ref_spans, key=lambda s: s.start):
                fid = _top_figure(span.ref_id)
                if FIGURE_ID_RE.match(span.ref_id) and fid in figs:
                    return fid, "first_intro_reference"
    return None


def apply_de_facto(paper: Paper, rows: Sequence[FigureRow]) -> None:
    """Set the de-facto GA on the paper (when it has no GA) and the role on its rows."""
    if paper.graphical_abstract is not None and not paper.graphical_abstract.de_facto:
        return
    found = de_facto_ga(paper)
    if found is None:
        return
    fid, how = found
    fig = next(f for f in paper.figures if f.id == fid)
    paper.graphical_abstract = GraphicalAbstract(
        id=ga_id(paper.id),
        type=None,
        paths=[i.path for i in fig.images if i.path],
        components=[fid],
        caption=None,
        de_facto=True,
        source=how,
    )
    for r in rows:
        if r.id == fid or r.parent_id == fid:
            r.ga_role = ROLE_DE_FACTO


def ga_row(paper: Paper, ga: GAInput) -> FigureRow:
    """The GA image as a row of the ``figures`` config."""
    return FigureRow(
        id=ga_id(paper.id),
        paper_id=paper.id,
        parent_id=None,
        kind=GA_KIND,
        index=0,
        number=None,
        label=None,
        caption=ga.caption or "",
        subcaption=None,
        subcaption_source=None,
        image_bytes=ga.data,
        image_path=ga.path,
        image_paths=[ga.path],
        image_kind="raster",
        image_source="ga_manifest",
        image_error=ga.error,
        ga_role=ROLE_GA,
        image_uri=ga.uri,
        image_status=None if ga.data is not None else (ga.status or UNREADABLE),
    )


def panels_of(rows: Sequence[FigureRow]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in rows:
        if r.kind == "subfigure" and r.parent_id:
            out.setdefault(r.parent_id, []).append(r.id)
    return out


def annotate_ga(
    paper: Paper,
    rows: list[FigureRow],
    ga: GAInput,
    thresholds,
    max_pixels: int,
    embeddings: Optional[dict[str, np.ndarray]] = None,
    matcher=None,
    de_facto: Optional[GraphicalAbstract] = None,
) -> list[FigureRow]:
    """Type the manifest GA against the paper's figure images; returns the rows with roles
    set and the GA's own row appended. ``embeddings``: item id -> unit vector, where the GA
    is ``"GA"`` and its tiles ``"GA#<n>"`` (optional). ``de_facto``: the paper's de-facto GA
    (its rows carry the ``de_facto_ga`` role), kept when the GA's image has no pixels."""
    from sciga.transforms.vision.decode import ImageDecodeError, decode_image
    from sciga.transforms.vision.figure_images import decode_row
    from sciga.transforms.vision.ga_match import decide, prepare
    from sciga.transforms.vision.phash import phash_hex

    record = GraphicalAbstract(
        id=ga_id(paper.id),
        type=None,
        paths=[ga.path],
        components=[],
        caption=ga.caption,
        de_facto=False,
        source=ga.source,
        score=None,
        error=ga.error,
    )
    paper.graphical_abstract = record
    row = ga_row(paper, ga)
    if matcher is not None:  # the medical keyword stage on the GA's caption, as for figures
        from sciga.schemas.records import Medical

        hits = matcher.hits([row.caption])
        row.medical = Medical(keyword_hits=hits, is_medical=None if hits else False)
    if ga.data is not None:
        try:
            dec = decode_image(ga.data, max_pixels)
            row.width, row.height, row.phash = dec.width, dec.height, phash_hex(dec.image)
        except ImageDecodeError as e:
            record.error = row.image_error = f"{ga.path}: {e}"
            row.image_status = DECODE_KIND_STATUS.get(e.kind, UNDECODABLE)
            row.image_bytes = None
            dec = None
    else:
        dec = None
    if dec is None and de_facto is not None:
        # No pixels: the paper keeps the figure that stands in for its GA, and says why the
        # manifest's was not used.
        paper.graphical_abstract = dataclasses.replace(de_facto, error=record.error)
    else:
        _clear_roles(rows)
    if dec is not None:
        figures = []
        for r in rows:
            if r.kind == GA_KIND:
                continue
            img = decode_row(r, max_pixels)
            if img is not None:
                figures.append((r.id, prepare(img)))
        emb = dict(embeddings or {})
        tiles = [v for k, v in sorted(emb.items()) if k.startswith("GA#")]
        d = decide(
            prepare(dec.image),
            figures,
            thresholds,
            panels=panels_of(rows),
            embeddings={k: v for k, v in emb.items() if not k.startswith("GA")} or None,
            ga_tile_embeddings=tiles,
            ga_embedding=emb.get("GA"),
        )
        record.type, record.components, record.score = d.type, list(d.components), d.score
        role = {"Reused": ROLE_REUSED, "Modified": ROLE_COMPONENT}.get(d.type)
        comps = set(d.components)
        for r in rows:
            if role and (r.id in comps or (d.type == "Reused" and r.parent_id in comps)):
                r.ga_role = role
    rows = [r for r in rows if r.kind != GA_KIND]
    rows.append(row)
    return rows


def _clear_roles(rows: Sequence[FigureRow]) -> None:
    for r in rows:
        if r.ga_role in (ROLE_REUSED, ROLE_COMPONENT, ROLE_DE_FACTO):
            r.ga_role = None
