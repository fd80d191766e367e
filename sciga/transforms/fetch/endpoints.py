"""Where papers come from: every endpoint is an option and an environment variable, so
users can point at mirrors and tests at 127.0.0.1."""

from __future__ import annotations

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


def resolve_endpoints(
    arxiv_api_url: str | None = None,
    html_base_url: str | None = None,
    eprint_base_url: str | None = None,
    rate_limit: float | str | None = None,
    environ: dict | None = None,
) -> Endpoints:
    """Each endpoint: the value given, else its environment variable, else the default."""
    env = os.environ if environ is None else environ
    given = {
        "arxiv_api_url": arxiv_api_url,
        "html_base_url": html_base_url,
        "eprint_base_url": eprint_base_url,
        "rate_limit": rate_limit,
    }

    def pick(name: str, default):
        v = given[name]
        if v is None or v == "":
            v = env.get(ENV[name]) or default
        return v

    rate = pick("rate_limit", DEFAULT_RATE_LIMIT)
    try:
        rate = float(rate)
    except (TypeError, ValueError):
        raise ValueError(f"--rate-limit / {ENV['rate_limit']} must be a number of seconds, got {rate!r}.") from None
    if rate < 0:
        raise ValueError("--rate-limit must be zero or more seconds.")
    return Endpoints(
        arxiv_api_url=str(pick("arxiv_api_url", DEFAULT_ARXIV_API_URL)),
        html_base_url=str(pick("html_base_url", DEFAULT_HTML_BASE_URL)),
        eprint_base_url=str(pick("eprint_base_url", DEFAULT_EPRINT_BASE_URL)),
        rate_limit=rate,
    )


@dataclass(frozen=True)
class HttpOptions:
    """How politely and how long the HTTP client tries."""

    max_retries: int = 4  # per request, on 429 / 5xx / resets / timeouts
    timeout: float = 60.0  # seconds to wait for a response before retrying
    backoff: float = 1.0  # first backoff delay; doubles per retry, capped at 60 s (Retry-After wins)

    def client(self, endpoints: Endpoints):
        from sciga.transforms.fetch.http_client import PoliteClient

        return PoliteClient(
            endpoints.rate_limit,
            max_retries=self.max_retries,
            read_timeout=self.timeout,
            total_timeout=max(self.timeout * 10, 60.0),
            backoff_base=self.backoff,
        )
