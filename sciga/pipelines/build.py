"""`sciga build`: LaTeXML pages -> typed Parquet shards, dead letters and a manifest.

The command only: its flags (``BuildFlags``, each declared once, with those of the vision
stage and the sources), the typed options they resolve to (``build_options``), and what is
printed. How the build runs is ``sciga.executors``: the chain of steps declared once, and
the executors that run it (in this process, Apache Beam, Dask).

Adding a flag to `sciga build` is one field here (or in ``VisionFlags`` / ``SourceFlags``)::

    max_authors: int = flag("--max-authors", default=50, type=positive_int, help="... (default %(default)s)")

and, where it changes what the build does, one line in ``build_options`` handing its value
to the stage's options. The field's name is the option's key in the manifest's ``options``
(``recorded=False`` leaves it out: a flag that changes no result, such as --quiet).
"""

from __future__ import annotations

import argparse
import os
import posixpath
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar, Optional

from sciga.executors.local_run import PAPERS_PER_WORKER_START
from sciga.executors.options import EXECUTORS
from sciga.pipelines.arg_types import positive_float, positive_int
from sciga.pipelines.flags import add_flags, flag, flag_values, flags_of, from_args, replace_flags
from sciga.pipelines.licence_flags import LicenceFlags
from sciga.pipelines.sources_options import SourceFlags, sample_tex_dir
from sciga.pipelines.vision import VisionFlags
from sciga.transforms.write.shard_names import DEFAULT_ROWS_PER_SHARD

if TYPE_CHECKING:
    from sciga.executors.options import BuildOptions, BuildResult


@dataclass(frozen=True)
class RunFlags:
    GROUP: ClassVar[str] = "running the build"

    workers: Optional[int] = flag(
        "--workers",
        type=positive_int,
        metavar="N",
        help=lambda: (
            "local worker processes (default: a small build, such as a few pages or a few changed among a "
            f"few hundred, runs in this process; a larger one uses every core, {os.cpu_count() or 1} here). On Linux a "
            "local build that runs no model runs without Apache Beam, its workers forked from this process; otherwise "
            "they are workers of Beam's runner (started warm on Linux, one per "
            f"{PAPERS_PER_WORKER_START} inputs elsewhere); 1 runs in this process. With --executor dask and no "
            "--dask-address: the processes of the local Dask cluster"
        ),
    )
    rebuild: bool = flag(
        "--rebuild",
        default=False,
        action="store_true",
        help="recompute every paper; by default papers whose inputs, options and builder are unchanged "
        "since the last build into OUTPUT are reused, and a killed build resumes",
    )
    relist_inputs: bool = flag(
        "--relist-inputs",
        default=False,
        action="store_true",
        help="walk the input folders even when no folder's mtime moved since the last build (by default "
        "its list of pages is reused then); for a tool that sets a folder's mtime back after adding a page. "
        "Nothing is recomputed for it",
        recorded=False,
    )
    finalize_in_job: bool = flag(
        "--finalize-in-job",
        default=False,
        action="store_true",
        help="the job itself moves the shards into place and writes manifest.json and the card when its "
        "last part is written (a Dataflow Flex Template, or a job submitted without waiting); by "
        "default the launcher does, once the job has finished",
        recorded=False,
    )
    quiet: bool = flag("--quiet", default=False, action="store_true", help="no progress line on stderr", recorded=False)
    progress_interval: float = flag(
        "--progress-interval",
        default=10.0,
        type=positive_float,
        metavar="SECONDS",
        help="when stderr is not a terminal, print a progress line this often (default: %(default)s)",
        recorded=False,
    )
    executor: str = flag(
        "--executor",
        default="auto",
        choices=EXECUTORS,
        help="what runs the build: auto (default: in this process and processes forked from it when no model "
        "or Beam flag needs Apache Beam, else Beam's runner), in-process, beam, or dask (a Dask cluster: "
        "--dask-address, else a local one of --workers processes; `pip install 'sciga-builder[dask]'`)",
        recorded=False,
    )
    dask_address: Optional[str] = flag(
        "--dask-address",
        metavar="tcp://HOST:PORT",
        help="with --executor dask: the scheduler of a running Dask cluster (Slurm, PBS, Kubernetes ...); the "
        "inputs and --output must be where its workers see them (a shared file system, or gs://)",
        recorded=False,
    )


@dataclass(frozen=True, kw_only=True)
class BuildFlags:
    """Every flag of `sciga build`."""

    input: list[str] = flag(
        "--input",
        default=[],
        action="extend",
        nargs="+",
        metavar="PATH_OR_GLOB",
        help="folder, glob or file of LaTeXML .html / .html.gz pages (any fsspec path); repeatable",
        recorded=False,
    )
    output: str = flag("--output", required=True, metavar="DIR", help="build folder (local, gs://...)", recorded=False)
    sample: bool = flag(
        "--sample", default=False, action="store_true", help="build the embedded sample corpus (adds it to --input)"
    )
    metadata: Optional[str] = flag(
        "--metadata",
        metavar="DIR",
        help="folder of <stem>.meta.json metadata sidecars (default: beside each page)",
    )
    max_page_mb: float = flag(
        "--max-page-mb",
        default=128,
        type=positive_float,
        metavar="MB",
        help="pages above this size are dead-lettered (default %(default)s)",
    )
    max_image_mb: int = flag(
        "--max-image-mb",
        default=64,
        type=positive_int,
        metavar="MB",
        help="image files above this size are not embedded (default %(default)s)",
    )
    papers_per_shard: int = flag(
        "--papers-per-shard",
        default=DEFAULT_ROWS_PER_SHARD["papers"],
        type=positive_int,
        metavar="N",
        help="most papers in one papers shard (default: %(default)s)",
    )
    figures_per_shard: int = flag(
        "--figures-per-shard",
        default=DEFAULT_ROWS_PER_SHARD["figures"],
        type=positive_int,
        metavar="N",
        help="most figure rows in one figures shard (default: %(default)s)",
    )
    no_images: bool = flag(
        "--no-images", default=False, action="store_true", help="do not embed image bytes in the figures config"
    )
    source: Optional[str] = flag("--source", help="provenance source label (default: detected from the page)")
    sentencizer: str = flag(
        "--sentencizer",
        default="pysbd",
        metavar="NAME",
        help="sentences of figure mentions: pysbd (scispaCy's pysbd_sentencizer, default), an installed "
        "scispaCy/spaCy model such as en_core_sci_sm or a pipeline folder, or none",
    )
    run: RunFlags = flags_of(RunFlags)
    vision: VisionFlags = flags_of(VisionFlags)
    sources: SourceFlags = flags_of(SourceFlags)
    licence: LicenceFlags = flags_of(LicenceFlags)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    add_flags(ap, BuildFlags)


def build_flags(argv: list[str], prog: str = "sciga build") -> tuple[BuildFlags, list[str]]:
    """(the build flags of ``argv``, what is left for Apache Beam), without requiring
    --output (a command that builds into its own folder sets it: `sciga update`)."""
    from sciga.pipelines.cli import Parser

    p = Parser(prog=prog, add_help=False, allow_abbrev=False)
    add_flags(p, BuildFlags, required=False)
    args, rest = p.parse_known_args(argv)
    return from_args(BuildFlags, args), rest


# ------------------------------------------------------------------ typed options


def build_options(flags: BuildFlags, *, verbose: bool = False, input_root: Optional[str] = None) -> BuildOptions:
    """The build's typed options from its flags (``verbose``: the global -v of `sciga`).
    ``input_root``: the one folder every --input lies under, when they are many folders in
    it (``BuildOptions.input_root``; a GA manifest's paths may lie under it too)."""
    from sciga.executors.options import BuildOptions
    from sciga.transforms.link.options import LinkOptions
    from sciga.transforms.parse.options import ParseOptions

    s, r = flags.sources, flags.run
    specs = list(flags.input)
    if flags.sample:
        from sciga.samples import sample_dir

        specs.append(sample_dir())
        flags = replace(flags, metadata=flags.metadata or sample_dir("meta"))
    fetch_ids = s.fetch_ids()
    if fetch_ids and (flags.input or flags.sample):
        raise SystemExit(
            "sciga build: --ids fetches its own inputs; use it without --input / --sample "
            "(or run `sciga fetch` first and build the cache with --input)."
        )
    if fetch_ids and not s.fetch_cache:
        flags = replace_flags(flags, fetch_cache=posixpath.join(flags.output.rstrip("/"), "fetch_cache"))
        s = flags.sources
    return BuildOptions(
        output=flags.output,
        specs=tuple(specs),
        fetch_ids=tuple(fetch_ids),
        fetch=s.id_fetch_options(fetch_ids, s.fetch_cache or ""),
        parse=ParseOptions(
            max_page_bytes=int(flags.max_page_mb * 1024 * 1024), source=flags.source, metadata_dir=flags.metadata
        ),
        tex=s.tex_options(sample_tex_dir() if flags.sample else None),
        link=LinkOptions(sentencizer=flags.sentencizer),
        vision=flags.vision.options(flags.max_image_mb, (input_root,) if input_root else input_roots(specs)),
        papers_per_shard=flags.papers_per_shard,
        figures_per_shard=flags.figures_per_shard,
        no_images=flags.no_images,
        licences=flags.licence.policy,
        assume_licence=flags.licence.assume_licence,
        html_from=s.html_from,
        eprints_bulk=s.eprints_bulk,
        latexml=s.latexml_options(),
        workers=r.workers,
        rebuild=r.rebuild,
        relist_inputs=r.relist_inputs,
        quiet=r.quiet,
        progress_interval=r.progress_interval,
        finalize_in_job=r.finalize_in_job,
        executor=r.executor,
        dask_address=r.dask_address,
        verbose=verbose,
        # the policy as applied (its default too): the card, the gate and publish read it
        recorded=dict(sorted({**flag_values(flags, recorded_only=True), "licences": flags.licence.policy}.items())),
        input_root=input_root,
        locations=tuple(_locations(flags, specs)),
    )


def input_roots(specs: list[str]) -> tuple[str, ...]:
    """The folders the --input specs read from (a folder, or a glob's folder before its first
    wildcard): where a GA manifest's paths may also lie. A single file given as --input (a
    page, an ar5iv dump) names no folder: the folder it sits in was not given, and may hold
    anything (a GA path into it stays outside)."""
    from sciga.transforms.write.published_uri import spec_root

    return tuple(dict.fromkeys(spec_root(spec) for spec in specs if not _names_one_file(spec)))


def _names_one_file(spec: str) -> bool:
    """An --input that is one file, not a folder or a glob (``spec_root`` gives its folder)."""
    from sciga.transforms.common.input_files import is_local, local_path

    if any(ch in spec for ch in "*?["):
        return False
    if is_local(spec):
        return not os.path.isdir(local_path(spec))
    return "." in spec.rstrip("/").rsplit("/", 1)[-1]


def _locations(flags: BuildFlags, specs: list[str]) -> list[tuple[str, str]]:
    """(flag, path) of every place the build reads or writes, as given on the command line."""
    s = flags.sources
    places = [("--output", flags.output)] + [("--input", spec) for spec in specs]
    for name, value in (
        ("--metadata", flags.metadata),
        ("--fetch-cache", s.fetch_cache),
        ("--eprints-bulk", s.eprints_bulk),
    ):
        if value:
            places.append((name, value))
    return places + [("--tex-input", t) for t in s.tex_input or []]


def check_build_paths(flags: BuildFlags) -> None:
    """Every file and folder option a build reads, checked before anything opens it (a
    FIFO never blocks, a missing or wrong-kind path is one sentence: ``UserError``)."""
    from sciga.pipelines.paths import check_input_file, check_input_folder, check_weights_path

    s, v = flags.sources, flags.vision
    if flags.metadata:
        check_input_folder(flags.metadata, "--metadata", "the folder of <stem>.meta.json sidecars")
    for t in s.tex_input or []:
        check_input_folder(t, "--tex-input", "a folder of TeX sources by paper")
    if s.eprints_bulk:
        check_input_folder(s.eprints_bulk, "--eprints-bulk", "the folder of arXiv's bulk source tars")
    for value, name, what in (
        (s.id_file, "--id-file", "a file with one arXiv id per line"),
        (v.ga_manifest, "--ga-manifest", "a CSV file with the columns arxiv_id,path"),
        (v.medical_keywords, "--medical-keywords", "a keyword list file"),
    ):
        if value:
            check_input_file(value, name, what)
    for value, name in ((v.medical_weights, "--medical-weights"), (v.ga_embedding_weights, "--ga-embedding-weights")):
        if value:
            check_weights_path(value, name)


def build_options_from_args(args: argparse.Namespace) -> BuildOptions:
    return build_options(from_args(BuildFlags, args), verbose=bool(vars(args).get("verbose")))


# ------------------------------------------------------------------ the command


def run_build(args: argparse.Namespace, beam_args: Optional[list[str]] = None) -> BuildResult:
    """The build of a parsed `sciga build` command line (``add_arguments``): its output
    folder checked, then the build (``sciga.executors.build.run_build``)."""
    from sciga.executors.build import run_build as execute
    from sciga.pipelines.paths import check_output_folder

    flags = from_args(BuildFlags, args)
    check_build_paths(flags)
    opts = build_options(flags, verbose=bool(vars(args).get("verbose")))
    check_output_folder(opts.output, "--output")
    return execute(opts, beam_args)


def run(args: argparse.Namespace, rest: Optional[list[str]] = None) -> int:
    """`sciga build`: the build, then its one-screen summary (or, when the runner did not run
    the job to completion, which job or template it made)."""
    import sys

    from sciga.pipelines.build_report import dead_letter_lines, nothing_kept_sentence
    from sciga.transforms.write.manifest import summary_text

    result = run_build(args, rest)
    if result.outcome is not None and not result.outcome.completed:
        print(result.outcome.message(result.out_dir))
        return 1 if result.outcome.failed else 0
    # took: from the start of the command (imports and Beam's start-up included), not of the pipeline
    started = getattr(args, "started", None)
    print(summary_text(result.counts, result.out_dir, time.time() - started if started else result.seconds))
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
    from sciga.transforms.common.result_store import ResultStore, store_root

    out = args.output.rstrip("/") or args.output
    try:  # the workers are stopped: what they were writing when stopped is of no use
        ResultStore(store_root(out)).remove_partial_writes()
        if os.path.isdir(store_root(out)):  # a record the launcher was replacing (page index)
            for entry in os.scandir(store_root(out)):
                if entry.name.endswith(".tmp") and entry.is_file(follow_symlinks=False):
                    os.remove(entry.path)
    except (OSError, ValueError):
        pass
    return interrupted_sentence(out)
