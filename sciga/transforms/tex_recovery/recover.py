"""Recover figures that ar5iv lost or blanked from the paper's TeX source.

The paper-level step of the TeX stage (``tex_stage.py``): the paper's TeX figures (parsed
from its e-print by ``eprints.tex_graphics``) are matched to its HTML figures
(``tex_figure_match``), and every matched HTML image that is lost (LaTeXML's missing image,
no image at all), absent (not beside the page, e.g. a page fetched without its assets) or
blank (one flat colour) is pointed at the source file instead:
``Image(source="tex", path=<file in the e-print>)``. The TeX stage then makes the PNG.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Optional

from sciga.schemas import ids
from sciga.schemas.records import Image, Paper, Subfigure
from sciga.transforms.common.input_files import file_size, parent_of, read_input
from sciga.transforms.eprints.tex_graphics import TexDocument
from sciga.transforms.inputs.page_images import candidate_paths
from sciga.transforms.tex_recovery.figure_match import (
    DEFAULT_NUMBER_MIN_JACCARD,
    DEFAULT_THRESHOLD,
    html_caption_tokens,
    match_figures,
    tokens,
)

BLANK_CHECK_MAX_BYTES = 32 * 1024 * 1024


# -- state of the HTML images ---------------------------------------------------------------
def is_blank(data: bytes) -> bool:
    """One flat colour (or fully transparent): what a failed PDF conversion often leaves."""
    from PIL import Image as PILImage

    try:
        with PILImage.open(io.BytesIO(data)) as im:
            if im.size[0] * im.size[1] > 64_000_000:
                return False
            im.draft("L", (256, 256))
            if im.mode in ("RGBA", "LA") or (im.mode == "P" and "transparency" in im.info):
                rgba = im.convert("RGBA")
                if rgba.getchannel("A").getextrema()[1] == 0:
                    return True
                lo, hi = rgba.convert("L").getextrema()
            else:
                lo, hi = im.convert("L").getextrema()
            return lo == hi
    except Exception:  # noqa: BLE001 - an unreadable image is not "blank", it is someone else's error
        return False


def image_problem(img: Image, page_uri: Optional[str], check_blank: bool = True) -> Optional[str]:
    """Why an HTML image needs the source: 'lost', 'absent', 'blank', or None if fine."""
    if img.kind == "inline_svg":
        return None
    if img.kind in ("missing", "unrendered") or not img.path:
        return "lost"
    if not page_uri:
        return None
    cands = candidate_paths(page_uri, img.path)
    root = parent_of(page_uri)
    for cand in cands:
        try:
            size = file_size(cand, root)  # a link out of the page's folder or a FIFO: OSError, not read
            if size is None:
                continue
            if check_blank and img.kind == "raster" and size <= BLANK_CHECK_MAX_BYTES:
                if is_blank(read_input(cand, root, BLANK_CHECK_MAX_BYTES)):
                    return "blank"
            return None
        except OSError:
            continue
    return "absent"


# -- recovery ----------------------------------------------------------------------------
@dataclass
class RecoveryReport:
    source_uri: Optional[str] = None
    source_kind: Optional[str] = None
    tex_figures: int = 0
    matched: int = 0
    matched_by_number: int = 0
    recovered: int = 0  # HTML images now pointing at a source file
    missing_in_source: list = field(default_factory=list)  # TeX refs of needed files absent from the e-print
    ambiguous: list = field(default_factory=list)  # figure ids whose image counts differ
    problems: list = field(default_factory=list)


def _tex_image(path: str, html_id: Optional[str] = None) -> Image:
    return Image(path=path, url=None, kind="raster", width=None, height=None, html_id=html_id, source="tex")


def _point_at_source(img: Image, graphic) -> bool:
    """Repoint one HTML image at its source file; True if it now has one. When the e-print
    lacks the file too, the HTML image is left as it was (its own error stands)."""
    if not graphic.path:
        return False
    img.source = "tex"
    img.url = None
    img.width = img.height = None
    img.path = graphic.path
    img.kind = "raster"
    return True


def recover_figures(
    paper: Paper,
    doc: TexDocument,
    problem_of: Callable[[Image], Optional[str]],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    number_min_jaccard: float = DEFAULT_NUMBER_MIN_JACCARD,
) -> RecoveryReport:
    """Mutates ``paper``: lost/absent/blank images of matched figures now point at the source."""
    rep = RecoveryReport(tex_figures=len(doc.figures), problems=list(doc.problems))
    if not paper.subjects.acm and doc.acm_classes:
        paper.subjects.acm = list(doc.acm_classes)
    if not paper.subjects.msc and doc.msc_classes:
        paper.subjects.msc = list(doc.msc_classes)
    if not doc.figures or not paper.figures:
        return rep
    html_side = [(f.number, html_caption_tokens(f.caption)) for f in paper.figures]
    tex_side = [(t.number if t.caption else None, tokens(t.caption)) for t in doc.figures]
    matches = match_figures(html_side, tex_side, threshold=threshold, number_min_jaccard=number_min_jaccard)
    rep.matched = len(matches)
    rep.matched_by_number = sum(1 for m in matches if m.by == "number")
    # Files some HTML figure already shows: LaTeXML sometimes repeats a caption of a
    # multi-caption float as an empty figure; it must not get a second copy of an image.
    shown = {img.path for f in paper.figures for img in f.images if img.path and img.kind != "missing"}
    for m in matches:
        fig = paper.figures[m.html_index]
        tf = doc.figures[m.tex_index]
        graphics = tf.graphics
        if not graphics:
            continue
        slots = list(fig.images)
        if not slots and any(g.path in shown for g in graphics):
            rep.ambiguous.append(fig.id)
            continue
        if not slots:
            # Caption-only figure: the HTML kept no image at all.
            rep.missing_in_source.extend(g.ref for g in graphics if not g.path)
            found = [(g, g.path) for g in graphics if g.path]
            if len(found) == 1:
                fig.images.append(_tex_image(found[0][1]))
                rep.recovered += 1
            else:
                for k, (g, path) in enumerate(found, 1):
                    img = _tex_image(path)
                    fig.images.append(img)
                    fig.subfigures.append(
                        Subfigure(
                            id=ids.subfigure_id(fig.id, k),
                            html_id=None,
                            label=None,
                            caption=g.subcaption or "",
                            images=[img],
                            caption_source="tex" if g.subcaption else "none",
                        )
                    )
                    rep.recovered += 1
            continue
        problems = [problem_of(img) for img in slots]
        if not any(problems):
            continue
        if len(slots) == len(graphics):
            pairs = list(zip(slots, graphics, problems))
        elif len(graphics) == 1:
            pairs = [(slots[0], graphics[0], problems[0])] if len(slots) == 1 else []
        else:
            pairs = []
        if not pairs:
            rep.ambiguous.append(fig.id)
            continue
        for img, g, prob in pairs:
            if not prob:
                continue
            if _point_at_source(img, g):
                rep.recovered += 1
            else:
                rep.missing_in_source.append(g.ref)
    return rep
