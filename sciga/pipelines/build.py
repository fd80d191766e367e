"""`sciga build`: LaTeXML pages -> typed Parquet shards, dead letters and a manifest.

Composition only. One composite transform per stage, in the order a paper meets them::

    list + plan inputs -> parse -> recover figures from TeX -> link -> vision -> write
    (transforms/inputs)   (parse)  (tex_recovery)               (link)  (vision)  (write)

Each stage passes ``PaperWork`` items on and sends failures to its ``dead_letter`` output.
Results are kept in a result store under the build folder and only references travel
through shuffles, so memory does not grow with the corpus; unchanged papers are reused
from the store (an incremental build), and a killed build resumes where it stopped. The
shard layout is fixed from the number of inputs before the pipeline starts; shard groups
write part files into a staging folder that replaces ``<out>/data`` only when the whole
pipeline succeeded. A build with only a few inputs to compute runs the same steps in this
process instead, without starting Beam (``in_process.py``), and is finalized the same way.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import posixpath
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

import fsspec

from sciga.pipelines import warm_workers
from sciga.pipelines.arg_types import positive_float, positive_int
from sciga.pipelines.cli_logging import notices_off
from sciga.pipelines.local_run import (
    PAPERS_PER_WORKER_START,
    LeanMemory,
    QuickWorkerExit,
    QuietBeamLogs,
    ScopedTempDir,
    WorkerOutput,
    clean_stale_staging,
    default_workers,
    local_runner,
    pipeline_options,
    remove_if_empty,
)
from sciga.pipelines.paths import check_output_folder
from sciga.pipelines.remote_run import LOCAL_RUNNERS
from sciga.transforms.common.quick_exit import QUICK_EXIT_ENV
from sciga.transforms.inputs.build_inputs import input_paper_ids, list_build_inputs
from sciga.transforms.write import manifest as mf
from sciga.transforms.write.output_lock import OutputLock
from sciga.transforms.write.shard_names import DEFAULT_ROWS_PER_SHARD

if TYPE_CHECKING:  # option types of the stages; imported where they are built (start-up time)
    from sciga.pipelines.remote_run import RunOutcome
    from sciga.pipelines.sources_options import IdFetchOptions
    from sciga.transforms.latexml.convert import LatexmlOptions
    from sciga.transforms.link.options import LinkOptions
    from sciga.transforms.parse.options import ParseOptions
    from sciga.transforms.tex_recovery.options import TexOptions
    from sciga.transforms.vision.options import VisionOptions

log = logging.getLogger("sciga.build")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    from sciga.pipelines.sources_options import add_source_build_arguments
    from sciga.pipelines.vision import add_vision_arguments

    ap.add_argument(
        "--input",
        action="extend",
        nargs="+",
        default=[],
        metavar="PATH_OR_GLOB",
        help="folder, glob or file of LaTeXML .html / .html.gz pages (any fsspec path); repeatable",
    )
    ap.add_argument("--output", required=True, metavar="DIR", help="build folder (local, gs://...)")
    ap.add_argument("--sample", action="store_true", help="build the embedded sample corpus (adds it to --input)")
    ap.add_argument(
        "--metadata",
        default=None,
        metavar="DIR",
        help="folder of <stem>.meta.json metadata sidecars (default: beside each page)",
    )
    ap.add_argument(
        "--max-page-mb",
        type=positive_float,
        default=128,
        metavar="MB",
        help="pages above this size are dead-lettered (default %(default)s)",
    )
    ap.add_argument(
        "--max-image-mb",
        type=positive_int,
        default=64,
        metavar="MB",
        help="image files above this size are not embedded (default %(default)s)",
    )
    ap.add_argument(
        "--papers-per-shard",
        type=positive_int,
        default=DEFAULT_ROWS_PER_SHARD["papers"],
        metavar="N",
        help="most papers in one papers shard (default: %(default)s)",
    )
    ap.add_argument(
        "--figures-per-shard",
        type=positive_int,
        metavar="N",
        default=DEFAULT_ROWS_PER_SHARD["figures"],
        help="most figure rows in one figures shard (default: %(default)s)",
    )
    ap.add_argument("--no-images", action="store_true", help="do not embed image bytes in the figures config")
    ap.add_argument("--source", default=None, help="provenance source label (default: detected from the page)")
    ap.add_argument(
        "--sentencizer",
        default="pysbd",
        metavar="NAME",
        help="sentences of figure mentions: pysbd (scispaCy's pysbd_sentencizer, default), an installed "
        "scispaCy/spaCy model such as en_core_sci_sm or a pipeline folder, or none",
    )
    run = ap.add_argument_group("running the build")
    run.add_argument(
        "--workers",
        type=positive_int,
        default=None,
        metavar="N",
        help="local worker processes (default: a small build, such as a few pages or a few changed among a few "
        f"hundred, runs in this process; a larger one uses every core, {os.cpu_count() or 1} here). On Linux a "
        "local build that runs no model runs without Apache Beam, its workers forked from this process; otherwise they are workers of Beam's runner (started warm on Linux, one per "
        f"{PAPERS_PER_WORKER_START} inputs elsewhere); 1 runs in this process",
    )
    run.add_argument(
        "--rebuild",
        action="store_true",
        help="recompute every paper; by default papers whose inputs, options and builder are unchanged "
        "since the last build into OUTPUT are reused, and a killed build resumes",
    )
    run.add_argument(
        "--finalize-in-job",
        action="store_true",
        help="the job itself moves the shards into place and writes manifest.json and the card when its "
        "last part is written (a Dataflow Flex Template, or a job submitted without waiting); by "
        "default the launcher does, once the job has finished",
    )
    run.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    run.add_argument(
        "--progress-interval",
        type=positive_float,
        default=10.0,
        metavar="SECONDS",
        help="when stderr is not a terminal, print a progress line this often (default: %(default)s)",
    )
    add_vision_arguments(ap)
    add_source_build_arguments(ap)


# ------------------------------------------------------------------ typed options


@dataclass(frozen=True)
class BuildOptions:
    """Everything a build needs, resolved from the command line once."""

    output: str
    parse: ParseOptions
    tex: TexOptions
    link: LinkOptions
    vision: VisionOptions
    specs: tuple[str, ...] = ()
    fetch_ids: tuple[str, ...] = ()
    fetch: Optional[IdFetchOptions] = None  # how the --ids are fetched (set with fetch_ids)
    papers_per_shard: int = DEFAULT_ROWS_PER_SHARD["papers"]
    figures_per_shard: int = DEFAULT_ROWS_PER_SHARD["figures"]
    no_images: bool = False
    html_from: str = "ar5iv"  # ar5iv | latexml | auto (pages made from e-prints)
    eprints_bulk: Optional[str] = None  # arXiv's bulk source tars
    latexml: LatexmlOptions = field(default_factory=lambda: _default_latexml())
    workers: Optional[int] = None
    rebuild: bool = False
    quiet: bool = False
    verbose: bool = False
    progress_interval: float = 10.0
    finalize_in_job: bool = False
    recorded: dict = field(default_factory=dict)  # the options as given, for the manifest

    def plan_options(self, *, store_root: str, fingerprint: str, progress_dir: Optional[str], hash_pages: bool = True):
        """The planner's options (``inputs/plan_step.py: PlanOptions``), for either executor."""
        from sciga.transforms.inputs.plan_step import PlanOptions

        return PlanOptions(
            store_root=store_root,
            fingerprint=fingerprint,
            rebuild=self.rebuild,
            max_page_bytes=self.parse.max_page_bytes,
            progress_dir=progress_dir,
            hash_pages=hash_pages,
        )

    def write_options(
        self, *, store_root: str, parts_root: str, layout, progress_dir: Optional[str], previous_parts: Optional[str]
    ):
        """The shard writer's options (``write/steps.py: WriteOptions``), for either executor."""
        from sciga.transforms.write.steps import WriteOptions

        return WriteOptions(
            store_root=store_root,
            parts_root=parts_root,
            layout=layout,
            no_images=self.no_images,
            max_image_bytes=self.vision.max_image_bytes,
            progress_dir=progress_dir,
            previous_parts=previous_parts,
        )


def _default_latexml() -> LatexmlOptions:
    from sciga.transforms.latexml.convert import LatexmlOptions

    return LatexmlOptions()


def build_options_from_args(args: argparse.Namespace) -> BuildOptions:
    from sciga.pipelines.sources_options import (
        id_fetch_options_from_args,
        latexml_options_from_args,
        prepare_source_args,
        tex_options_from_args,
    )
    from sciga.pipelines.vision import vision_options_from_args
    from sciga.transforms.link.options import LinkOptions
    from sciga.transforms.parse.options import ParseOptions

    specs = list(args.input)
    if args.sample:
        from sciga.samples import sample_dir

        specs.append(sample_dir())
        args.metadata = args.metadata or sample_dir("meta")
    prepare_source_args(args)
    recorded = {
        k: v
        for k, v in sorted(vars(args).items())
        if k
        not in (
            "func",
            "command",
            "input",
            "output",
            "fetch_ids",
            "ids",
            "id_file",
            "beam_flags",
            "forwards_to",
            "verbose",
            "quiet",
            "progress_interval",
            "finalize_in_job",
            "module",
            "started",
        )
    }  # not build options
    return BuildOptions(
        output=args.output,
        specs=tuple(specs),
        fetch_ids=tuple(args.fetch_ids),
        fetch=id_fetch_options_from_args(args),
        parse=ParseOptions(
            max_page_bytes=int(args.max_page_mb * 1024 * 1024), source=args.source, metadata_dir=args.metadata
        ),
        tex=tex_options_from_args(args),
        link=LinkOptions(sentencizer=args.sentencizer),
        vision=vision_options_from_args(args),
        papers_per_shard=args.papers_per_shard,
        figures_per_shard=args.figures_per_shard,
        no_images=args.no_images,
        html_from=args.html_from,
        eprints_bulk=args.eprints_bulk,
        latexml=latexml_options_from_args(args),
        workers=args.workers,
        rebuild=args.rebuild,
        quiet=args.quiet,
        progress_interval=args.progress_interval,
        recorded=recorded,
        finalize_in_job=bool(vars(args).get("finalize_in_job")),
        verbose=bool(vars(args).get("verbose")),  # the global -v of the `sciga` parser, not a build flag
    )


def results_fingerprint(opts: BuildOptions, vision) -> str:
    """What, besides a paper's own inputs, its result depends on: the code and every option
    that changes results (not: workers, shard sizes, progress...)."""
    from sciga.transforms.common.result_store import code_fingerprint

    blob = json.dumps(
        {
            "code": code_fingerprint(),
            "parse": dataclasses.asdict(opts.parse),
            "tex": dataclasses.asdict(opts.tex),
            "link": dataclasses.asdict(opts.link),
            "vision": vision.fingerprint_fields(),
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


# ------------------------------------------------------------------ composition


@dataclass
class BuildResult:
    out_dir: str
    counts: mf.BuildCounts
    manifest: dict
    seconds: float
    # Set when the runner did not run the job to completion here (dry run, template, a job
    # submitted without waiting): nothing was finalized, ``counts`` are empty.
    outcome: Optional[RunOutcome] = None
    up_to_date: bool = False  # nothing had changed since the last build: nothing was written


def _input_list_file(inputs: Sequence[str], staging: str, hashes=None) -> str:
    """The input URIs as a file in the staging folder (a million URIs inlined with
    beam.Create would exceed Dataflow's job-graph size, a file scales), one JSON string a
    line: any name a file system allows (a newline in it included) comes back as it was.
    Largest pages first (``largest_first``), so that local workers share the work evenly."""
    from sciga.transforms.inputs.build_inputs import input_list_lines, largest_first

    path = posixpath.join(staging, "inputs.jsonl")
    fs, p = fsspec.core.url_to_fs(path)
    fs.makedirs(posixpath.dirname(p), exist_ok=True)
    sizes = {u: st.size for u, st in hashes.stats.items()} if hashes is not None else {}
    with fs.open(p, "w", encoding="ascii") as f:
        f.writelines(input_list_lines(largest_first(inputs, sizes), hashes.sha256 if hashes is not None else None))
    return path


def _stage_previous_parts(out_dir: str, staging: str) -> Optional[str]:
    """The previous build's shards by part fingerprint, staged for the shard writers."""
    from sciga.transforms.write.finalize import previous_parts

    prev = previous_parts(out_dir)
    if not prev:
        return None
    path = posixpath.join(staging, "previous_parts.json")
    fs, p = fsspec.core.url_to_fs(path)
    fs.makedirs(posixpath.dirname(p), exist_ok=True)
    with fs.open(p, "w") as f:
        f.write(json.dumps(prev, sort_keys=True))
    return path


def _fetch_dead_ref(dl):
    from sciga.schemas.build import ResultRef

    return ResultRef(
        uri=dl.input_uri or f"arxiv:{dl.paper_id}", key=None, paper_id=dl.paper_id, is_paper=False, dead=[dl]
    )


def build_pipeline(
    p,
    opts: BuildOptions,
    *,
    inputs_file: Optional[str],
    vision,
    layout,
    fingerprint: str,
    store_root: str,
    parts_root: str,
    progress_dir: Optional[str],
    tex=None,
    pages=None,
    previous_parts: Optional[str] = None,
):
    """Compose the stages on pipeline ``p``; returns the PCollection of part infos."""
    import apache_beam as beam

    from sciga.transforms.common.dead_letter import DEAD_LETTER_TAG
    from sciga.transforms.common.progress import Progress
    from sciga.transforms.inputs.plan import PlanInputs
    from sciga.transforms.link.stage import LinkPapers
    from sciga.transforms.parse.stage import ParsePapers
    from sciga.transforms.tex_recovery.stage import RecoverFiguresFromTex
    from sciga.transforms.vision.options import GAIndex
    from sciga.transforms.vision.stage import Vision
    from sciga.transforms.write.stage import WriteBuild

    early_refs = []
    if opts.fetch_ids and opts.fetch is not None:
        # sciga build --ids: fetch into a store first (same polite client as `sciga fetch`).
        from sciga.pipelines.sources_options import fetch_transform

        fetched = p | "Ids" >> beam.Create(list(opts.fetch_ids)) | "Fetch" >> fetch_transform(opts.fetch)
        uris = fetched.uris | "Spread" >> beam.Reshuffle()
        early_refs.append(fetched[DEAD_LETTER_TAG] | "FetchDeadRefs" >> beam.Map(_fetch_dead_ref))
    else:
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

    checkers = {"ga": GAIndex(vision.ga_entries_uri)} if vision.ga_entries_uri else {}
    plan = uris | "Plan" >> PlanInputs(
        opts.plan_options(store_root=store_root, fingerprint=fingerprint, progress_dir=progress_dir),
        checkers,
    )
    parsed = plan.planned | "Parse" >> ParsePapers(opts.parse, fingerprint)
    works, dead = parsed.papers, [parsed[DEAD_LETTER_TAG]]
    tex = tex or opts.tex
    if tex.enabled:
        recovered = works | "RecoverFromTex" >> RecoverFiguresFromTex(tex)
        works, dead = recovered["papers"], dead + [recovered[DEAD_LETTER_TAG]]
    linked = works | "Link" >> LinkPapers(opts.link)
    seen = linked[DEAD_LETTER_TAG]
    vis = linked.papers | "Vision" >> Vision(vision, Progress(progress_dir))
    failed = (vis[DEAD_LETTER_TAG], seen, *dead) | "AllFailed" >> beam.Flatten()
    reused = (plan.reused, *early_refs) | "AllReused" >> beam.Flatten()
    write = opts.write_options(
        store_root=store_root,
        parts_root=parts_root,
        layout=layout,
        progress_dir=progress_dir,
        previous_parts=previous_parts,
    )
    return {
        "works": vis["papers"],
        "failed": failed,
        "reused": reused,
        "annotations": vis["annotations"],
    } | "Write" >> WriteBuild(write)


# ------------------------------------------------------------------ finalizing


@dataclass(frozen=True)
class Finalize:
    """What turning the written parts into the build needs: picklable, so that it runs in
    the launcher after the job, or as the job's last step (``--finalize-in-job``)."""

    out_dir: str
    staging: str  # OUT/.staging/<run>, removed at the end
    parts_root: str
    store_root: str
    n_inputs: int
    inputs_hash: str
    recorded: dict
    ga_entries_uri: Optional[str] = None
    run: dict = field(default_factory=dict)  # runner, workers, started_unix


# What finalize_build imports that a build has not imported before it (the dataset card's
# statistics, and pandas under them): a local build with forked workers imports them before
# forking (in_process.import_before_forking).
FINALIZE_MODULES = (
    "sciga.transforms.write.finalize",
    "sciga.explore.dataset_card",
    "sciga.explore.card_stats",
    "sciga.explore.stats",
    "sciga.explore.views",
    "pandas",
)


def finalize_build(f: Finalize) -> tuple[mf.BuildCounts, dict]:
    """Move the parts into ``OUT/data``, prune the result store, write manifest.json and the
    dataset card; remove the run's staging folder. Returns the counts and the manifest."""
    from sciga.explore.dataset_card import write_dataset_card
    from sciga.transforms.common.result_store import ResultStore
    from sciga.transforms.write.finalize import (
        finalize_parts,
        live_keys,
        mark_finalizing,
        read_part_infos,
        write_shard_members,
    )

    infos = read_part_infos(f.parts_root)
    mark_finalizing(f.out_dir, True)
    files = finalize_parts(f.out_dir, infos)
    write_shard_members(f.out_dir, infos)
    counts = mf.counts_from_parts(infos)
    counts.inputs = f.n_inputs
    pruned = ResultStore(f.store_root).prune(live_keys(infos))
    if f.ga_entries_uri:
        _warn_unmatched_ga(f.ga_entries_uri, f.out_dir)
    run = dict(f.run)
    started = run.pop("started_unix", None)
    if started is not None:
        run["seconds"] = round(time.time() - started, 3)
    run.update(
        finished_unix=int(time.time()),
        results_pruned=pruned,
        shard_parts_written=sum(1 for i in infos if i.path and not i.reused),
        shard_parts_reused=sum(1 for i in infos if i.reused),
        shard_row_groups_taken=sum(i.row_groups_taken for i in infos),
    )
    manifest = mf.write_manifest(f.out_dir, counts, files, f.inputs_hash, f.recorded, run=dict(sorted(run.items())))
    mark_finalizing(f.out_dir, False)  # the manifest describes the shards again
    fs, staging = fsspec.core.url_to_fs(f.staging)
    if fs.exists(staging):
        fs.rm(staging, recursive=True)
    remove_if_empty(fs, posixpath.dirname(staging.rstrip("/")))
    write_dataset_card(f.out_dir)  # README.md with configs and features: the folder loads with `datasets`
    return counts, manifest


def _finalize_after_parts(_written: int, f: Finalize) -> None:
    finalize_build(f)


def finalize_in_job(parts, f: Finalize):
    """The job's last step: once every part is written (the count of part infos waits for
    all of them), one worker finalizes the build."""
    import apache_beam as beam

    return parts | "PartsWritten" >> beam.combiners.Count.Globally() | "Finalize" >> beam.Map(_finalize_after_parts, f)


# ------------------------------------------------------------------ running it


def check_sentencizer(name: str) -> None:
    """Fail before the pipeline starts when the requested sentence model is not there."""
    from sciga.transforms.link.sentences import NONE, PYSBD, load_pipeline

    if name in (PYSBD, NONE):
        return  # shipped with the project
    try:
        load_pipeline(name)
    except ValueError as e:
        raise SystemExit(f"sciga build: --sentencizer: {e}.") from None


def open_bulk(opts: BuildOptions, out_dir: str, inputs: Sequence[str], options, runner: str):
    """Open arXiv's bulk source tars and extract the e-prints of the build's papers into
    ``<out>/.sciga/bulk`` (one verified pass per tar, tars side by side on the workers;
    finished tars are not read again). Returns the ``BulkEprints`` the stages read from."""
    import apache_beam as beam

    from sciga.transforms.common.errors import StageError
    from sciga.transforms.common.result_store import store_root
    from sciga.transforms.eprints.bulk_beam import ExtractBulkEprints
    from sciga.transforms.eprints.bulk_reader import BulkEprints

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
        from sciga.pipelines.remote_run import run_outcome

        outcome = run_outcome(getattr(p, "result", None), options, runner)
        if not outcome.completed and outcome.kind != "dry_run":
            # The build reads what this job extracts: it cannot start before that job ended.
            raise SystemExit(
                f"sciga build: --eprints-bulk: the extraction job did not run to completion here "
                f"({outcome.kind}, {outcome.job_id or outcome.template or outcome.state}); run the build "
                "without --no_wait_until_finish / --template_location, or once that job has finished."
            )
    return bulk


def _warn_unmatched_ga(ga_entries_uri: str, out_dir: str) -> None:
    """GA-manifest rows whose paper is not in the build (a typo, or a paper that failed)."""
    import pyarrow.parquet as pq

    from sciga.transforms.vision.options import GAIndex
    from sciga.transforms.write.manifest import shard_files

    built: set[str] = set()
    fs = fsspec.core.url_to_fs(out_dir)[0]
    for path in shard_files(out_dir, "papers"):
        with fs.open(path, "rb") as f:
            built.update(pq.read_table(f, columns=["id"]).column("id").to_pylist())
    missing = sorted(set(GAIndex(ga_entries_uri).entries()) - built)
    for pid in missing[:20]:
        log.warning("GA manifest names %s, which is not among the built papers; its GA is not used", pid)
    if len(missing) > 20:
        log.warning("... and %d more GA-manifest rows name papers that are not in the build", len(missing) - 20)


def run_build(args: argparse.Namespace, beam_args: Optional[list[str]] = None) -> BuildResult:
    """The build, holding its output folder's lock (``OutputLock``) from before its first
    write there to its end; what it holds is given back however it ends."""
    with contextlib.ExitStack() as held:
        return _run_build(args, beam_args, held)


def _on_failure(out_dir: str):
    """Exit callback for the build's stack: a full disk becomes one sentence (measured before
    anything is cleaned up), Ctrl-C stays Ctrl-C, and this run's staging folder goes."""
    from sciga.pipelines.local_run import disk_full_sentence, no_space_left, was_interrupted
    from sciga.transforms.common.errors import UserError

    def callback(exc_type, exc, tb):
        if exc is None or isinstance(exc, (UserError, SystemExit)):
            return False
        clean = clean_stale_staging if "://" not in out_dir else None
        try:
            if no_space_left(exc):
                raise UserError(disk_full_sentence(out_dir)) from None
            if was_interrupted(exc) and not isinstance(exc, KeyboardInterrupt):
                raise KeyboardInterrupt from None
        finally:
            if clean is not None:
                try:
                    clean(out_dir, None)  # this run's parts are of no use; the results are in the store
                except OSError:
                    pass
        return False

    return callback


def _run_build(args: argparse.Namespace, beam_args: Optional[list[str]], held: contextlib.ExitStack) -> BuildResult:
    # Apache Beam is imported only once the build knows it has something to do (~3 s).
    from sciga.pipelines.remote_run import check_build_locations, runner_of
    from sciga.transforms.common.result_store import store_root
    from sciga.transforms.inputs.page_index import page_hashes
    from sciga.transforms.inputs.pages import input_list_hash
    from sciga.transforms.vision.options import VisionConfigError, resolve_vision
    from sciga.transforms.write.layout import layout_for
    from sciga.transforms.write.up_to_date import build_signature, up_to_date_manifest

    t0 = time.time()
    opts = build_options_from_args(args)
    check_output_folder(opts.output, "--output")
    check_sentencizer(opts.link.sentencizer)
    # Buckets exist and may be used; a remote runner is handed no local path (workers cannot see it).
    check_build_locations(args, opts.specs, runner_of(beam_args))
    if opts.fetch_ids:
        inputs = list(opts.fetch_ids)
    else:
        if not opts.specs:
            raise SystemExit(
                "sciga build: give --input PATH_OR_GLOB, --ids ID ... (or --sample for the embedded corpus)."
            )
        inputs = list_build_inputs(opts.specs, opts.html_from)
        if not inputs:
            raise SystemExit(
                f"sciga build: no .html or .html.gz pages found in {', '.join(opts.specs)}; check the path"
                + (
                    " (or give --html-from auto to convert the e-prints of papers with metadata)."
                    if opts.html_from == "ar5iv"
                    else "."
                )
            )
    out_dir = opts.output.rstrip("/") or opts.output
    fs, out_root = fsspec.core.url_to_fs(out_dir)
    fs.makedirs(out_root, exist_ok=True)
    run_id = uuid.uuid4().hex
    held.enter_context(OutputLock(out_dir, run_id))  # a second build into OUT is refused, saying who holds it
    held.push(_on_failure(out_dir))
    clean_stale_staging(out_dir, run_id)
    staging = posixpath.join(out_dir, ".staging", run_id)
    try:
        with notices_off(opts.quiet):  # --quiet: no notice about options (the medical filter's stage 1 only)
            vision = resolve_vision(opts.vision, staging)
    except VisionConfigError as e:
        raise SystemExit(f"sciga build: {e}") from None
    fingerprint = results_fingerprint(opts, vision)
    layout = layout_for(len(inputs), opts.papers_per_shard, opts.figures_per_shard)
    sroot = store_root(out_dir)
    # The pages' SHA-256s, read again only where a page's size or mtime moved since the last
    # build (local pages; the pipeline plans the others). A build here whose store holds no
    # result leaves them to its workers, which hash each page as they read it (in_process.py):
    # with nothing to reuse, the launcher's reading every page first only delays them.
    from sciga.pipelines import in_process

    workers_hash = in_process.eligible(opts, vision, beam_args) and not _holds_results(sroot)
    hashes = (
        page_hashes(inputs, sroot, opts.parse.max_page_bytes, use_record=not opts.rebuild, hash_now=not workers_hash)
        if not opts.fetch_ids and opts.html_from == "ar5iv"
        else None
    )
    inputs_hash = input_list_hash(inputs, {u: st.size for u, st in hashes.stats.items()} if hashes else None)
    signature = build_signature(fingerprint, inputs, layout, opts.recorded)
    if (
        not opts.rebuild
        and not beam_args  # the default local runner, nothing for Beam to check
        and not opts.eprints_bulk
        and not opts.finalize_in_job
        and not vision.ga_entries_uri
    ):
        manifest = up_to_date_manifest(out_dir, sroot, inputs, hashes, fingerprint, signature, inputs_hash)
        if manifest is not None:
            return _nothing_to_do(out_dir, staging, manifest, len(inputs), t0)

    fin = Finalize(
        out_dir=out_dir,
        staging=staging,
        parts_root=posixpath.join(staging, "parts"),
        store_root=sroot,
        n_inputs=len(inputs),
        inputs_hash=inputs_hash,
        recorded=opts.recorded,
        ga_entries_uri=vision.ga_entries_uri,
        run={"started_unix": t0},  # the runner and its workers: below
    )
    to_compute = _inputs_to_compute(inputs, hashes, signature, opts.rebuild)
    _unclaim_pages(sroot)

    n_here = in_process.workers_for(opts.workers, len(inputs), to_compute)
    if in_process.eligible(opts, vision, beam_args) and (n_here == 1 or in_process.can_fork()):
        # Nothing that needs Beam: computed and written here and in processes forked from here,
        # without starting Beam (in_process.py).
        fin.run.update(runner=in_process.RUNNER, workers=n_here)
        return _build_in_process(
            opts, inputs, hashes, vision, layout, fingerprint, signature, fin, n_here, workers_hash=workers_hash
        )
    if workers_hash and hashes is not None:
        hashes.fill({}, opts.parse.max_page_bytes)  # Beam's planner needs them (no fork here)
    n_workers = (
        opts.workers
        if opts.workers is not None
        else default_workers(to_compute, warm=warm_workers.available(beam_args))
    )
    warm = None
    if warm_workers.wanted(n_workers, beam_args):
        # Started before Beam is imported: it warms the workers up on the core this process leaves idle.
        warm = held.enter_context(
            warm_workers.WarmWorkers(
                opts.link.sentencizer, {**LeanMemory.ENV, QUICK_EXIT_ENV: "1"}, quiet=not opts.verbose
            )
        )

    import apache_beam as beam

    from sciga.pipelines.remote_run import run_outcome
    from sciga.transforms.common.progress import ProgressMonitor

    options, runner = pipeline_options(beam_args, n_workers)
    tex, pages = opts.tex, None
    if opts.eprints_bulk:
        bulk = open_bulk(opts, out_dir, inputs, options, runner)
        tex = dataclasses.replace(opts.tex, bulk=bulk)
    else:
        bulk = None
    if opts.html_from != "ar5iv":
        from sciga.transforms.latexml.pages_from_eprints import PageSourceOptions

        pages = PageSourceOptions(
            html_from=opts.html_from,
            converted_root=posixpath.join(store_root(out_dir), "latexml"),
            latexml=opts.latexml,
            tex_dirs=tuple(opts.tex.tex_dirs),
            bulk=bulk,
        )
    local = runner in LOCAL_RUNNERS
    inputs_file = None if opts.fetch_ids else _input_list_file(inputs, staging, hashes)
    prev_uri = None if opts.rebuild else _stage_previous_parts(out_dir, staging)
    log.info("building %d inputs into %s with %s (%s shard groups)", len(inputs), out_dir, runner, layout.total_groups)
    multi = local and options.view_as(beam.options.pipeline_options.DirectOptions).direct_running_mode != "in_memory"
    worker_log = _build_log(out_dir)
    workers = options.view_as(beam.options.pipeline_options.DirectOptions).direct_num_workers
    fin.run.update(runner=runner, workers=workers)
    with ScopedTempDir(out_dir) as tmp:
        progress_dir = tempfile.mkdtemp(prefix="progress-", dir=tmp) if local else None
        with (
            WorkerOutput(worker_log, enabled=multi and not opts.verbose) as out,
            QuietBeamLogs(),
            LeanMemory(local),
            QuickWorkerExit(multi),
            ProgressMonitor(
                progress_dir or tmp,
                len(inputs),
                layout.total_groups,
                quiet=opts.quiet or not local,
                interval=opts.progress_interval,
                stream=out.stream,
                workers=options.view_as(beam.options.pipeline_options.DirectOptions).direct_num_workers,
            ),
        ):
            runner_obj = local_runner(options, runner, warm.command if warm is not None and multi else None)
            with beam.Pipeline(runner=runner_obj, options=options) as p:
                parts = build_pipeline(
                    p,
                    opts,
                    inputs_file=inputs_file,
                    vision=vision,
                    layout=layout,
                    fingerprint=fingerprint,
                    store_root=sroot,
                    parts_root=fin.parts_root,
                    progress_dir=progress_dir,
                    tex=tex,
                    pages=pages,
                    previous_parts=prev_uri,
                )
                if opts.finalize_in_job:
                    finalize_in_job(parts, fin)

    if warm is not None:
        warm.stop()  # its memory back before finalizing
        fin.run["workers_started_warm"] = warm.forked
    outcome = run_outcome(getattr(p, "result", None), options, runner, staging=staging)
    if opts.finalize_in_job:
        outcome = dataclasses.replace(outcome, finalizes_itself=True)
    if not outcome.completed:
        # A dry run, a template, a job still running (or stopped): no part files to finalize,
        # and the result store is left as it is. A dry run leaves nothing behind; the others
        # keep the staging folder, which the job reads (input list, GA manifest).
        if outcome.kind == "dry_run" and fs.exists(posixpath.join(out_root, ".staging", run_id)):
            fs.rm(posixpath.join(out_root, ".staging", run_id), recursive=True)
            remove_if_empty(fs, posixpath.join(out_root, ".staging"))
        return BuildResult(
            out_dir=out_dir,
            counts=mf.BuildCounts(inputs=len(inputs)),
            manifest={},
            seconds=time.time() - t0,
            outcome=outcome,
        )
    if opts.finalize_in_job:  # the job did it: read what it wrote
        manifest = mf.read_manifest(out_dir)
        counts = mf.counts_from_manifest(manifest)
    else:
        counts, manifest = finalize_build(fin)
    _record_pages(sroot, hashes if local and not opts.finalize_in_job else None, signature)
    return BuildResult(out_dir=out_dir, counts=counts, manifest=manifest, seconds=time.time() - t0)


def _build_log(out_dir: str) -> Optional[str]:
    """``OUT/.sciga/logs/build.log`` of a local build; None for a bucket (no log file there)."""
    return os.path.join(out_dir, ".sciga", "logs", "build.log") if "://" not in out_dir else None


def _build_in_process(
    opts: BuildOptions,
    inputs: Sequence[str],
    hashes,
    vision,
    layout,
    fingerprint: str,
    signature: str,
    fin: Finalize,
    workers: int,
    workers_hash: bool = False,
) -> BuildResult:
    """The build run by ``in_process.run_in_process`` with ``workers`` processes, then
    finalized as a Beam build is. ``workers_hash``: the pages were not hashed beforehand
    (``page_hashes(hash_now=False)``); the record takes the hashes the workers made."""
    from sciga.pipelines.in_process import (
        collector_for_batch_work,
        malloc_without_fastbins,
        run_in_process,
        system_allocator,
    )
    from sciga.transforms.common.progress import ProgressMonitor

    log.info(
        "building %d inputs into %s without Beam, %d worker process(es) (%s shard groups)",
        len(inputs),
        fin.out_dir,
        workers,
        layout.total_groups,
    )
    prev_uri = None if opts.rebuild else _stage_previous_parts(fin.out_dir, fin.staging)
    with ScopedTempDir(fin.out_dir) as tmp:
        progress_dir = tempfile.mkdtemp(prefix="progress-", dir=tmp)
        with (
            # Log records to OUT/.sciga/logs/build.log as well as to stderr, as after a Beam
            # build (forked workers inherit the handler).
            WorkerOutput(_build_log(fin.out_dir), enabled=False),
            system_allocator(),
            malloc_without_fastbins(),
            collector_for_batch_work(),
            ProgressMonitor(
                progress_dir,
                len(inputs),
                layout.total_groups,
                quiet=opts.quiet,
                interval=opts.progress_interval,
                workers=workers,
            ),
        ):
            ran = run_in_process(
                opts,
                inputs,
                hashes,
                vision=vision,
                layout=layout,
                fingerprint=fingerprint,
                store_root=fin.store_root,
                parts_root=fin.parts_root,
                progress_dir=progress_dir,
                previous_parts=prev_uri,
                workers=workers,
                write_workers=opts.workers if opts.workers is not None else (os.cpu_count() or 1),
                finalize_modules=FINALIZE_MODULES,
                hash_pages=not workers_hash,
            )
    fin.run["part_writers"] = ran.part_writers
    counts, manifest = finalize_build(fin)
    if workers_hash and hashes is not None:
        hashes.fill(ran.page_sha256, opts.parse.max_page_bytes)
    _record_pages(fin.store_root, hashes, signature)
    return BuildResult(
        out_dir=fin.out_dir, counts=counts, manifest=manifest, seconds=time.time() - fin.run["started_unix"]
    )


def _holds_results(sroot: str) -> bool:
    """Whether the result store has any result (a local one; another may, as far as known)."""
    from sciga.transforms.common.input_files import is_local, local_path
    from sciga.transforms.common.result_store import RESULTS

    if not is_local(sroot):
        return True
    try:
        with os.scandir(os.path.join(local_path(sroot), RESULTS)) as entries:
            return any(True for _ in entries)
    except OSError:  # no folder: a new output
        return False


def _inputs_to_compute(inputs: Sequence[str], hashes, signature: str, rebuild: bool) -> int:
    """How many inputs the pipeline will probably compute: with the same build signature as
    the last build, only the pages that changed since (an image that changed is not seen
    here; this only sizes the default number of worker processes, whose start-up costs
    more than a few papers do)."""
    if rebuild or hashes is None or hashes.record_signature != signature:
        return len(inputs)
    return len(inputs) - hashes.unchanged


def _unclaim_pages(sroot: str) -> None:
    """Before any result is stored: the last build's record no longer vouches for OUT
    (``page_index.unclaim_page_index``); where it cannot be rewritten (a full disk), it goes."""
    from sciga.transforms.inputs.page_index import forget_page_index, unclaim_page_index

    try:
        unclaim_page_index(sroot)
    except OSError:
        forget_page_index(sroot)  # unlinking needs no space; the next build hashes its pages again


def _record_pages(sroot: str, hashes, signature: str) -> None:
    """What the next build needs to know that nothing changed (``inputs/page_index.py``)."""
    from sciga.transforms.inputs.page_index import forget_page_index, save_page_index

    try:
        if hashes is not None:
            save_page_index(sroot, hashes, signature)
        else:
            forget_page_index(sroot)
    except OSError as e:  # the build is done; the next one hashes its pages again
        log.warning("could not record the pages' hashes in %s: %s", sroot, e)


def _nothing_to_do(out_dir: str, staging: str, manifest: dict, n_inputs: int, t0: float) -> BuildResult:
    """The build in OUT is what this build would write: leave it as it is."""
    fs, path = fsspec.core.url_to_fs(staging)
    if fs.exists(path):  # resolving the options may have staged a file (none is needed now)
        fs.rm(path, recursive=True)
        remove_if_empty(fs, posixpath.dirname(path.rstrip("/")))
    counts = mf.counts_from_manifest(manifest)
    counts.reused, counts.recomputed = n_inputs, 0
    return BuildResult(out_dir=out_dir, counts=counts, manifest=manifest, seconds=time.time() - t0, up_to_date=True)


def run(args: argparse.Namespace, rest: Optional[list[str]] = None) -> int:
    """`sciga build`: the build, then its one-screen summary (or, when the runner did not run
    the job to completion, which job or template it made)."""
    import sys

    from sciga.pipelines.build_report import dead_letter_lines, nothing_kept_sentence

    result = run_build(args, rest)
    if result.outcome is not None and not result.outcome.completed:
        print(result.outcome.message(result.out_dir))
        return 1 if result.outcome.failed else 0
    # took: from the start of the command (imports and Beam's start-up included), not of the pipeline
    started = getattr(args, "started", None)
    print(mf.summary_text(result.counts, result.out_dir, time.time() - started if started else result.seconds))
    if result.up_to_date:
        print(
            "  up to date: no page, image or option changed since the last build, so nothing was written "
            "(--rebuild recomputes everything)"
        )
    if result.counts.dead_letter:
        print("\n".join(dead_letter_lines(result.out_dir)))
    if not result.counts.papers and result.counts.inputs:
        print(
            f"sciga build: {nothing_kept_sentence(result.counts.inputs, result.counts.dead_letter, result.out_dir)}",
            file=sys.stderr,
        )

        return 1
    return 0 if result.counts.reconciled else 1


def interrupted(args: argparse.Namespace) -> str:
    """What `sciga` prints after Ctrl-C during a build."""
    from sciga.pipelines.build_report import interrupted_sentence

    return interrupted_sentence(args.output.rstrip("/") or args.output)
