"""Benchmark: our LaTeXML conversion (``convert_eprint``) per core, on the shared TeX trees.

Each tree of ../shared/corpus/tex is converted ``--repeat`` times, one conversion at a
time (one latexmlc process = one core), and the wall time and the CPU time of latexmlc
and its children (ImageMagick, ghostscript) are measured. CPU seconds per paper is the
figure that decides the cost on Dataflow (it does not change with the machine's load);
wall time is shown beside it with the load average. The baseline in the same run is the
bare command ``latexmlc --format=html5`` on the same tree, so the ratio shows what our
wrapper (main-file search, private copy, limits, PNG clean-up) adds.

Run:  python bench/latexml.py [--repeat 1]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sciga.transforms.eprints.eprint import read_eprint, read_source_dir
from sciga.transforms.latexml.convert import convert_eprint, find_main_file, latexml_version

TREES = {"dd3d": "tex/dd3d", "1709.07020": "tex/1709.07020/1709.07020v1.tar.gz", "2603.21852": "tex/2603.21852"}


def corpus() -> Path:
    sys.path.insert(0, str(ROOT / "bench"))
    from paths import corpus_dir

    found = corpus_dir()
    if found is None:
        raise SystemExit("bench/latexml.py needs the development corpus (../shared/corpus or SCIGA_CORPUS).")
    return found


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def bare(files: dict, main: str) -> None:
    """The plain command on a copy of the tree, nothing else."""
    work = tempfile.mkdtemp(prefix="bench-latexml-")
    try:
        for name, data in files.items():
            p = os.path.join(work, name)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "wb") as f:
                f.write(data)
        subprocess.run(
            ["latexmlc", "--format=html5", "--dest=out/page.html", main], cwd=work, capture_output=True, check=False
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    base = corpus()
    rows = []
    for name, rel in TREES.items():
        path = base / rel
        tree = (
            read_source_dir(str(path), keep=lambda _: True)
            if path.is_dir()
            else read_eprint(path.read_bytes(), keep=lambda _: True)
        )
        main_file = find_main_file(tree.files)
        for kind in ("bare latexmlc", "convert_eprint"):
            walls, cpus = [], []
            for _ in range(args.repeat):
                c0, t0 = children_cpu(), time.perf_counter()
                if kind == "bare latexmlc":
                    bare(tree.files, main_file)
                else:
                    convert_eprint(tree, paper_id=name)
                walls.append(time.perf_counter() - t0)
                cpus.append(children_cpu() - c0)
            rows.append((name, kind, min(walls), min(cpus)))
    print(
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, LaTeXML "
        f"{latexml_version()}, load average {os.getloadavg()[0]:.1f} (shared machine)\n"
    )
    print("| paper | path | wall s | CPU s | papers/hour/core (CPU) |")
    print("|---|---|---:|---:|---:|")
    for name, kind, wall, cpu in rows:
        print(f"| {name} | {kind} | {wall:.1f} | {cpu:.1f} | {3600 / cpu:.0f} |")
    ours = [r for r in rows if r[1] == "convert_eprint"]
    bares = [r for r in rows if r[1] == "bare latexmlc"]
    cpu_ours = sum(r[3] for r in ours) / len(ours)
    cpu_bare = sum(r[3] for r in bares) / len(bares)
    print(
        f"\nMean CPU s per paper: ours {cpu_ours:.1f}, bare {cpu_bare:.1f} (ratio {cpu_ours / cpu_bare:.2f}x); "
        f"throughput {3600 / cpu_ours:.0f} papers/hour per core."
    )


if __name__ == "__main__":
    main()
