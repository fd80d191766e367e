"""Peak memory of `sciga build` for one hostile page, next to a plain page's, in the same run.

Issue 43's cases, each a folder holding one page (tests/hostile_fixtures.py makes them):

* ``plain``: a real page of ../shared/corpus (eml.html), the baseline;
* ``png16``: its Figure 1 is a 9400 x 9400 16-bit greyscale PNG (1.3 MB on disk, under the
  pixel limit; it took 2.7 GB);
* ``mentions``: a paragraph with 1,000,000 references to Figure 1 (it took 4.7 GB);
* ``figures``: 100,000 figures that all show one 12 KB image (4.6 GB, a 1.23 GB shard);
* ``eprint``: its e-print beside it holds two 250 MB .tex files (1.6 GB);
* ``mentions_below``, ``figures_below`` and ``eprint_below``: the largest such inputs the
  bounds let through (95,000 references: the paper keeps 20,000 mentions; 4,900 figures of
  one image: stored once; two .tex files of 31 MB: under the 64 MiB of TeX text an e-print
  may hold), so each bound is measured where it is reached, not only where it refuses.

Each page is built alone, as a user builds it (`python -m sciga build --workers 1`, its own
process group); the peak RSS of the whole process tree is sampled every 50 ms (psutil).
The table gives each case's peak, its ratio to the plain page's, the build's time, the
figures shard's size and what the build made of the page; every peak must stay at or below
``--bound-gb`` (1.5 GB): the exit status is 1 otherwise.

    python bench/hostile_memory.py                    # every case at the issue's size
    python bench/hostile_memory.py --cases plain png16 --scale 0.1
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from paths import ROOT, corpus_dir

sys.path.insert(0, str(ROOT / "tests"))

from tests.hostile_fixtures import (
    GB,
    big_tex_eprint_page,
    build_rows,
    cli_env,
    many_figures_page,
    many_mentions_page,
    png16_page,
    run_watched,
    sciga_cmd,
)

CASES = ("plain", "png16", "mentions", "figures", "eprint", "mentions_below", "figures_below", "eprint_below")


def make(case: str, folder: Path, corpus: Path, scale: float) -> None:
    pid = "2490.00001"
    if case == "plain":
        folder.mkdir(parents=True)
        shutil.copy(corpus / "latexml" / "eml.html", folder / f"{pid}.html")
    elif case == "png16":
        png16_page(folder, corpus, pid, side=max(64, int(9400 * scale**0.5)))
    elif case == "mentions":
        many_mentions_page(folder, corpus, pid, n=max(1, int(1_000_000 * scale)))
    elif case == "figures":
        many_figures_page(folder, corpus, pid, n=max(1, int(100_000 * scale)))
    elif case == "eprint":
        big_tex_eprint_page(folder, corpus, pid, member_mb=max(1, int(250 * scale)))
    elif case == "mentions_below":
        many_mentions_page(folder, corpus, pid, n=max(1, int(95_000 * scale)))
    elif case == "figures_below":
        many_figures_page(folder, corpus, pid, n=max(1, int(4_900 * scale)))
    elif case == "eprint_below":
        big_tex_eprint_page(folder, corpus, pid, member_mb=max(1, int(31 * scale)))


def outcome(out: Path) -> str:
    if not (out / "manifest.json").exists():
        return "no manifest"
    papers, dead = build_rows(out)
    manifest = json.loads((out / "manifest.json").read_text())
    stats = {k: v for k, v in (manifest.get("stats") or {}).items() if "cut" in k or "capped" in k or "repeat" in k}
    what = f"{len(papers)} paper" + ("" if len(papers) == 1 else "s")
    what += "".join(f", dead letter {d['stage']}/{d['error_type']}" for d in dead)
    repeated = (manifest.get("image_status") or {}).get("repeated")
    if repeated:
        what += f", {repeated} figure rows repeat an image stored once"
    return what + "".join(f", {k} {v}" for k, v in sorted(stats.items()) if v)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    ap.add_argument("--scale", type=float, default=1.0, help="size of each case relative to the issue's (default 1)")
    ap.add_argument("--bound-gb", type=float, default=1.5)
    ap.add_argument("--timeout", type=float, default=1200)
    ap.add_argument("--workdir", default=None, help="where to build (default: a temporary folder, removed)")
    a = ap.parse_args(argv)
    corpus = corpus_dir()
    if corpus is None:
        print("bench/hostile_memory.py needs ../shared/corpus (or SCIGA_CORPUS)", file=sys.stderr)
        return 2
    work = Path(a.workdir or tempfile.mkdtemp(prefix="sciga-hostile-memory-"))
    cases = ["plain"] + [c for c in a.cases if c != "plain"]
    rows, failed = [], []
    try:
        for case in cases:
            inp, out = work / case / "in", work / case / "out"
            make(case, inp, corpus, a.scale)
            size = sum(p.stat().st_size for p in inp.rglob("*") if p.is_file())
            cmd = sciga_cmd("build", "--input", str(inp), "--output", str(out), "--workers", "1", "--quiet")
            r = run_watched(cmd, a.timeout, env=cli_env())
            shard = sum(p.stat().st_size for p in (out / "data" / "figures").glob("*.parquet")) if out.exists() else 0
            # Exit 1 with a manifest: the page was dead-lettered and no paper was built (the CLI's rule).
            finished = r.returncode in (0, 1) and (out / "manifest.json").exists() and "Traceback" not in r.stderr
            what = outcome(out) if finished else f"exit {r.returncode}: {r.stderr.strip()[-300:]}"
            rows.append((case, size, r.peak_rss, r.seconds, shard, what))
            if not finished or r.timed_out or r.peak_rss > a.bound_gb * GB:
                failed.append(case)
            print(f"{case}: peak RSS {r.peak_rss / GB:.2f} GB, {r.seconds:.1f} s, {what}", file=sys.stderr, flush=True)
            shutil.rmtree(work / case, ignore_errors=True)
    finally:
        if a.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    base = rows[0][2] if rows else 1
    print(f"# one hostile page: peak RSS of `sciga build --workers 1` (process tree), scale {a.scale:g}\n")
    print("| case | input MB | peak RSS GB | x plain page | seconds | figures shard MB | outcome |")
    print("|---|---|---|---|---|---|---|")
    for case, size, rss, sec, shard, what in rows:
        print(
            f"| {case} | {size / 1e6:.1f} | {rss / GB:.2f} | {rss / max(base, 1):.1f}x | {sec:.1f} | "
            f"{shard / 1e6:.1f} | {what} |"
        )
    print(
        f"\nbound {a.bound_gb:g} GB: "
        + ("every case within it." if not failed else f"{', '.join(failed)} above it (or failed).")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
