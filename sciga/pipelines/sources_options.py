"""`sciga build` flags of the sources (``SourceFlags``, each declared once) and the options
they make: ``--ids`` / ``--id-file`` (fetch inside the pipeline, e.g. on Dataflow), the
endpoint and network flags shared with ``sciga fetch`` and ``sciga update``
(``EndpointFlags``), and the TeX-source figure stage (``--tex-input``, ``--no-tex``,
matching threshold, rasterization settings).
"""

from __future__ import annotations

import argparse
import posixpath
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Optional

from sciga.pipelines.arg_types import non_negative_float, non_negative_int, positive_float, positive_int, unit_interval
from sciga.pipelines.flags import add_flags, flag, flags_of, from_args
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
    from sciga.executors.options import IdFetchOptions
    from sciga.transforms.latexml.convert import LatexmlOptions
    from sciga.transforms.tex_recovery.options import TexOptions


@dataclass(frozen=True)
class EndpointFlags:
    """The endpoint and network flags shared by ``sciga fetch``, ``sciga build --ids`` and
    ``sciga update``."""

    arxiv_api_url: Optional[str] = flag(
        "--arxiv-api-url",
        metavar="URL",
        help=f"arXiv API query endpoint (env {ENV['arxiv_api_url']}; default {DEFAULT_ARXIV_API_URL})",
    )
    html_base_url: Optional[str] = flag(
        "--html-base-url",
        metavar="URL",
        help=f"base URL of LaTeXML HTML pages, id appended (env {ENV['html_base_url']}; "
        f"default {DEFAULT_HTML_BASE_URL}; https://arxiv.org/html/ also works)",
    )
    eprint_base_url: Optional[str] = flag(
        "--eprint-base-url",
        metavar="URL",
        help=f"base URL of TeX e-prints, id appended (env {ENV['eprint_base_url']}; default {DEFAULT_EPRINT_BASE_URL})",
    )
    rate_limit: Optional[float] = flag(
        "--rate-limit",
        type=non_negative_float,
        metavar="SECONDS",
        help=f"seconds between requests to one host (env {ENV['rate_limit']}; default {DEFAULT_RATE_LIMIT:g}; "
        "arxiv.org hosts never go below 3)",
    )
    max_retries: int = flag(
        "--max-retries",
        default=4,
        type=non_negative_int,
        help="retries per request on 429 / 5xx / resets / timeouts (default 4)",
    )
    timeout: float = flag(
        "--timeout",
        default=60.0,
        type=positive_float,
        help="seconds to wait for a response before retrying (default 60)",
    )
    retry_backoff: float = flag(
        "--retry-backoff",
        default=1.0,
        type=non_negative_float,
        metavar="SECONDS",
        help="first backoff delay; doubles per retry, capped at 60 s (a Retry-After header wins)",
    )

    def endpoints(self) -> Endpoints:
        """--arxiv-api-url / --html-base-url / --eprint-base-url / --rate-limit, else their
        environment variables, else the defaults; one sentence for a bad value."""
        from sciga.transforms.fetch.endpoints import resolve_endpoints

        try:
            return resolve_endpoints(self.arxiv_api_url, self.html_base_url, self.eprint_base_url, self.rate_limit)
        except ValueError as e:
            raise SystemExit(str(e)) from None

    def http(self) -> HttpOptions:
        return HttpOptions(max_retries=self.max_retries, timeout=self.timeout, backoff=self.retry_backoff)


@dataclass(frozen=True)
class SourceFlags:
    GROUP: ClassVar[str] = "sources: TeX figures and fetching inside the pipeline"

    tex_input: list[str] = flag(
        "--tex-input",
        default=[],
        action="append",
        metavar="DIR",
        help="folder of TeX sources by paper (<stem>/ or <stem>.tar.gz); sources beside a page "
        "(<stem>.src.tar.gz, source/) are always used; repeatable",
    )
    no_tex: bool = flag(
        "--no-tex", default=False, action="store_true", help="do not use TeX sources to recover lost or blank figures"
    )
    tex_match_threshold: float = flag(
        "--tex-match-threshold",
        default=0.8,
        type=unit_interval,
        metavar="J",
        help="caption token Jaccard needed to match a TeX figure to an HTML figure without a number (default 0.8)",
    )
    tex_number_min_jaccard: float = flag(
        "--tex-number-min-jaccard",
        default=0.3,
        type=unit_interval,
        metavar="J",
        help="caption overlap still required when the figure numbers agree (default 0.3)",
    )
    rasterize_dpi: int = flag(
        "--rasterize-dpi", default=150, type=positive_int, help="resolution for PDF / EPS figures (default 150)"
    )
    rasterize_max_side: int = flag(
        "--rasterize-max-side",
        default=2048,
        type=positive_int,
        help="longest side of a rasterized PDF figure, pixels",
    )
    rasterize_timeout: float = flag(
        "--rasterize-timeout", default=60.0, type=positive_float, help="seconds per PDF / EPS figure (default 60)"
    )
    ids: list[str] = flag(
        "--ids",
        default=[],
        nargs="+",
        metavar="ID",
        help="fetch these arXiv ids inside the pipeline (metadata, HTML, e-print) and build them",
        recorded=False,
    )
    id_file: Optional[str] = flag(
        "--id-file", metavar="FILE", help="file with one arXiv id per line, for --ids", recorded=False
    )
    fetch_cache: Optional[str] = flag(
        "--fetch-cache",
        metavar="PATH",
        help="where --ids fetches go (any fsspec path, e.g. gs://bucket/cache; default OUTPUT/fetch_cache)",
    )
    eprints_bulk: Optional[str] = flag(
        "--eprints-bulk",
        metavar="DIR_OR_URL",
        help="arXiv's bulk source tars (a folder or s3://arxiv/src/ holding arXiv_src_manifest.xml): e-prints for "
        "TeX figure recovery and --html-from; s3://arxiv is requester-pays (you are billed for what is read)",
    )
    html_from: str = flag(
        "--html-from",
        default="ar5iv",
        choices=("ar5iv", "latexml", "auto"),
        help="where pages come from: ar5iv (the pages in --input, default), latexml (convert the e-print of "
        "every paper with metadata), auto (the page when there is one, else convert the e-print)",
    )
    latexml_timeout: float = flag(
        "--latexml-timeout",
        default=300.0,
        type=positive_float,
        metavar="SECONDS",
        help="time limit of one LaTeXML conversion (default %(default)s)",
    )
    latexml_max_memory_gb: float = flag(
        "--latexml-max-memory-gb",
        default=4.0,
        type=positive_float,
        metavar="GB",
        help="memory limit of one LaTeXML conversion (default %(default)s)",
    )
    fetch_workers: int = flag(
        "--fetch-workers",
        default=1,
        type=positive_int,
        help="parallel fetchers for --ids; each keeps the per-host rate limit, so >1 only for mirrors (default 1)",
    )
    endpoints: EndpointFlags = flags_of(EndpointFlags)

    def fetch_ids(self) -> list[str]:
        """--ids and the ids of --id-file, each once, sorted."""
        raw = list(self.ids or [])
        if self.id_file:
            raw += read_id_file(self.id_file)
        return sorted(dict.fromkeys(r.strip() for r in raw if r.strip()))

    def tex_options(self, sample_tex: Optional[str] = None) -> TexOptions:
        """The TeX stage's options (``sample_tex``: the embedded sample's TeX sources, for --sample)."""
        from sciga.transforms.tex_recovery.options import TexOptions

        return TexOptions(
            enabled=not self.no_tex,
            tex_dirs=tuple([*self.tex_input, *([sample_tex] if sample_tex else [])]),
            threshold=self.tex_match_threshold,
            number_min_jaccard=self.tex_number_min_jaccard,
            dpi=self.rasterize_dpi,
            max_side=self.rasterize_max_side,
            timeout=self.rasterize_timeout,
        )

    def latexml_options(self) -> LatexmlOptions:
        from sciga.transforms.latexml.convert import LatexmlOptions

        return LatexmlOptions(
            timeout_s=self.latexml_timeout, max_memory_bytes=int(self.latexml_max_memory_gb * (1 << 30))
        )

    def id_fetch_options(self, fetch_ids: list[str], store: str) -> Optional[IdFetchOptions]:
        """The fetch of ``--ids`` / ``--id-file`` into ``store``; None without ids."""
        from sciga.executors.options import IdFetchOptions

        if not fetch_ids:
            return None
        e = self.endpoints
        return IdFetchOptions(store=store, endpoints=e.endpoints(), http=e.http(), workers=self.fetch_workers)


def sample_tex_dir() -> str:
    from sciga.samples import sample_dir

    return posixpath.join(posixpath.dirname(sample_dir()), "tex")


def add_endpoint_arguments(ap) -> None:
    """The endpoint and network flags (``EndpointFlags``) on a command's parser or group."""
    add_flags(ap, EndpointFlags, into=ap)


def endpoints_from_args(args: argparse.Namespace) -> Endpoints:
    return from_args(EndpointFlags, args).endpoints()


def http_options_from_args(args: argparse.Namespace) -> HttpOptions:
    return from_args(EndpointFlags, args).http()


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
