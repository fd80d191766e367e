"""`sciga build` options of the sources stage and the pieces they switch on.

Kept out of build.py so the shared file only gains a few lines: ``--ids`` / ``--id-file``
(fetch inside the pipeline, e.g. on Dataflow), the endpoint and network options shared with
``sciga fetch``, and the TeX-source figure stage (``--tex-input``, ``--no-tex``, matching
threshold, rasterization settings).
"""

from __future__ import annotations

import argparse
import posixpath
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from sciga.pipelines.arg_types import non_negative_float, non_negative_int, positive_float, positive_int, unit_interval
from sciga.transforms.fetch.endpoints import (
    DEFAULT_ARXIV_API_URL,
    DEFAULT_EPRINT_BASE_URL,
    DEFAULT_HTML_BASE_URL,
    DEFAULT_RATE_LIMIT,
    ENV,
    Endpoints,
    HttpOptions,
)

if TYPE_CHECKING:
    from sciga.transforms.fetch.beam import FetchPapers
    from sciga.transforms.latexml.convert import LatexmlOptions
    from sciga.transforms.tex_recovery.options import TexOptions


@dataclass(frozen=True)
class IdFetchOptions:
    """How ``sciga build --ids`` fetches its papers inside the pipeline (the polite client of
    ``sciga fetch``)."""

    store: str  # the fetch store (--fetch-cache, default OUTPUT/fetch_cache)
    endpoints: Endpoints
    http: HttpOptions
    workers: int = 1


def add_source_build_arguments(ap: argparse.ArgumentParser) -> None:
    g = ap.add_argument_group("sources: TeX figures and fetching inside the pipeline")
    g.add_argument(
        "--tex-input",
        action="append",
        default=[],
        metavar="DIR",
        help="folder of TeX sources by paper (<stem>/ or <stem>.tar.gz); sources beside a page "
        "(<stem>.src.tar.gz, source/) are always used; repeatable",
    )
    g.add_argument("--no-tex", action="store_true", help="do not use TeX sources to recover lost or blank figures")
    g.add_argument(
        "--tex-match-threshold",
        type=unit_interval,
        default=0.8,
        metavar="J",
        help="caption token Jaccard needed to match a TeX figure to an HTML figure without a number (default 0.8)",
    )
    g.add_argument(
        "--tex-number-min-jaccard",
        type=unit_interval,
        default=0.3,
        metavar="J",
        help="caption overlap still required when the figure numbers agree (default 0.3)",
    )
    g.add_argument(
        "--rasterize-dpi", type=positive_int, default=150, help="resolution for PDF / EPS figures (default 150)"
    )
    g.add_argument(
        "--rasterize-max-side", type=positive_int, default=2048, help="longest side of a rasterized PDF figure, pixels"
    )
    g.add_argument(
        "--rasterize-timeout", type=positive_float, default=60.0, help="seconds per PDF / EPS figure (default 60)"
    )
    g.add_argument(
        "--ids",
        nargs="+",
        default=[],
        metavar="ID",
        help="fetch these arXiv ids inside the pipeline (metadata, HTML, e-print) and build them",
    )
    g.add_argument("--id-file", default=None, metavar="FILE", help="file with one arXiv id per line, for --ids")
    g.add_argument(
        "--fetch-cache",
        default=None,
        metavar="PATH",
        help="where --ids fetches go (any fsspec path, e.g. gs://bucket/cache; default OUTPUT/fetch_cache)",
    )
    g.add_argument(
        "--eprints-bulk",
        default=None,
        metavar="DIR_OR_URL",
        help="arXiv's bulk source tars (a folder or s3://arxiv/src/ holding arXiv_src_manifest.xml): e-prints for "
        "TeX figure recovery and --html-from; s3://arxiv is requester-pays (you are billed for what is read)",
    )
    g.add_argument(
        "--html-from",
        choices=("ar5iv", "latexml", "auto"),
        default="ar5iv",
        help="where pages come from: ar5iv (the pages in --input, default), latexml (convert the e-print of "
        "every paper with metadata), auto (the page when there is one, else convert the e-print)",
    )
    g.add_argument(
        "--latexml-timeout",
        type=positive_float,
        default=300.0,
        metavar="SECONDS",
        help="time limit of one LaTeXML conversion (default %(default)s)",
    )
    g.add_argument(
        "--latexml-max-memory-gb",
        type=positive_float,
        default=4.0,
        metavar="GB",
        help="memory limit of one LaTeXML conversion (default %(default)s)",
    )
    g.add_argument(
        "--fetch-workers",
        type=positive_int,
        default=1,
        help="parallel fetchers for --ids; each keeps the per-host rate limit, so >1 only for mirrors (default 1)",
    )
    add_endpoint_arguments(g)


def prepare_source_args(args: argparse.Namespace) -> None:
    """Resolve --ids / --id-file into ``args.fetch_ids`` and the fetch store location."""
    raw = list(args.ids or [])
    if args.id_file:
        raw += read_id_file(args.id_file)
    args.fetch_ids = sorted(dict.fromkeys(r.strip() for r in raw if r.strip()))
    if args.fetch_ids and not args.fetch_cache:
        args.fetch_cache = posixpath.join(args.output.rstrip("/"), "fetch_cache")
    if args.fetch_ids and (args.input or args.sample):
        raise SystemExit(
            "sciga build: --ids fetches its own inputs; use it without --input / --sample "
            "(or run `sciga fetch` first and build the cache with --input)."
        )


def tex_dirs(args: argparse.Namespace) -> list[str]:
    dirs = list(args.tex_input or [])
    if args.sample:
        from sciga.samples import sample_dir

        dirs.append(posixpath.join(posixpath.dirname(sample_dir()), "tex"))
    return dirs


def tex_options_from_args(args: argparse.Namespace) -> TexOptions:
    from sciga.transforms.tex_recovery.options import TexOptions

    return TexOptions(
        enabled=not args.no_tex,
        tex_dirs=tuple(tex_dirs(args)),
        threshold=args.tex_match_threshold,
        number_min_jaccard=args.tex_number_min_jaccard,
        dpi=args.rasterize_dpi,
        max_side=args.rasterize_max_side,
        timeout=args.rasterize_timeout,
    )


def add_endpoint_arguments(ap) -> None:
    """The endpoint and network options shared by ``sciga fetch`` and ``sciga build --ids``."""
    ap.add_argument(
        "--arxiv-api-url",
        default=None,
        metavar="URL",
        help=f"arXiv API query endpoint (env {ENV['arxiv_api_url']}; default {DEFAULT_ARXIV_API_URL})",
    )
    ap.add_argument(
        "--html-base-url",
        default=None,
        metavar="URL",
        help=f"base URL of LaTeXML HTML pages, id appended (env {ENV['html_base_url']}; "
        f"default {DEFAULT_HTML_BASE_URL}; https://arxiv.org/html/ also works)",
    )
    ap.add_argument(
        "--eprint-base-url",
        default=None,
        metavar="URL",
        help=f"base URL of TeX e-prints, id appended (env {ENV['eprint_base_url']}; default {DEFAULT_EPRINT_BASE_URL})",
    )
    ap.add_argument(
        "--rate-limit",
        type=non_negative_float,
        default=None,
        metavar="SECONDS",
        help=f"seconds between requests to one host (env {ENV['rate_limit']}; default {DEFAULT_RATE_LIMIT:g}; "
        "arxiv.org hosts never go below 3)",
    )
    ap.add_argument(
        "--max-retries",
        type=non_negative_int,
        default=4,
        help="retries per request on 429 / 5xx / resets / timeouts (default 4)",
    )
    ap.add_argument(
        "--timeout",
        type=positive_float,
        default=60.0,
        help="seconds to wait for a response before retrying (default 60)",
    )
    ap.add_argument(
        "--retry-backoff",
        type=non_negative_float,
        default=1.0,
        metavar="SECONDS",
        help="first backoff delay; doubles per retry, capped at 60 s (a Retry-After header wins)",
    )


def endpoints_from_args(args: argparse.Namespace) -> Endpoints:
    """--arxiv-api-url / --html-base-url / --eprint-base-url / --rate-limit, else their
    environment variables, else the defaults; one sentence for a bad value."""
    from sciga.transforms.fetch.endpoints import resolve_endpoints

    try:
        return resolve_endpoints(args.arxiv_api_url, args.html_base_url, args.eprint_base_url, args.rate_limit)
    except ValueError as e:
        raise SystemExit(str(e)) from None


def http_options_from_args(args: argparse.Namespace) -> HttpOptions:
    return HttpOptions(max_retries=args.max_retries, timeout=args.timeout, backoff=args.retry_backoff)


def latexml_options_from_args(args: argparse.Namespace) -> LatexmlOptions:
    from sciga.transforms.latexml.convert import LatexmlOptions

    return LatexmlOptions(timeout_s=args.latexml_timeout, max_memory_bytes=int(args.latexml_max_memory_gb * (1 << 30)))


def id_fetch_options_from_args(args: argparse.Namespace) -> Optional[IdFetchOptions]:
    """The fetch of ``--ids`` / ``--id-file`` (after ``prepare_source_args``); None without ids."""
    if not args.fetch_ids:
        return None
    return IdFetchOptions(
        store=args.fetch_cache,
        endpoints=endpoints_from_args(args),
        http=http_options_from_args(args),
        workers=args.fetch_workers,
    )


def fetch_transform(opts: IdFetchOptions) -> FetchPapers:
    from sciga.transforms.fetch.beam import FetchPapers

    return FetchPapers(
        opts.store,
        opts.endpoints,
        workers=opts.workers,
        max_retries=opts.http.max_retries,
        timeout=opts.http.timeout,
        backoff=opts.http.backoff,
    )


def read_id_file(path: str) -> list[str]:
    """The arXiv ids of an --id-file: whitespace or commas between ids, ``#`` starts a comment."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise FileNotFoundError(f"--id-file {path} could not be read ({e.strerror or e}); check the path.") from None
    out = []
    for ln in lines:
        ln = ln.split("#", 1)[0].strip()
        if ln:
            out.extend(ln.replace(",", " ").split())
    return out
