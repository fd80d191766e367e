"""Where papers come from: every endpoint is an option and an environment variable, so
users can point at mirrors and tests at 127.0.0.1."""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

DEFAULT_ARXIV_API_URL = "https://export.arxiv.org/api/query"
DEFAULT_HTML_BASE_URL = "https://ar5iv.labs.arxiv.org/html/"
DEFAULT_EPRINT_BASE_URL = "https://arxiv.org/e-print/"
DEFAULT_RATE_LIMIT = 3.0

ENV = {
    "arxiv_api_url": "SCIGA_ARXIV_API_URL",
    "html_base_url": "SCIGA_HTML_BASE_URL",
    "eprint_base_url": "SCIGA_EPRINT_BASE_URL",
    "rate_limit": "SCIGA_RATE_LIMIT",
}


@dataclass(frozen=True)
class Endpoints:
    arxiv_api_url: str = DEFAULT_ARXIV_API_URL
    html_base_url: str = DEFAULT_HTML_BASE_URL
    eprint_base_url: str = DEFAULT_EPRINT_BASE_URL
    rate_limit: float = DEFAULT_RATE_LIMIT

    def html_url(self, paper_id: str, version: str | None = None) -> str:
        return _join(self.html_base_url, paper_id + (version or ""))

    def eprint_url(self, paper_id: str, version: str | None = None) -> str:
        return _join(self.eprint_base_url, paper_id + (version or ""))


def _join(base: str, tail: str) -> str:
    return base if not tail else (base if base.endswith("/") else base + "/") + tail


def add_endpoint_arguments(ap: argparse.ArgumentParser) -> None:
    """The endpoint and network options shared by ``sciga fetch`` and ``sciga build --ids``."""
    ap.add_argument("--arxiv-api-url", default=None, metavar="URL",
                    help=f"arXiv API query endpoint (env {ENV['arxiv_api_url']}; default {DEFAULT_ARXIV_API_URL})")
    ap.add_argument("--html-base-url", default=None, metavar="URL",
                    help=f"base URL of LaTeXML HTML pages, id appended (env {ENV['html_base_url']}; "
                         f"default {DEFAULT_HTML_BASE_URL}; https://arxiv.org/html/ also works)")
    ap.add_argument("--eprint-base-url", default=None, metavar="URL",
                    help=f"base URL of TeX e-prints, id appended (env {ENV['eprint_base_url']}; default {DEFAULT_EPRINT_BASE_URL})")
    ap.add_argument("--rate-limit", type=float, default=None, metavar="SECONDS",
                    help=f"seconds between requests to one host (env {ENV['rate_limit']}; default {DEFAULT_RATE_LIMIT:g}; "
                         "arxiv.org hosts never go below 3)")
    ap.add_argument("--max-retries", type=int, default=4, help="retries per request on 429 / 5xx / resets / timeouts (default 4)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for a response before retrying (default 60)")
    ap.add_argument("--retry-backoff", type=float, default=1.0, metavar="SECONDS",
                    help="first backoff delay; doubles per retry, capped at 60 s (a Retry-After header wins)")


def endpoints_from(args: argparse.Namespace | None = None, environ: dict | None = None) -> Endpoints:
    """Option, else environment variable, else default."""
    env = os.environ if environ is None else environ

    def pick(name: str, default):
        v = getattr(args, name, None) if args is not None else None
        if v is None or v == "":
            v = env.get(ENV[name]) or default
        return v

    rate = pick("rate_limit", DEFAULT_RATE_LIMIT)
    try:
        rate = float(rate)
    except (TypeError, ValueError):
        raise SystemExit(f"--rate-limit / {ENV['rate_limit']} must be a number of seconds, got {rate!r}.") from None
    if rate < 0:
        raise SystemExit("--rate-limit must be zero or more seconds.")
    return Endpoints(
        arxiv_api_url=str(pick("arxiv_api_url", DEFAULT_ARXIV_API_URL)),
        html_base_url=str(pick("html_base_url", DEFAULT_HTML_BASE_URL)),
        eprint_base_url=str(pick("eprint_base_url", DEFAULT_EPRINT_BASE_URL)),
        rate_limit=rate,
    )
