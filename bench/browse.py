"""Benchmark: `sciga browse` pages per second and peak memory on one generated build, with the
chunked reader (8 papers per DuckDB round trip, the default) against one paper per round
trip as the baseline, both in the same run.

    python bench/browse.py                 # 2,000 papers (16,000 figure rows in 16 shards)
    python bench/browse.py --papers 500

The build is bench/gate.py's generator (papers shaped like the sample's: 4 sections, 5
figures of which one has 3 subfigures, 32x32 PNGs, 8 mentions), written by the project's
writer. Each browse runs in its own process so its peak RSS is its own; "pages: all" against
"pages: 10%" shows whether memory grows with the number of pages (it should not).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

RUN = r"""
import json, resource, sys, time
from sciga.explore.browse import BrowseOptions, browse
out, site, papers, chunk = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
t = time.perf_counter()
res = browse(BrowseOptions(out=out, output=site, papers=papers, chunk=chunk))
print(json.dumps({"seconds": time.perf_counter() - t, "pages": len(res.pages), "images": res.images,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run(out: str, site: str, papers: int, chunk: int) -> dict:
    env = dict(os.environ, PYTHONPATH=ROOT)
    res = subprocess.run(
        [sys.executable, "-c", RUN, out, site, str(papers), str(chunk)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    from gate import write_build

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--papers", type=int, default=2000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "build")
        t = time.perf_counter()
        write_build(out, args.papers)
        print(f"generated build: {args.papers} papers, {args.papers * 8} figure rows ({time.perf_counter() - t:.1f}s)")
        tenth = max(1, args.papers // 10)
        rows = [
            ("1 paper per round trip (baseline)", tenth, 1),
            ("8 papers per round trip (default)", tenth, 8),
            ("8 per round trip, every page", 0, 8),
        ]
        results = []
        for i, (name, n, chunk) in enumerate(rows):
            r = run(out, os.path.join(tmp, f"site{i}"), n, chunk)
            results.append(r)
            print(
                f"  {name:<36} pages {r['pages']:>6}  {r['pages'] / r['seconds']:>7.1f} pages/s  "
                f"peak RSS {r['peak_rss_mb']:>6.0f} MB"
            )
        base, default = results[0], results[1]
        print(
            f"default vs baseline: {(default['pages'] / default['seconds']) / (base['pages'] / base['seconds']):.2f}x pages/s"
        )
        print(f"peak RSS, every page vs 10% of the pages: {results[2]['peak_rss_mb'] / results[1]['peak_rss_mb']:.2f}x")


if __name__ == "__main__":
    main()
