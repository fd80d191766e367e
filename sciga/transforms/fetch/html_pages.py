"""LaTeXML HTML from ar5iv / arxiv.org (or a mirror) over HTTP, with failed conversions
detected and reported instead of being parsed as papers.

What a failed or missing conversion looks like:

* ar5iv has no conversion: a temporary redirect to ``https://arxiv.org/abs/<id>`` (an abstract
  page, not LaTeXML);
* ar5iv converted with a fatal error: a page titled "No content available" with an empty
  ``article.ltx_document`` and the conversion report link marked ``ar5iv-severity-fatal``;
  pages that say "Conversion to HTML had a Fatal error" are the same case;
* arxiv.org has no HTML for the paper: HTTP 404;
* anything else that is not LaTeXML (an error page, a PDF, a login wall).

A page with a fatal error that still holds the document body is kept (the parser decides),
and so is a page with ``ltx_ERROR`` spans: they are common in good conversions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional
from urllib.parse import urlsplit

from sciga.transforms.common.conversion_check import MAX_PAGE_BYTES, conversion_problem, generator_of
from sciga.transforms.common.errors import StageError
from sciga.transforms.fetch.endpoints import Endpoints
from sciga.transforms.fetch.http_client import FetchError, PoliteClient

STAGE = "fetch_html"


@dataclass
class HtmlPage:
    paper_id: str
    url: str  # final URL
    body: bytes
    source: str  # "ar5iv" | "arxiv_html" | "http"
    generator: Optional[str]
    etag: Optional[str] = None
    last_modified: Optional[str] = None
    not_modified: bool = False
    fatal_marked: bool = False  # the page carries ar5iv's fatal-severity marker but has content


def source_label(url: str) -> str:
    host = (urlsplit(url).hostname or "").lower()
    if "ar5iv" in host:
        return "ar5iv"
    if host == "arxiv.org" or host.endswith(".arxiv.org"):
        return "arxiv_html"
    return "http"


def fetch_html(
    http: PoliteClient,
    endpoints: Endpoints,
    paper_id: str,
    version: Optional[str] = None,
    *,
    etag: Optional[str] = None,
    last_modified: Optional[str] = None,
    max_bytes: int = MAX_PAGE_BYTES,
) -> HtmlPage:
    """The LaTeXML page of a paper, or a StageError (stage ``fetch_html``) whose
    ``error_type`` says why: ``no_html``, ``conversion_failed``, ``not_latexml``,
    ``http_<status>``, ``fetch_failed`` (transient: rerun to retry)."""
    url = endpoints.html_url(paper_id, version)
    try:
        resp = http.get(
            url,
            etag=etag,
            last_modified=last_modified,
            max_bytes=max_bytes,
            headers={"Accept": "text/html,application/xhtml+xml"},
        )
    except FetchError as e:
        err = StageError(
            STAGE,
            "fetch_failed" if not e.permanent else e.kind,
            f"{paper_id}: {e.message}",
            paper_id,
            permanent=e.permanent,
        )
        raise err from None
    if resp.not_modified:
        return HtmlPage(paper_id, resp.url, b"", source_label(resp.url), None, etag, last_modified, not_modified=True)
    if resp.status in (404, 410):
        err = StageError(
            STAGE,
            "no_html",
            f"{paper_id}: {url} has no HTML for this paper (HTTP {resp.status}); "
            "it may have no LaTeX source or was never converted.",
            paper_id,
            permanent=True,
        )
        raise err
    if resp.status != 200:
        err = StageError(
            STAGE,
            f"http_{resp.status}",
            f"{paper_id}: {url} answered HTTP {resp.status}; check --html-base-url.",
            paper_id,
            permanent=400 <= resp.status < 500,
        )
        raise err
    problem = conversion_problem(resp.body, resp.url)
    if problem:
        kind, why = problem
        err = StageError(
            STAGE,
            kind,
            f"{paper_id}: {resp.url}: {why}; the paper is skipped (its TeX source and metadata are still fetched).",
            paper_id,
            permanent=True,
        )
        raise err
    low = resp.body.lower()
    return HtmlPage(
        paper_id=paper_id,
        url=resp.url,
        body=resp.body,
        source=source_label(resp.url),
        generator=generator_of(resp.body),
        etag=resp.etag,
        last_modified=resp.last_modified,
        fatal_marked=b"ar5iv-severity-fatal" in low,
    )


def fetch_eprint(
    http: PoliteClient,
    endpoints: Endpoints,
    paper_id: str,
    version: Optional[str] = None,
    *,
    etag: Optional[str] = None,
    last_modified: Optional[str] = None,
    max_bytes: int = 512 * 1024 * 1024,
):
    """The e-print bytes of a paper (``HttpResponse``), or a StageError (``fetch_source``)."""
    url = endpoints.eprint_url(paper_id, version)
    try:
        resp = http.get(url, etag=etag, last_modified=last_modified, max_bytes=max_bytes)
    except FetchError as e:
        err = StageError(
            "fetch_source",
            "fetch_failed" if not e.permanent else e.kind,
            f"{paper_id}: {e.message}",
            paper_id,
            permanent=e.permanent,
        )
        raise err from None
    if resp.not_modified:
        return resp
    if resp.status in (403, 404, 410):
        err = StageError(
            "fetch_source",
            "no_source",
            f"{paper_id}: {url} has no source for this paper (HTTP {resp.status}); "
            "figures will come from the HTML only.",
            paper_id,
            permanent=True,
        )
        raise err
    if resp.status != 200:
        err = StageError(
            "fetch_source",
            f"http_{resp.status}",
            f"{paper_id}: {url} answered HTTP {resp.status}; check --eprint-base-url.",
            paper_id,
            permanent=400 <= resp.status < 500,
        )
        raise err
    if not resp.body:
        err = StageError(
            "fetch_source",
            "empty_source",
            f"{paper_id}: {url} sent an empty e-print; rerun later.",
            paper_id,
            permanent=False,
        )
        raise err
    return resp
