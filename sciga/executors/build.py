"""Running a build: checks before anything is written, the build prepared
(``prepare.py``), the executor chosen, and the chain run by it.

    --executor auto        in this process and processes forked from it (``in_process.py``)
                           when nothing needs Beam, else Beam's runner (``beam_executor.py``)
    --executor in-process  the former; one sentence when the build needs Beam
    --executor beam        Beam's runner (the DirectRunner unless Beam flags name another)
    --executor dask        a Dask cluster (``dask_executor.py``)

Every executor runs the same chain (``chain.py``) and is finalized the same way
(``finalize.py``), so every executor gives the same bytes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Optional

from sciga.executors.options import BuildOptions, BuildResult
from sciga.executors.prepare import PreparedBuild, prepare_build


def run_build(opts: BuildOptions, beam_args: Optional[Sequence[str]] = None) -> BuildResult:
    """The build, holding its output folder's lock (``OutputLock``) from before its first
    write there to its end; what it holds is given back however it ends."""
    with contextlib.ExitStack() as held:
        return _run_build(opts, list(beam_args or []), held)


def _run_build(opts: BuildOptions, beam_args: list[str], held: contextlib.ExitStack) -> BuildResult:
    # Apache Beam is imported only once the build knows it needs it (~3 s).
    from sciga.executors.remote_run import check_build_locations, runner_of

    check_sentencizer(opts.link.sentencizer)
    # Buckets exist and may be used; a remote runner is handed no local path (workers cannot see it).
    check_build_locations(opts.locations or default_locations(opts), runner_of(beam_args))
    check_executor(opts, beam_args)
    prepared = prepare_build(opts, beam_args, held)
    if isinstance(prepared, BuildResult):
        return prepared  # up to date: nothing to run
    return run_executor(prepared, beam_args, held)


def run_executor(b: PreparedBuild, beam_args: list[str], held: contextlib.ExitStack) -> BuildResult:
    """The chosen executor runs the build."""
    from sciga.executors import in_process
    from sciga.executors.choice import eligible

    if b.opts.executor == "dask":
        from sciga.executors.dask_executor import build_on_dask

        _refuse_beam_only(b, beam_args, "dask")
        return build_on_dask(b)
    n_here = in_process.workers_for(b.opts.workers, len(b.inputs), b.to_compute)
    if eligible(b.opts, b.vision, beam_args) and (n_here == 1 or in_process.can_fork()):
        # Nothing that needs Beam: computed and written here and in processes forked from here.
        return in_process.build_in_process(b, n_here)
    if b.opts.executor == "in-process":
        _refuse_beam_only(b, beam_args, "in-process")
    from sciga.executors.beam_executor import build_on_beam

    return build_on_beam(b, beam_args, held)


def check_executor(opts: BuildOptions, beam_args: Sequence[str]) -> None:
    """One sentence, before anything is written, for an executor that cannot run this build
    as far as the flags tell (``_refuse_beam_only`` checks the rest once the models are known)."""
    from sciga.executors.options import EXECUTORS

    if opts.executor not in EXECUTORS:
        raise SystemExit(f"sciga build: --executor {opts.executor}: give one of {', '.join(EXECUTORS)}.")
    if opts.dask_address and opts.executor != "dask":
        raise SystemExit("sciga build: --dask-address names a Dask scheduler; give it with --executor dask.")
    if opts.executor == "dask":
        from sciga.executors.dask_executor import INSTALL, dask_available

        if not dask_available():
            raise SystemExit(
                f"sciga build: --executor dask needs Dask's distributed scheduler, which is not installed; {INSTALL}."
            )
        if opts.dask_address and "://" not in opts.output and not opts.output.startswith("/"):
            raise SystemExit(
                f"sciga build: --output {opts.output} is a relative path, but the workers of {opts.dask_address} "
                "resolve it in their own folder; give an absolute path on a shared file system, or gs://..."
            )


def _refuse_beam_only(b: PreparedBuild, beam_args: Sequence[str], executor: str) -> None:
    from sciga.executors.chain import needs_beam
    from sciga.executors.in_process import can_fork

    what = needs_beam(b.opts, b.vision, beam_args)
    if what is None and executor == "in-process" and not can_fork() and (b.opts.workers or 1) > 1:
        what = "several worker processes on this system (forking is Linux-only)"
    if what is not None:
        raise SystemExit(
            f"sciga build: --executor {executor} cannot run this build: {what} needs Apache Beam; "
            "leave --executor out (or give --executor beam)."
        )


def check_sentencizer(name: str) -> None:
    """Fail before the build starts when the requested sentence model is not there."""
    from sciga.transforms.link.sentences import NONE, PYSBD, load_pipeline

    if name in (PYSBD, NONE):
        return  # shipped with the project
    try:
        load_pipeline(name)
    except ValueError as e:
        raise SystemExit(f"sciga build: --sentencizer: {e}.") from None


def default_locations(opts: BuildOptions) -> list[tuple[str, str]]:
    """(flag, path) of the places a build reads or writes, where the caller named none."""
    places = [("--output", opts.output)] + [("--input", s) for s in opts.specs]
    if opts.parse.metadata_dir:
        places.append(("--metadata", opts.parse.metadata_dir))
    if opts.fetch is not None:
        places.append(("--fetch-cache", opts.fetch.store))
    if opts.eprints_bulk:
        places.append(("--eprints-bulk", opts.eprints_bulk))
    return places + [("--tex-input", t) for t in opts.tex.tex_dirs]
