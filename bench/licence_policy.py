"""Changing the licence policy costs about a no-op rebuild, not a build.

The policy (``--licences``) is applied where shards are written: every paper's stored
result serves every policy. This bench builds N papers (copies of a sample page with its
figures, each with a sidecar giving it its own id and one of arXiv's licences, round robin)
into one folder, then measures in the same run, each as `sciga build` as a user runs it:

    clean         the first build (--licences all): every paper computed
    no-op         the same build again: nothing changed ("up to date", nothing written)
    policy        the same folder under --licences redistributable: nothing recomputed, the
                  parts whose papers are withheld rewritten
    policy back   --licences all again: the withheld papers written in full again

and prints each time with its ratio to the no-op rebuild and to the clean build.

    python bench/licence_policy.py --papers 1000 [--workdir /tmp/licence_bench]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sciga.samples import sample_dir

LICENCES = (
    "http://arxiv.org/licenses/nonexclusive-distrib/1.0/",  # most arXiv papers
    "http://arxiv.org/licenses/nonexclusive-distrib/1.0/",
    "http://arxiv.org/licenses/nonexclusive-distrib/1.0/",
    "http://creativecommons.org/licenses/by/4.0/",
    "http://creativecommons.org/licenses/by-nc-sa/4.0/",
    "http://creativecommons.org/licenses/by-nc-nd/4.0/",
    "http://creativecommons.org/publicdomain/zero/1.0/",
    "http://creativecommons.org/licenses/by-sa/4.0/",
)


def make_corpus(dest: Path, n: int) -> Path:
    """N copies of the sample page 2511.99001 (hard links), each with its own id and licence."""
    src = Path(sample_dir()) / "2511.99001"
    meta = json.loads((Path(sample_dir("meta")) / "2511.99001.meta.json").read_text())
    for i in range(n):
        pid = f"2603.{10000 + i:05d}"
        d = dest / pid
        if d.exists():
            continue
        (d / "figs").mkdir(parents=True)
        os.link(src / "2511.99001.html", d / f"{pid}.html")
        for f in (src / "figs").iterdir():
            os.link(f, d / "figs" / f.name)
        (d / f"{pid}.meta.json").write_text(json.dumps({**meta, "id": pid, "license": LICENCES[i % len(LICENCES)]}))
    return dest


def build(pages: Path, out: Path, policy: str) -> tuple[float, dict]:
    t = time.perf_counter()
    cmd = [sys.executable, "-m", "sciga", "build", "--input", str(pages), "--output", str(out)]
    subprocess.run([*cmd, "--licences", policy, "--quiet"], check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - t
    return seconds, json.loads((out / "manifest.json").read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--papers", type=int, default=1000)
    ap.add_argument("--workdir", default="/tmp/sciga_licence_bench")
    args = ap.parse_args()
    work = Path(args.workdir)
    shutil.rmtree(work / "out", ignore_errors=True)
    pages = make_corpus(work / f"pages_{args.papers}", args.papers)
    out = work / "out"
    runs = {}
    for name, policy in (("clean", "all"), ("no-op", "all"), ("policy", "redistributable"), ("policy back", "all")):
        seconds, m = build(pages, out, policy)
        runs[name] = (seconds, m)
        print(
            f"{name:<12} --licences {policy:<16} {seconds:7.1f}s  papers {m['counts']['papers']:,}, "
            f"withheld {sum((m.get('withheld') or {}).values()):,}, recomputed {m['incremental']['recomputed']:,}",
            flush=True,
        )
    noop, clean = runs["no-op"][0], runs["clean"][0]
    for name in ("policy", "policy back"):
        s = runs[name][0]
        print(f"{name}: {s / noop:.2f}x the no-op rebuild, {s / clean:.2f}x the clean build")
    assert runs["policy"][1]["incremental"]["recomputed"] == 0, "a policy change recomputed papers"
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
