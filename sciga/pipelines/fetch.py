"""`sciga fetch`: flags, and which job they ask for.

- arXiv ids, a query or ``--cached-metadata`` -> metadata, HTML pages and TeX e-prints in a
  resumable cache: ``transforms/fetch/job.py``;
- ``--metadata-snapshot`` / ``--oai-pmh`` -> the selected papers' ``<id>.meta.json`` only:
  ``transforms/metadata/snapshot.py``, ``oai_pmh.py``;
- ``--plan`` -> what a corpus definition will cost, nothing sent: ``fetch_plan.py``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from dataclasses import dataclass
from typing import ClassVar, Optional

from sciga.pipelines.arg_types import positive_float, positive_int
from sciga.pipelines.flags import add_flags, flag, flags_of
from sciga.pipelines.paths import check_output_folder
from sciga.pipelines.sources_options import EndpointFlags

log = logging.getLogger("sciga.fetch")


@dataclass(frozen=True)
class WhatFlags:
    GROUP: ClassVar[str] = "what to fetch (any combination)"

    query: Optional[str] = flag(
        "--query",
        metavar="QUERY",
        help="arXiv API search query, e.g. 'cat:cs.CV AND submittedDate:[202101010000 TO 202403312359]'",
    )
    ids: list[str] = flag(
        "--ids", default=[], nargs="+", metavar="ID", help="arXiv ids (2401.13641, 2401.13641v2, astro-ph/0601001)"
    )
    id_file: Optional[str] = flag(
        "--id-file", metavar="FILE", help="file with one arXiv id per line (# comments allowed)"
    )
    max_results: Optional[int] = flag(
        "--max-results", type=positive_int, metavar="N", help="stop a --query after N results (default: all)"
    )
    cached_metadata: bool = flag(
        "--cached-metadata",
        default=False,
        action="store_true",
        help="the papers whose metadata is already in --output (e.g. from --metadata-snapshot or --oai-pmh), "
        "narrowed by --category / --from / --until: fetch their other --parts",
    )


@dataclass(frozen=True)
class BulkFlags:
    GROUP: ClassVar[str] = (
        "bulk metadata: write <id>.meta.json of the selected papers into --output, fetch nothing else"
    )

    metadata_snapshot: Optional[str] = flag(
        "--metadata-snapshot",
        metavar="FILE.jsonl",
        help="arXiv metadata snapshot (JSON lines as on Kaggle; local or any fsspec path; .gz/.bz2/.xz/.zst read as such)",
    )
    oai_pmh: bool = flag(
        "--oai-pmh",
        default=False,
        action="store_true",
        help="harvest arXiv's OAI-PMH interface (resumable, incremental on rerun)",
    )
    oai_url: Optional[str] = flag(
        "--oai-url", metavar="URL", help="OAI-PMH base URL (env SCIGA_OAI_URL; default https://oaipmh.arxiv.org/oai)"
    )
    oai_format: str = flag(
        "--oai-format",
        default="arXivRaw",
        choices=("arXivRaw", "arXiv"),
        help="OAI-PMH metadataPrefix: arXivRaw (default: versions with times, as in the snapshot) or arXiv "
        "(authors split, with affiliations; dates are days)",
    )
    oai_set: Optional[str] = flag(
        "--set",
        metavar="SET",
        help="OAI-PMH set (cs, math, physics:hep-th ...; default: the one set holding every --category, else all)",
    )
    datestamp_from: Optional[str] = flag(
        "--datestamp-from",
        metavar="YYYY-MM-DD",
        help="OAI-PMH: harvest only records changed on or after this day (default: the day before --from; "
        "a complete harvest is incremental on the next run)",
    )
    datestamp_until: Optional[str] = flag(
        "--datestamp-until",
        metavar="YYYY-MM-DD",
        help="OAI-PMH: harvest only records changed on or before this day (default: no bound)",
    )


@dataclass(frozen=True)
class SelectionFlags:
    GROUP: ClassVar[str] = "selection (of --metadata-snapshot, --oai-pmh, --cached-metadata and --plan)"

    category: list[str] = flag(
        "--category",
        default=[],
        action="append",
        metavar="CAT",
        help="arXiv archive or category, repeatable or comma-separated: 'cs' keeps a paper listing any cs.* "
        "category, primary or cross-list (cs.DL astro-ph.IM is in cs); 'cs.CV' keeps that category",
    )
    date_from: Optional[str] = flag(
        "--from",
        metavar="YYYY-MM-DD",
        help="keep papers whose FIRST version (v1) is on or after this day (UTC; YYYY-MM means its 1st)",
    )
    date_until: Optional[str] = flag(
        "--until",
        metavar="YYYY-MM-DD",
        help="keep papers whose FIRST version (v1) is on or before this day (UTC; YYYY-MM means its last day)",
    )


@dataclass(frozen=True)
class PlanFlags:
    GROUP: ClassVar[str] = (
        "plan: print what the corpus will cost (papers, sources, requests, bytes, time); send nothing"
    )

    plan: bool = flag("--plan", default=False, action="store_true", help="plan only: nothing is fetched or written")
    eprints_bulk: Optional[str] = flag(
        "--eprints-bulk",
        metavar="DIR_OR_URL",
        help="arXiv bulk source tars with arXiv_src_manifest.xml (a folder, or s3://arxiv/src/): e-prints they "
        "hold are not fetched over HTTP",
    )
    eprints_manifest: Optional[str] = flag(
        "--eprints-manifest",
        metavar="FILE",
        help="a local copy of arXiv_src_manifest.xml, to plan a remote --eprints-bulk without sending anything",
    )
    html_from: str = flag(
        "--html-from",
        default="ar5iv",
        choices=("ar5iv", "latexml", "auto"),
        help="--plan: pages the cache and --html-dump lack come over HTTP (ar5iv, default) or are converted "
        "from the e-print by the build (latexml, auto)",
    )
    bandwidth: float = flag(
        "--bandwidth",
        default=100.0,
        type=positive_float,
        metavar="MBIT",
        help="--plan: download speed assumed for the wall time (default 100 Mbit/s)",
    )


@dataclass(frozen=True, kw_only=True)
class FetchFlags:
    """Every flag of `sciga fetch`."""

    what: WhatFlags = flags_of(WhatFlags)
    bulk: BulkFlags = flags_of(BulkFlags)
    selection: SelectionFlags = flags_of(SelectionFlags)
    planning: PlanFlags = flags_of(PlanFlags)
    output: str = flag("--output", required=True, metavar="CACHE", help="cache folder (created; rerun to resume)")
    parts: str = flag(
        "--parts", default="meta,html,source", help="comma list of meta, html, source (default all three)"
    )
    html_dump: list[str] = flag(
        "--html-dump",
        default=[],
        action="append",
        metavar="ZIP",
        help="ar5iv dump zip(s): take pages from them instead of over HTTP when they hold the paper",
    )
    page_size: int = flag(
        "--page-size", default=100, type=positive_int, help="arXiv API results per request (max 2000)"
    )
    refresh: bool = flag(
        "--refresh",
        default=False,
        action="store_true",
        help="re-check cached parts with conditional requests (ETag / Last-Modified)",
    )
    retry_failed: bool = flag(
        "--retry-failed",
        default=False,
        action="store_true",
        help="retry parts that failed permanently before (404, failed conversion)",
    )
    max_eprint_mb: int = flag(
        "--max-eprint-mb", default=512, type=positive_int, help="e-prints above this size are not downloaded"
    )
    no_progress: bool = flag(
        "--no-progress",
        default=False,
        action="store_true",
        help="no progress bar (the final summary is still printed)",
    )
    endpoints: EndpointFlags = flags_of(EndpointFlags)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    add_flags(ap, FetchFlags)


def run_fetch(args: argparse.Namespace):
    """`sciga fetch`: a plan, a bulk metadata import, or the fetch job (``transforms/fetch/job.py``)."""
    from sciga.pipelines.paths import check_input_file, check_input_folder
    from sciga.transforms.fetch.job import PARTS, FetchOptions, run_fetch_job

    raw_ids = list(args.ids or [])
    if args.id_file:
        from sciga.pipelines.sources_options import read_id_file

        check_input_file(args.id_file, "--id-file", "a file with one arXiv id per line")  # a FIFO never blocks
        raw_ids += read_id_file(args.id_file)
    mode = _check_corpus_flags(args, raw_ids)
    for value, name, what in (
        (args.metadata_snapshot, "--metadata-snapshot", "arXiv's metadata snapshot (JSON lines)"),
        (args.eprints_manifest, "--eprints-manifest", "a copy of arXiv_src_manifest.xml"),
    ):
        if value:
            check_input_file(value, name, what)
    if args.eprints_bulk:
        check_input_folder(args.eprints_bulk, "--eprints-bulk", "the folder of arXiv's bulk source tars")
    if mode == "plan":
        return run_plan(args, raw_ids)
    check_output_folder(args.output, "--output")
    if mode == "snapshot":
        return run_snapshot_import(args)
    if mode == "oai":
        return run_oai_harvest(args)
    if not raw_ids and not args.query and not args.cached_metadata:
        raise SystemExit(
            "sciga fetch: give --query QUERY, --ids ID ..., --id-file FILE, --cached-metadata, "
            "--metadata-snapshot FILE or --oai-pmh."
        )
    parts = tuple(p.strip() for p in args.parts.split(",") if p.strip())
    if any(p not in PARTS for p in parts) or "meta" not in parts:
        raise SystemExit("sciga fetch: --parts is a comma list of meta, html, source and must include meta.")
    endpoints, http = _http_from(args)
    return run_fetch_job(
        FetchOptions(
            output=args.output,
            endpoints=endpoints,
            http=http,
            ids=tuple(raw_ids),
            query=args.query,
            max_results=args.max_results,
            cached_metadata=args.cached_metadata,
            selection=selection_from(args),
            parts=parts,
            html_dumps=tuple(args.html_dump),
            eprints_manifest=args.eprints_manifest or args.eprints_bulk,
            page_size=args.page_size,
            refresh=args.refresh,
            retry_failed=args.retry_failed,
            max_eprint_bytes=args.max_eprint_mb << 20,
            progress=not args.no_progress,
        )
    )


# -- bulk metadata and the plan ------------------------------------------------------------------
_OAI_ONLY = (
    ("oai_url", "--oai-url"),
    ("oai_set", "--set"),
    ("datestamp_from", "--datestamp-from"),
    ("datestamp_until", "--datestamp-until"),
)
_PLAN_ONLY = (("html_from", "--html-from", "ar5iv"), ("bandwidth", "--bandwidth", 100.0))


def _check_corpus_flags(args: argparse.Namespace, raw_ids: list) -> str:
    """Which command this is ("plan", "snapshot", "oai", "fetch"); SystemExit with one
    sentence for flags that do not go together."""

    def fail(msg: str):
        raise SystemExit(f"sciga fetch: {msg}")

    if args.metadata_snapshot and args.oai_pmh:
        fail("give --metadata-snapshot or --oai-pmh, not both.")
    for attr, name in _OAI_ONLY:
        if getattr(args, attr) and not args.oai_pmh:
            fail(f"{name} goes with --oai-pmh.")
    if args.oai_format != "arXivRaw" and not args.oai_pmh:
        fail("--oai-format goes with --oai-pmh.")
    selecting = args.category or args.date_from or args.date_until
    bulk = args.metadata_snapshot or args.oai_pmh
    if args.plan:
        return "plan"
    for attr, name, default in _PLAN_ONLY:
        if getattr(args, attr) != default:
            fail(f"{name} goes with --plan.")
    if bulk:
        if raw_ids or args.query or args.cached_metadata:
            fail(
                "--metadata-snapshot / --oai-pmh only write metadata; run --ids / --query / --cached-metadata "
                "as a second command."
            )
        return "snapshot" if args.metadata_snapshot else "oai"
    if selecting and not args.cached_metadata:
        fail(
            "--category / --from / --until select from --metadata-snapshot, --oai-pmh or --cached-metadata "
            "(for --query, write the selection in the query)."
        )
    return "fetch"


def selection_from(args: argparse.Namespace):
    from sciga.transforms.metadata.corpus_selection import Selection, SelectionError, parse_categories, parse_day

    try:
        return Selection(
            categories=parse_categories(args.category),
            date_from=parse_day(args.date_from, "--from") if args.date_from else None,
            date_until=parse_day(args.date_until, "--until", end=True) if args.date_until else None,
        )
    except SelectionError as e:
        raise SystemExit(f"sciga fetch: {e}") from None


def oai_options_from(args: argparse.Namespace, selection):
    from sciga.transforms.metadata.corpus_selection import SelectionError, oai_set_of, parse_day
    from sciga.transforms.metadata.oai_pmh import DEFAULT_OAI_URL, OaiHarvestOptions

    url = args.oai_url or os.environ.get("SCIGA_OAI_URL") or DEFAULT_OAI_URL
    try:
        dfrom = parse_day(args.datestamp_from, "--datestamp-from") if args.datestamp_from else None
        duntil = parse_day(args.datestamp_until, "--datestamp-until", end=True) if args.datestamp_until else None
    except SelectionError as e:
        raise SystemExit(f"sciga fetch: {e}") from None
    return OaiHarvestOptions(
        url=url,
        metadata_prefix=args.oai_format,
        set_spec=args.oai_set or oai_set_of(selection),
        selection=selection,
        datestamp_from=dfrom,
        datestamp_until=duntil,
    )


def _http_from(args: argparse.Namespace):
    from sciga.pipelines.sources_options import endpoints_from_args, http_options_from_args

    return endpoints_from_args(args), http_options_from_args(args)


def _write_import_report(cache, report) -> None:
    d = report.to_json()
    d["finished_unix"] = int(time.time())
    cache.write_atomic(
        os.path.join(cache.root, "report.json"), (json.dumps(d, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
    )


def _progress_bar(**kw):
    from tqdm import tqdm

    return tqdm(file=sys.stderr, dynamic_ncols=True, **kw)


def _finish_import(cache, bar, work):
    """Run a metadata import into ``cache``, then close the bar, write report.json and close
    the cache (the report only when the import finished)."""
    try:
        report = work()
    finally:
        if bar is not None:
            bar.close()
    _write_import_report(cache, report)
    cache.close()
    return report


def run_snapshot_import(args: argparse.Namespace):
    from sciga.transforms.metadata.cache_sink import open_for_import
    from sciga.transforms.metadata.snapshot import SnapshotOptions, import_snapshot, snapshot_size

    options = SnapshotOptions(uri=args.metadata_snapshot, selection=selection_from(args))
    cache = open_for_import(args.output)
    bar = (
        None
        if args.no_progress
        else _progress_bar(
            total=snapshot_size(options.uri), unit="B", unit_scale=True, unit_divisor=1024, desc="snapshot"
        )
    )

    def progress(pos: int) -> None:
        if bar is not None:
            bar.update(max(0, pos - bar.n))

    return _finish_import(cache, bar, lambda: import_snapshot(options, cache, progress=progress))


def run_oai_harvest(args: argparse.Namespace):
    from sciga.transforms.metadata.cache_sink import open_for_import
    from sciga.transforms.metadata.oai_pmh import OaiHarvester

    options = oai_options_from(args, selection_from(args))
    endpoints, http_options = _http_from(args)
    http = http_options.client(endpoints)
    cache = open_for_import(args.output)
    bar = None if args.no_progress else _progress_bar(total=None, unit="rec", desc="OAI-PMH")

    def on_page(report, total) -> None:
        if bar is not None:
            if total and (bar.total or 0) < total:
                bar.total = total
            bar.update(max(0, report.read - bar.n))
            bar.set_postfix(selected=report.selected, refresh=False)

    return _finish_import(cache, bar, lambda: OaiHarvester(options, http, cache).run(on_page=on_page))


def run_plan(args: argparse.Namespace, raw_ids: list):
    from sciga.transforms.fetch.cost_estimate import PlanOptions, plan_fetch

    endpoints, _ = _http_from(args)
    parts = tuple(p.strip() for p in args.parts.split(",") if p.strip())
    selection = selection_from(args)
    options = PlanOptions(
        cache=os.path.abspath(args.output),
        endpoints=endpoints,
        parts=parts,
        ids=tuple(raw_ids),
        query=args.query,
        max_results=args.max_results,
        page_size=args.page_size,
        snapshot=args.metadata_snapshot,
        oai=oai_options_from(args, selection) if args.oai_pmh else None,
        cached_metadata=args.cached_metadata,
        selection=selection,
        html_dumps=tuple(args.html_dump),
        eprints_bulk=args.eprints_bulk,
        eprints_manifest=args.eprints_manifest,
        html_from=args.html_from,
        bandwidth_mbit=args.bandwidth,
        refresh=args.refresh,
        retry_failed=args.retry_failed,
    )
    return plan_fetch(options)


def run(args: argparse.Namespace, rest=None) -> int:
    summary = run_fetch(args)  # a fetch summary, a bulk metadata import report or a plan
    print(summary.text())
    return summary.exit_code
