"""`sciga build --executor dask` against the in-process executor: wall time of a clean build
of N text pages (copies of the real pages in ../shared/corpus, as bench/scale.py makes them)
with 2 workers each, the Dask build on a local cluster of 2 worker processes that the build
starts and stops itself (what `--executor dask --workers 2` does without --dask-address).
Builds alternate (in-process, Dask, in-process, Dask ...) so that a busy neighbour slows
both; the shards of every build are checked to be the same bytes.

    python bench/dask_executor.py                  # 1,000 pages, 3 rounds (about 5 minutes here)
    python bench/dask_executor.py --pages 200 --rounds 1

Goal: the Dask build at most 1.3x the in-process one (median of the rounds).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench.scale import digests, run_measured, text_corpus

GOAL = 1.3


def build(pages: Path, out: Path, extra: list[str]) -> float:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "sciga", "build", "--input", str(pages), "--output", str(out), "--quiet"]
    wall, _, _ = run_measured([*cmd, "--workers", "2", *extra])
    return wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workdir", default=None, help="where the corpus and builds go (default: a temporary folder)")
    args = ap.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="sciga-bench-dask-"))
    workdir.mkdir(parents=True, exist_ok=True)
    pages = text_corpus(workdir, args.pages)
    walls: dict[str, list[float]] = {"in_process": [], "dask": []}
    shards: dict[str, dict] = {}
    for r in range(args.rounds):
        for name, extra in (("in_process", []), ("dask", ["--executor", "dask"])):
            out = workdir / f"out_{name}"
            walls[name].append(build(pages, out, extra))
            shards.setdefault(name, digests(out))
            assert digests(out) == shards["in_process"], f"{name} wrote other bytes than the in-process build"
            print(f"round {r + 1}: {name:<10} {walls[name][-1]:6.1f} s", file=sys.stderr, flush=True)
    base, dask = statistics.median(walls["in_process"]), statistics.median(walls["dask"])
    print(f"| {args.pages:,} text pages, 2 workers | wall (median of {args.rounds}) | vs in-process |")
    print("|---|---:|---:|")
    print(f"| in-process executor (`--workers 2`) | {base:.1f} s | 1.00x |")
    print(f"| Dask, local cluster of 2 processes (`--executor dask --workers 2`) | {dask:.1f} s | {dask / base:.2f}x |")
    print(f"goal: at most {GOAL}x -> {'met' if dask / base <= GOAL else 'NOT met'}; shards byte-identical: yes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
