"""Benchmark of the local side of the sources stage (fetching is network-bound by design:
arXiv asks for one request every 3 s per host).

1. Per-paper TeX figure work, ours vs a plain loop, on the same e-prints in the same run:
   - ours: ``read_eprint`` (streamed, safety-checked, in memory) + ``parse_document``
     (main file, \\input tree, \\includegraphics resolution) + ``to_png_many`` for every
     resolved figure file (pdftoppm / ghostscript via stdin/stdout, a paper's PDFs side by
     side, PNG passed through after a decode check);
   - baseline: ``tarfile.extractall`` into a temporary folder + ``pdftoppm`` on every PDF
     in the tree (same pdftoppm options), files written to disk.
2. Cache lookups per second: ``FetchCache.record`` (the journal index in memory) vs
   ``os.path.exists`` on the paper's view file (what a cache without an index would do),
   plus the time to open a cache (journal load) with that many records.

Run:  python bench/sources.py [--repeat 3] [--papers 200000]
Prints a Markdown table; docs/explanation/benchmarks.md keeps the measured one.
"""

from __future__ import annotations

import argparse
import gzip
import io
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sciga.transforms.eprints.eprint import read_eprint
from sciga.transforms.eprints.rasterize import DEFAULT_DPI, DEFAULT_MAX_SIDE, to_png_many
from sciga.transforms.eprints.tex_graphics import parse_document
from sciga.transforms.fetch.cache import FetchCache


def corpus() -> Path:
    from paths import corpus_dir

    found = corpus_dir()
    if found is None:
        raise SystemExit("bench/sources.py needs the development corpus (../shared/corpus or SCIGA_CORPUS).")
    return found


def tar_gz(folder: Path) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tf:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                tf.add(p, arcname=str(p.relative_to(folder)))
    return gzip.compress(raw.getvalue(), mtime=0)


def eprints() -> dict[str, bytes]:
    c = corpus()
    return {
        "1709.07020 (1 PDF)": (c / "tex" / "1709.07020" / "1709.07020v1.tar.gz").read_bytes(),
        "2603.21852 (2 PDF)": tar_gz(c / "tex" / "2603.21852"),
        "dd3d (\\input tree, 4 PNG)": tar_gz(c / "tex" / "dd3d"),
        "sample 2511.99003 (PNG + PDF)": tar_gz(ROOT / "samples" / "tex" / "2511.99003"),
    }


def ours_prepare(data: bytes):
    """Safe read + main file + \\input tree + \\includegraphics resolution."""
    tree = read_eprint(data)
    doc = parse_document(tree)
    paths = []
    for fig in doc.figures:
        for g in fig.graphics:
            if g.path and g.path not in paths:
                paths.append(g.path)
    return tree, paths


def ours(data: bytes) -> int:
    tree, paths = ours_prepare(data)
    out = to_png_many([(p, tree.files[p]) for p in paths], dpi=DEFAULT_DPI, max_side=DEFAULT_MAX_SIDE)
    assert all(png is not None for png, _ in out)
    return len(paths)


def baseline_extract(data: bytes) -> tuple[str, list[str]]:
    tmp = tempfile.mkdtemp(prefix="bench-plain-")
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tf:
        tf.extractall(tmp, filter="fully_trusted")  # the plain call, no checks
    pdfs = [os.path.join(d, n) for d, _, files in os.walk(tmp) for n in files if n.lower().endswith(".pdf")]
    return tmp, pdfs


def baseline(data: bytes) -> int:
    tmp, pdfs = baseline_extract(data)
    try:
        for src in pdfs:
            subprocess.run(
                [
                    "pdftoppm",
                    "-png",
                    "-singlefile",
                    "-f",
                    "1",
                    "-l",
                    "1",
                    "-r",
                    str(DEFAULT_DPI),
                    "-scale-to",
                    str(DEFAULT_MAX_SIDE),
                    src,
                    src[:-4],
                ],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        return len(pdfs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def baseline_extract_only(data: bytes) -> int:
    tmp, pdfs = baseline_extract(data)
    shutil.rmtree(tmp, ignore_errors=True)
    return len(pdfs)


def best_pair(a, b, arg, repeat: int) -> tuple[float, float, int, int]:
    """Best of ``repeat`` for two functions, runs interleaved so load hits both alike."""
    ta = tb = float("inf")
    na = nb = 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        na = a(arg)
        ta = min(ta, time.perf_counter() - t0)
        t0 = time.perf_counter()
        nb = b(arg)
        tb = min(tb, time.perf_counter() - t0)
    return ta, tb, na, nb


def bench_extraction(repeat: int) -> list[str]:
    lines = [
        "| e-print | ours: safe read + resolve | plain: extractall + walk | ours: + rasterize (files) | "
        "plain: + pdftoppm loop (PDFs) | plain / ours, total |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    tot = [0.0, 0.0, 0.0, 0.0]
    for name, data in eprints().items():
        po, pb, _, _ = best_pair(lambda d: len(ours_prepare(d)[1]), baseline_extract_only, data, repeat * 3)
        to, tb, no, nb = best_pair(ours, baseline, data, repeat)
        for k, v in enumerate((po, pb, to, tb)):
            tot[k] += v
        lines.append(
            f"| {name} | {po * 1000:.1f} ms | {pb * 1000:.1f} ms | {to * 1000:.0f} ms ({no}) | "
            f"{tb * 1000:.0f} ms ({nb}) | {tb / to:.2f}x |"
        )
    lines.append(
        f"| **all four** | **{tot[0] * 1000:.1f} ms** | **{tot[1] * 1000:.1f} ms** | **{tot[2] * 1000:.0f} ms** | "
        f"**{tot[3] * 1000:.0f} ms** | **{tot[3] / tot[2]:.2f}x** |"
    )
    return lines


def bench_cache(n: int) -> list[str]:
    tmp = tempfile.mkdtemp(prefix="bench-cache-")
    try:
        cache = FetchCache(tmp, fsync=False)
        ids = [f"{2400 + i // 100000}.{i % 100000:05d}" for i in range(n)]
        # Journal lines as a real run writes them (three parts per paper); view files for
        # the html part so the stat() baseline has something to find.
        for i, pid in enumerate(ids):
            for part in ("meta", "html", "source"):
                cache._append(cache.record(pid, part) or _rec(pid, part))
            if i < 20000:
                os.makedirs(os.path.dirname(cache.page_path(pid)), exist_ok=True)
                open(cache.page_path(pid), "wb").close()
        cache.close()
        t0 = time.perf_counter()
        cache = FetchCache(tmp, fsync=False)
        t_open = time.perf_counter() - t0
        probe = ids[:20000]
        t0 = time.perf_counter()
        hits = sum(1 for pid in probe for part in ("meta", "html", "source") if cache.record(pid, part) is not None)
        t_ours = time.perf_counter() - t0
        t0 = time.perf_counter()
        hits_b = sum(1 for pid in probe for _ in range(3) if os.path.exists(cache.page_path(pid)))
        t_base = time.perf_counter() - t0
        cache.close()
        assert hits == hits_b == 3 * len(probe)
        ours_rate = hits / t_ours
        base_rate = hits_b / t_base
        return [
            "| cache lookups | per second | ratio |",
            "|---|---:|---:|",
            f"| `FetchCache.record` (journal index in memory) | {ours_rate:,.0f} | {ours_rate / base_rate:.1f}x |",
            f"| `os.path.exists` on the view file (no index) | {base_rate:,.0f} | 1.0x |",
            f"| open a cache of {n:,} papers ({3 * n:,} journal lines) | {t_open:.2f} s | |",
        ]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _rec(pid: str, part: str):
    from sciga.transforms.fetch.cache import PartRecord

    return PartRecord(id=pid, part=part, status="ok", sha256="0" * 64, bytes=1, file=f"papers/{pid}/{pid}.{part}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="best of N per e-print (default 3)")
    ap.add_argument("--papers", type=int, default=100000, help="cache size for the lookup benchmark")
    args = ap.parse_args()
    if not shutil.which("pdftoppm"):
        raise SystemExit("pdftoppm is needed (poppler-utils).")
    print(
        f"# sources benchmark ({platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"pdftoppm at {DEFAULT_DPI} dpi, max side {DEFAULT_MAX_SIDE}px, best of {args.repeat})\n"
    )
    print("\n".join(bench_extraction(args.repeat)))
    print()
    print("\n".join(bench_cache(args.papers)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
