"""Paper -> rows of the ``figures`` config (one per figure and one per subfigure)."""

from __future__ import annotations

from sciga.schemas.images import IN_SUBFIGURES
from sciga.schemas.records import Figure, FigureRow, Image, Paper, Subfigure


def _primary(images: list[Image]):
    """The image a row carries: the first one that names a file."""
    for img in images:
        if img.path:
            return img
    return images[0] if images else None


def figure_rows(paper: Paper) -> list[FigureRow]:
    rows: list[FigureRow] = []
    for fig in paper.figures:
        rows.append(_figure_row(paper, fig))
        for sub in fig.subfigures:
            rows.append(_subfigure_row(paper, fig, sub))
    return rows


def _row(
    paper: Paper,
    fig: Figure,
    *,
    id: str,
    parent_id,
    kind: str,
    label,
    subcaption,
    subcaption_source,
    images: list[Image],
    primary,
    html_id,
) -> FigureRow:
    """The fields a figure row and a subfigure row share come from the figure."""
    return FigureRow(
        id=id,
        paper_id=paper.id,
        parent_id=parent_id,
        kind=kind,
        index=fig.index,
        number=fig.number,
        label=label,
        caption=fig.caption,
        subcaption=subcaption,
        subcaption_source=subcaption_source,
        image_bytes=None,
        image_path=primary.path if primary else None,
        image_paths=[i.path for i in images if i.path],
        image_kind=primary.kind if primary else None,
        image_source=primary.source if primary else None,
        image_url=primary.url if primary else None,
        section_id=fig.section_id,
        html_id=html_id,
        is_teaser=fig.is_teaser,
        svg_source=primary.svg if primary is not None and primary.kind == "inline_svg" else None,
    )


def _figure_row(paper: Paper, fig: Figure) -> FigureRow:
    # A figure made of panels carries no image of its own: its panels are rows too.
    primary = None if fig.subfigures else _primary(fig.images)
    row = _row(
        paper,
        fig,
        id=fig.id,
        parent_id=None,
        kind="figure",
        label=fig.label,
        subcaption=None,
        subcaption_source=None,
        images=fig.images,
        primary=primary,
        html_id=fig.html_id,
    )
    if fig.subfigures:
        row.image_status = IN_SUBFIGURES
    return row


def _subfigure_row(paper: Paper, fig: Figure, sub: Subfigure) -> FigureRow:
    return _row(
        paper,
        fig,
        id=sub.id,
        parent_id=fig.id,
        kind="subfigure",
        label=sub.label,
        subcaption=sub.caption or None,
        subcaption_source=sub.caption_source,
        images=sub.images,
        primary=_primary(sub.images),
        html_id=sub.html_id,
    )
