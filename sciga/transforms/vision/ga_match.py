"""Graphical abstract vs. the paper's figures: Reused, Modified or Original, and which figures.

SciGA's three GA types (seed 000, Sec. 3): *Original* (newly created, no paper figure
reused), *Reused* (a paper figure copied without modification), *Modified* (several
figures combined, or one figure cropped / edited). We decide them from pixels only:

1. **Whole-image match.** Both pictures are trimmed of uniform margins, squeezed to a
   small square and compared by normalised cross-correlation (NCC, a Pearson correlation
   of the pixels), with the aspect ratio checked apart. The perceptual hashes (pHash,
   Hamming distance) are the fast path: near-identical hashes *and* aspect say Reused
   without further work. A GA that matches one figure as a whole is **Reused** and its
   component is that figure (the best-scoring one).
2. **Tile matching.** Otherwise we search, at a range of scales, for (a) the GA as a tile
   inside each figure (a crop of the figure) and (b) each figure as a tile inside the GA
   (a combination such as a 2x2 mosaic, or one figure with added margins / text). Search
   is an FFT normalised cross-correlation of blurred greyscale images at a few hundred
   pixels. Every figure whose best tile score passes ``part_ncc`` is a component. A crop
   that keeps nearly all of a figure (``crop_reused_area``) counts as Reused.
3. **Embeddings (optional).** When CNN embeddings of the GA, of its tiles and of the
   figures are given (computed by RunInference with the same handler as the medical
   classifier), a cosine similarity above ``embed_reused`` / ``embed_part`` turns a loose
   pixel match (above ``soft_ncc``: a recoloured or redrawn copy) into a copy / component.
   Embeddings alone never decide: unrelated plots embed alike.
4. No evidence: **Original**.

A figure drawn as panels has no image of its own (its panels are subfigure rows): when the
matched components are exactly all the panels of one figure, the GA is that figure reused
(``components = [figure id]``). The numbers are thresholds, exposed as build options, and
measured on a synthetic set in tests/transforms/vision/test_vision_ga.py (see docs/how-to/vision.md, "Graphical abstracts").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
from PIL import Image

from sciga.transforms.vision.defaults import GAThresholds
from sciga.transforms.vision.phash import hamming, phash_hex

REUSED, MODIFIED, ORIGINAL = "Reused", "Modified", "Original"


@dataclass
class MatchImage:
    """A picture prepared for matching: trimmed greyscale at two resolutions."""

    gray: Image.Image  # trimmed, 'L', at most BASE pixels on its longer side
    thumb: np.ndarray  # THUMB x THUMB, zero mean, unit norm
    phash: str
    aspect: float  # width / height after trimming
    _canvas: dict = field(default_factory=dict, repr=False, compare=False)  # longest side -> _Canvas

    @property
    def size(self) -> tuple[int, int]:
        return self.gray.size


@dataclass
class FigureMatch:
    figure_id: str
    whole: float = 0.0  # NCC of the whole images (0 when the aspects differ)
    phash_bits: int = 64
    ga_in_figure: float = 0.0  # best NCC of the GA as a crop of the figure
    ga_in_figure_area: float = 0.0  # fraction of the figure's area that crop covers
    figure_in_ga: float = 0.0  # best NCC of the figure as a tile of the GA
    figure_in_ga_area: float = 0.0
    embed_whole: Optional[float] = None
    embed_tile: Optional[float] = None


@dataclass
class GADecision:
    type: str
    components: list[str]
    score: float  # the evidence that decided (NCC / cosine); 0 for Original
    matches: list[FigureMatch] = field(default_factory=list)


BASE = 256  # longer side of the greyscale kept for matching
WORK = 128  # longer side of the canvas searched by tile matching
THUMB = 64  # side of the whole-image thumbnail
VERIFY_FROM = 0.6  # coarse tile scores below this are not worth a finer look
_EDGE = 6  # pixels of a template's rim left out of tile matching (2 sigma of the band-pass)


def _bandpass(a: np.ndarray) -> np.ndarray:
    """Structure only: a difference of Gaussians drops pixel noise and the smooth shading
    (sky, gradients, paper tone) that makes unrelated photographs correlate."""
    a = a.astype(np.float64)
    from scipy.ndimage import gaussian_filter  # here: `sciga build --help` needs this module's defaults, not scipy

    return gaussian_filter(a, 0.8, mode="nearest") - gaussian_filter(a, 3.0, mode="nearest")


def _trim(gray: Image.Image, tol: int = 10) -> Image.Image:
    """Cut uniform margins (the colour of the border) so padding does not hide a copy."""
    a = np.asarray(gray, dtype=np.int16)
    if a.size == 0 or min(a.shape) < 3:
        return gray
    border = np.concatenate([a[0], a[-1], a[:, 0], a[:, -1]])
    bg = int(np.median(border))
    mask = np.abs(a - bg) > tol
    rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    if rows.size == 0 or cols.size == 0:
        return gray
    box = (int(cols[0]), int(rows[0]), int(cols[-1]) + 1, int(rows[-1]) + 1)
    if box[2] - box[0] < 4 or box[3] - box[1] < 4:
        return gray
    return gray.crop(box)


def _unit(a: np.ndarray) -> np.ndarray:
    a = a.astype(np.float64).ravel()
    a = a - a.mean()
    n = np.linalg.norm(a)
    return a / n if n > 1e-9 else a * 0.0


def _fit(size: tuple[int, int], longest: float) -> tuple[int, int]:
    w, h = size
    s = longest / max(w, h)
    return max(1, round(w * s)), max(1, round(h * s))


def prepare(image: Image.Image) -> MatchImage:
    rgb = image.convert("RGB")
    gray = rgb.convert("L")
    if max(gray.size) > 4 * BASE:  # cheap first reduction of huge pictures
        gray = gray.reduce(max(1, max(gray.size) // (2 * BASE)))
    gray = _trim(gray)
    if max(gray.size) > BASE:
        gray = gray.resize(_fit(gray.size, BASE), Image.Resampling.BILINEAR, reducing_gap=2.0)
    thumb = _unit(_bandpass(np.asarray(gray.resize((THUMB, THUMB), Image.Resampling.BILINEAR, reducing_gap=2.0))))
    w, h = gray.size
    return MatchImage(gray=gray, thumb=thumb, phash=phash_hex(gray), aspect=w / h)


def whole_ncc(a: MatchImage, b: MatchImage) -> float:
    return float(np.dot(a.thumb, b.thumb))


class _Canvas:
    """A band-passed image prepared once for many template searches: its FFT at a fixed
    padded shape and its integral images (window sums for the NCC denominator)."""

    def __init__(self, arr: np.ndarray):
        self.arr = arr
        self.H, self.W = arr.shape
        # Circular correlation at the canvas' own size is exact on every placement where
        # the template lies inside the canvas (the only ones we read): no 2x padding.
        from scipy import fft as sfft
        from scipy.fft import next_fast_len

        self.shape = (next_fast_len(self.H, real=True), next_fast_len(self.W, real=True))
        self.fft = sfft.rfft2(arr.astype(np.float32), self.shape)
        self.c1 = np.pad(arr, ((1, 0), (1, 0))).cumsum(0).cumsum(1)
        self.c2 = np.pad(arr * arr, ((1, 0), (1, 0))).cumsum(0).cumsum(1)

    @staticmethod
    def _window(c: np.ndarray, th: int, tw: int) -> np.ndarray:
        return c[th:, tw:] - c[:-th, tw:] - c[th:, :-tw] + c[:-th, :-tw]

    def best_ncc(self, templ: np.ndarray, peaks: int = 1) -> tuple[float, int, int]:
        """(highest normalised cross-correlation of ``templ`` over every placement, its
        top-left y, x); with ``peaks`` > 1 the runners-up are left in ``self.peaks``."""
        th, tw = templ.shape
        if th > self.H or tw > self.W or th < 2 or tw < 2:
            return 0.0, 0, 0
        t = templ - templ.mean()
        tn = math.sqrt(float((t * t).sum()))
        if tn < 1e-6:
            return 0.0, 0, 0
        from scipy import fft as sfft

        full = sfft.irfft2(self.fft * sfft.rfft2(t[::-1, ::-1].astype(np.float32), self.shape), self.shape)
        num = full[th - 1 : self.H, tw - 1 : self.W]
        n = th * tw
        s1 = self._window(self.c1, th, tw)
        var = np.maximum(self._window(self.c2, th, tw) - s1 * s1 / n, 0.0)
        # Flat windows (blank paper) correlate with nothing: keep them out of the maximum.
        ok = var > (n * 0.25)  # per-pixel (band-passed) std above half a grey level
        if not ok.any():
            return 0.0, 0, 0
        score = np.where(ok, num / np.maximum(np.sqrt(var) * tn, 1e-9), -1.0)
        y, x = np.unravel_index(int(np.argmax(score)), score.shape)
        if peaks > 1:  # also the next best placements, away from the ones already taken
            self.peaks = [(float(score[y, x]), int(y), int(x))]
            sy, sx = max(2, th // 4), max(2, tw // 4)
            for _ in range(peaks - 1):
                score[max(0, y - sy) : y + sy + 1, max(0, x - sx) : x + sx + 1] = -1.0
                y, x = np.unravel_index(int(np.argmax(score)), score.shape)
                if score[y, x] <= 0:
                    break
                self.peaks.append((float(score[y, x]), int(y), int(x)))
            return self.peaks[0]
        return float(score[y, x]), int(y), int(x)


def _local_ncc(sub: np.ndarray, templ: np.ndarray) -> float:
    """Best NCC of ``templ`` over the few placements inside ``sub`` (direct, no FFT)."""
    th, tw = templ.shape
    if sub.shape[0] < th or sub.shape[1] < tw:
        return 0.0
    t = templ - templ.mean()
    tn = math.sqrt(float((t * t).sum()))
    if tn < 1e-6:
        return 0.0
    win = np.lib.stride_tricks.sliding_window_view(sub, (th, tw))
    num = np.tensordot(win, t, axes=([2, 3], [0, 1]))
    n = th * tw
    s1 = win.sum(axis=(2, 3))
    var = np.maximum(np.square(win).sum(axis=(2, 3)) - s1 * s1 / n, 0.0)
    ok = var > n * 0.25
    if not ok.any():
        return 0.0
    return float(np.max(np.where(ok, num / np.maximum(np.sqrt(var) * tn, 1e-9), -1.0)))


def best_ncc(image: np.ndarray, templ: np.ndarray) -> float:
    return _Canvas(image).best_ncc(templ)[0]


def _level(m: MatchImage, longest: int) -> _Canvas:
    """The band-passed canvas of ``m`` with its longer side ``longest`` (cached)."""
    key = min(longest, max(m.size))
    if key not in m._canvas:
        m._canvas[key] = _Canvas(
            _bandpass(np.asarray(m.gray.resize(_fit(m.size, key), Image.Resampling.BILINEAR, reducing_gap=2.0)))
        )
    return m._canvas[key]


def _scales(lo: float, step: float, hi: float = 1.0) -> list[float]:
    out, f = [], hi
    while f >= lo - 1e-9:
        out.append(f)
        f /= step
    return out


def _template(img: MatchImage, tw: int, th: int) -> tuple[np.ndarray, int]:
    """The band-passed template and the rim left out: the band-pass near a template's edge
    cannot know what surrounds it in the canvas (white gaps of a mosaic, the rest of a
    figure), so only its interior is matched."""
    t = _bandpass(np.asarray(img.gray.resize((tw, th), Image.Resampling.BILINEAR, reducing_gap=2.0)))
    m = min(_EDGE, tw // 6, th // 6)
    return (t[m : th - m, m : tw - m] if m else t), m


def tile_search(
    canvas_img: MatchImage, templ_img: MatchImage, min_fraction: float, min_area: float = 0.0
) -> tuple[float, float]:
    """Best NCC of ``templ_img`` scaled to a fraction of ``canvas_img``'s size (the
    template keeps its aspect), and the share of the canvas area it then covers.

    Coarse scales first (steps of 12 %) on a small canvas, a finer look (3 %) around the
    best one, then the best placement is verified on a canvas twice as large, where small
    templates show the detail that separates a real copy from a look-alike plot."""
    canvas = _level(canvas_img, WORK)
    cw, ch = canvas.W, canvas.H
    seen: dict[tuple[int, int], tuple[float, int, int, int]] = {}

    def size(f: float) -> Optional[tuple[int, int]]:
        tw, th = _fit(templ_img.size, f * max(cw, ch))
        if tw > cw or th > ch:  # rounding can overshoot the canvas by a pixel or two
            if tw > cw * 1.03 or th > ch * 1.03:
                return None
            tw, th = min(tw, cw), min(th, ch)
        if min(tw, th) < 8 or tw * th < min_area * cw * ch:
            return None
        return tw, th

    def score(f: float) -> tuple[float, tuple]:
        wh = size(f)
        if wh is None:
            return 0.0, ()
        if wh not in seen:
            t, m = _template(templ_img, *wh)
            seen[wh] = (*canvas.best_ncc(t), m)
        return seen[wh][0], wh

    coarse = [(score(f), f) for f in _scales(min_fraction, 1.12)]
    (best, wh), fbest = max(coarse, key=lambda x: x[0][0])
    if best <= 0.3 or not wh:
        return best, 0.0
    for k in (-3, -2, -1, 1, 2, 3):
        f = fbest * 1.03**k
        if f <= 1.0 + 1e-9:
            s, w2 = score(f)
            if s > best:
                best, wh = s, w2
    area = (wh[0] * wh[1]) / (cw * ch)
    fine = _level(canvas_img, 2 * WORK)
    r = fine.W / cw
    if r < 1.5 or best < VERIFY_FROM:  # too small for a finer level, or no candidate at all
        return best, area
    # Verify at twice the resolution, around the best coarse placements (plots repeat
    # their grid, so the true placement need not be the coarse maximum).
    t, m = _template(templ_img, *wh)
    canvas.best_ncc(t, peaks=3)
    pad, fine_best = 6, 0.0
    for _, y, x in canvas.peaks:
        for jitter in (1.0, 0.985, 1.015, 0.97, 1.03):  # the coarse scale is only good to ~2 %
            tw2, th2 = min(round(wh[0] * r * jitter), fine.W), min(round(wh[1] * r * jitter), fine.H)
            t2, m2 = _template(templ_img, tw2, th2)
            # (y, x): where the coarse interior starts; the full template starts m pixels
            # earlier, and the fine interior m2 pixels after the fine template's start.
            y0 = max(0, round((y - m) * r) + m2 - pad)
            x0 = max(0, round((x - m) * r) + m2 - pad)
            sub = fine.arr[y0 : y0 + t2.shape[0] + 2 * pad, x0 : x0 + t2.shape[1] + 2 * pad]
            fine_best = max(fine_best, _local_ncc(sub, t2))
            if fine_best >= 0.9:
                return fine_best, area
    return fine_best, area


def compare(ga: MatchImage, fig: MatchImage, figure_id: str, th: GAThresholds, full: bool = True) -> FigureMatch:
    m = FigureMatch(figure_id=figure_id)
    m.phash_bits = hamming(ga.phash, fig.phash)
    if abs(math.log(ga.aspect / fig.aspect)) <= th.aspect_tolerance:
        m.whole = whole_ncc(ga, fig)
    if full:
        m.ga_in_figure, m.ga_in_figure_area = tile_search(fig, ga, th.min_tile_fraction, th.min_tile_area)
        m.figure_in_ga, m.figure_in_ga_area = tile_search(ga, fig, th.min_tile_fraction, th.min_tile_area)
    return m


def _is_copy(m: FigureMatch, th: GAThresholds) -> bool:
    if m.whole >= th.reused_ncc:
        return True
    if m.whole > 0 and m.phash_bits <= th.reused_phash_bits:
        return True
    if m.embed_whole is not None and m.embed_whole >= th.embed_reused and m.whole >= th.soft_ncc:
        return True
    return m.ga_in_figure >= th.part_ncc and m.ga_in_figure_area >= th.crop_reused_area


def _copy_score(m: FigureMatch) -> float:
    return max(m.whole, m.ga_in_figure if m.ga_in_figure_area else 0.0, m.embed_whole or 0.0)


def _part_score(m: FigureMatch) -> float:
    return max(m.ga_in_figure, m.figure_in_ga)


def _is_part(m: FigureMatch, th: GAThresholds) -> bool:
    if _part_score(m) >= th.part_ncc:
        return True
    # An embedding match rescues a tile whose pixels agree only loosely (recoloured,
    # redrawn); alone it is not evidence (unrelated plots embed alike).
    return m.embed_tile is not None and m.embed_tile >= th.embed_part and _part_score(m) >= th.soft_ncc


def decide(
    ga: MatchImage,
    figures: Sequence[tuple[str, MatchImage]],
    th: GAThresholds = GAThresholds(),
    panels: Optional[dict[str, list[str]]] = None,
    embeddings: Optional[dict[str, np.ndarray]] = None,
    ga_tile_embeddings: Sequence[np.ndarray] = (),
    ga_embedding: Optional[np.ndarray] = None,
) -> GADecision:
    """Type a GA against the paper's figure images.

    ``figures``: (id, prepared image) in paper order (figures and subfigures with pixels).
    ``panels``: figure id -> its subfigure ids, for figures drawn as panels.
    ``embeddings``: figure id -> unit-norm CNN embedding (optional), with the GA's own
    embedding and those of its tiles.
    """
    order = {fid: i for i, (fid, _) in enumerate(figures)}
    # Fast path: a copy recognisable from the hash and thumbnail alone.
    quick = [compare(ga, img, fid, th, full=False) for fid, img in figures]
    _add_embeddings(quick, embeddings, ga_embedding, ga_tile_embeddings)
    copies = [m for m in quick if _is_copy(m, th)]
    if copies:
        best = max(copies, key=lambda m: (_copy_score(m), -order[m.figure_id]))
        return GADecision(REUSED, [best.figure_id], round(_copy_score(best), 4), quick)

    matches = [compare(ga, img, fid, th, full=True) for fid, img in figures]
    _add_embeddings(matches, embeddings, ga_embedding, ga_tile_embeddings)
    copies = [m for m in matches if _is_copy(m, th)]
    if copies:
        best = max(copies, key=lambda m: (_copy_score(m), -order[m.figure_id]))
        return GADecision(REUSED, [best.figure_id], round(_copy_score(best), 4), matches)
    parts = [m for m in matches if _is_part(m, th)]
    if not parts:
        return GADecision(ORIGINAL, [], 0.0, matches)
    ids = sorted({m.figure_id for m in parts}, key=order.__getitem__)
    score = round(max(max(_part_score(m), m.embed_tile or 0.0) for m in parts), 4)
    for parent, subs in (panels or {}).items():
        if subs and set(ids) == set(subs):
            return GADecision(REUSED, [parent], score, matches)
    return GADecision(MODIFIED, ids, score, matches)


def _add_embeddings(matches, embeddings, ga_embedding, ga_tiles) -> None:
    if not embeddings:
        return
    for m in matches:
        e = embeddings.get(m.figure_id)
        if e is None:
            continue
        if ga_embedding is not None:
            m.embed_whole = float(np.dot(ga_embedding, e))
        if len(ga_tiles):
            m.embed_tile = max(float(np.dot(t, e)) for t in ga_tiles)


def ga_tiles(image: Image.Image, grids: Sequence[tuple[int, int]] = ((1, 2), (2, 1), (2, 2))) -> list[Image.Image]:
    """The GA cut into the tiles of a few regular grids (for the embedding comparison)."""
    w, h = image.size
    out = []
    for rows, cols in grids:
        for r in range(rows):
            for c in range(cols):
                box = (c * w // cols, r * h // rows, (c + 1) * w // cols, (r + 1) * h // rows)
                if box[2] - box[0] >= 8 and box[3] - box[1] >= 8:
                    out.append(image.crop(box))
    return out
