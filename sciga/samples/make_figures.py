#!/usr/bin/env python3
"""Generate every figure image of the embedded sample papers.

Pillow only.  Every image is drawn from fixed seeds and fixed data, PNG files
are written without any ancillary metadata chunks, and the single PDF figure
gets fixed creation/modification dates, so re-running this script produces
byte-identical files (for a given Pillow/FreeType build).

Usage:  python samples/make_figures.py            # writes samples/tex/*/figs/
"""

from __future__ import annotations

import math
import random
import time
from pathlib import Path

from PIL import Image, ImageDraw, ImageFilter, ImageFont

HERE = Path(__file__).resolve().parent
TEX = HERE / "tex"

# Fixed date written into the PDF's /CreationDate and /ModDate.
PDF_DATE = time.strptime("2025-11-03 12:00:00", "%Y-%m-%d %H:%M:%S")

PALETTE = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189), (140, 86, 75)]


# ----------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------
def font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def save_png(im: Image.Image, path: Path, colors: int | None = None) -> None:
    """Save without metadata; optionally quantize to a palette (smaller files)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if colors is not None:
        im = im.convert("RGB").quantize(colors=colors, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    im.info.clear()
    im.save(path, format="PNG", optimize=True)


def save_pdf(im: Image.Image, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    im.convert("RGB").save(
        path,
        format="PDF",
        resolution=100.0,
        quality=95,
        title=path.stem,
        author="sciga-builder samples",
        creator="make_figures.py",
        producer="Pillow",
        creationDate=PDF_DATE,
        modDate=PDF_DATE,
    )


def text_center(d: ImageDraw.ImageDraw, cx: float, cy: float, s: str, f, fill=(0, 0, 0)):
    d.text((cx, cy), s, font=f, fill=fill, anchor="mm")


def arrow(d: ImageDraw.ImageDraw, p0, p1, fill=(40, 40, 40), width=2, head=9):
    d.line([p0, p1], fill=fill, width=width)
    ang = math.atan2(p1[1] - p0[1], p1[0] - p0[0])
    left = (p1[0] - head * math.cos(ang - 0.45), p1[1] - head * math.sin(ang - 0.45))
    right = (p1[0] - head * math.cos(ang + 0.45), p1[1] - head * math.sin(ang + 0.45))
    d.polygon([p1, left, right], fill=fill)


# ----------------------------------------------------------------------------
# charts
# ----------------------------------------------------------------------------
def _axes(d, w, h, xlabel, ylabel, title, margin=(52, 30, 18, 44)):
    """Draw axes; return plotting box (x0, y0, x1, y1)."""
    ml, mt, mr, mb = margin
    x0, y0, x1, y1 = ml, mt, w - mr, h - mb
    d.rectangle([x0, y0, x1, y1], outline=(0, 0, 0), width=1)
    if title:
        text_center(d, (x0 + x1) / 2, mt / 2, title, font(14))
    text_center(d, (x0 + x1) / 2, h - 12, xlabel, font(12))
    # vertical y label: render on a small image and rotate
    f = font(12)
    bbox = f.getbbox(ylabel)
    lab = Image.new("RGBA", (int(bbox[2]) + 4, int(bbox[3]) + 4), (255, 255, 255, 0))
    ImageDraw.Draw(lab).text((2, 0), ylabel, font=f, fill=(0, 0, 0))
    lab = lab.rotate(90, expand=True)
    d._image.paste(lab, (4, int((y0 + y1) / 2 - lab.size[1] / 2)), lab)
    return x0, y0, x1, y1


def line_plot(path, w, h, series, xlim, ylim, xlabel, ylabel, title="", xticks=(), yticks=(), legend="top"):
    im = Image.new("RGB", (w, h), "white")
    d = ImageDraw.Draw(im)
    x0, y0, x1, y1 = _axes(d, w, h, xlabel, ylabel, title)

    def sx(x):
        return x0 + (x - xlim[0]) / (xlim[1] - xlim[0]) * (x1 - x0)

    def sy(y):
        return y1 - (y - ylim[0]) / (ylim[1] - ylim[0]) * (y1 - y0)

    f = font(11)
    for t in xticks:
        d.line([(sx(t), y1), (sx(t), y1 - 4)], fill=(0, 0, 0))
        d.line([(sx(t), y0), (sx(t), y1)], fill=(232, 232, 232))
        text_center(d, sx(t), y1 + 9, f"{t:g}", f)
    for t in yticks:
        d.line([(x0, sy(t)), (x0 + 4, sy(t))], fill=(0, 0, 0))
        d.line([(x0, sy(t)), (x1, sy(t))], fill=(232, 232, 232))
        d.text((x0 - 5, sy(t)), f"{t:g}", font=f, fill=(0, 0, 0), anchor="rm")
    d.rectangle([x0, y0, x1, y1], outline=(0, 0, 0), width=1)
    for k, (label, xs, ys) in enumerate(series):
        col = PALETTE[k % len(PALETTE)]
        pts = [(sx(x), sy(y)) for x, y in zip(xs, ys)]
        d.line(pts, fill=col, width=2)
        for p in pts:
            d.ellipse([p[0] - 3, p[1] - 3, p[0] + 3, p[1] + 3], fill=col)
        # legend
        ly = (y0 + 10 + 16 * k) if legend == "top" else (y1 - 10 - 16 * (len(series) - 1 - k))
        d.line([(x1 - 110, ly), (x1 - 90, ly)], fill=col, width=3)
        d.text((x1 - 85, ly), label, font=f, fill=(0, 0, 0), anchor="lm")
    return im


def bar_chart(path, w, h, cats, groups, ylim, ylabel, title="", xlabel="", yticks=()):
    """groups: list of (label, values) - one bar per category per group."""
    im = Image.new("RGB", (w, h), "white")
    d = ImageDraw.Draw(im)
    x0, y0, x1, y1 = _axes(d, w, h, xlabel, ylabel, title)

    def sy(y):
        return y1 - (y - ylim[0]) / (ylim[1] - ylim[0]) * (y1 - y0)

    f = font(11)
    for t in yticks:
        d.line([(x0, sy(t)), (x1, sy(t))], fill=(232, 232, 232))
        d.text((x0 - 5, sy(t)), f"{t:g}", font=f, fill=(0, 0, 0), anchor="rm")
    n, g = len(cats), len(groups)
    slot = (x1 - x0) / n
    bw = slot * 0.8 / g
    for i, c in enumerate(cats):
        for j, (_, vals) in enumerate(groups):
            bx = x0 + i * slot + slot * 0.1 + j * bw
            d.rectangle([bx, sy(vals[i]), bx + bw - 2, y1], fill=PALETTE[j % len(PALETTE)])
        text_center(d, x0 + (i + 0.5) * slot, y1 + 9, c, f)
    d.rectangle([x0, y0, x1, y1], outline=(0, 0, 0), width=1)
    for j, (label, _) in enumerate(groups):
        ly = y0 + 10 + 15 * j
        d.rectangle([x0 + 8, ly - 5, x0 + 18, ly + 5], fill=PALETTE[j % len(PALETTE)])
        d.text((x0 + 23, ly), label, font=f, fill=(0, 0, 0), anchor="lm")
    return im


def block_diagram(w, h, boxes, arrows, bg=(255, 255, 255)):
    """boxes: name -> (x, y, bw, bh, text, fill); arrows: list of (from, to)."""
    im = Image.new("RGB", (w, h), bg)
    d = ImageDraw.Draw(im)
    f = font(13)
    for a, b in arrows:
        ax, ay, aw, ah = boxes[a][:4]
        bx, by, bw, bh = boxes[b][:4]
        acx, acy, bcx, bcy = ax + aw / 2, ay + ah / 2, bx + bw / 2, by + bh / 2
        if abs(bcx - acx) >= abs(bcy - acy):
            p0 = (ax + aw if bcx > acx else ax, acy)
            p1 = (bx if bcx > acx else bx + bw, bcy)
        else:
            p0 = (acx, ay + ah if bcy > acy else ay)
            p1 = (bcx, by if bcy > acy else by + bh)
        arrow(d, p0, p1)
    for _name, (x, y, bw, bh, txt, fill) in boxes.items():
        d.rounded_rectangle([x, y, x + bw, y + bh], radius=8, fill=fill, outline=(30, 30, 30), width=2)
        lines = txt.split("\n")
        for k, line in enumerate(lines):
            text_center(d, x + bw / 2, y + bh / 2 + (k - (len(lines) - 1) / 2) * 15, line, f)
    return im


# ----------------------------------------------------------------------------
# photo-like and synthetic "medical" images
# ----------------------------------------------------------------------------
def gradient_photo(w, h, seed, top, bottom, blobs=4):
    """Smooth sky/ground style gradient with a few soft coloured blobs."""
    rnd = random.Random(seed)
    im = Image.new("RGB", (w, h))
    px = im.load()
    assert px is not None
    for y in range(h):
        t = y / (h - 1)
        for x in range(w):
            s = 0.08 * math.sin(x / w * math.pi * 2 + seed)
            c = [int(max(0, min(255, top[i] * (1 - t) + bottom[i] * t + 40 * s))) for i in range(3)]
            px[x, y] = tuple(c)
    layer = Image.new("RGB", (w, h), (0, 0, 0))
    mask = Image.new("L", (w, h), 0)
    dl, dm = ImageDraw.Draw(layer), ImageDraw.Draw(mask)
    for _ in range(blobs):
        cx, cy = rnd.uniform(0.1, 0.9) * w, rnd.uniform(0.35, 0.9) * h
        r = rnd.uniform(0.06, 0.16) * min(w, h) * 1.6
        col = tuple(rnd.randint(30, 230) for _ in range(3))
        dl.ellipse([cx - r, cy - r * 0.7, cx + r, cy + r * 0.7], fill=col)
        dm.ellipse([cx - r, cy - r * 0.7, cx + r, cy + r * 0.7], fill=200)
    mask = mask.filter(ImageFilter.GaussianBlur(6))
    im.paste(layer, (0, 0), mask)
    return im


def add_noise(im: Image.Image, seed: int, sigma: float) -> Image.Image:
    """Add Gaussian noise (Python's random, fixed seed) to an L image."""
    rnd = random.Random(seed)
    px = im.load()
    assert px is not None
    w, h = im.size
    for y in range(h):
        for x in range(w):
            v = float(px[x, y]) + rnd.gauss(0.0, sigma)  # type: ignore[arg-type]  # an "L" image: one int a pixel
            px[x, y] = int(max(0, min(255, v)))
    return im


def mri_slice(seed, size=224, weighting="T1", lesion=True):
    """Axial-brain-like slice: nested ellipses (skull, CSF, grey/white matter)."""
    w = h = size
    im = Image.new("L", (w, h), 0)
    d = ImageDraw.Draw(im)
    cx, cy = w / 2, h / 2
    if weighting == "T1":
        skull, csf, grey, white, vent, les = 200, 40, 110, 165, 35, 70
    else:  # T2: fluid bright, white matter dark
        skull, csf, grey, white, vent, les = 90, 225, 140, 95, 230, 200
    d.ellipse([cx - 92, cy - 104, cx + 92, cy + 104], fill=skull)
    d.ellipse([cx - 84, cy - 96, cx + 84, cy + 96], fill=csf)
    d.ellipse([cx - 79, cy - 91, cx + 79, cy + 91], fill=grey)
    d.ellipse([cx - 62, cy - 74, cx + 62, cy + 74], fill=white)
    # ventricles
    d.ellipse([cx - 22, cy - 30, cx - 4, cy + 18], fill=vent)
    d.ellipse([cx + 4, cy - 30, cx + 22, cy + 18], fill=vent)
    if lesion:
        rnd = random.Random(seed)
        lx, ly = cx + rnd.uniform(20, 40), cy + rnd.uniform(-50, 40)
        d.ellipse([lx - 11, ly - 8, lx + 11, ly + 8], fill=les)
    im = im.filter(ImageFilter.GaussianBlur(1.6))
    return add_noise(im, seed, 4.0)


def ct_slice(seed, size=224):
    """Abdominal-CT-like slice: body outline, organs, bright vertebra."""
    w = h = size
    im = Image.new("L", (w, h), 10)
    d = ImageDraw.Draw(im)
    cx, cy = w / 2, h / 2
    d.ellipse([cx - 100, cy - 72, cx + 100, cy + 72], fill=95)  # fat
    d.ellipse([cx - 92, cy - 64, cx + 92, cy + 64], fill=120)  # soft tissue
    d.ellipse([cx - 75, cy - 50, cx - 5, cy + 20], fill=140)  # liver
    d.ellipse([cx + 25, cy - 30, cx + 70, cy + 10], fill=135)  # spleen
    d.ellipse([cx - 45, cy + 18, cx - 20, cy + 42], fill=150)  # kidney L
    d.ellipse([cx + 20, cy + 18, cx + 45, cy + 42], fill=150)  # kidney R
    d.ellipse([cx - 13, cy + 28, cx + 13, cy + 52], fill=235)  # vertebra
    d.ellipse([cx - 6, cy + 2, cx + 6, cy + 14], fill=175)  # aorta
    d.ellipse([cx - 55, cy - 25, cx - 40, cy - 12], fill=100)  # hypodense lesion
    im = im.filter(ImageFilter.GaussianBlur(1.2))
    return add_noise(im, seed, 3.5)


def xray_chest(seed, w=224, h=256):
    """Chest-radiograph-like image: dark lungs, bright mediastinum and ribs."""
    im = Image.new("L", (w, h), 30)
    d = ImageDraw.Draw(im)
    cx = w / 2
    d.rounded_rectangle([18, 20, w - 18, h - 10], radius=40, fill=150)  # body
    d.ellipse([cx - 92, 40, cx - 12, 220], fill=55)  # left lung
    d.ellipse([cx + 12, 40, cx + 92, 220], fill=55)  # right lung
    d.rounded_rectangle([cx - 18, 30, cx + 18, h - 20], radius=10, fill=185)  # spine
    d.ellipse([cx - 10, 120, cx + 55, 205], fill=160)  # heart
    for k in range(7):  # ribs
        y = 55 + 22 * k
        d.arc([cx - 100, y - 18, cx - 5, y + 30], 200, 340, fill=130, width=5)
        d.arc([cx + 5, y - 18, cx + 100, y + 30], 200, 340, fill=130, width=5)
    d.ellipse([cx - 70, 90, cx - 52, 106], fill=110)  # nodule
    im = im.filter(ImageFilter.GaussianBlur(2.0))
    return add_noise(im, seed, 3.0)


def histology(seed, w=240, h=180, stain="HE"):
    """H&E-like texture: pink stroma with purple nuclei."""
    rnd = random.Random(seed)
    base = (236, 178, 206) if stain == "HE" else (226, 206, 170)
    nucleus = (92, 52, 140) if stain == "HE" else (120, 72, 40)
    im = Image.new("RGB", (w, h), base)
    d = ImageDraw.Draw(im)
    # fibrous stroma streaks
    for _ in range(40):
        x, y = rnd.uniform(0, w), rnd.uniform(0, h)
        ang = rnd.uniform(-0.4, 0.4)
        L = rnd.uniform(30, 90)
        shade = rnd.randint(-25, 10)
        col = tuple(max(0, min(255, c + shade)) for c in base)
        d.line([(x, y), (x + L * math.cos(ang), y + L * math.sin(ang))], fill=col, width=rnd.randint(2, 5))
    # nuclei, clustered
    centers = [(rnd.uniform(0, w), rnd.uniform(0, h)) for _ in range(5)]
    for _ in range(170):
        ccx, ccy = rnd.choice(centers)
        x, y = rnd.gauss(ccx, 30), rnd.gauss(ccy, 24)
        r = rnd.uniform(2.5, 5.5)
        shade = rnd.randint(-20, 20)
        col = tuple(max(0, min(255, c + shade)) for c in nucleus)
        d.ellipse([x - r, y - r * 0.8, x + r, y + r * 0.8], fill=col)
    return im.filter(ImageFilter.GaussianBlur(0.8))


def overlay_mask(im: Image.Image, seed: int, color=(255, 40, 40), alpha=110):
    """Semi-transparent blob mask overlay, as in qualitative segmentation figures."""
    rnd = random.Random(seed)
    w, h = im.size
    mask = Image.new("L", (w, h), 0)
    dm = ImageDraw.Draw(mask)
    cx, cy = rnd.uniform(0.3, 0.7) * w, rnd.uniform(0.45, 0.75) * h
    dm.ellipse([cx - w * 0.14, cy - h * 0.18, cx + w * 0.14, cy + h * 0.18], fill=alpha)
    col = Image.new("RGB", (w, h), color)
    out = im.convert("RGB")
    out.paste(col, (0, 0), mask)
    d = ImageDraw.Draw(out)
    d.ellipse([cx - w * 0.14, cy - h * 0.18, cx + w * 0.14, cy + h * 0.18], outline=color, width=2)
    return out


# ----------------------------------------------------------------------------
# per-paper figure sets
# ----------------------------------------------------------------------------
def figs_2511_99001(out: Path):
    """CVPR-style video segmentation paper."""
    # teaser strip: four frames with masks + labels
    strip = Image.new("RGB", (640, 176), "white")
    d = ImageDraw.Draw(strip)
    for k in range(4):
        fr = gradient_photo(152, 140, seed=10 + k, top=(120, 170, 230), bottom=(70, 120, 60), blobs=3)
        fr = overlay_mask(fr, seed=20 + k, color=(255, 60, 60) if k % 2 == 0 else (60, 200, 255))
        strip.paste(fr, (6 + k * 158, 6))
        tag = "keyframe" if k in (0, 3) else "routed"
        text_center(d, 6 + k * 158 + 76, 162, f"t={k * 8}  ({tag})", font(12))
    save_png(strip, out / "teaser.png", colors=128)

    # 640x300 (w:h 2.13): a method diagram inside PaperBanana's [1.5, 2.5] window, so the
    # sample fills the method_diagrams view.
    boxes = {
        "in": (10, 125, 90, 50, "Video\nframes", (230, 236, 250)),
        "enc": (130, 125, 90, 50, "Frame\nencoder", (208, 228, 245)),
        "rt": (250, 125, 90, 50, "Token\nrouter", (255, 226, 196)),
        "mem": (370, 40, 110, 46, "Keyframe\nmemory", (220, 240, 215)),
        "dec": (370, 200, 110, 50, "Mask\ndecoder", (208, 228, 245)),
        "out": (520, 200, 100, 50, "Masks", (240, 220, 235)),
    }
    arrows = [("in", "enc"), ("enc", "rt"), ("rt", "mem"), ("rt", "dec"), ("mem", "dec"), ("dec", "out")]
    save_png(block_diagram(640, 300, boxes, arrows), out / "overview.png", colors=64)

    xs = [10, 20, 40, 80, 160]
    im = line_plot(
        None,
        400,
        280,
        [
            ("Ours", xs, [71.2, 76.8, 80.1, 81.9, 82.4]),
            ("Dense", xs, [64.0, 70.5, 75.9, 79.8, 81.7]),
            ("Uniform", xs, [60.3, 66.1, 71.4, 75.0, 77.2]),
        ],
        xlim=(0, 170),
        ylim=(55, 85),
        xlabel="GFLOPs per frame",
        ylabel="J&F (%)",
        title="Accuracy vs. compute",
        xticks=(0, 40, 80, 120, 160),
        yticks=(60, 70, 80),
    )
    save_png(im, out / "res_curve.png", colors=64)

    im = bar_chart(
        None,
        400,
        280,
        ["fast", "occl.", "small", "multi"],
        [
            ("Ours", [78.5, 70.2, 66.9, 74.8]),
            ("Dense", [75.1, 68.8, 67.3, 71.0]),
        ],
        ylim=(50, 85),
        ylabel="J&F (%)",
        title="Per-attribute accuracy",
        yticks=(50, 60, 70, 80),
    )
    save_png(im, out / "res_bars.png", colors=64)

    qual = gradient_photo(400, 280, seed=33, top=(200, 210, 235), bottom=(110, 95, 70), blobs=5)
    qual = overlay_mask(qual, seed=34, color=(40, 220, 90))
    save_png(qual, out / "res_qual.png", colors=128)


def figs_2511_99002(out: Path):
    """ACM-style interaction/graphics paper."""
    tz = Image.new("RGB", (640, 200), "white")
    for k, (top, bot) in enumerate(
        [((250, 210, 160), (120, 70, 50)), ((180, 220, 250), (40, 80, 140)), ((220, 250, 200), (60, 120, 60))]
    ):
        tz.paste(gradient_photo(206, 190, seed=50 + k, top=top, bottom=bot, blobs=4), (5 + k * 212, 5))
    save_png(tz, out / "teaser.png", colors=128)

    boxes = {
        "p": (15, 60, 95, 50, "Participant", (230, 236, 250)),
        "h": (150, 15, 110, 46, "Haptic\nstylus", (255, 226, 196)),
        "s": (150, 110, 110, 46, "Sculpting\nengine", (208, 228, 245)),
        "d": (290, 60, 80, 50, "Display", (220, 240, 215)),
    }
    save_png(
        block_diagram(385, 170, boxes, [("p", "h"), ("h", "s"), ("s", "d"), ("d", "p")]),
        out / "study_setup.png",
        colors=64,
    )

    im = bar_chart(
        None,
        360,
        240,
        ["T1", "T2", "T3"],
        [
            ("Mouse", [94, 131, 160]),
            ("Stylus", [72, 98, 121]),
            ("Ours", [58, 77, 90]),
        ],
        ylim=(0, 180),
        ylabel="Time (s)",
        title="Task completion time",
        yticks=(0, 50, 100, 150),
    )
    save_png(im, out / "task_times.png", colors=64)

    pals = [
        ((250, 235, 200), (170, 110, 60)),
        ((210, 230, 255), (60, 90, 160)),
        ((235, 255, 220), (90, 140, 70)),
        ((255, 220, 235), (150, 60, 100)),
    ]
    for k, (top, bot) in enumerate(pals):
        save_png(
            gradient_photo(240, 170, seed=70 + k, top=top, bottom=bot, blobs=3),
            out / f"grid_{'abcd'[k]}.png",
            colors=96,
        )

    im = line_plot(
        None,
        400,
        260,
        [
            ("Novice", [1, 2, 3, 4, 5], [3.1, 3.6, 4.0, 4.3, 4.4]),
            ("Expert", [1, 2, 3, 4, 5], [3.9, 4.2, 4.4, 4.6, 4.6]),
        ],
        xlim=(0.5, 5.5),
        ylim=(2.5, 5.0),
        xlabel="Session",
        ylabel="Rating (1-5)",
        title="Perceived control per session",
        xticks=(1, 2, 3, 4, 5),
        yticks=(3, 4, 5),
        legend="bottom",
    )
    save_png(im, out / "appendix_ratings.png", colors=64)


def figs_2511_99003(out: Path):
    """Medical imaging paper: synthetic MRI / CT / X-ray / histology."""
    save_png(mri_slice(101, weighting="T1"), out / "mri_axial.png")
    save_png(ct_slice(102), out / "ct_slice.png")
    save_png(xray_chest(103), out / "xray_chest.png")
    save_png(mri_slice(104, size=200, weighting="T1"), out / "mri_t1.png")
    save_png(mri_slice(104, size=200, weighting="T2"), out / "mri_t2.png")
    for k, stain in enumerate(["HE", "HE", "IHC"]):
        save_png(histology(110 + k, stain=stain), out / f"histo_{'abc'[k]}.png", colors=128)
    # the one PDF figure (LaTeXML must convert it through ImageMagick + ghostscript)
    im = bar_chart(
        None,
        420,
        260,
        ["MRI", "CT", "X-ray"],
        [
            ("Supervised", [0.71, 0.66, 0.58]),
            ("Ours", [0.79, 0.74, 0.65]),
        ],
        ylim=(0.4, 0.9),
        ylabel="Dice",
        title="Lesion segmentation (Dice)",
        yticks=(0.5, 0.6, 0.7, 0.8),
    )
    save_pdf(im, out / "dice_scores.pdf")
    # NOTE: figs/attention_maps.png is deliberately NOT generated (missing-image case).


def main() -> None:
    figs_2511_99001(TEX / "2511.99001" / "figs")
    figs_2511_99002(TEX / "2511.99002" / "figs")
    figs_2511_99003(TEX / "2511.99003" / "figs")
    # q-bio0601999 has no figures.
    for p in sorted(TEX.glob("*/figs/*")):
        print(f"{p.relative_to(HERE)}  {p.stat().st_size} bytes")


if __name__ == "__main__":
    main()
