"""`sciga build`: LaTeXML pages -> typed Parquet shards, dead letters and a manifest.

Composition only: every step is a DoFn/PTransform from ``transforms/``. The stages are

    list inputs -> read+parse -> one per paper id -> [link] -> [vision] -> rows -> shards

Rows are written to a fresh staging folder first and moved into ``<out>/data`` only when
the whole run succeeded, so a rerun replaces the previous build and never mixes with it.
"""
from __future__ import annotations

import argparse
import logging
import os
import posixpath
import time
import uuid
from dataclasses import dataclass
from typing import Optional, Sequence

import apache_beam as beam
import fsspec
from apache_beam.options.pipeline_options import PipelineOptions

from sciga.pipelines import manifest as mf
from sciga.pipelines.vision import VisionStage, add_vision_arguments
from sciga.schemas.arrow import CONFIGS, dead_letter_row, figure_row, mention_row, paper_row
from sciga.transforms.dead_letter import DEAD_LETTER_TAG
from sciga.transforms.link.beam import LinkPaper
from sciga.transforms.link.mentions import mention_rows
from sciga.transforms.parse.beam import KeepOnePerPaper, ParsePage
from sciga.transforms.sources.beam import AttachLocalImages
from sciga.transforms.sources.local_files import input_list_hash, list_inputs
from sciga.transforms.write.beam import WriteShards
from sciga.transforms.write.parquet_shards import DEFAULT_ROWS_PER_SHARD

log = logging.getLogger("sciga.build")


def sample_dir(part: str = "html") -> str:
    """The embedded sample corpus (installed with the package, or in the checkout):
    ``html`` pages with their images, ``meta`` sidecars, ``tex`` sources."""
    import sciga.samples

    return os.path.join(os.path.dirname(os.path.abspath(sciga.samples.__file__)), part)


def add_build_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--input", action="extend", nargs="+", default=[], metavar="PATH_OR_GLOB",
                    help="folder, glob or file of LaTeXML .html / .html.gz pages (any fsspec path); repeatable")
    ap.add_argument("--output", required=True, metavar="DIR", help="build folder (local, gs://...)")
    ap.add_argument("--sample", action="store_true", help="build the embedded sample corpus (adds it to --input)")
    ap.add_argument("--metadata", default=None, metavar="DIR",
                    help="folder of <stem>.meta.json metadata sidecars (default: beside each page)")
    ap.add_argument("--max-page-mb", type=int, default=128, help="pages above this size are dead-lettered")
    ap.add_argument("--max-image-mb", type=int, default=64, help="image files above this size are not embedded")
    ap.add_argument("--papers-per-shard", type=int, default=DEFAULT_ROWS_PER_SHARD["papers"])
    ap.add_argument("--figures-per-shard", type=int, default=DEFAULT_ROWS_PER_SHARD["figures"])
    ap.add_argument("--no-images", action="store_true", help="do not embed image bytes in the figures config")
    ap.add_argument("--source", default=None, help="provenance source label (default: detected from the page)")
    ap.add_argument("--sentencizer", default="pysbd", metavar="NAME",
                    help="sentences of figure mentions: pysbd (scispaCy's pysbd_sentencizer, default), an installed "
                         "scispaCy/spaCy model such as en_core_sci_sm or a pipeline folder, or none")
    add_vision_arguments(ap)
    from sciga.pipelines.sources_options import add_source_build_arguments

    add_source_build_arguments(ap)


@dataclass
class BuildResult:
    out_dir: str
    counts: mf.BuildCounts
    manifest: dict
    seconds: float


def _input_list_file(inputs: Sequence[str], staging: str) -> str:
    """The input URIs as a text file in the staging folder: a million URIs inlined with
    beam.Create would exceed Dataflow's job-graph size, a file scales."""
    path = posixpath.join(staging, "inputs.txt")
    fs, p = fsspec.core.url_to_fs(path)
    fs.makedirs(posixpath.dirname(p), exist_ok=True)
    with fs.open(p, "w") as f:
        f.write("\n".join(inputs) + "\n")
    return path


def build_pipeline(p: beam.Pipeline, inputs: Sequence[str], out_dir: str, args: argparse.Namespace) -> None:
    max_bytes = args.max_page_mb * 1024 * 1024
    fetch_dead = []
    if getattr(args, "fetch_ids", None):
        # sciga build --ids: fetch into a store first (same polite client as `sciga fetch`).
        from sciga.pipelines.sources_options import fetch_transform

        fetched = p | "Ids" >> beam.Create(list(inputs)) | "Fetch" >> fetch_transform(args)
        uris = fetched.uris | "Spread" >> beam.Reshuffle()
        fetch_dead = [fetched[DEAD_LETTER_TAG]]
    else:
        uris = (
            p
            | "Inputs" >> beam.io.ReadFromText(_input_list_file(inputs, out_dir))
            | "NonEmpty" >> beam.Filter(bool)
            | "Spread" >> beam.Reshuffle()
        )

    parse = ParsePage(max_bytes, args.source, args.metadata)
    parsed = uris | "Parse" >> beam.ParDo(parse).with_outputs(DEAD_LETTER_TAG, main="papers")
    deduped = (
        parsed.papers
        | "KeyById" >> beam.Map(lambda paper: (paper.id, paper))
        | "GroupById" >> beam.GroupByKey()
        | "OnePerPaper" >> beam.ParDo(KeepOnePerPaper()).with_outputs(DEAD_LETTER_TAG, main="papers")
    )
    papers = deduped.papers
    dead = fetch_dead + [parsed[DEAD_LETTER_TAG], deduped[DEAD_LETTER_TAG]]

    # Paper-level stages added by later steps (linking, vision) go here: each takes the
    # papers and returns (papers, dead letters), so a failure removes the paper from
    # every config and counts still reconcile.
    if not getattr(args, "no_tex", False):
        # TeX-source figures: only papers with a source beside the page / in --tex-input change.
        from sciga.pipelines.sources_options import tex_recovery_fn

        tex = papers | "TexFigures" >> beam.ParDo(tex_recovery_fn(args)).with_outputs(DEAD_LETTER_TAG, main="papers")
        papers = tex.papers
        dead.append(tex[DEAD_LETTER_TAG])

    linked = papers | "Link" >> beam.ParDo(LinkPaper(getattr(args, "sentencizer", "pysbd"))).with_outputs(DEAD_LETTER_TAG, main="papers")
    papers = linked.papers
    dead.append(linked[DEAD_LETTER_TAG])

    mentions = papers | "MentionRows" >> beam.FlatMap(mention_rows)
    # Vision (pipelines/vision.py): keyword stage and de-facto GA roles on the rows, images
    # read and decoded, graphical abstracts typed, medical classifier via RunInference.
    # Images are read even with --no-images (sizes, hashes and models need pixels); the
    # bytes are dropped at the end of the stage instead.
    vision = VisionStage.from_args(args)
    figures = papers | "FigureRows" >> beam.FlatMap(vision.figure_rows)
    if not getattr(args, "no_tex", False):
        # Figures recovered from the TeX source: read (and rasterize) from the e-print.
        from sciga.pipelines.sources_options import tex_images_transform

        figures = figures | "TexImages" >> tex_images_transform(args)
    figures = figures | "ReadImages" >> beam.ParDo(AttachLocalImages(args.max_image_mb * 1024 * 1024))
    papers, figures = vision.apply(papers, figures)

    rows = {
        "papers": papers | "PaperToRow" >> beam.Map(paper_row),
        "figures": figures | "FigureToRow" >> beam.Map(figure_row),
        "mentions": mentions | "MentionToRow" >> beam.Map(mention_row),
        "dead_letter": tuple(dead) | "AllDead" >> beam.Flatten() | "DeadToRow" >> beam.Map(dead_letter_row),
    }
    per_shard = {"papers": args.papers_per_shard, "figures": args.figures_per_shard}
    for config in CONFIGS:
        rows[config] | f"Write{config}" >> WriteShards(config, out_dir, per_shard.get(config))


def _finalize(staging: str, out_dir: str) -> None:
    """Replace each config's shards with the staged ones (stale shards of an earlier run
    with another shard count are removed)."""
    fs, out_root = fsspec.core.url_to_fs(out_dir)
    _, stage_root = fsspec.core.url_to_fs(staging)
    for config in CONFIGS:
        dest = posixpath.join(out_root, "data", config)
        staged = mf.shard_files(staging, config)
        if fs.isdir(dest):
            for old in fs.ls(dest, detail=False):
                if old.endswith(".parquet"):
                    fs.rm(old)
        fs.makedirs(dest, exist_ok=True)
        for path in staged:
            fs.mv(path, posixpath.join(dest, posixpath.basename(path)))
    fs.rm(stage_root, recursive=True)


def check_sentencizer(name: str) -> None:
    """Fail before the pipeline starts when the requested sentence model is not there."""
    from sciga.transforms.link.sentences import NONE, PYSBD, load_pipeline

    if name in (PYSBD, NONE):
        return  # shipped with the project
    try:
        load_pipeline(name)
    except ValueError as e:
        raise SystemExit(f"sciga build: --sentencizer: {e}.") from None


def run_build(args: argparse.Namespace, beam_args: Optional[list[str]] = None) -> BuildResult:
    t0 = time.time()
    specs = list(args.input)
    if args.sample:
        specs.append(sample_dir())
        args.metadata = args.metadata or sample_dir("meta")
    from sciga.pipelines.sources_options import prepare_source_args

    prepare_source_args(args)
    check_sentencizer(getattr(args, "sentencizer", "pysbd"))
    if getattr(args, "fetch_ids", None):
        inputs = list(args.fetch_ids)
    else:
        if not specs:
            raise SystemExit("sciga build: give --input PATH_OR_GLOB, --ids ID ... (or --sample for the embedded corpus).")
        inputs = list_inputs(specs)
        if not inputs:
            raise SystemExit(f"sciga build: no .html or .html.gz pages found in {', '.join(specs)}; check the path.")
    out_dir = args.output
    fs, out_root = fsspec.core.url_to_fs(out_dir)
    fs.makedirs(out_root, exist_ok=True)
    staging = posixpath.join(out_dir.rstrip("/"), ".staging", uuid.uuid4().hex)

    options = PipelineOptions(beam_args or [])
    std = options.view_as(beam.options.pipeline_options.StandardOptions)
    if not std.runner:
        std.runner = "DirectRunner"
    log.info("building %d pages into %s with %s", len(inputs), out_dir, std.runner)
    with beam.Pipeline(options=options) as p:
        build_pipeline(p, inputs, staging, args)
    _finalize(staging, out_dir)

    counts, files = mf.count_build(out_dir)
    counts.inputs = len(inputs)
    opts = {k: v for k, v in sorted(vars(args).items())
            if k not in ("func", "command", "input", "output", "fetch_ids", "ids", "id_file")}
    seconds = time.time() - t0
    manifest = mf.write_manifest(
        out_dir, counts, files, input_list_hash(inputs), opts,
        run={"runner": std.runner, "seconds": round(seconds, 3), "finished_unix": int(time.time())},
    )
    return BuildResult(out_dir=out_dir, counts=counts, manifest=manifest, seconds=seconds)
