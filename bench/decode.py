"""Benchmark: CPU per figure to measure it (size, pHash) and prepare its classifier input,
the former way (two decodes) against one reduced decode, in the same run.

    python bench/decode.py [--input-size 224] [--passes 3]

The former build (builder 0.1.0), per figure: ``decode_image`` at full size -> size and
pHash; then, for the classifier, the file decoded again (``decode_image`` with a JPEG draft
at twice the input size) -> ``resize_for_model``. Now: ``figure_images.measure_image``,
one ``decode_reduced`` (JPEG DCT scaling in libjpeg, PNG by libspng, box reduction before
colour conversion) -> size, pHash and the classifier input. "now, Pillow PNG" is the same
without libspng (``decode._spng = None``), to show what each part brings. "size + pHash
only" is a figure the classifier does not see (no keyword hit, the default), or a build
without ``--medical-weights``: one decode before and now.

Figure sets, all from real arXiv figures:

- ``sample``: the embedded sample's figure PNGs (small, 2-30 KB);
- ``corpus png``: the dd3d e-print's PNG figures (matplotlib RGBA plots, diagrams);
- ``corpus pdf``: the corpus PDF figures rasterised as the build does
  (``eprints.rasterize.pdf_to_png`` at its DPI);
- ``jpeg (re-encoded)``: JPEG (quality 90) re-encodings of the three sets above: the corpus
  has no real JPEG figure, so these are made;
- ``arXiv-size png`` / ``arXiv-size jpeg``: each real figure of >= 400 px scaled to 2400 px
  on its longer side (PNG keeps its alpha), and bench/vision.py's "large" set (2x2 mosaics
  and single figures at print resolution, the PDF figures at 300 dpi), kept when 0.2-2 MB.

CPU time (``time.process_time``, best of ``--passes`` passes), one thread: other jobs on a
shared machine do not inflate it. "mix" pools every figure of every set.
"""

from __future__ import annotations

import argparse
import io
import resource
import tarfile
import tempfile
import time
from pathlib import Path

from paths import ROOT, corpus_dir
from vision import LARGE_RANGE, make_large_figures, real_figure_files

import sciga  # noqa: F401 - puts the checkout on sciga's path


def _encode(im, fmt: str) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **({"quality": 90} if fmt == "JPEG" else {}))
    return buf.getvalue()


def figure_sets(tmp: Path) -> dict[str, list[bytes]]:
    from PIL import Image

    from sciga.transforms.eprints.rasterize import pdf_to_png

    sets: dict[str, list[bytes]] = {
        "sample": [p.read_bytes() for p in sorted((ROOT / "samples" / "html").glob("*/figs/*.png"))]
    }
    corpus = corpus_dir()
    if corpus is not None:
        seen: set = set()
        sets["corpus png"] = []
        for p in sorted((corpus / "tex" / "dd3d" / "figures").glob("**/*.png")):
            data = p.read_bytes()
            if data not in seen:
                seen.add(data)
                sets["corpus png"].append(data)
        pdfs = [p.read_bytes() for p in sorted((corpus / "tex" / "2603.21852").glob("*.pdf"))]
        tarball = corpus / "tex" / "1709.07020" / "1709.07020v1.tar.gz"
        if tarball.is_file():
            with tarfile.open(tarball) as tf:
                pdfs += [
                    tf.extractfile(m).read()  # type: ignore[union-attr]
                    for m in tf.getmembers()
                    if m.isfile() and m.name.lower().endswith(".pdf")
                ]
        sets["corpus pdf"] = [pdf_to_png(d, f"figure{i}.pdf") for i, d in enumerate(pdfs)]
    real = [d for name in ("sample", "corpus png", "corpus pdf") for d in sets.get(name, [])]
    sets["jpeg (re-encoded)"] = [_encode(Image.open(io.BytesIO(d)).convert("RGB"), "JPEG") for d in real]
    large: dict[str, list[bytes]] = {"png": [], "jpeg": []}
    for d in real:
        im = Image.open(io.BytesIO(d))
        if max(im.size) < 400:
            continue
        s = 2400 / max(im.size)
        im = im.convert("RGBA" if "transparency" in im.info or im.mode in ("RGBA", "LA") else "RGB")
        big = im.resize((round(im.width * s), round(im.height * s)), Image.Resampling.LANCZOS)
        for fmt, key in (("PNG", "png"), ("JPEG", "jpeg")):
            data = _encode(big if fmt == "PNG" else big.convert("RGB"), fmt)
            if LARGE_RANGE[0] <= len(data) <= LARGE_RANGE[1] or fmt == "PNG":
                large[key].append(data)
    for p in make_large_figures(tmp / "large", real_figure_files()):
        large["png" if p.suffix == ".png" else "jpeg"].append(p.read_bytes())
    sets["arXiv-size png"], sets["arXiv-size jpeg"] = large["png"], large["jpeg"]
    return sets


def former(data: bytes, size: int) -> None:
    """Builder 0.1.0: full decode for size + pHash, a second decode for the classifier."""
    from sciga.transforms.vision.decode import decode_image
    from sciga.transforms.vision.models import resize_for_model

    former_hash_only(data, size)
    resize_for_model(decode_image(data, draft_size=(2 * size, 2 * size)).image, size)


def former_hash_only(data: bytes, size: int) -> None:
    """Builder 0.1.0 for a figure the classifier does not see (no keyword hit)."""
    from sciga.transforms.vision.decode import decode_image
    from sciga.transforms.vision.phash import phash_hex

    phash_hex(decode_image(data).image)


def now_hash_only(data: bytes, size: int) -> None:
    now(data, 0)


def now(data: bytes, size: int) -> None:
    from sciga.schemas.records import FigureRow
    from sciga.transforms.vision.figure_images import measure_image

    row = FigureRow(
        id="x_F1",
        paper_id="x",
        parent_id=None,
        kind="figure",
        index=1,
        number="1",
        label=None,
        caption="",
        subcaption=None,
        subcaption_source=None,
        image_bytes=data,
        image_path="x",
        image_paths=["x"],
        image_kind="raster",
        image_source="html",
    )
    x = measure_image(row, model_input_size=size or None)
    assert (x is not None) == bool(size)


def now_pillow_png(data: bytes, size: int) -> None:
    from sciga.transforms.vision import decode

    spng, decode._spng = decode._spng, None
    try:
        now(data, size)
    finally:
        decode._spng = spng


def cpu_ms(fn, datas: list[bytes], size: int, passes: int) -> float:
    best = float("inf")
    for _ in range(passes):
        t = time.process_time()
        for d in datas:
            fn(d, size)
        best = min(best, time.process_time() - t)
    return 1000 * best / len(datas)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--input-size", type=int, default=224)
    ap.add_argument("--passes", type=int, default=3)
    args = ap.parse_args()
    from sciga.transforms.vision import decode

    with tempfile.TemporaryDirectory() as tmp:
        sets = figure_sets(Path(tmp))
    sets["mix"] = [d for v in list(sets.values()) for d in v]
    print(
        f"### decode benchmark: CPU ms per figure (best of {args.passes}), classifier input "
        f"{args.input_size} px, libspng {'yes' if decode._spng is not None else 'NOT installed'}\n"
    )
    print(
        "| set | figures | KB mean (max) | before: 2 decodes | now: 1 decode | now, Pillow PNG | before / now "
        "| size + pHash only: before | now | before / now |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, datas in sets.items():
        kb = [len(d) / 1024 for d in datas]
        old = cpu_ms(former, datas, args.input_size, args.passes)
        new = cpu_ms(now, datas, args.input_size, args.passes)
        pil = cpu_ms(now_pillow_png, datas, args.input_size, args.passes)
        old_h = cpu_ms(former_hash_only, datas, args.input_size, args.passes)
        new_h = cpu_ms(now_hash_only, datas, args.input_size, args.passes)
        print(
            f"| {name} | {len(datas)} | {sum(kb) / len(kb):.0f} ({max(kb):.0f}) | {old:.1f} | {new:.1f} | {pil:.1f} "
            f"| **{old / new:.1f}x** | {old_h:.1f} | {new_h:.1f} | {old_h / new_h:.1f}x |",
            flush=True,
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS of the benchmark process: {peak:.0f} MB")


if __name__ == "__main__":
    main()
