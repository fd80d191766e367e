"""A build on a disk that fills up, end to end, on a real small file system (tmpfs).

Run by tests/e2e/test_hostile_inputs.py inside a private mount namespace, so that mounting
needs no root on the machine and leaves nothing mounted whatever happens:

    unshare --user --map-root-user --mount --propagation private \\
        python tests/full_disk_scenario.py WORKDIR WORKERS|default RESULT.json

Steps (each a `sciga build` subprocess; RESULT.json gets what each one did):
1. ``tiny``: OUT on a 1 MiB disk: the build stops with one sentence (exit 2), no hang.
2. ``first``: the disk grown (tmpfs remount): a complete build.
3. ``rebuild_full``: the disk shrunk to what the build uses plus a little, ``--rebuild``:
   stops with one sentence; the previous build is intact (manifest and shards unchanged).
4. ``resume``: the disk grown again, the same command without ``--rebuild``: it resumes
   and ends reconciled with the same shards as the first build.
RLIMIT_FSIZE is not used: it gives EFBIG (file too large), not a full disk (ENOSPC).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True)


def digests(out: Path) -> dict:
    files = sorted(out.glob("data/*/*.parquet")) + [out / "manifest.json"]
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files if p.exists()}


def shard_digests(out: Path) -> dict:
    return {k: v for k, v in digests(out).items() if k.startswith("data/")}


def used_kib(path: Path) -> int:
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize // 1024


def build(inp: Path, out: Path, workers: str, *extra: str, timeout: float = 300) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    t0 = time.time()
    try:
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "sciga",
                "build",
                "--input",
                str(inp),
                "--output",
                str(out),
                *(["--workers", workers] if workers != "default" else []),  # default: in the sciga process
                "--quiet",
                *extra,
            ],
            env=env,
            cwd=str(ROOT),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        rc, err = p.returncode, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, err = None, (e.stderr or b"").decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
    return {"rc": rc, "stderr": err, "seconds": round(time.time() - t0, 1)}


def main(work: Path, workers: str, result_path: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from sciga.samples.scale_corpus import make_image_rich_corpus

    inp, disk = work / "in", work / "disk"
    disk.mkdir(parents=True, exist_ok=True)
    make_image_rich_corpus(inp, 10, n_figures=5)
    out = disk / "out"
    res: dict = {}
    sh("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk))
    res["tiny"] = build(inp, out, workers)
    sh("mount", "-o", "remount,size=200m", str(disk))
    res["first"] = build(inp, out, workers)
    first = digests(out)
    res["first_digests"] = first
    res["used_kib"] = used_kib(disk)
    sh("mount", "-o", f"remount,size={res['used_kib'] + 512}k", str(disk))
    res["rebuild_full"] = build(inp, out, workers, "--rebuild")
    res["intact"] = digests(out) == first
    res["staging_after_failure"] = (
        sorted(p.name for p in (out / ".staging").iterdir()) if (out / ".staging").exists() else None
    )
    sh("mount", "-o", "remount,size=200m", str(disk))
    res["resume"] = build(inp, out, workers)
    res["same_shards"] = shard_digests(out) == {k: v for k, v in first.items() if k.startswith("data/")}
    res["manifest"] = json.loads((out / "manifest.json").read_text())
    result_path.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]))
