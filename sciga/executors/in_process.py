"""Local builds without Apache Beam: in this process, or in processes forked from it.

Beam's local runner costs a local build a lot that is not computing papers: importing Beam
(about 1.2 s), building the job, starting and warming worker processes, shuffling every
paper's reference between them, and stopping them again. On 1,000 text pages with 2 workers
that was ~9 s of a 31 s build, with one core idle for most of it (``bench/scale.py
--timeline``). This executor runs the build's chain (``chain.py``: the same step objects every executor
runs) by calling the steps itself: each input through ``BuildChain.items``, then
``BuildChain.part_jobs_on_disk`` and ``BuildChain.write``.

With one worker, one after another in this process. With more (``--workers``, or every core
when more than a few inputs changed), the inputs (largest first, in small batches) and then
the part files go to that many processes forked from this one once every step is set up, so
only input lines, references and part jobs cross between processes; grouping and cutting,
which need every reference, stay here.

The part files and their sidecars are what the Beam pipeline writes, byte for byte, with any
number of workers (``tests/executors/test_in_process.py``), and the launcher finalizes them
the same way.

It runs every local build that needs nothing of Beam: no Beam flags, no model to run (the
medical classifier, GA typing), no pages made from e-prints, no ``--ids``, no bulk tars, no
finalizing in the job. ``SCIGA_IN_PROCESS=0`` runs Beam's DirectRunner instead.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

    from sciga.executors.chain import BuildChain
    from sciga.executors.options import BuildResult
    from sciga.executors.prepare import PreparedBuild
    from sciga.executors.spill import JobRef

# The work of a build run here, as bench/scale.py's text pages cost it on 2 cores: planning
# an unchanged input (its stored header read, its files checked) ~0.2 ms, computing a page
# ~25 ms. Below ONE_PROCESS_BELOW_SECONDS of it, forking workers (and importing what they
# share first) costs more than another core saves: the embedded sample (4 pages) built in
# 1.02-1.09 s in one process and 1.12-1.22 s in two; 1 changed of 1,000 text pages,
# 1.64-1.73 s either way; 10 changed of 1,000, 2.05-2.09 s in one and 1.83-1.89 s in two.
PLAN_SECONDS_PER_INPUT = 0.0002
COMPUTE_SECONDS_PER_INPUT = 0.025
ONE_PROCESS_BELOW_SECONDS = 0.4
# Arrow bytes of the part files to write at least, for a build computed in one process to
# write them in several: a small rebuild rewrites whole shards (1,000 text papers' papers
# shard is 110 MB of Arrow data, 0.4 s to encode), which another core can share.
MIN_BYTES_TO_SHARE_WRITES = 32 << 20
RUNNER = "in_process"  # the manifest's run.runner


@dataclass(frozen=True)
class InProcessRun:
    """What ``run_in_process`` did."""

    page_sha256: dict[str, str]  # page -> the SHA-256 of the bytes its stored paper was made from
    part_writers: int  # processes that wrote the part files
    # CPU-seconds (user + system) per stage, summed over every process that ran it
    # (``BuildChain.cpu_seconds``; "group": grouping and cutting, in the launcher)
    cpu_seconds: dict[str, float]


def can_fork() -> bool:
    """Whether worker processes may be forked from this one: on Linux (macOS's system
    libraries are not safe to use in a forked child; Windows cannot fork)."""
    return sys.platform.startswith("linux")


def workers_for(asked: Optional[int], n_inputs: int, to_compute: int) -> int:
    """Processes for a build run here: ``--workers`` when given; else one where the build's
    work is small (a few pages, or a few changed among a few hundred), and otherwise every
    core: they share the planning of the unchanged inputs, the papers to compute and the
    part files to write."""
    if asked is not None:
        return max(1, asked)
    work = n_inputs * PLAN_SECONDS_PER_INPUT + to_compute * COMPUTE_SECONDS_PER_INPUT
    if work < ONE_PROCESS_BELOW_SECONDS:
        return 1
    return os.cpu_count() or 1


@contextlib.contextmanager
def system_allocator():
    """Arrow allocates from the C library's malloc while the build runs here, unless the
    user chose an allocator (``ARROW_DEFAULT_MEMORY_POOL``); the previous pool is put back
    after (a notebook that calls the build keeps its own). A rebuild here rewrites the
    parts of the changed papers from the previous shards, tens of MB of full text per row
    group; with Arrow's default (mimalloc) this machine spent 0.4 s more in the kernel on
    a 1% rebuild of 1,000 papers (3.8 s against 3.4 s), and reading the same row groups
    took 60 to 620 ms from run to run. The bytes written do not depend on the allocator."""
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        yield
        return
    import pyarrow as pa

    previous = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        yield
    finally:
        pa.set_memory_pool(previous)  # buffers still alive return to the pool they came from


# Objects allocated before the collector's youngest generation is collected, while the
# build runs here (Python's default: 700).
GC_YOUNG_THRESHOLD = 10_000


@contextlib.contextmanager
def collector_for_batch_work():
    """Python's cyclic garbage collector tuned for many short-lived objects while the build
    runs here, put back after (a notebook that calls the build keeps its settings; nothing
    when the caller turned the collector off). Everything alive when the build starts
    computing (the modules: pyarrow, lxml, pandas) is frozen: no collection walks it again,
    and forked workers do not copy those memory pages by writing to them. A page makes tens
    of thousands of objects that die with it; collecting the young generation every 10,000
    allocations instead of every 700 took 400 text pages' collections from 0.39 s to 0.15 s
    (of ~11 s). Reference cycles are still collected, later."""
    import gc

    if not gc.isenabled():
        yield
        return
    previous = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *previous[1:])
    try:
        yield
    finally:
        gc.set_threshold(*previous)
        gc.unfreeze()


def collect_batch_garbage() -> None:
    """A full collection after each batch of inputs, while ``collector_for_batch_work``
    holds: a page leaves reference cycles behind, and with the young generation collected
    every 10,000 allocations and the modules frozen the oldest generation was collected so
    seldom that they piled up. A worker grew by ~33 MB per batch of 16 pages, to 400-800 MB,
    and the build's memory with the corpus (2,000 text pages: 1,028 MB summed over the
    process tree; 6,000: 1,631 MB). Collected after each batch (~16 pages, and only what was
    not frozen): 544 MB at 2,000 pages, and no slower (114 s against 118 s)."""
    import gc

    if gc.isenabled():
        gc.collect()


# glibc's mallopt parameter for its "fastbins" (small freed blocks kept unmerged), and its
# default on 64-bit Linux (64 * sizeof(size_t) / 4).
_M_MXFAST, _DEFAULT_MXFAST = 1, 128


@contextlib.contextmanager
def malloc_without_fastbins():
    """glibc's malloc keeps no fastbins while the build runs here (put back after; not when
    the user tuned them with ``GLIBC_TUNABLES``; nothing on another C library). Freeing a
    page's tree leaves thousands of small blocks in fastbins, and glibc merges all of them
    whenever a large block is freed next: the page's bytes, its UTF-8 copy, a result's
    Arrow stream. That took ~0.9 ms a page of 440 KB (the page's bytes alone: 0.85 ms to
    free with fastbins, 0.05 ms without); parsing a page took 1.0 to 1.3 ms less of 16 ms
    without them, the two run side by side on the two cores, each pinned to one."""
    libc = _glibc()
    if libc is None or "mxfast" in os.environ.get("GLIBC_TUNABLES", ""):
        yield
        return
    libc.mallopt(_M_MXFAST, 0)
    try:
        yield
    finally:
        libc.mallopt(_M_MXFAST, _DEFAULT_MXFAST)


def release_free_memory() -> None:
    """The C heap's free pages given back to the system (glibc's ``malloc_trim``; nothing on
    another C library). The launcher frees every paper's reference once the part jobs are
    cut, but glibc keeps the freed pages resident; worker processes forked after that
    (``_Workers.widen``) would each map them too, and the build's memory, summed over its
    processes, would count them once more per worker."""
    libc = _glibc()
    if libc is None:
        return
    try:
        libc.malloc_trim(0)
    except AttributeError:
        pass


def _glibc():
    """The C library when it is glibc (its ``mallopt`` is tuned), else None."""
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return None
        import ctypes

        return ctypes.CDLL(None)
    except (ValueError, OSError, AttributeError):
        return None


def run_in_process(
    chain: BuildChain,
    lines: Sequence[str],
    *,
    workers: int = 1,
    write_workers: int = 1,
    finalize_modules: Sequence[str] = (),
) -> InProcessRun:
    """Run ``chain`` over the input ``lines`` (``build_inputs.input_list_lines``, largest
    first): compute what changed and write every part file (with its sidecar), in this
    process or, with ``workers`` > 1, in that many processes forked from it. Returns the
    SHA-256 of each page whose paper is stored (as its worker read it) and how many
    processes wrote the parts. ``write_workers``: processes the part files may be written in
    when ``workers`` is 1 and they are many and large (``_processes_for_writes``)."""
    import tempfile

    from sciga.executors.chain import add_cpu_seconds
    from sciga.executors.spill import SortedRuns
    from sciga.transforms.write.steps import paper_key

    chain.setup()
    read: dict[str, str] = {}  # page -> SHA-256 of the bytes its paper was made from
    cpu: dict[str, float] = {}
    # The references and the part jobs wait on disk, not in this process (``spill.py``): the
    # workers forked for the writes would map them too.
    with (
        tempfile.TemporaryDirectory(prefix="part-jobs-") as folder,
        _Workers(workers, chain, shared_modules=finalize_modules) as pool,
    ):
        by_paper = SortedRuns(folder, "references")
        for batch, spent in pool.map(_chain_items, _batches(list(lines), workers)):
            add_cpu_seconds(cpu, spent)
            for item in batch:
                by_paper.add(paper_key(item), item)
                if item.content_sha256:
                    read[item.uri] = item.content_sha256
        t = time.process_time()
        # Whether a part is taken over is asked only where the writes may be shared, while
        # each job is at hand: not read back twice.
        jobs = chain.part_jobs_on_disk(by_paper, folder, mark_taken_over=_may_share_writes(pool.n, write_workers))
        add_cpu_seconds(cpu, {"group": time.process_time() - t})
        release_free_memory()  # before any fork for the writes: a child maps what the launcher holds
        pool.widen(_processes_for_writes(pool.n, write_workers, jobs, lambda ref: bool(ref.taken_over)))
        for spent in pool.map(_write_parts, _batches(jobs, pool.n)):  # each part file and its sidecar
            add_cpu_seconds(cpu, spent)
        part_writers = pool.n
    chain.finish()
    return InProcessRun(page_sha256=read, part_writers=part_writers, cpu_seconds=cpu)


def build_in_process(b: PreparedBuild, workers: int) -> BuildResult:
    """The build run here with ``workers`` processes (``run_in_process``), then finalized
    as every build is."""
    import logging
    import tempfile

    from sciga.executors.chain import build_chain
    from sciga.executors.finalize import FINALIZE_MODULES, finalize_build
    from sciga.executors.local_run import ScopedTempDir, WorkerOutput, build_log
    from sciga.transforms.common.progress import ProgressMonitor

    b.fin.run.update(runner=RUNNER, workers=workers)
    logging.getLogger("sciga.build").info(
        "building %d inputs into %s without Beam, %d worker process(es) (%s shard groups)",
        len(b.inputs),
        b.out_dir,
        workers,
        b.layout.total_groups,
    )
    previous = b.previous_parts()
    with ScopedTempDir(b.out_dir) as tmp:
        progress_dir = tempfile.mkdtemp(prefix="progress-", dir=tmp)
        chain = build_chain(
            b.opts,
            b.vision,
            fingerprint=b.fingerprint,
            store_root=b.fin.store_root,
            parts_root=b.fin.parts_root,
            layout=b.layout,
            progress_dir=progress_dir,
            previous_parts=previous,
            hash_pages=not b.workers_hash,
        )
        with (
            # Log records to OUT/.sciga/logs/build.log as well as to stderr, as after a Beam
            # build (forked workers inherit the handler).
            WorkerOutput(build_log(b.out_dir), enabled=False),
            system_allocator(),
            malloc_without_fastbins(),
            collector_for_batch_work(),
            ProgressMonitor(
                progress_dir,
                len(b.inputs),
                b.layout.total_groups,
                quiet=b.opts.quiet,
                interval=b.opts.progress_interval,
                workers=workers,
            ),
        ):
            ran = run_in_process(
                chain,
                b.input_lines(),
                workers=workers,
                write_workers=b.opts.workers if b.opts.workers is not None else (os.cpu_count() or 1),
                finalize_modules=FINALIZE_MODULES,
            )
    b.fin.run["part_writers"] = ran.part_writers
    b.fin.run["cpu_seconds"] = {stage: round(s, 3) for stage, s in sorted(ran.cpu_seconds.items())}
    counts, manifest = finalize_build(b.fin)
    return b.finished(counts, manifest, ran.page_sha256)


def import_before_forking(modules: Sequence[str]) -> None:
    """Import ``modules`` in the launcher before it forks the workers, which then share
    them. Each worker would otherwise import pandas on its first table (pyarrow does, to
    tell whether a list is a pandas object): ~0.35 s of CPU each, and the launcher again for
    the dataset card's statistics. A module that fails here fails again where it is used,
    and says so there."""
    import importlib

    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - reported where the module is used
            continue


def _processes_for_writes(workers: int, allowed: int, jobs: list[JobRef], taken_over: Callable[[JobRef], bool]) -> int:
    """Processes to write the part files in: the build's own when it has several; else
    up to ``allowed`` when more than one part is written again (not ``taken_over``) and
    together they are large enough to pay for forking (``MIN_BYTES_TO_SHARE_WRITES``)."""
    if not _may_share_writes(workers, allowed):
        return workers  # asked before any part's fingerprint is computed: most builds stop here
    to_write = [j for j in jobs if not taken_over(j)]
    if len(to_write) < 2:
        return workers
    if sum(j.nbytes for j in to_write) < MIN_BYTES_TO_SHARE_WRITES:
        return workers
    return min(allowed, len(to_write))


def _may_share_writes(workers: int, allowed: int) -> bool:
    """Whether a build computed in one process may fork more to write its parts."""
    return workers <= 1 and allowed > 1


def _batches(items: list, workers: int) -> list[list]:
    """``items`` in order, in batches small enough that the workers end together (the inputs
    come largest first, so the last batches are the quickest) and large enough that handing
    one to a worker (~0.1 ms) is nothing next to computing it."""
    if workers <= 1:
        return [items] if items else []
    size = max(1, min(16, len(items) // (workers * 8)))
    return [items[i : i + size] for i in range(0, len(items), size)]


# What a forked worker runs with: set in the launcher before the workers are forked, so each
# inherits the steps already set up (nothing is pickled but input lines, references and jobs).
_FORKED: dict = {}


def _chain_items(lines: list[str]) -> tuple[list, dict[str, float]]:
    chain: BuildChain = _FORKED["chain"]
    out = [item for line in lines for item in chain.items(line)]
    chain.finish_items()  # a batch is a Beam bundle: progress is flushed at its end
    collect_batch_garbage()
    return out, chain.take_cpu_seconds()


def _write_parts(jobs: list[JobRef]) -> dict[str, float]:
    from sciga.executors.spill import load_job
    from sciga.transforms.common.interrupts import raise_if_received

    chain: BuildChain = _FORKED["chain"]
    for ref in jobs:
        raise_if_received()  # in the launcher: a Ctrl-C that a finalizer swallowed
        chain.write([load_job(ref)])
        # A part's tables are freed once it is written, but glibc keeps their pages: in a
        # process that writes part after part (each a different mix of row-group sizes) the
        # resident memory climbed with the number of parts written, not with what a part
        # holds. Trimming after each part keeps it at one part's worth.
        release_free_memory()
    return chain.take_cpu_seconds()


class _Workers:
    """``map`` over batches: in this process for one worker; else in ``n`` processes forked
    from this one (Linux), which end with the build. Ctrl-C is the launcher's to handle: the
    workers ignore it and are killed when anything stops the map, and a worker the system
    kills (out of memory) stops the build with one sentence instead of hanging it."""

    def __init__(self, n: int, chain: BuildChain, shared_modules: Sequence[str] = ()):
        self.n = max(1, n)
        self.chain = chain
        self.shared_modules = shared_modules  # imported before forking (import_before_forking)
        self.pool: Optional[ProcessPoolExecutor] = None

    def __enter__(self) -> _Workers:
        _FORKED.update(chain=self.chain)
        if self.n > 1:
            self._fork()
        return self

    def _fork(self) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        import_before_forking(self.shared_modules)
        self.pool = ProcessPoolExecutor(
            self.n,
            mp_context=multiprocessing.get_context("fork"),
            initializer=_worker_started,
            initargs=(os.getpid(),),
        )

    def widen(self, n: int) -> None:
        """From here on, ``n`` processes forked from this one (Linux), where this one alone
        computed the papers; nothing otherwise."""
        if self.pool is None and n > 1 and can_fork():
            self.n = n
            self._fork()

    def map(self, fn, batches: list):
        if self.pool is None:
            return map(fn, batches)
        return self._pooled(fn, batches)

    def _pooled(self, fn, batches: list):
        from concurrent.futures.process import BrokenProcessPool

        from sciga.transforms.common.errors import UserError

        assert self.pool is not None
        try:
            yield from self.pool.map(fn, batches)
        except BrokenProcessPool:
            raise UserError(
                "a worker process of the build was killed (most often by the system, for lack of "
                "memory); rerun with fewer --workers, and the build resumes where it stopped."
            ) from None

    def __exit__(self, exc_type, exc, tb) -> None:
        _FORKED.clear()
        if self.pool is None:
            return
        if exc_type is None:
            self.pool.shutdown(wait=True)
            return
        # Stopped (Ctrl-C, a full disk, a failure): what the workers are doing is of no use.
        procs = list((getattr(self.pool, "_processes", None) or {}).values())
        self.pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            if p.is_alive():
                p.kill()
        for p in procs:
            p.join(5)


def _worker_started(launcher_pid: int) -> None:
    """A forked worker: Ctrl-C is for the launcher, which stops the workers itself; and the
    worker ends when the launcher does, however that ends (Linux: a parent-death signal)."""
    import signal

    # A handler that does nothing, not SIG_IGN: a program the worker runs (pdftoppm) does not
    # inherit a handler, so Ctrl-C still stops it, and its result is not kept as final.
    signal.signal(signal.SIGINT, _ignore_signal)
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    # The signal is asked for after the fork: a launcher killed in between (kill -9 as the
    # workers start) never sends it, and the worker would wait on its queue for ever, since its
    # sibling holds the queue's other end open. Its parent is then no longer the launcher: the
    # worker ends as the signal would have ended it.
    if os.getppid() != launcher_pid:
        os.kill(os.getpid(), signal.SIGKILL)


def _ignore_signal(signum, frame) -> None:
    pass
