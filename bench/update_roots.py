"""The build of ``sciga update``: one --input folder per selected paper of the fetch cache.
Its shards' paths were said relative to each of those folders (a root per paper): every
path was compared with every root, and every part's fingerprint named them all. They are now
said relative to the cache's ``papers/`` folder (``BuildOptions.input_root``).

For N papers in one folder each (generated pages with two small raster figures, missing
images included so that image errors are published too), it builds them as an update does,
both ways, in the same run: the clean build, then the build after one paper was added (what a
weekly update does), and prints the wall times, the parts written again and the ratios. Then
it times the path rewrite itself for one path against 1, 3,000 and 145,000 roots, and projects
what a root per paper cost a SciGA-size update (the 145,000-page realistic build has 145,000
papers rows, 1,680,677 figure image paths and 1,735,669 image errors: bench/size.py).

    python bench/update_roots.py              # 2,000 papers (~3 min here)
    python bench/update_roots.py --papers 500

Timing ratios need a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sciga.executors.build import run_build
from sciga.pipelines.build import build_flags, build_options
from sciga.pipelines.flags import replace_flags
from sciga.samples.scale_corpus import make_image_rich_corpus
from sciga.transforms.write.layout import layout_for
from sciga.transforms.write.published_uri import normalize_roots, published_text, published_uri

SCIGA_PAPERS_ROWS, SCIGA_IMAGE_PATHS, SCIGA_IMAGE_ERRORS = 145_000, 1_680_677, 1_735_669


def build(pages: Path, out: Path, ids: list[str], one_root: bool) -> tuple[float, dict]:
    flags, beam = build_flags(["--output", str(out), "--quiet", "--no-tex"], prog="bench")
    flags = replace_flags(flags, input=[str(pages / pid) for pid in ids])
    opts = build_options(flags, input_root=str(pages) if one_root else None)  # as pipelines/update.py gives it
    t = time.perf_counter()
    r = run_build(opts, beam)
    wall = time.perf_counter() - t
    assert r.manifest is not None and r.counts.papers == len(ids), r.counts
    return wall, {k: v for k, v in r.manifest.run.items() if k.startswith("shard_parts")}


def rewrite_seconds(n_roots: int) -> tuple[float, float]:
    """Seconds to publish one path, and one image error quoting it, against ``n_roots``
    roots of one folder per paper (the path under the middle one on average)."""
    roots = normalize_roots(
        ["/cache/papers"] if n_roots == 1 else [f"/cache/papers/2601.{i:06d}" for i in range(n_roots)]
    )
    uris = [f"/cache/papers/2601.{i:06d}/2601.{i:06d}.html.gz" for i in range(0, 145_000, 725)]
    t = time.perf_counter()
    for u in uris:
        published_uri(u, roots)
    per_uri = (time.perf_counter() - t) / len(uris)
    t = time.perf_counter()
    for u in uris[:40]:
        published_text(f"image not found: {u}", [u], roots)
    return per_uri, (time.perf_counter() - t) / 40


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--papers", type=int, default=2000)
    args = ap.parse_args()
    n = args.papers
    while layout_for(n) != layout_for(n + 1):  # the added paper must not change the shard layout
        n -= 1
    with tempfile.TemporaryDirectory(prefix="update-roots-") as tmp:
        pages = Path(tmp) / "papers"
        make_image_rich_corpus(pages, n + 1, n_figures=2, image_kb=4, distinct_images=1)
        ids = sorted(p.name for p in pages.iterdir() if not p.name.startswith("."))
        for pid in ids[::3]:  # a missing image: its error message quotes a path under a root
            os.remove(pages / pid / "figs" / "f1.png")
        print(f"{n:,} papers, one --input folder each (as `sciga update` builds them)")
        rows = []
        for label, one_root in (("a root per paper (before)", False), ("one root (now)", True)):
            out = Path(tmp) / ("one" if one_root else "each")
            clean, _ = build(pages, out, ids[:-1], one_root)
            added, parts = build(pages, out, ids, one_root)
            rows.append((clean, added))
            print(
                f"  {label:<26} clean build {clean:7.1f} s; one paper added {added:6.1f} s, "
                f"parts written again {parts.get('shard_parts_written')} (taken over {parts.get('shard_parts_reused')})"
            )
        (c0, a0), (c1, a1) = rows
        print(f"  ratio (before / now): clean build x{c0 / c1:.2f}, one paper added x{a0 / a1:.2f}")
    print("the path rewrite, per path / per image error (this run):")
    cost = {}
    for n in (1, 3000, 145_000):
        cost[n] = rewrite_seconds(n)
        print(f"  {n:>7,} roots: {cost[n][0] * 1e3:8.3f} ms / {cost[n][1] * 1e3:8.3f} ms")
    uri_s, text_s = cost[145_000]
    projected = (SCIGA_PAPERS_ROWS + SCIGA_IMAGE_PATHS) * uri_s + SCIGA_IMAGE_ERRORS * text_s
    print(
        f"projected for a SciGA-size update with a root per paper: {projected / 3600:.1f} CPU-hours of path "
        f"rewriting each time its parts are written (one root: {((SCIGA_PAPERS_ROWS + SCIGA_IMAGE_PATHS) * cost[1][0] + SCIGA_IMAGE_ERRORS * cost[1][1]):.0f} s)"
    )


if __name__ == "__main__":
    main()
