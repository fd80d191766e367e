"""Paper -> rows of the ``figures`` config (one per figure and one per subfigure)."""
from __future__ import annotations

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


def _figure_row(paper: Paper, fig: Figure) -> FigureRow:
    # A figure made of panels carries no image of its own: its panels are rows too.
    img = None if fig.subfigures else _primary(fig.images)
    return FigureRow(
        id=fig.id,
        paper_id=paper.id,
        parent_id=None,
        kind="figure",
        index=fig.index,
        number=fig.number,
        label=fig.label,
        caption=fig.caption,
        subcaption=None,
        subcaption_source=None,
        image_bytes=None,
        image_path=img.path if img else None,
        image_paths=[i.path for i in fig.images if i.path],
        image_kind=img.kind if img else None,
        image_source=img.source if img else None,
        image_url=img.url if img else None,
        section_id=fig.section_id,
        html_id=fig.html_id,
        is_teaser=fig.is_teaser,
    )


def _subfigure_row(paper: Paper, fig: Figure, sub: Subfigure) -> FigureRow:
    img = _primary(sub.images)
    return FigureRow(
        id=sub.id,
        paper_id=paper.id,
        parent_id=fig.id,
        kind="subfigure",
        index=fig.index,
        number=fig.number,
        label=sub.label,
        caption=fig.caption,
        subcaption=sub.caption or None,
        subcaption_source=sub.caption_source,
        image_bytes=None,
        image_path=img.path if img else None,
        image_paths=[i.path for i in sub.images if i.path],
        image_kind=img.kind if img else None,
        image_source=img.source if img else None,
        image_url=img.url if img else None,
        section_id=fig.section_id,
        html_id=sub.html_id,
        is_teaser=fig.is_teaser,
    )
