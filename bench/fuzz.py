"""Fuzzing `sciga build` with hostile inputs: the long run of tests/e2e/test_hostile_inputs.py.

Inputs are mutated from the real pages of ../shared/corpus (tests/hostile_fixtures.py: bad
names, FIFOs, links out of the input and link loops, sidecars of the wrong types, gzip
bombs, captions of mentions, giant formulas, broken bytes; since issue 43 also folders linked
from outside, paths over 4,096 bytes, names that are not UTF-8, unsafe dump members, ``::``
and NUL in image sources and GA-manifest rows, impostor and confusable ids, 16-bit images and
pages with huge row counts, ...), every kind once before any twice, in batches of ``--batch`` inputs per build. Each build is run as a user runs it
(`python -m sciga build`, its own process group) and checked: exit status, no hang
(``--timeout``), peak RSS of the process tree (``--rss-gb``), no canary file outside the
input opened (inotify) or copied into the output, every input a paper or a dead letter,
each planted input as it must come out. ``--kill-resume`` also kills each batch's build
(SIGKILL to the group) at a random moment, resumes it, and checks that the resumed build
has the same shards as the uninterrupted one.

The baseline is a build of the same number of plain corpus pages in the same run: the
summary prints the hostile builds' time against it (what hostility costs).

    python bench/fuzz.py                            # seed 23, 300 inputs in batches of 30
    python bench/fuzz.py --seed 7 --count 60 --batch 30 --workers 2 --kill-resume
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from paths import ROOT, corpus_dir

sys.path.insert(0, str(ROOT / "tests"))

from tests.hostile_fixtures import (
    GB,
    CanaryWatch,
    Mutations,
    accounted,
    build_rows,
    bytes_leaked,
    check_expectations,
    corpus_pages,
    kill_group,
    run_watched,
    sciga_cmd,
)


def shard_digests(out: Path) -> dict:
    return {
        str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.glob("data/*/*.parquet"))
    }


def build(m: Mutations, out: Path, a, on_tick=None, workers=None):
    cmd = sciga_cmd(
        "build",
        "--input",
        str(m.inp),
        "--output",
        str(out),
        "--workers",
        str(workers or a.workers),
        "--quiet",
        "--max-page-mb",
        str(a.max_page_mb),
        *m.build_args(),
    )
    with CanaryWatch(m.canaries) as watch:
        r = run_watched(cmd, a.timeout, on_tick=on_tick)
        return r, watch.touched()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=23)
    ap.add_argument("--count", type=int, default=300, help="hostile inputs in all (default %(default)s)")
    ap.add_argument("--batch", type=int, default=30, help="inputs per build (default %(default)s)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--max-page-mb", type=int, default=16, help="--max-page-mb of the builds (gzip bombs inflate past it)"
    )
    ap.add_argument("--timeout", type=float, default=900, help="seconds before a build counts as hung")
    ap.add_argument("--rss-gb", type=float, default=1.5, help="peak RSS bound of one build's process tree")
    ap.add_argument("--kill-resume", action="store_true", help="also kill each build at a random moment and resume it")
    ap.add_argument(
        "--ga-every",
        type=int,
        default=5,
        help="every Nth batch also gets hostile GA-manifest rows and is built with 1 worker (a GA manifest runs on "
        "Beam's DirectRunner, whose processes alone take ~1.5 GB with 2 workers); 0: none (default %(default)s)",
    )
    ap.add_argument("--workdir", default=None, help="where to build (default: a temporary folder, removed)")
    a = ap.parse_args(argv)
    corpus = corpus_dir()
    if corpus is None:
        print("bench/fuzz.py needs ../shared/corpus (or SCIGA_CORPUS)", file=sys.stderr)
        return 2
    work = Path(a.workdir or tempfile.mkdtemp(prefix="sciga-fuzz-"))
    rng = random.Random(a.seed)
    pages = corpus_pages(corpus)
    outcomes: dict = collections.defaultdict(collections.Counter)
    failures: list[str] = []
    rows, hostile_seconds = [], 0.0
    try:
        # Baseline: the same number of plain pages, same workers, same run.
        base = Mutations(work / "baseline" / "in", work / "baseline" / "outside", pages, random.Random(a.seed))
        for _ in range(min(a.batch, a.count)):
            base.plain_page()
        t0 = time.time()
        r, _ = build(base, work / "baseline" / "out", a)
        baseline = time.time() - t0
        if r.returncode != 0:
            failures.append(f"baseline build failed: {r.stderr[-2000:]}")
        print(
            f"baseline: {len(base.planted)} plain pages in {baseline:.1f} s, peak RSS {r.peak_rss / GB:.2f} GB",
            file=sys.stderr,
            flush=True,
        )
        left, n = a.count, 0
        while left > 0:
            n += 1
            size = min(a.batch, left)
            left -= size
            folder = work / f"batch{n:03d}"
            m = Mutations(folder / "in", folder / "outside", pages, random.Random(rng.randrange(1 << 30)))
            m.plant(size)
            with_ga = bool(a.ga_every) and n % a.ga_every == 0
            if with_ga:
                for kind in Mutations.GA_KINDS:
                    getattr(m, kind)()
            out = folder / "out"
            r, touched = build(m, out, a, workers=1 if with_ga else None)
            hostile_seconds += r.seconds
            problems = []
            if r.timed_out:
                problems.append(f"hung (killed after {a.timeout:.0f} s)")
            if r.returncode != 0:
                problems.append(
                    f"exit {r.returncode}: {r.stderr.strip().splitlines()[-1:] if r.stderr.strip() else ''}"
                )
            if "Traceback" in r.stderr:
                problems.append("a traceback on stderr")
            if r.peak_rss > a.rss_gb * GB:
                problems.append(f"peak RSS {r.peak_rss / GB:.2f} GB")
            if touched:
                problems.append(f"opened outside the input: {touched}")
            if (out / "manifest.json").exists():
                problems += (
                    bytes_leaked(out, [m.marker])
                    + accounted(out, m.listed(), m.inp)
                    + check_expectations(out, m.planted, m.inp)
                )
                papers, dead = build_rows(out, m.inp)
                paper_uris = {p["input_uri"] for p in papers}
                dead_types = {d["input_uri"]: d["error_type"] for d in dead if d.get("scope") != "part"}
                for p in m.planted:
                    outcomes[p.kind]["paper" if p.uri in paper_uris else dead_types.get(p.uri, "?")] += 1
            if a.kill_resume and r.returncode == 0:
                problems += kill_and_resume(m, folder, out, a, rng)
            rows.append((n, size, r.seconds, r.peak_rss / GB, len(problems)))
            failures += [f"batch {n} (seed of the batch in {folder}): {p}" for p in problems]
            print(
                f"batch {n}{' (with GA rows, 1 worker)' if with_ga else ''}: {size} inputs, {r.seconds:.1f} s, "
                f"peak RSS {r.peak_rss / GB:.2f} GB, "
                f"{len(problems)} problems",
                file=sys.stderr,
                flush=True,
            )
    finally:
        if a.workdir is None and not failures:
            shutil.rmtree(work, ignore_errors=True)
    print(f"# sciga build fuzz: seed {a.seed}, {a.count} inputs, batches of {a.batch}, {a.workers} workers\n")
    print("| batch | inputs | seconds | x baseline | peak RSS GB | problems |")
    print("|---|---|---|---|---|---|")
    for n, size, sec, rss, nprob in rows:
        print(f"| {n} | {size} | {sec:.1f} | {sec / max(baseline, 1e-9):.2f}x | {rss:.2f} | {nprob} |")
    print(
        f"\nbaseline (plain pages, same run): {baseline:.1f} s per batch; hostile batches took "
        f"{hostile_seconds / max(1, len(rows)):.1f} s on average ({hostile_seconds / max(1, len(rows)) / max(baseline, 1e-9):.2f}x)\n"
    )
    print("| mutation kind | outcomes (paper or dead-letter type) |")
    print("|---|---|")
    for kind in sorted(outcomes):
        print(f"| {kind} | {', '.join(f'{k} {v}' for k, v in sorted(outcomes[kind].items()))} |")
    print(
        f"\n{len(failures)} problems"
        + (
            ":"
            if failures
            else "; every build held: no hang, nothing read outside the "
            "input, every input accounted for, memory within the bound."
        )
    )
    for f in failures:
        print(f"- {f}")
    if failures:
        print(f"\nbuilds kept in {work}")
    return 1 if failures else 0


def kill_and_resume(m: Mutations, folder: Path, whole: Path, a, rng: random.Random) -> list[str]:
    """Kill a build of the same inputs at a random moment, resume it: same shards as ``whole``."""
    out = folder / "killed"
    delay = rng.uniform(2.0, 20.0)
    t0 = time.time()
    killed = []

    def kill_later(ps):
        if not killed and time.time() - t0 > delay:
            kill_group(ps.pid)
            killed.append(delay)

    build(m, out, a, on_tick=kill_later)
    r, _ = build(m, out, a)
    problems = []
    if r.returncode != 0:
        problems.append(f"the resumed build (killed at {delay:.1f} s) exited {r.returncode}")
    elif shard_digests(out) != shard_digests(whole):
        problems.append(f"the build killed at {delay:.1f} s and resumed differs from the uninterrupted one")
    if (out / ".staging").exists() or (out / ".sciga" / "build.lock").exists():
        problems.append("the resumed build left .staging or its lock behind")
    return problems


if __name__ == "__main__":
    raise SystemExit(main())
