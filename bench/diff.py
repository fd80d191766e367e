"""Benchmark: `sciga diff OLD NEW` on two generated builds of N papers (time and peak RSS),
against baselines measured in the same run on the same shards.

    python bench/diff.py                        # two 20,000-paper builds (160,000 figure rows each)
    python bench/diff.py --papers 5000 20000    # several sizes: does memory grow with the build?

The builds are synthetic shards, not real builds: bench/gate.py's generator (papers shaped
like the sample's: 4 sections, 5 figures of which one has 3 subfigures, 8 mentions, a 32x32
PNG per figure row), written with the project's own shard writer and manifest. A real
20,000-paper `sciga build` takes ~13 minutes on this machine (bench/scale.py); the diff
only reads shards, so the shards are what matters. NEW is OLD with 1% of the papers changed
(a title, a caption, a subcaption, an image, a mention: 0.2% each), 1% added and 0.5%
removed; papers are written in generation order, so every shard of NEW differs from OLD's
(as in a monthly update, where new papers land in every shard group) and the diff cannot
skip any.

Each run is its own process (its peak RSS is its own: ``VmHWM``, the peak of that process
image; ``ru_maxrss`` would include the launching process's, from before ``exec``):
* ``count`` baseline: DuckDB ``count(*)`` over every shard of both builds (footers only);
* ``scan`` baseline: DuckDB reading, in one pass per config and build, the columns the diff
  reads and hashing them (no grouping, no join): the floor of any diff that reads them;
* ``sciga diff`` (bytes of images hashed, the default) and ``--no-image-bytes``;
* ``sciga diff OLD OLD``: a build against itself (no shard differs: footers only).
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from gate import paper_rows, write_build  # bench/gate.py's generator and writer (bench/ is on the path above)

RUN = r"""
import json, sys, time
kind, old, new = sys.argv[1], sys.argv[2], sys.argv[3]
t = time.perf_counter()
if kind == "count":
    import duckdb
    con = duckdb.connect()
    n = 0
    for side in (old, new):
        for config in ("papers", "figures", "mentions", "dead_letter"):
            n += con.execute(f"SELECT count(*) FROM read_parquet('{side}/data/{config}/*.parquet')").fetchone()[0]
    result = {"rows": n}
elif kind == "scan":
    import duckdb
    con = duckdb.connect()
    con.execute("SET memory_limit = '1GB'")
    q = {"papers": "sum(hash(id, title, abstract, [struct_pack(i := x.id, t := x.title, b := x.body) for x in sections], "
                   "teaser, graphical_abstract, provenance, authors, subjects, primary_category))",
         "figures": "sum(hash(id, paper_id, kind, caption, subcaption, image.path, hash(image.bytes), width, height, "
                    "is_teaser, ga_role, medical))",
         "mentions": "sum(hash(paper_id, figure_id, section_id, paragraph_index, char_start, char_end, surface, sentence))"}
    for side in (old, new):
        for config, expr in q.items():
            con.execute(f"SELECT {expr} FROM read_parquet('{side}/data/{config}/*.parquet')").fetchall()
    result = {}
else:
    import io, contextlib
    from sciga.pipelines.cli import main
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["diff", old, new, "--json"] + (["--no-image-bytes"] if kind == "diff-no-bytes" else []))
    d = json.loads(buf.getvalue())
    result = {"rc": rc, "added": d["papers"]["added"], "removed": d["papers"]["removed"], "changed": d["papers"]["changed"],
              "fields": {k: v for k, v in d["fields"].items() if v}}
# VmHWM: the peak RSS of this process image (ru_maxrss would include the parent's, from before exec).
hwm = next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:"))
result.update(seconds=time.perf_counter() - t, peak_rss_mb=hwm / 1024)
print(json.dumps(result))
"""


def mutate(i: int, paper: dict, figures: list, mentions: list) -> None:
    """One kind of change per changed paper (every 100th paper is changed; which kind cycles)."""
    k = (i // 100) % 5
    if k == 0:
        paper["title"] += " (revised)"
    elif k == 1:
        figures[0]["caption"] += " Revised."
    elif k == 2:
        sub = next(r for r in figures if r["kind"] == "subfigure")
        sub["subcaption"] = (sub["subcaption"] or "") + " revised"
    elif k == 3:
        figures[1]["image"] = dict(figures[1]["image"], bytes=figures[1]["image"]["bytes"] + b"\0")
    else:
        mentions.pop()


def write(out: str, ids) -> None:
    """Papers ``ids`` (generator indices; a negative index is paper -i with a change) into
    shards of the default sizes, in order, then the manifest (bench/gate.py's writer)."""
    ids = list(ids)

    def rows(k: int):
        j = ids[k]
        p, fr, m = paper_rows(abs(j))
        if j < 0:
            mutate(-j, p, fr, m)
        return p, fr, m

    write_build(out, len(ids), rows)


def make_pair(root: str, n: int) -> tuple[str, str, dict]:
    old, new = os.path.join(root, f"old-{n}"), os.path.join(root, f"new-{n}")
    write(old, range(1, n + 1))
    removed = set(range(7, n + 1, 200))  # 0.5%
    changed = set(range(3, n + 1, 100))  # 1%
    ids = [(-i if i in changed else i) for i in range(1, n + 1) if i not in removed]
    ids += list(range(n + 1, n + 1 + n // 100))  # 1% added
    write(new, ids)
    expect = {"added": n // 100, "removed": len(removed), "changed": len(changed - removed)}
    # --no-image-bytes does not see a change of image bytes alone (kind 3 of ``mutate``)
    expect["changed_no_bytes"] = expect["changed"] - sum(1 for i in changed - removed if (i // 100) % 5 == 3)
    return old, new, expect


def run(kind: str, old: str, new: str) -> dict:
    env = dict(os.environ, PYTHONPATH=ROOT)
    res = subprocess.run(
        [sys.executable, "-c", RUN, kind, old, new], env=env, capture_output=True, text=True, timeout=3600, cwd=ROOT
    )
    if res.returncode != 0:
        raise SystemExit(f"{kind} failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def du_mb(path: str) -> float:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs) / (1 << 20)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--papers", type=int, nargs="+", default=[20000], help="papers per build (one pair per size)")
    ap.add_argument("--workdir", default=None, help="where the builds go (default: a temp folder, removed afterwards)")
    args = ap.parse_args()
    root = args.workdir or tempfile.mkdtemp(prefix="sciga-bench-diff-")
    os.makedirs(root, exist_ok=True)
    table = []
    try:
        for n in args.papers:
            t = time.perf_counter()
            old, new, expect = make_pair(root, n)
            print(
                f"{n:,} papers: two builds written in {time.perf_counter() - t:.1f}s "
                f"({du_mb(old):.0f} MB + {du_mb(new):.0f} MB); expected {expect}",
                flush=True,
            )
            runs = [
                ("count", "DuckDB count(*) over both builds (baseline)", old, new),
                ("scan", "DuckDB scan + hash of the columns the diff reads (baseline)", old, new),
                ("diff", "`sciga diff OLD NEW --json`", old, new),
                ("diff-no-bytes", "`sciga diff OLD NEW --json --no-image-bytes`", old, new),
                ("diff", "`sciga diff OLD OLD --json` (a build against itself)", old, old),
            ]
            base = None
            for kind, label, a, b in runs:
                r = run(kind, a, b)
                if kind == "scan":
                    base = r["seconds"]
                if kind.startswith("diff") and a != b:
                    want = dict(
                        expect, changed=expect["changed_no_bytes"] if kind == "diff-no-bytes" else expect["changed"]
                    )
                    got = {k: r[k] for k in ("added", "removed", "changed")}
                    assert got == {k: want[k] for k in got}, (got, want)
                elif kind.startswith("diff"):
                    assert r["added"] == r["removed"] == r["changed"] == 0, r
                print(
                    f"  {label}: {r['seconds']:.2f}s, peak RSS {r['peak_rss_mb']:.0f} MB"
                    + (f", {r.get('fields')}" if r.get("fields") else ""),
                    flush=True,
                )
                table.append((n, label, r["seconds"], r["peak_rss_mb"], base))
            if args.workdir is None:
                shutil.rmtree(old, ignore_errors=True)
                shutil.rmtree(new, ignore_errors=True)
    finally:
        if args.workdir is None:
            shutil.rmtree(root, ignore_errors=True)
    print()
    print(f"| papers per build | run | seconds | peak RSS MB | vs scan baseline |  ({os.cpu_count()} cores)")
    print("|---:|---|---:|---:|---:|")
    for n, label, s, rss, base in table:
        ratio = f"{s / base:.2f}x" if base else ""
        print(f"| {n:,} | {label} | {s:.2f} | {rss:.0f} | {ratio} |")


if __name__ == "__main__":
    main()
