"""Local builds run in the `sciga` process and processes forked from it, without Apache
Beam (``executors/in_process.py``): the same steps, the same bytes as Beam's pipeline, dead
letters included, whatever the number of workers; Beam runs whenever it is asked for or a
step needs it; a worker killed by the system stops the build with one sentence."""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from sciga.executors import choice, in_process
from sciga.pipelines.build import add_arguments, build_options_from_args
from sciga.pipelines.cli import main
from sciga.samples.scale_corpus import make_image_rich_corpus
from sciga.transforms.parse.step import ParseStep
from sciga.transforms.vision.options import VisionOptions, resolve_vision

from conftest import ROOT, cli_in_fresh_process

SHARDS = ("--papers-per-shard", "3", "--figures-per-shard", "8")  # several groups and parts


def data_digests(out: Path) -> dict:
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.glob("data/*/*"))}


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text(encoding="utf-8"))


def sciga_build(pages: Path, out: Path, *extra: str, env: dict | None = None) -> tuple[str, bool]:
    """(stdout, whether Apache Beam was imported) of `sciga build` in a new interpreter."""
    import os

    old = dict(os.environ)
    os.environ.update(env or {})
    try:
        r, modules = cli_in_fresh_process(["build", "--input", str(pages), "--output", str(out), *SHARDS, *extra])
    finally:
        os.environ.clear()
        os.environ.update(old)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    return r.stdout, "apache_beam" in modules


@pytest.mark.e2e  # real builds in new interpreters, real Parquet
def test_builds_and_rebuilds_run_without_beam_and_write_what_beam_writes(tmp_path):
    pages = tmp_path / "pages"
    make_image_rich_corpus(pages, 40, n_figures=3, image_kb=4, distinct_images=2)
    here, beam = tmp_path / "here", tmp_path / "beam"
    _, imported = sciga_build(pages, here)
    assert not imported, "a clean local build imports no Apache Beam"
    ran_here = manifest(here)["run"]
    assert ran_here["runner"] == in_process.RUNNER
    assert ran_here["workers"] == in_process.workers_for(None, 40, 40)  # 40 to compute: every core
    _, imported = sciga_build(pages, beam, env={choice.ENV: "0"})
    assert imported and manifest(beam)["run"]["runner"] == "DirectRunner"
    assert data_digests(here) == data_digests(beam), "a clean build: the same shards as Beam's, byte for byte"

    changed = sorted(pages.glob("*/*.html"))
    for page in changed[:2]:  # two pages edited
        page.write_text(page.read_text(encoding="utf-8").replace("</article>", "<p>Added.</p></article>", 1))
    changed[2].write_bytes(b"\x00\x01 not a page")  # one page broken: a dead letter

    out, imported = sciga_build(pages, here)
    assert not imported, "a rebuild of three changed pages imports no Apache Beam"
    assert re.search(r"reused +37 +\(unchanged since the last build; recomputed 3\)", out), out
    assert re.search(r"dead-lettered +1\b", out), out
    _, imported = sciga_build(pages, beam, env={choice.ENV: "0"})
    assert imported

    ran_here, ran_on_beam = manifest(here), manifest(beam)
    assert ran_here["run"]["runner"] == in_process.RUNNER and ran_here["run"]["workers"] == 1  # 3 to compute
    assert ran_on_beam["run"]["runner"] == "DirectRunner"
    assert data_digests(here) == data_digests(beam), "the same shards, byte for byte"
    for key in ("files", "counts", "stats", "reconciled"):
        assert ran_here.get(key) == ran_on_beam.get(key), key
    assert ran_here["reconciled"] and ran_here["counts"]["dead_letter"] == 1
    assert ran_here["run"]["shard_parts_reused"] > 0, "parts of unchanged papers are taken over"

    # Nothing changed since: nothing to do, as after a Beam build.
    out, imported = sciga_build(pages, here)
    assert "up to date" in out and not imported


@pytest.mark.e2e  # real clean builds of the embedded sample
def test_the_sample_builds_without_beam_like_on_beam_with_any_workers(tmp_path):
    """The README's first command: the embedded sample (a few papers) builds without Beam,
    with one worker or several, and gives the bytes Beam gives."""
    r, modules = cli_in_fresh_process(["build", "--sample", "--output", str(tmp_path / "here"), "--quiet"])
    assert r.returncode == 0, r.stderr[-3000:]
    assert "apache_beam" not in modules
    # Its mentions' sentences are found by pysbd alone: spaCy (1.3 s to import) stays out.
    assert "spacy" not in modules
    r, modules = cli_in_fresh_process(
        ["build", "--sample", "--output", str(tmp_path / "two"), "--quiet", "--workers", "3"]
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "apache_beam" not in modules
    run = manifest(tmp_path / "two")["run"]
    assert (run["runner"], run["workers"]) == (in_process.RUNNER, 3)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(choice.ENV, "0")
        r, _ = cli_in_fresh_process(
            ["build", "--sample", "--output", str(tmp_path / "beam"), "--quiet", "--workers", "2"]
        )
    assert r.returncode == 0, r.stderr[-3000:]
    assert manifest(tmp_path / "beam")["run"]["runner"] == "DirectRunner"
    assert data_digests(tmp_path / "here") == data_digests(tmp_path / "two") == data_digests(tmp_path / "beam")


def _options(tmp_path: Path, *argv: str):
    ap = argparse.ArgumentParser()
    add_arguments(ap)
    opts = build_options_from_args(ap.parse_args(["--input", str(tmp_path), "--output", str(tmp_path / "o"), *argv]))
    return opts, resolve_vision(VisionOptions(), str(tmp_path / "staging"))


def test_beam_runs_when_asked_for_or_when_a_step_needs_it(tmp_path, monkeypatch):
    opts, vision = _options(tmp_path)
    assert choice.eligible(opts, vision, None)
    assert choice.eligible(opts, vision, [])
    assert choice.eligible(_options(tmp_path, "--workers", "1")[0], vision, None)  # workers here, not Beam's
    assert not choice.eligible(opts, vision, ["--runner", "DirectRunner"])  # Beam flags: Beam
    assert not choice.eligible(_options(tmp_path, "--finalize-in-job")[0], vision, None)
    assert not choice.eligible(_options(tmp_path, "--html-from", "auto")[0], vision, None)
    monkeypatch.setenv(choice.ENV, "0")
    assert not choice.eligible(opts, vision, None)


def test_workers_are_every_core_unless_the_work_is_small(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    assert in_process.workers_for(None, 4, 4) == 1  # the embedded sample: a fork costs more than it saves
    assert in_process.workers_for(None, 1000, 0) == 1  # nothing to compute, little to plan
    assert in_process.workers_for(None, 1000, 1) == 1  # one changed page of 1,000: a wash
    assert in_process.workers_for(None, 12, 12) == 1  # a dozen pages: a fork does not pay
    assert in_process.workers_for(None, 1000, 10) == 4  # ten of 1,000: planning and writing shared
    assert in_process.workers_for(None, 40, 40) == 4  # a clean build of a few dozen pages
    assert in_process.workers_for(None, 5001, 1) == 4  # so many unchanged: workers share planning them
    assert in_process.workers_for(3, 10, 1) == 3  # --workers wins
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert in_process.workers_for(None, 1000, 1000) == 1


def test_parts_are_written_in_several_processes_when_many_and_large():
    """A build computed here (a few changed pages) writes its parts in up to ``allowed``
    processes when more than one is written again and together they are large; a build
    with several workers keeps them; taken-over parts count for nothing."""
    from sciga.executors.spill import JobRef

    big = in_process.MIN_BYTES_TO_SHARE_WRITES

    def job(nbytes: int) -> JobRef:
        return JobRef("jobs.pickle", 0, 0, nbytes)

    def none_taken_over(job) -> bool:
        return False

    assert in_process._processes_for_writes(1, 2, [job(big), job(1)], none_taken_over) == 2
    assert (
        in_process._processes_for_writes(1, 4, [job(big), job(1), job(1)], none_taken_over) == 3
    )  # at most one per part
    assert in_process._processes_for_writes(1, 2, [job(big)], none_taken_over) == 1  # one part: nothing to share
    assert in_process._processes_for_writes(1, 2, [job(1), job(1)], none_taken_over) == 1  # too small to pay for a fork
    assert (
        in_process._processes_for_writes(1, 1, [job(big), job(big)], none_taken_over) == 1
    )  # --workers 1, or one core
    assert in_process._processes_for_writes(3, 2, [job(1)], none_taken_over) == 3  # the build's own workers
    kept = job(big)
    assert in_process._processes_for_writes(1, 2, [kept, job(big)], lambda j: j is kept) == 1  # one left to write


@pytest.mark.e2e  # real builds, real worker processes forked for the writes
def test_a_small_rebuild_writes_its_parts_in_two_processes_with_a_clean_builds_bytes(tmp_path, monkeypatch):
    pages = tmp_path / "pages"
    make_image_rich_corpus(pages, 12, n_figures=2, image_kb=4, distinct_images=2)
    out, clean = tmp_path / "out", tmp_path / "clean"
    argv = ["--input", str(pages), *SHARDS, "--quiet"]
    assert main(["build", "--output", str(out), *argv]) == 0
    page = sorted(pages.glob("*/*.html"))[4]
    page.write_text(page.read_text(encoding="utf-8").replace("</article>", "<p>Added.</p></article>", 1))
    monkeypatch.setattr(in_process, "MIN_BYTES_TO_SHARE_WRITES", 0)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    from sciga.executors import spill

    read_here: list = []  # part jobs read back in this process (the forked writers read theirs)
    asked: list = []
    real_load, real_share = spill.load_job, in_process._processes_for_writes
    monkeypatch.setattr(spill, "load_job", lambda ref: read_here.append(ref) or real_load(ref))
    monkeypatch.setattr(
        in_process, "_processes_for_writes", lambda *a: asked.append([r.taken_over for r in a[2]]) or real_share(*a)
    )
    assert main(["build", "--output", str(out), *argv]) == 0
    run = manifest(out)["run"]
    assert (run["runner"], run["workers"], run["part_writers"]) == (in_process.RUNNER, 1, 2), run
    # whether each part is taken over was asked as it was cut: no job was read back here for it
    assert read_here == [] and len(asked) == 1
    assert True in asked[0] and False in asked[0] and None not in asked[0], asked
    assert main(["build", "--output", str(clean), "--workers", "1", *argv]) == 0
    assert manifest(clean)["run"]["part_writers"] == 1  # --workers 1: one process, writes included
    assert data_digests(out) == data_digests(clean), "the same shards as a clean build, byte for byte"


def test_the_in_process_build_puts_the_callers_allocator_back(monkeypatch):
    """malloc while the build runs here; the caller's pool after (a notebook keeps its own),
    and an allocator the user chose is left alone."""
    import pyarrow as pa

    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    before = pa.default_memory_pool().backend_name
    with in_process.system_allocator():
        assert pa.default_memory_pool().backend_name == "system"
    assert pa.default_memory_pool().backend_name == before
    monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", before)
    with in_process.system_allocator():
        assert pa.default_memory_pool().backend_name == before


def test_the_collector_is_tuned_while_the_build_runs_here_and_back_after():
    """While the build runs here: what was alive before is frozen and the young generation
    is collected less often; after: the caller's thresholds, nothing frozen; a collector
    the caller turned off is left alone."""
    import gc

    before = gc.get_threshold()
    with in_process.collector_for_batch_work():
        assert gc.get_threshold() == (in_process.GC_YOUNG_THRESHOLD, *before[1:])
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
    gc.disable()
    try:
        with in_process.collector_for_batch_work():
            assert gc.get_threshold() == before and gc.get_freeze_count() == 0
    finally:
        gc.enable()


def test_reference_cycles_a_batch_leaves_are_collected_when_the_batch_ends(monkeypatch):
    """Pages leave reference cycles; with the tuned collector they piled up in the oldest
    generation, and a worker's memory grew with the pages it had computed (the build's, at
    2,000 text pages, 1,028 MB against 544 MB). Each batch of inputs ends with a collection."""
    import gc
    import weakref

    class Cycle:
        def __init__(self):
            self.me = self
            self.payload = bytearray(1 << 20)

    left: list = []

    class Chain:
        def items(self, line):
            c = Cycle()
            left.append(weakref.ref(c))
            return [line]

        def finish_items(self):
            pass

        def take_cpu_seconds(self):
            return {}

    monkeypatch.setitem(in_process._FORKED, "chain", Chain())
    with in_process.collector_for_batch_work():
        gc.collect()
        out = in_process._chain_items([f"line {i}" for i in range(16)])
        assert out[0] == [f"line {i}" for i in range(16)]
        assert all(r() is None for r in left), "a batch's reference cycles outlived the batch"


def test_glibcs_fastbins_are_off_while_the_build_runs_here_and_back_after(monkeypatch):
    """No fastbins while the build runs here, glibc's default after; a user's own
    GLIBC_TUNABLES setting of them is left alone, as is a C library that is not glibc."""
    calls: list = []

    class FakeGlibc:
        def mallopt(self, param, value):
            calls.append((param, value))
            return 1

    monkeypatch.setattr(in_process, "_glibc", lambda: FakeGlibc())
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    with in_process.malloc_without_fastbins():
        assert calls == [(1, 0)]
    assert calls == [(1, 0), (1, 128)]
    calls.clear()
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.mxfast=64")
    with in_process.malloc_without_fastbins():
        pass
    monkeypatch.setattr(in_process, "_glibc", lambda: None)
    monkeypatch.delenv("GLIBC_TUNABLES")
    with in_process.malloc_without_fastbins():
        pass
    assert calls == []
    if sys.platform.startswith("linux") and os.confstr("CS_GNU_LIBC_VERSION"):
        monkeypatch.undo()
        with in_process.malloc_without_fastbins():  # the real mallopt takes both settings
            pass


def test_what_workers_and_finalizing_import_is_imported_once_before_forking(tmp_path, monkeypatch):
    """The modules finalizing needs (pandas under them, which pyarrow imports on a worker's
    first table) are imported before the workers are forked, which share them; a module that
    cannot be imported there is left to fail where it is used."""
    from sciga.executors.finalize import FINALIZE_MODULES

    for name in FINALIZE_MODULES:  # a misspelled name would quietly import nothing
        __import__(name)
    (tmp_path / "sciga_test_ahead.py").write_text("VALUE = 1\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "sciga_test_ahead", raising=False)
    with in_process._Workers(1, None, shared_modules=["sciga_test_ahead"]):
        assert "sciga_test_ahead" not in sys.modules  # one worker: this process, nothing forked
    with in_process._Workers(2, None, shared_modules=["sciga_test_no_such_module", "sciga_test_ahead"]):
        assert "sciga_test_no_such_module" not in sys.modules
        assert sys.modules["sciga_test_ahead"].VALUE == 1


@pytest.mark.e2e  # real worker processes, one killed as the system's out-of-memory killer does
def test_a_worker_killed_by_the_system_stops_the_build_with_one_sentence_and_the_rerun_resumes(
    tmp_path, monkeypatch, capsys
):
    pages, out = tmp_path / "pages", tmp_path / "out"
    make_image_rich_corpus(pages, 12, n_figures=1, image_kb=4, distinct_images=1)
    victim = sorted(p.name for p in pages.glob("*/*.html"))[5]
    launcher, parse = os.getpid(), ParseStep.run

    def run(self, work):
        if os.getpid() != launcher and work.uri.endswith(victim):
            os.kill(os.getpid(), signal.SIGKILL)
        return parse(self, work)

    monkeypatch.setattr(ParseStep, "run", run)
    argv = ["build", "--input", str(pages), "--output", str(out), "--workers", "2", "--quiet"]
    before = {c.pid for c in psutil.Process().children(recursive=True)}  # servers of other tests
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("sciga build: a worker process of the build was killed"), err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    left = [c for c in psutil.Process().children(recursive=True) if c.pid not in before]
    assert not left, "no worker is left running"

    monkeypatch.setattr(ParseStep, "run", parse)
    assert main(argv) == 0
    m = manifest(out)
    assert m["counts"]["papers"] == 12 and m["reconciled"]


@pytest.mark.e2e  # a real build in a new interpreter, its launcher killed as `kill -9` does
def test_workers_end_when_their_launcher_is_killed(tmp_path):
    pages = tmp_path / "pages"
    make_image_rich_corpus(pages, 120, n_figures=3, image_kb=4, distinct_images=2)
    p = subprocess.Popen(
        [sys.executable, "-m", "sciga", "build", "--input", str(pages), "--output", str(tmp_path / "out")]
        + ["--workers", "2", "--quiet"],
        cwd=str(ROOT),
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    launcher = psutil.Process(p.pid)
    deadline = time.monotonic() + 120
    workers: list = []
    while len(workers) < 2 and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.05)
        workers = forked_workers(launcher)
    assert len(workers) == 2, "the build forked its two workers"
    p.kill()
    p.wait()
    _, alive = psutil.wait_procs(workers, timeout=10)
    # A worker that ended but whose exit status nobody collected yet is a zombie: it has
    # ended (its launcher, which would reap it, is gone; in a container, PID 1 may never).
    alive = [w for w in alive if not _ended(w)]
    for w in alive:
        w.kill()  # not left behind by a failing test
    assert not alive, "a worker outlived its launcher"


@pytest.mark.e2e  # real forked workers, their launcher killed in the moment they start
def test_a_worker_that_starts_after_its_launcher_was_killed_ends_too():
    """The parent-death signal is asked for in the worker, after the fork: a launcher killed in
    between never sends it. This delays each worker's start until its launcher is gone, which
    the CI's `kill -9` test met by chance (a worker left waiting on its queue for ever)."""
    read_end, write_end = os.pipe()
    launcher = os.fork()
    if launcher == 0:  # the launcher: fork two workers, say their ids, and die as kill -9 does
        try:
            os.close(read_end)
            started = in_process._worker_started

            def late_start(launcher_pid: int) -> None:
                time.sleep(1.0)  # by now the launcher is gone
                started(launcher_pid)

            in_process._worker_started = late_start
            workers = in_process._Workers(2, chain=None)  # type: ignore[arg-type]
            workers._fork()
            assert workers.pool is not None
            workers.pool.submit(int)  # the pool forks its workers on the first job
            pids = [p.pid for p in workers.pool._processes.values()]
            os.write(write_end, json.dumps(pids).encode() + b"\n")
        finally:
            os.kill(os.getpid(), signal.SIGKILL)
    os.close(write_end)
    with os.fdopen(read_end) as f:  # one line: the workers hold the pipe's other end too
        pids = json.loads(f.readline() or "[]")
    os.waitpid(launcher, 0)
    assert len(pids) == 2, "the launcher forked its two workers"
    workers = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):  # already gone: it ended
            workers.append(psutil.Process(pid))
    _, alive = psutil.wait_procs(workers, timeout=10)
    alive = [w for w in alive if not _ended(w)]
    for w in alive:
        w.kill()  # not left behind by a failing test
    assert not alive, "a worker that started after its launcher died outlived it"


def _ended(proc) -> bool:
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def forked_workers(launcher) -> list:
    """The build's workers: the processes forked from ``launcher`` (the same program and
    command line), not a short-lived helper it runs, such as the ``lscpu`` that joblib's CPU
    count starts, which had been counted as a worker now and then."""
    try:
        argv = launcher.cmdline()
        children = launcher.children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    forked = []
    for child in children:
        try:
            if child.cmdline() == argv:
                forked.append(child)
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            continue
    return forked


@pytest.mark.parametrize("workers", ["1", "2"])
def test_the_manifest_records_cpu_seconds_per_stage_summed_over_the_workers(tmp_path, workers):
    """Issue 47 item 5: CPU-seconds per paper per stage, from a build's manifest."""
    import argparse

    from sciga.pipelines.build import run_build

    pages = tmp_path / "pages"
    make_image_rich_corpus(pages, 6, n_figures=3, image_kb=4, distinct_images=2)
    ap = argparse.ArgumentParser()
    add_arguments(ap)
    out = tmp_path / "out"
    run_build(ap.parse_args(["--input", str(pages), "--output", str(out), "--workers", workers, "--quiet", *SHARDS]))
    cpu = manifest(out)["run"]["cpu_seconds"]
    assert (
        {"plan", "parse", "link", "vision", "store", "group", "write"}
        <= set(cpu)
        <= {"plan", "parse", "tex_source", "link", "vision", "store", "group", "write"}
    ), cpu
    assert all(isinstance(s, float) and s >= 0 for s in cpu.values()), cpu
    assert cpu["parse"] > 0 and cpu["write"] > 0, cpu
    assert sum(cpu.values()) <= manifest(out)["run"]["seconds"] * int(workers) + 1, "CPU time beyond the workers' wall"
