"""Running a build on this machine: Beam's options for the local runner, the worker
processes (``--workers``), and keeping Beam's local chatter and temporary folders out of
the user's way. A run on another runner (Dataflow) uses none of this (``remote_run.py``)."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import posixpath
import re
import shutil
import sys
import tempfile
import threading
from typing import Optional, TextIO

import fsspec

from sciga.transforms.common.environ import restore_environ
from sciga.transforms.common.errors import exception_chain

PAPERS_PER_WORKER_START = 16  # starting a worker process costs about what parsing this many papers does


def default_workers(n_inputs: int, warm: bool = False) -> int:
    """Every core, but no more worker processes than the inputs can keep busy. ``warm``:
    workers start warm (``warm_workers.py``), at the cost of a fork: one per input to
    compute pays (10 of 1,000 pages changed: 8.7 to 9.3 s with 2 warm workers, 10.7 s in
    one process; 1 of 1,000: a wash, so one input runs in this process)."""
    per_worker = 1 if warm else PAPERS_PER_WORKER_START
    return max(1, min(os.cpu_count() or 1, n_inputs // per_worker))


def pipeline_options(beam_args: Optional[list[str]], workers: Optional[int]):
    """Beam options: the DirectRunner unless told otherwise, with ``--workers`` processes."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions

    args = list(beam_args or [])
    options = PipelineOptions(args)
    std = options.view_as(StandardOptions)
    if not std.runner:
        std.runner = "DirectRunner"
    direct = options.view_as(DirectOptions)
    n = workers if workers is not None else (os.cpu_count() or 1)
    if std.runner in ("DirectRunner", "PortableRunner") and not any(a.startswith("--direct_num_workers") for a in args):
        direct.direct_num_workers = max(1, n)
        if not any(a.startswith("--direct_running_mode") for a in args):
            direct.direct_running_mode = "multi_processing" if n > 1 else "in_memory"
    if std.runner == "PortableRunner":
        from apache_beam.options.pipeline_options import PortableOptions

        port = options.view_as(PortableOptions)
        if port.job_endpoint == "embed" and not port.environment_type:
            port.environment_type = "LOOPBACK"
    debug = options.view_as(beam.options.pipeline_options.WorkerOptions)
    if not any(a.startswith("--default_sdk_harness_log_level") for a in args):
        debug.default_sdk_harness_log_level = "WARNING"
    return options, std.runner


def local_runner(options, runner_name: str, worker_command: Optional[str] = None):
    """Beam's DirectRunner first tries the Prism runner, which downloads a binary from the
    internet and runs the job elsewhere; a build on "DirectRunner" means the in-process Fn
    API runner (in-memory or multi-processing), made here the way the DirectRunner makes it.
    ``worker_command``: the command line that starts a worker process of a multi-processing
    run (``warm_workers.WarmWorkers.command``) instead of Beam's. Other runners are left to Beam."""
    if runner_name != "DirectRunner":
        return None
    from apache_beam.portability.api import beam_provision_api_pb2
    from apache_beam.runners.portability.fn_api_runner import fn_runner
    from apache_beam.runners.portability.portable_runner import JobServiceHandle

    encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
    info = fn_runner.ExtendedProvisionInfo(beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded))
    if worker_command is None:
        return fn_runner.FnApiRunner(provision_info=info)
    return _runner_with_worker_command(fn_runner.FnApiRunner, worker_command, info)


def _runner_with_worker_command(base, command: str, info):
    """An Fn API runner whose worker processes start with ``command``. Its
    ``run_pipeline`` picks the subprocess environment from the running mode, with Beam's
    own command line for "multi_processing"; the mode is hidden from it while it runs (the
    mode is read there alone), so the environment given here stays."""
    from apache_beam.options.pipeline_options import DirectOptions
    from apache_beam.transforms.environments import SubprocessSDKEnvironment

    class RunnerWithWorkerCommand(base):
        def run_pipeline(self, pipeline, opts):
            direct = opts.view_as(DirectOptions)
            mode, direct.direct_running_mode = direct.direct_running_mode, "multi_processing_with_worker_command"
            try:
                return super().run_pipeline(pipeline, opts)
            finally:
                direct.direct_running_mode = mode

    return RunnerWithWorkerCommand(
        default_environment=SubprocessSDKEnvironment.from_command_string(command_string=command), provision_info=info
    )


def clean_stale_staging(out_dir: str, keep: Optional[str]) -> None:
    """Staging folders of earlier runs that were killed: their parts are of no use (the
    results they were made from are in the store). ``.staging`` itself goes when it is empty
    (``keep=None`` removes every run's folder: the build holds the output lock)."""
    fs, root = fsspec.core.url_to_fs(posixpath.join(out_dir.rstrip("/"), ".staging"))
    if not fs.isdir(root):
        return
    for p in fs.ls(root, detail=False):
        if posixpath.basename(p.rstrip("/")) != keep:
            fs.rm(p, recursive=True)
    remove_if_empty(fs, root)


def remove_if_empty(fs, path: str) -> None:
    """Remove folder ``path`` if nothing is in it (object stores have no empty folders)."""
    try:
        if fs.isdir(path) and not fs.ls(path, detail=False):
            fs.rmdir(path)
    except (FileNotFoundError, OSError):
        pass


class WorkerOutput:
    """Local worker processes write Beam's start-up chatter straight to file descriptor 2.
    While the pipeline runs, fd 2 goes to ``<out>/.sciga/logs/build.log`` instead, and the
    progress line keeps the real stderr; ``--verbose`` leaves everything where it was. A
    build in this process alone (one worker) has no worker output: its log records go to
    build.log as well as to stderr, so the file is there after every local build.

    fd 2 is a pipe, drained into the log by a thread of this process, never the log file
    itself: on a full disk a write to the file fails, and a Beam worker whose ``print`` of a
    failed bundle's traceback to stderr raises never reports the failure, so the build hung.
    Writes to the pipe always succeed; what the disk refuses is dropped from the log."""

    def __init__(self, log_path: Optional[str], enabled: bool):
        self.log_path = log_path
        self.enabled = enabled and log_path is not None
        self.stream: TextIO = sys.stderr
        self._handler: Optional[logging.Handler] = None
        self.lost = False  # the log could not be written (a full disk): some worker output is missing

    def __enter__(self):
        if not self.enabled:
            if self.log_path is not None:
                self._handler = _log_file_handler(self.log_path)
            return self
        assert self.log_path is not None  # enabled
        sys.stderr.flush()
        os.makedirs(os.path.dirname(self.log_path), exist_ok=True)
        self._log = open(self.log_path, "ab", buffering=0)
        read_end, write_end = os.pipe()
        self._saved = os.dup(2)
        self.stream = os.fdopen(os.dup(self._saved), "w", buffering=1)
        os.dup2(write_end, 2)
        os.close(write_end)
        self._drain = threading.Thread(target=self._copy, args=(read_end,), name="sciga-worker-output", daemon=True)
        self._drain.start()
        return self

    def _copy(self, read_end: int) -> None:
        try:
            while True:
                chunk = os.read(read_end, 1 << 16)
                if not chunk:
                    return
                if not self.lost:
                    try:
                        self._log.write(chunk)
                    except OSError:
                        self.lost = True  # keep draining: a worker must never block on stderr
        finally:
            os.close(read_end)

    def __exit__(self, exc_type, exc, tb):
        if not self.enabled:
            if self._handler is not None:
                logging.getLogger().removeHandler(self._handler)
                self._handler.close()
            return False
        sys.stderr.flush()
        os.dup2(self._saved, 2)  # our last write end closes: the drain sees the end once the workers are gone
        os.close(self._saved)
        self._drain.join(timeout=5)
        try:
            self._log.close()
        except OSError:
            pass
        self.stream.close()
        if exc_type is not None and exc_type is not KeyboardInterrupt and not (exc and no_space_left(exc)):
            print(f"sciga build: the pipeline failed; worker output is in {self.log_path}", file=sys.stderr)
        return False


class _DroppingFileHandler(logging.FileHandler):
    """A log file that drops what the disk refuses: on a full disk, logging's default
    ``handleError`` would print a traceback per record to stderr."""

    def handleError(self, record: logging.LogRecord) -> None:
        pass


def _log_file_handler(path: str) -> Optional[logging.Handler]:
    """The root logger's records, from now on, also appended to ``path`` (with a first line
    saying which run they belong to); None when the log cannot be written (a full disk)."""
    import time

    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        handler = _DroppingFileHandler(path, encoding="utf-8")
        handler.stream.write(  # type: ignore[union-attr]  # opened: delay=False
            f"--- sciga build in this process, {time.strftime('%Y-%m-%d %H:%M:%S')}: warnings and "
            "errors (everything with -v)\n"
        )
        handler.flush()
    except OSError:
        return None
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(handler)
    return handler


# Python writes "[Errno 28] No space left on device"; Arrow's own file I/O (local part
# files) raises an OSError without errno whose text says "[errno 28] No space left on device".
_NO_SPACE_RE = re.compile(r"\[errno (?:28\] No space left on device|122\] Disk quota exceeded)", re.IGNORECASE)


def no_space_left(exc: BaseException) -> bool:
    """A full disk anywhere in ``exc``'s chain, raised here or in a worker process (whose
    failure reaches the launcher as the text of its traceback)."""
    for e in exception_chain(exc):
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if _NO_SPACE_RE.search(str(e)):
            return True
    return False


def was_interrupted(exc: BaseException) -> bool:
    """Ctrl-C, which Beam's in-process runner re-raises as ``RuntimeError("KeyboardInterrupt
    [while running ...]")`` from the thread that ran the bundle."""
    for e in exception_chain(exc):
        if isinstance(e, KeyboardInterrupt) or (isinstance(e, RuntimeError) and str(e).startswith("KeyboardInterrupt")):
            return True
    return False


def disk_full_sentence(out_dir: str) -> str:
    """One sentence for a build stopped by a full disk: which disk, what is kept, what to do."""
    from sciga.transforms.common.storage import is_remote

    where = out_dir
    if is_remote(out_dir) or _free_bytes(out_dir) > 64 * 1024 * 1024:
        where = f"the temporary folder {tempfile.gettempdir()} (TMPDIR)"
    return (
        f"no space left on {where}: the disk is full, so the build stopped; the previous build in {out_dir} is "
        "intact and the papers finished so far are kept: free some space (or set TMPDIR / give --output on a "
        "larger disk) and run the same command again to resume."
    )


def _free_bytes(path: str) -> int:
    while path and not os.path.exists(path):
        path = os.path.dirname(path.rstrip("/"))
    try:
        st = os.statvfs(path or ".")
    except OSError:
        return 0
    return st.f_bavail * st.f_frsize


class ScopedTempDir:
    """Beam's local runners make temporary folders (staging, job servers) and do not always
    remove them. Everything ``tempfile`` makes during the run goes into one folder of this
    build (workers inherit it through TMPDIR), which is removed afterwards.

    A killed build cannot remove its folder; with ``owner`` (the output folder) the folder
    is named ``sciga-build-<hash of owner>-*``, and the next build of the same output (which
    holds the output lock, so no other build of it is running) removes those left behind."""

    PREFIX = "sciga-build-"

    def __init__(self, owner: Optional[str] = None):
        self.owner = owner

    def __enter__(self) -> str:
        prefix = self.PREFIX
        if self.owner is not None:
            prefix += hashlib.sha256(self.owner.encode("utf-8", "surrogateescape")).hexdigest()[:12] + "-"
            remove_left_behind(prefix)
        self.path = tempfile.mkdtemp(prefix=prefix)
        self.saved = (tempfile.tempdir, os.environ.get("TMPDIR"))
        tempfile.tempdir = self.path
        os.environ["TMPDIR"] = self.path
        return self.path

    def __exit__(self, *exc):
        tempfile.tempdir, env = self.saved
        restore_environ({"TMPDIR": env})
        shutil.rmtree(self.path, ignore_errors=True)
        return False


def remove_left_behind(prefix: str) -> int:
    """Remove ``$TMPDIR/<prefix>*`` folders (left by killed runs); how many."""
    base = tempfile.gettempdir()
    n = 0
    try:
        names = [e.name for e in os.scandir(base) if e.name.startswith(prefix) and e.is_dir(follow_symlinks=False)]
    except OSError:
        return 0
    for name in names:
        shutil.rmtree(os.path.join(base, name), ignore_errors=True)
        n += 1
    return n


class QuickWorkerExit:
    """The worker processes of a local multi-process build end without the interpreter's
    teardown (``quick_exit``): the DirectRunner waits for them one after another, ~0.85 s
    each. They inherit the environment variable set here. A build in this process alone
    runs its stages here: the variable is cleared for it, so the command's own status
    decides how it ends."""

    def __init__(self, enabled: bool):
        self.enabled = enabled

    def __enter__(self):
        from sciga.transforms.common.quick_exit import QUICK_EXIT_ENV

        self.saved = {QUICK_EXIT_ENV: os.environ.get(QUICK_EXIT_ENV)}
        if self.enabled:
            os.environ[QUICK_EXIT_ENV] = "1"
        else:
            os.environ.pop(QUICK_EXIT_ENV, None)
        return self

    def __exit__(self, *exc):
        restore_environ(self.saved)
        return False


class LeanMemory:
    """Allocator settings that keep a local build's resident memory low, for this process
    and the worker processes it starts (they inherit the environment). A build allocates
    and frees many mid-sized buffers from several threads (gRPC, Parquet writers); glibc then
    keeps one arena per thread and pyarrow's jemalloc keeps freed pages, so resident memory
    climbs far above what is live. Measured on 200 image-rich papers with 2 workers: peak RSS
    summed over the process tree 1,527 MB -> 1,274 MB, no slower. Settings the user made
    in the environment win."""

    ENV = {"MALLOC_ARENA_MAX": "2", "ARROW_DEFAULT_MEMORY_POOL": "system"}
    M_ARENA_MAX = -8  # glibc's mallopt parameter

    def __init__(self, enabled: bool = True):
        self.enabled = enabled

    def __enter__(self):
        self.saved_env, self.saved_pool = {}, None
        if not self.enabled:
            return self
        self.saved_env = {k: os.environ.get(k) for k in self.ENV}
        for k, v in self.ENV.items():
            os.environ.setdefault(k, v)
        if self.saved_env["ARROW_DEFAULT_MEMORY_POOL"] is None:
            import pyarrow as pa

            self.saved_pool = pa.default_memory_pool()
            pa.set_memory_pool(pa.system_memory_pool())
        if self.saved_env["MALLOC_ARENA_MAX"] is None and sys.platform.startswith("linux"):
            try:
                import ctypes

                ctypes.CDLL("libc.so.6").mallopt(self.M_ARENA_MAX, int(self.ENV["MALLOC_ARENA_MAX"]))
            except (OSError, AttributeError):  # not glibc (musl, ...): nothing to tune
                pass
        return self

    def __exit__(self, *exc):
        restore_environ(self.saved_env)
        if self.saved_pool is not None:
            import pyarrow as pa

            pa.set_memory_pool(self.saved_pool)
        return False


class QuietBeamLogs:
    """Beam's local runners log worker start/stop chatter at INFO/WARNING on stderr; a
    normal build shows only our own progress and real problems (--verbose shows all)."""

    NAMES = (
        "apache_beam.runners.portability",
        "apache_beam.runners.worker",
        "apache_beam.runners.direct",
        "apache_beam.options.pipeline_options",
        "apache_beam.runners.portability.fn_api_runner",
    )
    # Logs the traceback of every exception that leaves a DoFn, at ERROR, before re-raising
    # it: the build then says what failed in one sentence (a full disk), or re-raises it.
    SILENT = ("apache_beam.runners.common",)

    def __enter__(self):
        self.saved = {}
        if logging.getLogger().getEffectiveLevel() <= logging.INFO:
            return self
        for n in self.NAMES + self.SILENT:
            lg = logging.getLogger(n)
            self.saved[n] = lg.level
            lg.setLevel(logging.CRITICAL if n in self.SILENT else logging.ERROR)
        return self

    def __exit__(self, *exc):
        for n, level in self.saved.items():
            logging.getLogger(n).setLevel(level)
        return False


def build_log(out_dir: str) -> Optional[str]:
    """``OUT/.sciga/logs/build.log`` of a local build; None for a bucket (no log file there)."""
    return os.path.join(out_dir, ".sciga", "logs", "build.log") if "://" not in out_dir else None


@contextlib.contextmanager
def notices_off(enabled: bool, names: tuple = ("sciga",)):
    """With ``enabled`` (``--quiet``), warnings of our own loggers are not shown for the block:
    use it around steps whose warnings are notices about the options chosen, not about the
    user's data. Errors still show."""
    if not enabled:
        yield
        return
    saved = {n: logging.getLogger(n).level for n in names}
    for n in names:
        logging.getLogger(n).setLevel(logging.ERROR)
    try:
        yield
    finally:
        for n, level in saved.items():
            logging.getLogger(n).setLevel(level)
