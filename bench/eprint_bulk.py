"""Benchmark: taking the e-prints a build needs out of arXiv's bulk source tars.

Same generated archives (arXiv's layout: ``arXiv_src_YYMM_NNN.tar`` of ``YYMM/<id>.gz``
members, incompressible e-prints of 50 KB - 1.5 MB, plus the manifest), same wanted
papers (``--fraction`` of each tar, spread through it), in the same run:

- baseline: a plain ``tarfile`` loop over each tar (seekable mode, so unwanted members
  are skipped), writing each wanted member to a file. No checksum, no safety checks.
- verified baseline: the same loop streaming the whole tar through md5 (the manifest's
  check), and md5 alone: what any first pass that checks the md5 cannot go below.
- ours, first pass: ``BulkEprints.extract`` (md5 of every tar byte against the manifest,
  on a helper thread; sha256 per member for the index; outer-member safety checks; staged
  writes committed after the md5 matched; the index written), with ``validate`` off and on
  (on: every extracted e-print is also read with ``read_eprint``'s rules, i.e. inflated).
- ours, a later build: the tars' indexes exist, the e-prints do not: range reads of the
  wanted members checked against the sha256 in the index.

With ``--s3`` the same runs read the tars from moto's S3 server on 127.0.0.1 (s3fs), so
that both sides pay a network hop; the moto server shares this machine's cores.

Run:  python bench/eprint_bulk.py [--tars 3] [--tar-mb 200] [--fraction 0.4] [--repeat 3] [--s3]
Prints a Markdown table; docs/explanation/benchmarks.md keeps the measured one.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import random
import shutil
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from sciga.transforms.eprints.bulk_reader import BulkEprints

from tests.bulk_fixtures import write_bulk
from tests.sources_fixtures import tar_gz_of


def make_archives(root: Path, n_tars: int, tar_mb: int, fraction: float, seed: int = 7):
    """n_tars tars of about tar_mb MB; returns (manifest folder, wanted ids, all ids)."""
    rng = random.Random(seed)
    tars, all_ids, k = {}, [], 1
    for t in range(1, n_tars + 1):
        members, size = [], 0
        while size < tar_mb << 20:
            pid = f"2103.{k:05d}"
            n = int(rng.lognormvariate(12.6, 0.8))  # median ~300 KB, like arXiv e-prints
            n = max(50_000, min(n, 1_500_000))
            body = hashlib.shake_256(pid.encode()).digest(n)
            data = tar_gz_of(
                {"main.tex": b"\\documentclass{article}\\begin{document}x\\end{document}", "fig.bin": body}
            )
            members.append((f"2103/{pid}.gz", data))
            all_ids.append(pid)
            size += len(data) + 512
            k += 1
        tars[f"2103_{t:03d}"] = members
    src = write_bulk(root, tars)
    wanted = sorted(rng.sample(all_ids, int(len(all_ids) * fraction)))
    return src, wanted, all_ids


class _Md5Reader:
    """A file object that hashes every byte read through it."""

    def __init__(self, f):
        self.f, self.md5 = f, hashlib.md5()

    def read(self, n=-1):
        b = self.f.read(n)
        self.md5.update(b)
        return b


def baseline(src: Path, wanted: set, out: Path, opener=None, md5: bool = False) -> int:
    """A plain tarfile loop: open each tar, write the wanted members. Returns bytes written.
    With ``md5`` it is the verified baseline: the one check arXiv's manifest allows, md5 of
    every tar byte, so the tar is streamed whole (``r|``) instead of seeking past members."""
    out.mkdir(parents=True, exist_ok=True)
    n = 0
    for tar in sorted(src.glob("arXiv_src_*.tar")) if opener is None else opener.tars():
        f = open(tar, "rb") if opener is None else opener.open(tar)
        r = _Md5Reader(f) if md5 else f
        with f, tarfile.open(fileobj=r, mode="r|" if md5 else "r:") as tf:
            for m in tf:
                if not m.isfile():
                    continue
                pid = os.path.basename(m.name)[:-3]
                if pid in wanted:
                    data = tf.extractfile(m).read()
                    with open(out / os.path.basename(m.name), "wb") as w:
                        w.write(data)
                    n += len(data)
            while md5 and r.read(1 << 20):  # the tar's end-of-archive padding is hashed too
                pass
    return n


def md5_only(src: Path, opener=None) -> None:
    """md5 of every tar byte and nothing else: the floor under any verified first pass."""
    for tar in sorted(src.glob("arXiv_src_*.tar")) if opener is None else opener.tars():
        f = open(tar, "rb", buffering=0) if opener is None else opener.open(tar)
        h = hashlib.md5()
        with f:
            while b := f.read(8 << 20):
                h.update(b)


class S3Opener:
    def __init__(self, fs, prefix):
        self.fs, self.prefix = fs, prefix

    def tars(self):
        return sorted(p for p in self.fs.ls(self.prefix) if p.endswith(".tar"))

    def open(self, path):
        return self.fs.open(path, "rb", block_size=32 << 20, cache_type="readahead")  # as ours


def cpu() -> float:
    """CPU seconds of this process, all threads (the md5 helper thread included)."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed(fn, repeat: int) -> tuple[float, float]:
    """(median wall seconds, median CPU seconds) over ``repeat`` runs."""
    walls, cpus = [], []
    for _ in range(repeat):
        c0, t0 = cpu(), time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(cpu() - c0)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tars", type=int, default=3)
    ap.add_argument("--tar-mb", type=int, default=200)
    ap.add_argument("--fraction", type=float, default=0.4, help="share of each tar's papers the build needs")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--s3", action="store_true", help="read the tars from moto's S3 server on 127.0.0.1")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-bulk-"))
    try:
        src, wanted, all_ids = make_archives(work / "data", args.tars, args.tar_mb, args.fraction)
        total = sum(p.stat().st_size for p in src.glob("*.tar"))
        wanted_set = set(wanted)
        root, opts, opener, server = str(src), {}, None, None
        if args.s3:
            import logging

            from tests.bulk_fixtures import S3Server

            logging.getLogger("werkzeug").setLevel(logging.WARNING)
            server = S3Server().start()
            server.upload(src, "arxiv", "src")
            root, opts = "s3://arxiv/src", server.storage_options()
            import s3fs

            opener = S3Opener(s3fs.S3FileSystem(**opts), "arxiv/src")
        for p in src.glob("*.tar"):  # warm the page cache for both sides
            p.read_bytes()

        def run_baseline():
            shutil.rmtree(work / "base", ignore_errors=True)
            return baseline(src, wanted_set, work / "base", opener)

        def run_verified_baseline():
            shutil.rmtree(work / "vbase", ignore_errors=True)
            return baseline(src, wanted_set, work / "vbase", opener, md5=True)

        def run_ours(validate: bool, hash_members: bool = True, workers: int = 1):
            def go():
                shutil.rmtree(work / "cache", ignore_errors=True)
                bulk = BulkEprints.open(root, str(work / "cache"), storage_options=opts, hash_members=hash_members)
                rep = bulk.extract(wanted, max_workers=workers, validate=validate)
                assert len(rep.extracted) == len(wanted) and not rep.reasons, rep.reasons

            return go

        def run_indexed():
            shutil.rmtree(work / "cache" / "eprints", ignore_errors=True)
            shutil.rmtree(work / "cache" / "refused", ignore_errors=True)
            bulk = BulkEprints.open(root, str(work / "cache"), storage_options=opts)
            rep = bulk.extract(wanted, max_workers=1, validate=False)
            assert not rep.tars_scanned and len(rep.extracted) == len(wanted)

        wanted_bytes = run_baseline()
        rows = []
        t_base = timed(run_baseline, args.repeat)
        rows.append(("plain tarfile loop (no checks)", t_base))
        rows.append(
            (
                "md5 of every tar byte alone (floor of any verified pass)",
                timed(lambda: md5_only(src, opener), args.repeat),
            )
        )
        t_vbase = timed(run_verified_baseline, args.repeat)
        rows.append(("plain tarfile loop + md5 of every tar byte (verified baseline)", t_vbase))
        rows.append(
            (
                "ours, first pass: md5 + outer checks (no per-member index hashes)",
                timed(run_ours(False, hash_members=False), args.repeat),
            )
        )
        rows.append(
            ("ours, first pass: md5 + sha256 index + outer checks (default)", timed(run_ours(False), args.repeat))
        )
        rows.append(("ours, first pass + every e-print read_eprint-validated", timed(run_ours(True), args.repeat)))
        rows.append(
            (
                f"ours, first pass (default), {min(args.tars, os.cpu_count() or 1)} tars side by side as a build runs them",
                timed(run_ours(False, workers=min(args.tars, os.cpu_count() or 1)), args.repeat),
            )
        )
        run_ours(False)()
        rows.append(("ours, later build: range reads checked by the index", timed(run_indexed, args.repeat)))
        if server is not None:
            server.stop()

        print(
            f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f}; "
            f"source: {'moto S3 on 127.0.0.1' if args.s3 else 'local folder (page cache)'}"
        )
        print(
            f"Archives: {args.tars} tars, {total / 1e6:.0f} MB, {len(all_ids)} e-prints; wanted "
            f"{len(wanted)} ({args.fraction:.0%}), {wanted_bytes / 1e6:.0f} MB; median of {args.repeat}\n"
        )
        print("| path | wall s | tar MB/s | wall vs baseline | wall vs verified baseline | CPU s | CPU vs baseline |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for name, (wall, cpu_s) in rows:
            print(
                f"| {name} | {wall:.2f} | {total / 1e6 / wall:.0f} | {wall / t_base[0]:.2f}x | {wall / t_vbase[0]:.2f}x | "
                f"{cpu_s:.2f} | {cpu_s / t_base[1]:.2f}x |"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
