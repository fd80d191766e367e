"""Benchmark: CPU per figure to measure it (size, pHash) and prepare its classifier input,
the former way (two decodes) against one reduced decode, in the same run.

    python bench/decode.py [--input-size 224] [--passes 3]

The former build (builder 0.1.0), per figure: ``decode_image`` at full size -> size and
pHash; then, for the classifier, the file decoded again (``decode_image`` with a JPEG draft
at twice the input size) -> ``resize_for_model``. Now: ``figure_images.measure_image``,
one ``decode_reduced`` (JPEG DCT scaling in libjpeg, PNG by Wuffs (the ``fast`` extra) or
libspng, box reduction before colour conversion) -> size, pHash and the classifier input.
"now, libspng PNG" is the same without Wuffs (``decode._wuffs = None``: an install without
the extra), "now, Pillow PNG" without either, to show what each part brings. "size + pHash
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
import resource
import sys
import tempfile
import time
from pathlib import Path

from paths import ROOT
from vision import LARGE_RANGE, make_large_figures, real_figure_files

import sciga  # noqa: F401 - puts the checkout on sciga's path

sys.path.insert(0, str(ROOT / "tests"))  # the figure fixtures import the tests' conftest


def figure_sets(tmp: Path) -> dict[str, list[bytes]]:
    """The tests' real figure sets (``vision_fixtures.figure_sets``), each file once, with
    bench/vision.py's large figures added and arXiv-size JPEGs kept when 0.2-2 MB."""
    from tests.vision_fixtures import LARGE_SETS
    from tests.vision_fixtures import figure_sets as fixture_sets

    sets: dict[str, list[bytes]] = {}
    for name, files in fixture_sets().items():
        seen: set = set()
        kept = sets.setdefault(name, [])
        for _, data in files:
            if data in seen or (name == "arXiv-size jpeg" and not LARGE_RANGE[0] <= len(data) <= LARGE_RANGE[1]):
                continue
            seen.add(data)
            kept.append(data)
    for p in make_large_figures(tmp / "large", real_figure_files()):
        sets.setdefault(LARGE_SETS[0] if p.suffix == ".png" else LARGE_SETS[1], []).append(p.read_bytes())
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
    from sciga.transforms.vision.figure_images import measure_image

    from tests.vision_fixtures import figure_row

    row = figure_row(data)
    x = measure_image(row, model_input_size=size or None)
    assert (x is not None) == bool(size)


def now_spng(data: bytes, size: int) -> None:
    """Now, without Wuffs (an install without the `fast` extra): libspng decodes PNGs."""
    from sciga.transforms.vision import decode

    wuffs, decode._wuffs = decode._wuffs, None
    try:
        now(data, size)
    finally:
        decode._wuffs = wuffs


def now_pillow_png(data: bytes, size: int) -> None:
    from sciga.transforms.vision import decode

    spng, wuffs, decode._spng, decode._wuffs = decode._spng, decode._wuffs, None, None
    try:
        now(data, size)
    finally:
        decode._spng, decode._wuffs = spng, wuffs


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
        f"{args.input_size} px, libspng {'yes' if decode._spng is not None else 'NOT installed'}, "
        f"Wuffs {'yes' if decode._wuffs is not None else 'NOT installed (the fast extra)'}\n"
    )
    print(
        "| set | figures | KB mean (max) | before: 2 decodes | now: 1 decode | now, libspng PNG | now, Pillow PNG "
        "| before / now | size + pHash only: before | now | before / now |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, datas in sets.items():
        kb = [len(d) / 1024 for d in datas]
        old = cpu_ms(former, datas, args.input_size, args.passes)
        new = cpu_ms(now, datas, args.input_size, args.passes)
        spng = cpu_ms(now_spng, datas, args.input_size, args.passes)
        pil = cpu_ms(now_pillow_png, datas, args.input_size, args.passes)
        old_h = cpu_ms(former_hash_only, datas, args.input_size, args.passes)
        new_h = cpu_ms(now_hash_only, datas, args.input_size, args.passes)
        print(
            f"| {name} | {len(datas)} | {sum(kb) / len(kb):.0f} ({max(kb):.0f}) | {old:.1f} | {new:.1f} | {spng:.1f} | {pil:.1f} "
            f"| **{old / new:.1f}x** | {old_h:.1f} | {new_h:.1f} | {old_h / new_h:.1f}x |",
            flush=True,
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS of the benchmark process: {peak:.0f} MB")


if __name__ == "__main__":
    main()
