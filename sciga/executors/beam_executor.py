"""The build's chain (``chain.py``) as an Apache Beam job: locally (the DirectRunner, with
warm worker processes: ``local_run.py``, ``warm_workers.py``) or on Dataflow
(``remote_run.py``, ``flex_template.py``)::

    inputs -> Plan -> Parse -> [RecoverFromTex] -> Link -> Vision -> Write
                  \\ reused ------------------------------------------/

Each step of the chain runs through the one adapter (``stage_fn.StepStage``); the measure
step runs inside the vision stage's transform, which adds the models (RunInference) when
the build has one. Between the write steps Beam groups by paper id and by (config, shard
group) and spreads the parts over the workers; only references travel through those
shuffles, so memory does not grow with the corpus. The Beam-only parts of a build are here
too: fetching ``--ids`` and making pages from e-prints inside the job, reading arXiv's bulk
tars first, and finalizing as the job's last step (``--finalize-in-job``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import posixpath
import tempfile
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Optional

import fsspec

from sciga.executors.finalize import Finalize

if TYPE_CHECKING:
    from sciga.executors.chain import BuildChain
    from sciga.executors.options import BuildOptions, BuildResult
    from sciga.executors.prepare import PreparedBuild
    from sciga.transforms.fetch.beam import FetchPapers
    from sciga.transforms.latexml.pages_from_eprints import PageSourceOptions

log = logging.getLogger("sciga.build")


def build_pipeline(
    p, chain: BuildChain, opts: BuildOptions, *, inputs_file: Optional[str], pages: Optional[PageSourceOptions] = None
):
    """Compose ``chain`` on pipeline ``p``; returns the PCollection of part infos."""
    import apache_beam as beam

    from sciga.executors.beam_write import WriteBuild
    from sciga.transforms.common.dead_letter import DEAD_LETTER_TAG
    from sciga.transforms.common.stage_fn import StepStage
    from sciga.transforms.inputs.plan_step import REUSED
    from sciga.transforms.vision.stage import Vision

    uris, early_refs = _inputs(p, opts, inputs_file, pages)
    plan = uris | "Plan" >> StepStage(chain.plan, REUSED, main="planned")
    works, dead = plan.planned, list[Any]()  # the failures of each stage before Vision
    for label, step in chain.labelled_per_paper()[:-1]:  # the last, measuring images, runs in Vision
        out = works | label >> StepStage(step, DEAD_LETTER_TAG, main="papers")
        works, dead = out.papers, [*dead, out[DEAD_LETTER_TAG]]
    vis = works | "Vision" >> Vision(chain.measure.vision, measure=chain.measure)
    failed = (vis[DEAD_LETTER_TAG], *dead) | "AllFailed" >> beam.Flatten()
    reused = (plan.reused, *early_refs) | "AllReused" >> beam.Flatten()
    return {"works": vis["papers"], "failed": failed, "reused": reused, "annotations": vis["annotations"]} | (
        "Write" >> WriteBuild(chain)
    )


def _inputs(p, opts: BuildOptions, inputs_file: Optional[str], pages: Optional[PageSourceOptions]):
    """(the input URIs, reused references made before planning: the dead letters of --ids
    that could not be fetched and of pages that could not be made)."""
    import apache_beam as beam

    from sciga.transforms.common.dead_letter import DEAD_LETTER_TAG

    early_refs = []
    if opts.fetch_ids and opts.fetch is not None:
        # sciga build --ids: fetch into a store first (same polite client as `sciga fetch`).
        fetched = p | "Ids" >> beam.Create(list(opts.fetch_ids)) | "Fetch" >> fetch_transform(opts)
        uris = fetched.uris | "Spread" >> beam.Reshuffle()
        early_refs.append(fetched[DEAD_LETTER_TAG] | "FetchDeadRefs" >> beam.Map(_fetch_dead_ref))
        return uris, early_refs
    from sciga.transforms.inputs.build_inputs import input_from_line, planned_input_from_line

    uris = (
        p
        | "Inputs" >> beam.io.ReadFromText(inputs_file)
        | "NonEmpty" >> beam.Filter(bool)
        | "Decode" >> beam.Map(input_from_line if pages is not None else planned_input_from_line)
        | "Spread" >> beam.Reshuffle()
    )
    if pages is not None:
        # --html-from latexml|auto: pages made from e-prints (converted once, kept in the build folder).
        from sciga.transforms.latexml.pages_from_eprints import PagesFromEprints

        made = uris | "PagesFromEprints" >> PagesFromEprints(pages)
        uris = made.pages
        early_refs.append(made[DEAD_LETTER_TAG])
    return uris, early_refs


def fetch_transform(opts: BuildOptions) -> FetchPapers:
    from sciga.transforms.fetch.beam import FetchPapers

    f = opts.fetch
    assert f is not None, "fetch_transform is called for --ids only"
    return FetchPapers(
        f.store,
        f.endpoints,
        workers=f.workers,
        max_retries=f.http.max_retries,
        timeout=f.http.timeout,
        backoff=f.http.backoff,
    )


def _fetch_dead_ref(dl):
    from sciga.schemas.build import ResultRef

    return ResultRef(
        uri=dl.input_uri or f"arxiv:{dl.paper_id}", key=None, paper_id=dl.paper_id, is_paper=False, dead=[dl]
    )


def _finalize_after_parts(_written: int, f: Finalize) -> None:
    from sciga.executors.finalize import finalize_build

    finalize_build(f)


def finalize_in_job(parts, f: Finalize):
    """The job's last step: once every part is written (the count of part infos waits for
    all of them), one worker finalizes the build."""
    import apache_beam as beam

    return parts | "PartsWritten" >> beam.combiners.Count.Globally() | "Finalize" >> beam.Map(_finalize_after_parts, f)


def open_bulk(opts: BuildOptions, out_dir: str, inputs: Sequence[str], options, runner: str):
    """Open arXiv's bulk source tars and extract the e-prints of the build's papers into
    ``<out>/.sciga/bulk`` (one verified pass per tar, tars side by side on the workers;
    finished tars are not read again). Returns the ``BulkEprints`` the stages read from."""
    import apache_beam as beam

    from sciga.executors.local_run import local_runner
    from sciga.executors.remote_run import run_outcome
    from sciga.transforms.common.errors import StageError
    from sciga.transforms.common.result_store import store_root
    from sciga.transforms.eprints.bulk_beam import ExtractBulkEprints
    from sciga.transforms.eprints.bulk_reader import BulkEprints
    from sciga.transforms.inputs.build_inputs import input_paper_ids

    assert opts.eprints_bulk, "open_bulk is called for --eprints-bulk only"
    try:
        bulk = BulkEprints.open(opts.eprints_bulk, posixpath.join(store_root(out_dir), "bulk"))
    except StageError as e:
        raise SystemExit(f"sciga build: --eprints-bulk: {e.message}") from None
    wanted = input_paper_ids(inputs)
    plan = bulk.plan(wanted)
    if plan.warning:
        log.warning("%s", plan.warning)
    groups, _ = bulk.manifest.group(wanted)
    todo = sorted((name, pids) for name, pids in groups.items() if bulk.index(name) is None)
    if todo:
        log.info("bulk e-prints: scanning %d tars for %d papers", len(todo), sum(len(v) for _, v in todo))
        with beam.Pipeline(runner=local_runner(options, runner), options=options) as p:
            _ = p | "BulkTars" >> beam.Create(todo) | "Extract" >> ExtractBulkEprints(bulk)
        outcome = run_outcome(getattr(p, "result", None), options, runner)
        if not outcome.completed and outcome.kind != "dry_run":
            # The build reads what this job extracts: it cannot start before that job ended.
            raise SystemExit(
                f"sciga build: --eprints-bulk: the extraction job did not run to completion here "
                f"({outcome.kind}, {outcome.job_id or outcome.template or outcome.state}); run the build "
                "without --no_wait_until_finish / --template_location, or once that job has finished."
            )
    return bulk


def input_list_file(lines: Sequence[str], staging: str) -> str:
    """The input lines as a file in the staging folder (a million URIs inlined with
    beam.Create would exceed Dataflow's job-graph size, a file scales), one JSON string a
    line: any name a file system allows (a newline in it included) comes back as it was."""
    path = posixpath.join(staging, "inputs.jsonl")
    fs, p = fsspec.core.url_to_fs(path)
    fs.makedirs(posixpath.dirname(p), exist_ok=True)
    with fs.open(p, "w", encoding="ascii") as f:
        f.writelines(lines)
    return path


# ------------------------------------------------------------------ running it


def build_on_beam(b: PreparedBuild, beam_args: Optional[list[str]], held: contextlib.ExitStack) -> BuildResult:
    """The build as a Beam job on the runner its flags name (the DirectRunner by default),
    then finalized here (unless the job finalizes itself, or did not run to completion here)."""
    from sciga.executors import warm_workers
    from sciga.executors.local_run import default_workers, pipeline_options
    from sciga.executors.remote_run import LOCAL_RUNNERS

    opts = b.opts
    if b.workers_hash and b.hashes is not None:
        b.hashes.fill({}, opts.parse.max_page_bytes)  # Beam's planner needs them
    n_workers = (
        opts.workers
        if opts.workers is not None
        else default_workers(b.to_compute, warm=warm_workers.available(beam_args))
    )
    warm = None
    if warm_workers.wanted(n_workers, beam_args):
        # Started before Beam is imported: it warms the workers up on the core this process leaves idle.
        from sciga.executors.local_run import LeanMemory
        from sciga.transforms.common.quick_exit import QUICK_EXIT_ENV

        warm = held.enter_context(
            warm_workers.WarmWorkers(
                opts.link.sentencizer, {**LeanMemory.ENV, QUICK_EXIT_ENV: "1"}, quiet=not opts.verbose
            )
        )
    options, runner = pipeline_options(beam_args, n_workers)
    tex, pages = _sources(b, options, runner)
    local = runner in LOCAL_RUNNERS
    inputs_file = None if opts.fetch_ids else input_list_file(b.input_lines(), b.fin.staging)
    previous = b.previous_parts()
    log.info(
        "building %d inputs into %s with %s (%s shard groups)", len(b.inputs), b.out_dir, runner, b.layout.total_groups
    )
    result = _run_job(b, options, runner, warm, tex=tex, pages=pages, inputs_file=inputs_file, previous=previous)
    if warm is not None:
        warm.stop()  # its memory back before finalizing
        b.fin.run["workers_started_warm"] = warm.forked
    return _after_job(b, result, options, runner, local)


def _sources(b: PreparedBuild, options, runner: str) -> tuple[Any, Optional[PageSourceOptions]]:
    """(the TeX options, with arXiv's bulk tars opened for --eprints-bulk; where pages are
    made from e-prints, for --html-from latexml|auto)."""
    opts = b.opts
    tex, pages, bulk = opts.tex, None, None
    if opts.eprints_bulk:
        bulk = open_bulk(opts, b.out_dir, b.inputs, options, runner)
        tex = dataclasses.replace(opts.tex, bulk=bulk)
    if opts.html_from != "ar5iv":
        from sciga.transforms.common.result_store import store_root
        from sciga.transforms.latexml.pages_from_eprints import PageSourceOptions

        pages = PageSourceOptions(
            html_from=opts.html_from,
            converted_root=posixpath.join(store_root(b.out_dir), "latexml"),
            latexml=opts.latexml,
            tex_dirs=tuple(opts.tex.tex_dirs),
            bulk=bulk,
        )
    return tex, pages


def _run_job(b: PreparedBuild, options, runner: str, warm, *, tex, pages, inputs_file, previous):
    """Build the chain and the job, run it; Beam's result (None when there is none)."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import DirectOptions

    from sciga.executors.chain import build_chain
    from sciga.executors.local_run import (
        LeanMemory,
        QuickWorkerExit,
        QuietBeamLogs,
        ScopedTempDir,
        WorkerOutput,
        build_log,
        local_runner,
    )
    from sciga.executors.remote_run import LOCAL_RUNNERS
    from sciga.transforms.common.progress import ProgressMonitor

    opts, local = b.opts, runner in LOCAL_RUNNERS
    direct = options.view_as(DirectOptions)
    multi = local and direct.direct_running_mode != "in_memory"
    b.fin.run.update(runner=runner, workers=direct.direct_num_workers)
    with ScopedTempDir(b.out_dir) as tmp:
        progress_dir = tempfile.mkdtemp(prefix="progress-", dir=tmp) if local else None
        chain = build_chain(
            opts,
            b.vision,
            fingerprint=b.fingerprint,
            store_root=b.fin.store_root,
            parts_root=b.fin.parts_root,
            layout=b.layout,
            progress_dir=progress_dir,
            previous_parts=previous,
            tex=tex,
        )
        with (
            WorkerOutput(build_log(b.out_dir), enabled=multi and not opts.verbose) as out,
            QuietBeamLogs(),
            LeanMemory(local),
            QuickWorkerExit(multi),
            ProgressMonitor(
                progress_dir or tmp,
                len(b.inputs),
                b.layout.total_groups,
                quiet=opts.quiet or not local,
                interval=opts.progress_interval,
                stream=out.stream,
                workers=direct.direct_num_workers,
            ),
        ):
            runner_obj = local_runner(options, runner, warm.command if warm is not None and multi else None)
            with beam.Pipeline(runner=runner_obj, options=options) as p:
                parts = build_pipeline(p, chain, opts, inputs_file=inputs_file, pages=pages)
                if opts.finalize_in_job:
                    finalize_in_job(parts, b.fin)
    return getattr(p, "result", None)


def _after_job(b: PreparedBuild, result, options, runner: str, local: bool) -> BuildResult:
    """What the job left: finalized here; or read back when it finalized itself; or, when
    it did not run to completion here, which job or template it made."""
    from sciga.executors.finalize import finalize_build
    from sciga.executors.local_run import remove_if_empty
    from sciga.executors.options import BuildResult
    from sciga.executors.prepare import record_pages
    from sciga.transforms.write import manifest as mf

    opts = b.opts
    outcome = run_outcome_of(result, options, runner, b.fin.staging)
    if opts.finalize_in_job:
        outcome = dataclasses.replace(outcome, finalizes_itself=True)
    if not outcome.completed:
        # A dry run, a template, a job still running (or stopped): no part files to finalize,
        # and the result store is left as it is. A dry run leaves nothing behind; the others
        # keep the staging folder, which the job reads (input list, GA manifest).
        fs, staging = fsspec.core.url_to_fs(b.fin.staging)
        if outcome.kind == "dry_run" and fs.exists(staging):
            fs.rm(staging, recursive=True)
            remove_if_empty(fs, posixpath.dirname(staging.rstrip("/")))
        return BuildResult(
            out_dir=b.out_dir,
            counts=mf.BuildCounts(inputs=len(b.inputs)),
            manifest=None,
            seconds=time.time() - b.started,
            outcome=outcome,
        )
    if opts.finalize_in_job:  # the job did it: read what it wrote
        manifest = mf.read_manifest(b.out_dir)
        counts = mf.counts_from_manifest(manifest)
        record_pages(b.fin.store_root, None, b.signature)
        return BuildResult(out_dir=b.out_dir, counts=counts, manifest=manifest, seconds=time.time() - b.started)
    counts, manifest = finalize_build(b.fin)
    if not local:
        b.hashes = None  # the record vouches for local pages only
    return b.finished(counts, manifest)


def run_outcome_of(result, options, runner: str, staging: str):
    from sciga.executors.remote_run import run_outcome

    return run_outcome(result, options, runner, staging=staging)
