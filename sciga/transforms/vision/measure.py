"""The measuring step of the vision stage: a paper's figure rows, measured from their images.

Per paper: the figure rows, the keyword stage of the medical filter, the de-facto GA, and
each image read once, hashed and decoded (size, pHash or the image error) at the small scale
those need (``decode.decode_reduced``). An image file that several rows of one paper show
(the same ``src``, or another spelling of the same file) is read, decoded and stored once:
the first row embeds it, the others get ``image_status`` ``repeated``, the same
``image_uri``, size and pHash, and ``image_error`` naming the row that holds the bytes (a page
that showed one teaser 100,000 times made a 1.23 GB figures shard). The rows carry where their bytes are (``ImageRef``),
never the bytes. The model steps' requests (``classify``, ``ga``) leave as tagged outputs;
Beam's side of the stage (``stage.py``) runs the models on them.
"""

from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional, Union

import numpy as np

from sciga.schemas.build import ImageRef, PaperWork
from sciga.schemas.images import EMBEDDED, NOT_FOUND, RASTERIZED_SVG, REPEATED, SVG_ONLY, UNDECODABLE, UNREADABLE
from sciga.schemas.records import FigureRow, GraphicalAbstract
from sciga.transforms.common.counters import Counter
from sciga.transforms.common.progress import Progress
from sciga.transforms.common.result_store import absent_dep, file_dep
from sciga.transforms.common.steps import PaperStep, Tagged
from sciga.transforms.inputs.page_images import find_asset
from sciga.transforms.vision.decode import sniff_vector
from sciga.transforms.vision.figure_images import measure_image
from sciga.transforms.vision.figure_rows import figure_rows
from sciga.transforms.vision.ga import GAInput, apply_de_facto
from sciga.transforms.vision.ga_manifest import ga_file_dep
from sciga.transforms.vision.medical import KeywordMatcher, annotate_keywords
from sciga.transforms.vision.options import GAIndex, ResolvedVision
from sciga.transforms.vision.svg_raster import MAX_SVG_BYTES, SvgRefused, rasterize_svg

if TYPE_CHECKING:
    from sciga.transforms.vision.ga_manifest import GAEntry

log = logging.getLogger("sciga.vision")

CLASSIFY = "classify"
GA_REQUESTS = "ga"
Payload = Union[ImageRef, bytes]


@dataclass(frozen=True)
class ClassifyKey:
    """Which row a classifier request is for, and its stage-1 keyword hits."""

    key: str
    paper_id: str
    row_id: str
    keyword_hits: tuple[str, ...] = ()


@dataclass
class GAFigure:
    id: str
    kind: str
    parent_id: Optional[str]
    payload: Optional[Payload] = None  # None: the row has no decodable image
    ga_role: Optional[str] = None  # the de-facto GA's role, kept when the manifest GA cannot be read


@dataclass
class GARequest:
    key: str
    paper_id: str
    entry: GAEntry
    figures: list[GAFigure] = field(default_factory=list)
    ga: Optional[GAInput] = None  # filled by LoadGA
    # The paper's de-facto GA (its teaser, or the figure the Introduction references first):
    # the paper keeps it when the manifest's GA image cannot be read or decoded.
    de_facto: Optional[GraphicalAbstract] = None


def _is_de_facto(ga: Optional[GraphicalAbstract]) -> bool:
    return ga is not None and ga.de_facto


# ------------------------------------------------------------------ per paper


class MeasureStep(PaperStep):
    """PaperWork -> PaperWork with ``figure_rows``; medical requests (``classify``) and the
    GA request (``ga``) as tagged outputs."""

    STAGE = "vision"

    def __init__(self, vision: ResolvedVision, progress: Optional[Progress] = None):
        super().__init__()
        self.vision = vision
        self.progress = progress or Progress()
        self.ga_index = GAIndex(vision.ga_entries_uri)
        self.decoded = Counter("images_decoded")
        self.undecodable = Counter("images_undecodable")

    def setup(self):
        self.matcher = KeywordMatcher(list(self.vision.keywords))

    def run(self, work: PaperWork):
        v, o = self.vision, self.vision.options
        paper = work.live_paper()
        rows = annotate_keywords(paper, figure_rows(paper), self.matcher)
        entry = self.ga_index.get(paper.id) if v.ga_entries_uri else None
        if v.ga_entries_uri:
            work.deps.append(self.ga_index.dep(paper.id))
        # Also with a manifest GA: the de-facto GA stands in when that GA's image cannot be
        # read (TypeGA drops it when the GA is read).
        apply_de_facto(paper, rows)
        out: list = []
        payloads: dict[str, Payload] = {}
        input_size: Optional[int] = getattr(v.medical_meta, "input_size", None)  # a CheckpointMeta
        seen: dict[tuple[str, str], FigureRow] = {}  # ("path", src) / ("uri", file) -> the row that read it
        for row in rows:
            classify = v.medical_meta is not None and bool(o.classify_all or row.medical.keyword_hits)
            payload, model_input = self._measure(work, row, input_size if classify else None, seen)
            if payload is not None:
                payloads[row.id] = payload
                if classify:
                    # The classifier gets the input made from this step's decode (the file
                    # is not read and decoded again), else where the bytes are.
                    out.append(
                        Tagged(
                            CLASSIFY,
                            (
                                ClassifyKey(work.key or "", paper.id, row.id, tuple(row.medical.keyword_hits)),
                                model_input if model_input is not None else payload,
                            ),
                        )
                    )
        if out:
            work.pending.append("medical")
        if entry is not None:
            dep = ga_file_dep(entry)  # a file (read only where it may be): changing it retypes the GA
            if dep is not None:
                work.deps.append(dep)
            work.pending.append("ga")
            out.append(
                Tagged(
                    GA_REQUESTS,
                    GARequest(
                        key=work.key or "",
                        paper_id=paper.id,
                        entry=entry,
                        figures=[GAFigure(r.id, r.kind, r.parent_id, payloads.get(r.id), r.ga_role) for r in rows],
                        de_facto=paper.graphical_abstract if _is_de_facto(paper.graphical_abstract) else None,
                    ),
                )
            )
        work.figure_rows = rows
        work.made_images = {}  # measured; the rows that need them keep them inline
        images = sum(1 for r in rows if r.image_sha256 or r.image_bytes is not None)
        work.count("images_read", images)
        self.progress.add(images=images)
        return [work, *out]

    def _measure(
        self,
        work: PaperWork,
        row: FigureRow,
        model_input_size: Optional[int] = None,
        seen: Optional[dict[tuple[str, str], FigureRow]] = None,
    ) -> tuple[Optional[Payload], Optional[np.ndarray]]:
        """Read and decode the row's image once; the row keeps its size, hash and where the
        bytes are. Returns what a model step should read (None: no usable pixels) and, with
        ``model_input_size``, the classifier's uint8 input made from the same decode.
        ``seen``: the paper's rows so far by image path and file; a file read before is not
        read again (``_same_file``)."""
        o = self.vision.options
        seen = {} if seen is None else seen
        if row.image_source != "tex" and row.image_path and row.image_bytes is None:
            first = seen.get(("path", row.image_path))
            if first is not None:
                _same_file(row, first)
                return None, None
        data, uri, sha = None, None, None
        if row.image_source == "tex":
            data = work.made_images.get(row.image_path or "")
            if data is None:
                made_error = work.made_image_errors.get(row.image_path or "")
                # No error: the source vanished; "not in the e-print": no file; else rasterizing failed.
                row.image_status = (
                    UNDECODABLE if made_error and not made_error.endswith("is not in the e-print.") else NOT_FOUND
                )
                row.image_error = made_error or (
                    f"{row.image_path}: its TeX source is no longer where the figure stage found it"
                )
        elif row.image_path and row.image_bytes is None:
            got = find_asset(work.uri, row.image_path, o.max_image_bytes)
            data, uri = got.data, got.uri
            if data is not None and uri is not None and ("uri", uri) in seen:  # the same file, spelled otherwise
                first = seen[("uri", uri)]
                seen[("path", row.image_path)] = first
                _same_file(row, first)
                return None, None
            work.deps.extend(absent_dep(u) for u in got.looked)
            if data is not None and uri is not None:  # bytes come with where they were read
                dep = file_dep(uri, data)
                work.deps.append(dep)
                sha = dep.sha256  # the image's hash, taken once for both the dependency and the row
            else:
                row.image_error, row.image_status, row.image_uri = got.error, got.status, got.expected_at
                if got.transient:
                    work.cacheable = False  # an I/O error may pass: the next build reads the image again
        svg_at = None  # where the SVG a PNG is drawn from lies: the file, or the page at the figure's element
        if data is not None and sniff_vector(data) == "svg":
            svg_at, data = uri, self._rasterized(work, row, data)
        elif data is None and row.svg_source is not None and row.image_source != "tex":
            svg_at = f"{work.uri}#{row.html_id}" if row.html_id else work.uri
            data = self._rasterized(work, row, row.svg_source)
        row.svg_source = None  # drawn (or refused): the markup does not travel further
        row.image_bytes = data
        had = data is not None
        model_input = None
        try:
            model_input = measure_image(row, o.max_pixels, model_input_size)
        except Exception as e:  # noqa: BLE001 - a bug on one image must not stop the paper
            log.warning("internal error decoding %s: %r", row.id, e)
            row.image_error, row.image_bytes = (
                f"internal: unexpected {type(e).__name__} while decoding ({e}); please report",
                None,
            )
            row.image_status = UNDECODABLE
        if had:
            (self.decoded if row.image_bytes is not None else self.undecodable).inc()
        if (
            row.image_source != "tex" and row.image_path and row.image_status != UNREADABLE
        ):  # a failure that may pass is read again
            seen[("path", row.image_path)] = row
            if uri is not None:
                seen[("uri", uri)] = row
        if row.image_bytes is None:
            row.image_uri = row.image_uri or svg_at or uri  # a file that was read but did not decode
            return None, None
        if svg_at is not None:  # a PNG drawn here from an SVG: inline, like TeX's; image_uri says where the SVG is
            row.image_status, row.image_uri, row.image_sha256, row.image_size = RASTERIZED_SVG, svg_at, None, None
            return row.image_bytes, model_input
        if uri is None:  # made here (TeX): the bytes stay inline, there is no file to point at
            return row.image_bytes, model_input
        import hashlib

        ref = ImageRef(uri=uri, sha256=sha or hashlib.sha256(row.image_bytes).hexdigest(), size=len(row.image_bytes))
        row.image_uri, row.image_sha256, row.image_size = ref.uri, ref.sha256, ref.size
        row.image_bytes = None
        return ref, model_input

    def _rasterized(self, work: PaperWork, row: FigureRow, svg) -> Optional[bytes]:
        """The PNG drawn from an SVG drawing or file (``svg_raster``), or None with the row's
        ``svg_only`` status and the reason in ``image_error`` when it is refused."""
        if isinstance(svg, (bytes, bytearray)) and svg[:2] == b"\x1f\x8b":  # .svgz
            from sciga.transforms.common.decompress import InflatesTooFar, gunzip_at_most

            try:
                svg = gunzip_at_most(bytes(svg), MAX_SVG_BYTES)
            except (InflatesTooFar, OSError, EOFError, zlib.error) as e:
                row.image_status, row.image_error = (
                    SVG_ONLY,
                    f"svg_refused: too_large: the .svgz does not inflate ({e})",
                )
                work.count("svg_refused")
                return None
        try:
            png = rasterize_svg(svg).png
        except SvgRefused as e:
            row.image_status, row.image_error = SVG_ONLY, str(e)
            work.count("svg_refused")
            return None
        work.count("svg_rasterized")
        return png


def _same_file(row: FigureRow, first: FigureRow) -> None:
    """``row`` shows the image file ``first`` read: the same measurements; the bytes stay
    with ``first`` (``repeated``), or the same reason there are none."""
    row.image_uri, row.width, row.height, row.phash = first.image_uri, first.width, first.height, first.phash
    row.image_bytes, row.image_sha256, row.image_size = None, None, None
    if first.image_status in (EMBEDDED, RASTERIZED_SVG):  # a drawn SVG's PNG is held by the first row too
        row.image_status = REPEATED
        row.image_error = (
            f"{REPEATED}: the same image file as row {first.id}, whose image holds it (stored once per paper)"
        )
    else:
        row.image_status, row.image_error = first.image_status, first.image_error
