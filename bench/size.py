"""Memory and time of every command on a build as the corpus grows: wall time and peak RSS of
the command's whole process tree (sampled every 0.2 s, summed over the tree), at each size,
and the ratio of the largest size to the smallest (issue 47: a command's memory must not
grow with the corpus).

The pages are real: the shared corpus' ar5iv page (html/2303.17564.html) and its six LaTeXML
pages, cycled under distinct ids (a metadata sidecar per page gives it its id), as the
numbers in issue 47 were measured. Per size N (corpus, builds and reports in --workdir, kept
with --keep and reused by later runs):

1. ``clean build``: ``sciga build`` of the N pages;
2. ``no-op rebuild``: the same build again (nothing changed), twice: the first may walk the
   inputs and add their listing to the build's record (the clean build started within 2 s
   of the corpus' last change, ``inputs/listing_record.py``); ``no-op rebuild, again`` is
   every later one;
3. ``1% of pages changed``: a copy of the build, rebuilt after 1% of the pages' sidecars got
   a new title (the sidecars are restored afterwards);
4. every command that reads a build, on the clean build: ``validate``, ``diff`` (the build
   against its 1% rebuild), ``sql`` (an aggregate, and an export of the ``papers`` config to
   Parquet), ``stats``, ``browse``, ``show``, ``publish --dry-run`` (gate, card, hashing and
   the plan, against a Hub-compatible server on 127.0.0.1), and the data loading of
   ``evaluate random`` and ``train ga-bc`` (the corpus has no images, so both stop once
   they have read the build).

    python bench/size.py                                   # 2,000 and 20,000 pages (~40 min here)
    python bench/size.py --sizes 200 2000                  # minutes
    python bench/size.py --sizes 2000 20000 --workdir /tmp/size --keep --only validate diff
    python bench/size.py --sizes 2000 20000 --workdir /tmp/size --keep --reuse   # builds kept: reading commands only

``--mix realistic`` (for the full-size run, 145,000 pages in ~50 GB of disk): the same real
pages, cycled under distinct ids over several arXiv months (ids have five digits a month), and
one paper in ``--image-every`` (default 14.5: 10,000 of 145,000) an image-rich paper: a real
LaTeXML conversion of a TeX paper (or, without latexmlc, a generated LaTeXML-shaped page) with
``--figures`` generated raster figures of ~30 KB each, as bench/scale.py makes them. Inputs are
hard links, so a page costs its sidecar; the build holds the images once per paper.

    python bench/size.py --mix realistic --sizes 2000 145000 --workdir /big/size --keep

Per size it also prints the clean build's CPU-seconds per paper (user + system of the whole
process tree), its split per stage (``run.cpu_seconds`` in the build's manifest.json: what each
step cost in every process, summed), and what SciGA-145k would cost from those numbers
(``--costs-from BUILD`` prints that for any finished build without running anything): CPU-hours,
Dataflow's batch price at ``DATAFLOW_PRICE`` (stated with its date below), and the wall time on
16 and 64 cores, which is projected (linear in cores), not measured.

Goals (issue 47): at the largest size each command's peak RSS is at most 1.25x its peak at
the smallest size (or under 512 MB), and at most 1.5 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from bench.paths import corpus_dir

SAMPLE_EVERY_S = 0.2
RSS_GROWTH_GOAL = 1.25
RSS_FLOOR_MB = 512
RSS_CEILING_MB = 1536
FULL_SIZE = 145_000  # SciGA's papers
# Dataflow batch list prices, us-central1, as Apache Beam's load tests state them
# (apache_beam/testing/load_tests/dataflow_cost_consts.py, from cloud.google.com/dataflow/pricing),
# read on 2026-11-28: $0.056 per vCPU-hour and $0.003557 per GB-hour, so a vCPU with an
# n1-standard worker's 3.75 GB costs $0.0693 an hour. Check the live page before budgeting.
DATAFLOW_PRICE_DATE = "2026-11-28"
DATAFLOW_VCPU_HOUR = 0.056 + 3.75 * 0.003557
BUILD_STEPS = ("clean build", "no-op rebuild", "no-op rebuild, again", "1% of pages changed")
READ_COMMANDS = (
    "validate",
    "diff",
    "sql (aggregate)",
    "sql (export papers)",
    "stats",
    "browse",
    "show",
    "publish --dry-run",
    "evaluate random",
    "train ga-bc",
)


@dataclass
class Measured:
    wall: float
    peak_mb: float
    rc: int
    cpu_s: float = 0.0  # user + system seconds of the process tree (every process it waited for)


def checkout_env(extra: dict | None = None) -> dict:
    """This checkout's code first; no progress lines, no telemetry."""
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e.setdefault("GX_ANALYTICS_ENABLED", "False")
    e.update(extra or {})
    return e


def tree_rss(proc) -> int:
    """Bytes of RSS summed over ``proc`` and every process below it (gone ones skipped)."""
    import psutil

    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        procs = [proc]
    total = 0
    for q in procs:
        try:
            total += q.memory_info().rss
        except psutil.Error:
            pass
    return total


def measure(cmd: list[str], env: dict | None = None, ok: tuple = (0,), log: Path | None = None) -> Measured:
    """Run ``cmd``; its wall time and the peak of its process tree's summed RSS, sampled every
    ``SAMPLE_EVERY_S``. Output goes to ``log`` (never piped back: a full pipe would stall it)."""
    import resource

    import psutil

    out = open(log, "wb") if log else subprocess.DEVNULL
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, cwd=str(ROOT), env=checkout_env(env), stdout=out, stderr=subprocess.STDOUT)
        top = psutil.Process(p.pid)
        peak = 0
        while p.poll() is None:
            peak = max(peak, tree_rss(top))
            time.sleep(SAMPLE_EVERY_S)
        wall = time.perf_counter() - t0
    finally:
        if log:
            out.close()
    if p.returncode not in ok:
        tail = log.read_text(errors="replace")[-3000:] if log else ""
        raise SystemExit(f"failed ({p.returncode}): {' '.join(cmd)}\n{tail}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Measured(wall, peak / 2**20, p.returncode, cpu)


def sciga(*args: str) -> list[str]:
    return [sys.executable, "-m", "sciga", *args]


# ------------------------------------------------------------------ corpus and builds


def source_pages() -> list[Path]:
    c = corpus_dir()
    if c is None:
        raise SystemExit("the shared corpus is missing: set SCIGA_CORPUS or put it at ../shared/corpus")
    return [c / "html" / "2303.17564.html", *sorted((c / "latexml").glob("*.html"))]


def corpus(workdir: Path, n: int) -> Path:
    from sciga.samples.scale_corpus import make_text_corpus

    d = workdir / f"pages_{n}"
    if not (d / ".done").exists():
        make_text_corpus(d, n, source_pages())
        (d / ".done").write_text("ok")
    return d


def month_ids(n: int, first_month: int = 2602) -> list[str]:
    """``n`` distinct new-style arXiv ids, 99,999 a month from ``first_month`` (YYMM) on."""
    ids = []
    month = first_month
    while len(ids) < n:
        ids += [f"{month}.{i:05d}" for i in range(1, min(99_999, n - len(ids)) + 1)]
        month = month + 1 if month % 100 < 12 else (month // 100 + 1) * 100 + 1
    return ids


def realistic_corpus(workdir: Path, n: int, image_every: float, figures: int, image_kb: int = 19) -> tuple[Path, str]:
    """(folder, a text paper's id): ``n`` pages, ``round(n / image_every)`` of them image-rich
    papers ``<id>/<id>.html`` + ``figs/`` (ids 2601.*), the rest hard links of the real pages
    with a sidecar naming their id (ids 2602.* on)."""
    from bench.scale import image_corpus
    from sciga.samples.scale_corpus import _link_or_copy

    d = workdir / f"pages_realistic_{n}"
    n_images = round(n / image_every) if image_every > 0 else 0
    ids = month_ids(n - n_images)
    if not (d / ".done").exists():
        d.mkdir(parents=True, exist_ok=True)
        if n_images:
            # bench/scale.py's image-rich papers (real LaTeXML page, generated figures, hard links)
            pool = image_corpus(workdir, n_images, figures, image_kb)
            for paper in sorted(q for q in pool.iterdir() if q.is_dir() and not q.name.startswith(".")):
                if not (d / paper.name).exists():
                    shutil.copytree(paper, d / paper.name, copy_function=os.link)
            shutil.rmtree(pool)
        srcs = source_pages()
        for i, pid in enumerate(ids):
            page = d / f"{pid}.html"
            if not page.exists():
                _link_or_copy(srcs[i % len(srcs)], page)
            (d / f"{pid}.meta.json").write_text(json.dumps({"id": pid, "title": None}), encoding="utf-8")
        (d / ".done").write_text("ok")
    return d, ids[-1]


def copy_build(build: Path, to: Path) -> None:
    """A copy of ``build`` for the 1% rebuild. The result store (content-addressed files that a
    build only ever adds or removes whole) is hard-linked; everything else is copied, since the
    rebuild replaces it. At 145,000 pages a plain copy would need the store's ~28 GB twice."""
    results = build / ".sciga" / "results"

    def copy(src: str, dst: str) -> object:
        if Path(src).is_relative_to(results):
            os.link(src, dst)
            return dst
        return shutil.copy2(src, dst)

    shutil.copytree(build, to, symlinks=True, copy_function=copy)


def changed_sidecars(pages: Path, share: float = 0.01) -> dict[Path, str]:
    """Every 1/share-th page's sidecar -> its text now (to restore)."""
    sidecars = sorted(pages.glob("*.meta.json"))
    step = max(1, round(1 / share))
    return {p: p.read_text(encoding="utf-8") for p in sidecars[::step]}


def publish_hub():
    """A Hub-compatible server on 127.0.0.1 (tests/hub_fixtures.py) for ``publish --dry-run``."""
    from tests.hub_fixtures import FakeHub

    return FakeHub("hf_bench_size_token").start()


def read_commands(
    build: Path, changed: Path, scratch: Path, hub_url: str, show_id: str
) -> dict[str, tuple[list[str], dict, tuple]]:
    """name -> (argv, extra env, accepted exit codes) of each command that reads a build."""
    hub_env = {"HF_ENDPOINT": hub_url, "HF_TOKEN": "hf_bench_size_token", "HF_HUB_DISABLE_XET": "1"}
    hub_env["HF_HOME"] = str(scratch / "hf_home")
    agg = (
        "SELECT primary_category, count(*) AS papers, sum(len(figures)) AS figures, "
        "sum(len(sections)) AS sections FROM papers GROUP BY ALL ORDER BY ALL"
    )
    return {
        # the gate fails these pages (their images are not in the corpus): exit 1 is its verdict
        "validate": (sciga("validate", str(build), "--report", str(scratch / "validate")), {}, (0, 1)),
        "diff": (sciga("diff", str(build), str(changed)), {}, (0,)),
        "sql (aggregate)": (sciga("sql", str(build), agg, "--format", "csv"), {}, (0,)),
        "sql (export papers)": (
            sciga("sql", str(build), "--view", "papers", "--format", "parquet", "--output", str(scratch / "p.parquet")),
            {},
            (0,),
        ),
        "stats": (sciga("stats", str(build), "--output", str(scratch / "stats")), {}, (0,)),
        "browse": (sciga("browse", str(build), "--output", str(scratch / "browse")), {}, (0,)),
        "show": (sciga("show", show_id, "--build", str(build)), {}, (0,)),
        "publish --dry-run": (
            sciga(
                "publish",
                str(build),
                "--repo-id",
                "bench/size",
                "--version",
                "v0.0.1",
                "--dry-run",
                "--max-missing-image-rate",
                "1",
                "--allow-any-licence",  # the corpus pages' licences are unknown (the licence check, issue 46)
            ),
            hub_env,
            (0,),
        ),
        # The pages' images are not in the corpus, so no paper is a query or a training example:
        # both stop (exit 3 / 2) after reading the build, which is the part measured here.
        "evaluate random": (
            sciga("evaluate", "random", "--data", str(build), "--results", str(scratch / "eval_random")),
            {},
            (0, 3),
        ),
        "train ga-bc": (
            # with images (--mix realistic): one small step, so that loading is what is measured
            sciga(
                "train",
                "ga-bc",
                "--data",
                str(build),
                "--output",
                str(scratch / "ga_bc"),
                "--device",
                "cpu",
                "--max-steps",
                "1",
                "--batch-size",
                "4",
                "--image-size",
                "64",
            ),
            {},
            (0, 2),
        ),
    }


def run_size(
    workdir: Path, n: int, only: set[str], reuse: bool, keep_scratch: bool, mix: argparse.Namespace
) -> dict[str, Measured]:
    if mix.mix == "realistic":
        pages, show_id = realistic_corpus(workdir, n, mix.image_every, mix.figures)
        build = workdir / f"build_realistic_{n}"
    else:
        from sciga.samples.scale_corpus import paper_ids

        pages, show_id = corpus(workdir, n), paper_ids(n, "2602")[-1]
        build = workdir / f"build_{n}"
    changed = build.with_name(build.name + "_1pct")
    logs = workdir / "logs"
    logs.mkdir(exist_ok=True)
    results: dict[str, Measured] = {}

    def step(name: str, cmd: list[str], env=None, ok=(0,)) -> None:
        print(f"  {n}: {name} ...", file=sys.stderr, flush=True)
        m = measure(cmd, env, ok, logs / f"{n}_{name.replace(' ', '_').replace('/', '_')}.log")
        results[name] = m
        print(f"  {n}: {name}: {m.wall:.1f} s, {m.peak_mb:,.0f} MB, {m.cpu_s:.1f} CPU s", file=sys.stderr, flush=True)

    # --reuse: a build already in the workdir is used as it is (its steps are not measured)
    if not (build / "manifest.json").exists() or ("clean build" in only and not reuse):
        shutil.rmtree(build, ignore_errors=True)
        step("clean build", sciga("build", "--input", str(pages), "--output", str(build), "--quiet"))
    for name in ("no-op rebuild", "no-op rebuild, again"):
        if name in only and not reuse:
            step(name, sciga("build", "--input", str(pages), "--output", str(build), "--quiet"))
    if not (changed / "manifest.json").exists() or ("1% of pages changed" in only and not reuse):
        shutil.rmtree(changed, ignore_errors=True)
        copy_build(build, changed)
        before = changed_sidecars(pages)
        try:
            for p, text in before.items():
                meta = json.loads(text)
                meta["title"] = f"A changed title for {meta['id']}"
                p.write_text(json.dumps(meta), encoding="utf-8")
            name = "1% of pages changed"
            cmd = sciga("build", "--input", str(pages), "--output", str(changed), "--quiet")
            if name in only:
                step(name, cmd)
            else:
                subprocess.run(cmd, cwd=str(ROOT), env=checkout_env(), check=True, capture_output=True)
        finally:
            for p, text in before.items():
                p.write_text(text, encoding="utf-8")

    hub = publish_hub() if "publish --dry-run" in only else None
    scratch = Path(tempfile.mkdtemp(prefix=f"size_{n}_", dir=workdir))
    try:
        cmds = read_commands(build, changed, scratch, hub.url if hub else "http://127.0.0.1:9", show_id)
        for name in READ_COMMANDS:
            if name in only:
                cmd, env, ok = cmds[name]
                step(name, cmd, env, ok)
    finally:
        if hub:
            hub.stop()
        if not keep_scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    return results


# ------------------------------------------------------------------ report


def verdict(small: Measured, large: Measured) -> str:
    ok = (large.peak_mb <= RSS_GROWTH_GOAL * small.peak_mb or large.peak_mb <= RSS_FLOOR_MB) and (
        large.peak_mb <= RSS_CEILING_MB
    )
    return "yes" if ok else "**no**"


def table(sizes: list[int], runs: dict[int, dict[str, Measured]]) -> str:
    lo, hi = sizes[0], sizes[-1]
    head = ["command"] + [f"{n:,} pages" for n in sizes] + [f"RSS {hi:,} / {lo:,}", f"time {hi:,} / {lo:,}", "goal met"]
    lines = ["| " + " | ".join(head) + " |", "|---" + "|---:" * (len(head) - 2) + "|---|"]
    for name in (*BUILD_STEPS, *READ_COMMANDS):
        if not all(name in runs[n] for n in sizes):
            continue
        cells = [f"{runs[n][name].wall:.1f} s, {runs[n][name].peak_mb:,.0f} MB" for n in sizes]
        a, b = runs[lo][name], runs[hi][name]
        cells += [f"x{b.peak_mb / a.peak_mb:.2f}", f"x{b.wall / a.wall:.1f}", verdict(a, b) if lo != hi else ""]
        lines.append("| " + " | ".join([name, *cells]) + " |")
    return "\n".join(lines)


def costs(manifest_path: Path, wall: Optional[float] = None) -> str:
    """Per-stage CPU-ms per paper of a finished build (its manifest's ``run.cpu_seconds``) and
    what SciGA-145k would cost at that rate: measured per paper, projected at full size."""
    m = json.loads(Path(manifest_path).read_text())
    papers = int(m["counts"]["papers"]) or 1
    cpu = {k: float(v) for k, v in (m.get("run", {}).get("cpu_seconds") or {}).items()}
    if not cpu:
        return f"{manifest_path}: the manifest records no CPU-seconds per stage (a Beam build, or an older one)"
    total = sum(cpu.values())
    lines = [
        f"CPU per paper by stage, {papers:,} papers (measured: run.cpu_seconds of {manifest_path}):",
        "",
        "| stage | CPU-seconds | CPU-ms per paper | share |",
        "|---|---:|---:|---:|",
    ]
    for stage, sec in sorted(cpu.items(), key=lambda kv: -kv[1]):
        lines.append(f"| {stage} | {sec:,.1f} | {sec / papers * 1000:.1f} | {sec / total:.0%} |")
    lines.append(f"| **all stages** | {total:,.1f} | {total / papers * 1000:.1f} | 100% |")
    full_h = total / papers * FULL_SIZE / 3600
    lines += [
        "",
        f"SciGA-145k ({FULL_SIZE:,} papers) at this rate (projected, linear in papers):",
        "",
        "| where | cores | wall hours | cost |",
        "|---|---:|---:|---|",
        f"| Dataflow, n1-standard workers | any | {full_h:.1f} vCPU-hours in all (e.g. 10 n1-standard-4 for "
        f"{full_h / 40:.2f} h, plus ~5 min start-up) | ${full_h * DATAFLOW_VCPU_HOUR:,.2f} at ${DATAFLOW_VCPU_HOUR:.4f} "
        f"per vCPU-hour (batch list price, us-central1, read {DATAFLOW_PRICE_DATE}) |",
    ]
    for cores in (16, 64):
        lines.append(f"| one machine | {cores} | {full_h / cores:.2f} (if the stages scale linearly in cores) | |")
    if wall is not None:
        here = os.cpu_count() or 1
        lines.append(
            f"| this machine (measured wall, scaled by papers) | {here} | {wall / papers * FULL_SIZE / 3600:.2f} | |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 20000], help="pages per build (smallest first)")
    ap.add_argument("--workdir", default=None, help="corpora, builds and logs (default: a temporary folder)")
    ap.add_argument("--keep", action="store_true", help="keep the workdir (corpora and builds) for later runs")
    ap.add_argument("--reuse", action="store_true", help="use the builds already in --workdir instead of building")
    ap.add_argument(
        "--only",
        nargs="+",
        metavar="NAME",
        default=None,
        help="measure only these (e.g. validate diff 'clean build'); default: every step and command",
    )
    ap.add_argument("--json", metavar="FILE", help="also write the measurements here")
    ap.add_argument(
        "--costs-from",
        metavar="BUILD",
        help="print the per-stage CPU and SciGA-145k's projected cost of this finished build, and stop",
    )
    ap.add_argument(
        "--mix",
        choices=("text", "realistic"),
        default="text",
        help="text: the real pages cycled; realistic: plus image-rich papers (see above)",
    )
    ap.add_argument(
        "--image-every", type=float, default=14.5, help="--mix realistic: one image-rich paper in this many"
    )
    ap.add_argument("--figures", type=int, default=8, help="--mix realistic: figures per image-rich paper")
    args = ap.parse_args()
    if args.costs_from:
        print(costs(Path(args.costs_from) / "manifest.json"))
        return 0
    names = (*BUILD_STEPS, *READ_COMMANDS)
    only = set(args.only or names)
    unknown = only - set(names)
    if unknown:
        raise SystemExit(f"unknown --only {sorted(unknown)}; known: {', '.join(names)}")
    sizes = sorted(args.sizes)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="sciga-bench-size-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"machine: {os.cpu_count()} cores; workdir {workdir}", file=sys.stderr)
    runs: dict[int, dict[str, Measured]] = {}
    try:
        for n in sizes:
            runs[n] = run_size(workdir, n, only, args.reuse, args.keep, args)
        report(args, sizes, runs, workdir)
    finally:
        if not args.keep and not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


def report(args: argparse.Namespace, sizes: list[int], runs: dict[int, dict[str, Measured]], workdir: Path) -> None:
    """The table, the CPU per paper and SciGA-145k's projected cost (read from the builds,
    before a temporary workdir is removed)."""
    print(
        f"\nPeak RSS: the whole process tree, summed, sampled every {SAMPLE_EVERY_S} s. Goal: at {sizes[-1]:,} pages "
        f"at most {RSS_GROWTH_GOAL}x the peak at {sizes[0]:,} (or under {RSS_FLOOR_MB} MB), and at most "
        f"{RSS_CEILING_MB / 1024:.1f} GB.\n"
    )
    print(table(sizes, runs))
    for n in sizes:
        b = runs[n].get("clean build")
        if b is not None:
            print(
                f"\nclean build of {n:,} pages ({args.mix}): {b.cpu_s:,.0f} CPU-seconds, {b.cpu_s / n * 1000:.1f} "
                f"CPU-ms per paper (user + system, whole process tree), {b.wall:,.0f} s on {os.cpu_count()} cores"
            )
            built = workdir / (f"build_realistic_{n}" if args.mix == "realistic" else f"build_{n}")
            print(costs(built / "manifest.json", b.wall))
    if args.json:
        Path(args.json).write_text(
            json.dumps({n: {k: vars(v) for k, v in r.items()} for n, r in runs.items()}, indent=2) + "\n"
        )


if __name__ == "__main__":
    raise SystemExit(main())
