"""Benchmark: what rasterizing an SVG figure costs (issue 44), against decoding a PNG of the
same size in the same run, and the three candidate renderers side by side.

    python bench/svg_raster.py [--passes 5] [--candidates DIR]

SVGs, all real: the SVG figure file of arXiv:2609.03768v1 and the two inline TikZ pictures of
arXiv:2410.00260v2 (``tests/pages/oxide``), the embedded sample's inline drawing, and the
inline pictures of the shared corpus' ar5iv page 2303.17564 (when the corpus is there).

Printed:

- per SVG figure: ``svg_raster.rasterize_svg`` (checks + resvg + PNG encode) CPU time, best of
  ``--passes``, against ``decode.decode_image`` of the PNG it made (the baseline: what a build
  already pays per raster figure of that size), and the ratio;
- the peak RSS a fresh process adds while it rasterizes the largest SVG of the test data
  (modules imported and warmed up first; Linux ``/proc/self/clear_refs`` resets the peak),
  against one that decodes a PNG of the same size;
- resvg, cairosvg and svglib on the same SVGs, where they are installed (``--candidates``
  adds a folder to ``sys.path``, e.g. one made by ``pip install --target DIR cairosvg svglib``):
  CPU per figure and whether they drew the text (dark pixels against resvg's).

CPU time (``time.process_time``), one thread: other jobs on a shared machine do not inflate it.
"""

from __future__ import annotations

import argparse
import io
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Optional

from paths import ROOT, corpus_dir

OXIDE = ROOT / "tests" / "pages" / "oxide"


def svgs() -> list[tuple[str, str]]:
    """(name, standalone SVG markup) of every real SVG figure at hand."""
    from lxml import etree

    from sciga.transforms.parse.inline_svg import svg_markup

    out = [("2609.03768 fig_closure.svg (file)", (OXIDE / "2609.03768v1" / "fig_closure.svg").read_text())]
    pages = [OXIDE / "2410.00260v2.html", ROOT / "samples" / "html" / "2511.99002" / "2511.99002.html"]
    corpus = corpus_dir()
    if corpus is not None and (corpus / "html" / "2303.17564.html").exists():
        pages.append(corpus / "html" / "2303.17564.html")
    for page in pages:
        root = etree.fromstring(page.read_bytes(), etree.HTMLParser())
        for fig in root.iter("figure"):
            svg = next(fig.iter("svg"), None)
            if svg is not None and fig.get("id") and "ltx_figure" in (fig.get("class") or ""):
                out.append((f"{page.stem} {fig.get('id')} (inline)", svg_markup(svg)))
    return out


def best(fn: Callable[[], object], passes: int) -> float:
    times = []
    for _ in range(passes):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return min(times)


def dark(png: bytes) -> int:
    import numpy as np
    from PIL import Image

    return int((np.asarray(Image.open(io.BytesIO(png)).convert("L")) < 128).sum())


def candidates() -> dict[str, Callable[[str, int], bytes]]:
    """Renderer name -> render(svg markup, pixel width) -> PNG, for those installed."""
    from sciga.transforms.vision.svg_raster import prepare_svg, rasterize_svg

    out: dict[str, Callable[[str, int], bytes]] = {"resvg (ours)": lambda s, w: rasterize_svg(s).png}
    try:
        import cairosvg

        # cairosvg is given the same checked markup (foreignObject text included) and unsafe=False
        out["cairosvg"] = lambda s, w: cairosvg.svg2png(
            bytestring=prepare_svg(s).markup.encode(), output_width=w, background_color="white", unsafe=False
        )
    except (ImportError, OSError) as e:  # OSError: no libcairo on this machine
        print(f"  (cairosvg not usable: {type(e).__name__}: {str(e)[:80]})")
    try:
        from reportlab.graphics import renderPM
        from svglib.svglib import svg2rlg

        def svglib_png(s: str, w: int) -> bytes:
            drawing = svg2rlg(io.BytesIO(prepare_svg(s).markup.encode()))
            scale = w / drawing.width
            drawing.scale(scale, scale)
            drawing.width, drawing.height = drawing.width * scale, drawing.height * scale
            return renderPM.drawToString(drawing, fmt="PNG", bg=0xFFFFFF)

        out["svglib"] = svglib_png
    except (ImportError, OSError) as e:
        print(f"  (svglib not usable: {type(e).__name__}: {str(e)[:80]})")
    # svglib draws through reportlab's renderPM, which needs rlPyCairo + pycairo (built from source
    # against the system's cairo headers where pip has no wheel): a RenderPMError below says so.
    return out


CHILD = r"""
import sys
sys.path.insert(0, {root!r})
from sciga.transforms.vision.decode import decode_image
from sciga.transforms.vision.svg_raster import rasterize_svg
what, path = sys.argv[1], sys.argv[2]
data = open(path, "rb").read()
decode_image(open({warm!r}, "rb").read())  # everything imported and loaded once: the baseline
rasterize_svg(open({warm_svg!r}, "rb").read())

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])

open("/proc/self/clear_refs", "w").write("5")  # reset the peak (VmHWM) to the current RSS
before = status("VmRSS")
if what == "rasterize":
    rasterize_svg(data)
elif what == "decode":
    decode_image(data)
print(before, status("VmHWM"))
"""


def peak_rss_kb(what: str, path: Path, warm_png: Path, warm_svg: Path) -> tuple[int, int]:
    """(RSS before, peak RSS during) one rasterize or decode in a fresh process, in kB, the
    modules imported and warmed up first (Linux: /proc/self/clear_refs resets the peak)."""
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD.format(root=str(ROOT), warm=str(warm_png), warm_svg=str(warm_svg)),
            what,
            str(path),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    before, peak = r.stdout.strip().splitlines()[-1].split()
    return int(before), int(peak)


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--candidates", help="a folder with cairosvg / svglib installed (pip install --target)")
    a = ap.parse_args(argv)
    if a.candidates:
        sys.path.append(a.candidates)

    from sciga.transforms.vision.decode import decode_image
    from sciga.transforms.vision.svg_raster import rasterize_svg

    figures = svgs()
    print(f"SVG figures: {len(figures)}; CPU per figure, best of {a.passes} passes (one thread)\n")
    print(f"{'figure':52} {'bytes':>8} {'PNG px':>11} {'rasterize':>10} {'PNG decode':>11} {'ratio':>6}")
    total_r = total_d = 0.0
    largest = None
    for name, svg in figures:
        r = rasterize_svg(svg)
        tr = best(lambda svg=svg: rasterize_svg(svg), a.passes)
        td = best(lambda png=r.png: decode_image(png), a.passes)
        total_r, total_d = total_r + tr, total_d + td
        print(
            f"{name[:52]:52} {len(svg.encode()):>8} {f'{r.width}x{r.height}':>11} "
            f"{tr * 1000:>8.1f}ms {td * 1000:>9.2f}ms {tr / td:>5.0f}x"
        )
        if largest is None or len(svg.encode()) > len(largest[1].encode()):
            largest = (name, svg, r)
    n = len(figures)
    print(
        f"{'mean per SVG figure':52} {'':>8} {'':>11} {total_r / n * 1000:>8.1f}ms {total_d / n * 1000:>9.2f}ms "
        f"{total_r / total_d:>5.0f}x"
    )

    assert largest is not None
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        svg_path, png_path = Path(tmp) / "largest.svg", Path(tmp) / "same_size.png"
        warm_png, warm_svg = Path(tmp) / "warm.png", Path(tmp) / "warm.svg"
        svg_path.write_text(largest[1])
        png_path.write_bytes(largest[2].png)
        warm_svg.write_text('<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8"><text y="6">x</text></svg>')
        warm_png.write_bytes(rasterize_svg(warm_svg.read_text()).png)
        rb, rp = peak_rss_kb("rasterize", svg_path, warm_png, warm_svg)
        db, dp = peak_rss_kb("decode", png_path, warm_png, warm_svg)
    print(
        f"\npeak RSS above the process's own, largest SVG of the test data ({largest[0]}, "
        f"{len(largest[1].encode())} bytes -> {largest[2].width}x{largest[2].height} px, fresh process each): "
        f"rasterize +{(rp - rb) / 1024:.1f} MB, decode of a PNG of the same size +{(dp - db) / 1024:.1f} MB "
        f"(the process itself: {rb / 1024:.0f} MB)"
    )

    print("\ncandidates, same SVGs (CPU per figure, best of passes; text: dark pixels against resvg's)")
    cands = candidates()
    ref = {name: dark(rasterize_svg(svg).png) for name, svg in figures}
    for label, render in cands.items():
        tt, ok, text_ratio, failed = 0.0, 0, [], []
        for name, svg in figures:
            w = rasterize_svg(svg).width
            try:
                png = render(svg, w)
                tt += best(lambda render=render, svg=svg, w=w: render(svg, w), max(1, a.passes // 2))
                ok += 1
                text_ratio.append(dark(png) / max(1, ref[name]))
            except Exception as e:  # noqa: BLE001 - a candidate's failure is a finding
                failed.append(f"{name}: {type(e).__name__}")
        mean = f"{tt / ok * 1000:.1f}ms" if ok else "-"
        drawn = f"{min(text_ratio):.2f}-{max(text_ratio):.2f}" if text_ratio else "-"
        print(
            f"  {label:14} {ok}/{n} drawn, {mean} per figure, dark pixels / resvg's {drawn}; failed: {failed or 'none'}"
        )
    print(f"\n(max RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
