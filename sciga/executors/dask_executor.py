"""`sciga build --executor dask`: the build's chain (``chain.py``) on a Dask cluster, the one
users already run on Slurm and PBS (dask-jobqueue), Kubernetes (dask-kubernetes) or one
machine (``--dask-address tcp://HOST:PORT``; without it, a ``distributed.LocalCluster`` of
``--workers`` processes started here and stopped at the end).

What runs where:

* the workers: the chain's per-input steps, a batch of input lines per task
  (``BuildChain.items``: plan, parse, recover, link, measure, store), then the part files, a
  batch of part jobs per task (``BuildChain.write``). The chain travels pickled once per
  task and is set up once per worker process (``_worker_chain``);
* here: listing and hashing the inputs, grouping the references and cutting the parts
  (``BuildChain.part_jobs_on_disk``, which needs every reference), the progress line (counted from
  what each task returns, so it works with workers that cannot see this machine's disk),
  the output lock, and finalizing, as for every executor.

A task whose worker is lost (killed, out of memory, its node gone) is run again by Dask on
another worker. That is safe: results are stored by content key and part files by their
place, each written whole or not at all, and only the first answer of a task is used, so
a retried task adds no duplicate and loses nothing. The inputs, the output and the result
store must be where every worker sees them: a shared file system, or gs://.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import os
import signal
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from sciga.executors.chain import BuildChain
    from sciga.executors.options import BuildResult
    from sciga.executors.prepare import PreparedBuild

RUNNER = "dask"  # the manifest's run.runner
INSTALL = "pip install 'sciga-builder[dask]'"
# Seconds to wait for a scheduler given with --dask-address.
CONNECT_TIMEOUT = 30
# A worker's first task imports the steps and sets them up (~2 s); batches are kept large
# enough that handing one over (a round trip to the scheduler, ~2 ms) is nothing next to it.
MAX_BATCH = 16
# Part-writing tasks sent ahead per worker thread: enough to keep every worker busy while the
# launcher reads the next batch of jobs back from disk, few enough that it never holds them all.
WINDOW_PER_SLOT = 4

log = logging.getLogger("sciga.build")


@dataclass(frozen=True)
class DaskRun:
    """What ``run_on_dask`` did."""

    page_sha256: dict[str, str]  # page -> the SHA-256 of the bytes its stored paper was made from
    workers: int  # worker processes of the cluster when the build started
    address: str  # the scheduler's


def dask_available() -> bool:
    try:
        import distributed  # noqa: F401 - whether it is installed
    except ImportError:
        return False
    return True


def run_on_dask(
    chain: BuildChain,
    lines: Sequence[str],
    *,
    address: Optional[str],
    workers: int,
    progress_dir: Optional[str],
    verbose: bool = False,
) -> DaskRun:
    """Run ``chain`` over the input ``lines`` on the cluster at ``address`` (None: a local
    cluster of ``workers`` processes): every result stored and every part file written
    into the chain's parts folder, ready to finalize."""
    import tempfile

    from sciga.executors.spill import SortedRuns, load_job
    from sciga.transforms.common.progress import Progress
    from sciga.transforms.write.steps import paper_key

    blob = _pickled(chain)  # before anything is set up here: the workers set up their own copy
    token = hashlib.sha256(blob).hexdigest()[:16]
    progress = Progress(progress_dir)
    with _client(address, workers, verbose) as client:
        n = max(1, sum(client.nthreads().values()))
        read: dict[str, str] = {}
        with tempfile.TemporaryDirectory(prefix="part-jobs-") as folder:
            # Grouped and cut on disk (``spill.py``), as the in-process executor does.
            by_paper = SortedRuns(folder, "references")
            for batch in _answers(client, _items_task, _batches(list(lines), n), token, blob, "inputs"):
                for item in batch:
                    by_paper.add(paper_key(item), item)
                _count_items(progress, batch)
                read.update({i.uri: i.content_sha256 for i in batch if i.content_sha256})
            chain.collect.setup()
            chain.cut.setup()
            refs = chain.part_jobs_on_disk(by_paper, folder)
            progress.add(groups=len({r.group for r in refs}), parts=len(refs))
            # Each batch of jobs is read back when it is sent, a window of them at a time: the
            # launcher never holds every job (all of the build's references) at once.
            jobs = ([load_job(r) for r in batch] for batch in _batches(refs, n))
            for done in _answers(client, _write_task, jobs, token, blob, "parts", window=WINDOW_PER_SLOT * n):
                progress.add(parts_done=len(done))
        progress.flush()
        return DaskRun(page_sha256=read, workers=len(client.nthreads()), address=client.scheduler.address)


def _pickled(chain: BuildChain) -> bytes:
    import cloudpickle

    return cloudpickle.dumps(chain)


def _count_items(progress, batch: list) -> None:
    """What the steps count where the progress folder is visible (``Progress``), from the
    references a task returned: an input each, reused or computed, paper or dead letter."""
    for ref in batch:
        progress.add(
            inputs=1,
            reused=int(ref.reused),
            papers=int(ref.is_paper),
            dead=int(not ref.is_paper),
            images=int(ref.stats.get("images_read", 0)),
        )


def _batches(items: list, slots: int) -> list[list]:
    """``items`` in order (largest inputs first), in batches small enough that the workers
    end together and the progress line moves, at most ``MAX_BATCH`` each."""
    size = max(1, min(MAX_BATCH, len(items) // max(1, slots * 8)))
    return [items[i : i + size] for i in range(0, len(items), size)]


def _answers(
    client, fn, batches: Iterable[list], token: str, blob: bytes, what: str, window: Optional[int] = None
) -> Iterator[Any]:
    """Each batch's answer as its task finishes; one sentence when the cluster gives up on
    one (Dask retries a task whose worker was lost, up to ``allowed-failures`` times).
    ``window``: at most this many tasks submitted and not finished at a time (the next batch
    is taken from ``batches`` as one finishes); None: every batch at once."""
    from distributed import as_completed

    from sciga.transforms.common.errors import UserError
    from sciga.transforms.common.interrupts import raise_if_received

    pending = iter(batches)
    running = as_completed(loop=client.loop)
    futures: set = set()

    def submit(count: Optional[int]) -> None:
        for batch in itertools.islice(pending, count):
            future = client.submit(fn, batch, token=token, blob=blob, pure=False)
            futures.add(future)
            running.add(future)

    submit(window)
    try:
        for future in running:
            raise_if_received()  # a Ctrl-C that a finalizer swallowed while the launcher waited
            futures.discard(future)
            if window is not None:
                submit(1)  # before the answer is used: the cluster stays busy
            try:
                yield future.result()
            except Exception as e:
                if type(e).__name__ != "KilledWorker":
                    raise
                raise UserError(
                    f"Dask lost the workers that ran a batch of {what} several times over (most often they "
                    "ran out of memory, or their nodes went away); give the workers more memory or run fewer "
                    "per node, and run the same command again: the build resumes where it stopped."
                ) from None
    finally:
        for future in futures:
            future.cancel()


@contextlib.contextmanager
def _client(address: Optional[str], workers: int, verbose: bool):
    """A client of the scheduler at ``address``, or of a local cluster of ``workers``
    processes (one thread each), closed at the end."""
    from sciga.transforms.common.errors import UserError

    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise UserError(
            f"--executor dask needs Dask's distributed scheduler, which is not installed; {INSTALL}."
        ) from None
    with _quiet_dask(verbose):
        if address:
            try:
                client = Client(address, timeout=CONNECT_TIMEOUT, set_as_default=False)
            except (OSError, TimeoutError) as e:
                raise UserError(
                    f"--dask-address {address}: no Dask scheduler answered there ({e}); start one "
                    "(`dask scheduler`, or your cluster's) and give its tcp://HOST:PORT."
                ) from None
            with client:
                yield client
            return
        with _workers_ignore_ctrl_c():
            cluster = LocalCluster(
                n_workers=max(1, workers),
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=logging.DEBUG if verbose else logging.CRITICAL,
            )
        try:
            with Client(cluster, set_as_default=False) as client:
                yield client
        finally:
            cluster.close()


@contextlib.contextmanager
def _workers_ignore_ctrl_c():
    """The local cluster's processes start with Ctrl-C ignored (they inherit it): Ctrl-C is
    this process's, which stops them itself and says one sentence."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def _quiet_dask(verbose: bool):
    """Dask's own log lines (a worker restarted, a scheduler started) only with -v: a lost
    worker is retried, and the build says what matters."""
    names = ("distributed", "dask")
    saved = {n: logging.getLogger(n).level for n in names}
    if not verbose:
        for n in names:
            logging.getLogger(n).setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for n, level in saved.items():
            logging.getLogger(n).setLevel(level)


# ------------------------------------------------------------------ on the workers

_CHAINS: dict[str, BuildChain] = {}  # token -> the chain this worker process set up
_SETUP = threading.Lock()
_RUNNING = threading.Lock()  # a worker with several threads runs one batch at a time: the steps keep state


def _worker_chain(token: str, blob: bytes) -> BuildChain:
    """The build's chain in this worker process, set up on its first task."""
    import pickle

    with _SETUP:
        chain = _CHAINS.get(token)
        if chain is None:
            os.environ.pop("SCIGA_QUICK_EXIT", None)  # a Dask worker ends as Dask ends it
            chain = pickle.loads(blob)
            chain.setup()
            _CHAINS.clear()  # one build at a time: the last build's steps go
            _CHAINS[token] = chain
        return chain


def _items_task(lines: list[str], token: str, blob: bytes) -> list:
    chain = _worker_chain(token, blob)
    with _RUNNING:
        out = [item for line in lines for item in chain.items(line)]
        chain.finish_items()
        return out


def _write_task(jobs: list, token: str, blob: bytes) -> list:
    chain = _worker_chain(token, blob)
    with _RUNNING:
        return chain.write(jobs)


# ------------------------------------------------------------------ the build


def build_on_dask(b: PreparedBuild) -> BuildResult:
    """The build's chain on the cluster (``run_on_dask``), then finalized here as every
    build is."""
    import tempfile

    from sciga.executors.chain import build_chain
    from sciga.executors.finalize import finalize_build
    from sciga.executors.local_run import QuickWorkerExit, ScopedTempDir, WorkerOutput, build_log
    from sciga.transforms.common.progress import ProgressMonitor

    opts = b.opts
    workers = opts.workers or os.cpu_count() or 1
    previous = b.previous_parts()
    chain = build_chain(
        opts,
        b.vision,
        fingerprint=b.fingerprint,
        store_root=b.fin.store_root,
        parts_root=b.fin.parts_root,
        layout=b.layout,
        progress_dir=None,  # counted here, from what the tasks return: the workers may not see this disk
        previous_parts=previous,
        hash_pages=not b.workers_hash,
    )
    where = opts.dask_address or f"a local cluster of {workers} worker processes"
    log.info(
        "building %d inputs into %s on Dask, %s (%s shard groups)",
        len(b.inputs),
        b.out_dir,
        where,
        b.layout.total_groups,
    )
    with ScopedTempDir(b.out_dir) as tmp:
        progress_dir = tempfile.mkdtemp(prefix="progress-", dir=tmp)
        with (
            WorkerOutput(build_log(b.out_dir), enabled=False),
            QuickWorkerExit(False),
            ProgressMonitor(
                progress_dir,
                len(b.inputs),
                b.layout.total_groups,
                quiet=opts.quiet,
                interval=opts.progress_interval,
                workers=None if opts.dask_address else workers,
            ),
        ):
            ran = run_on_dask(
                chain,
                b.input_lines(),
                address=opts.dask_address,
                workers=workers,
                progress_dir=progress_dir,
                verbose=opts.verbose,
            )
    b.fin.run.update(runner=RUNNER, workers=ran.workers)
    counts, manifest = finalize_build(b.fin)
    return b.finished(counts, manifest, ran.page_sha256)
