"""arXiv API metadata through the ``arxiv`` package, over the polite client.

How the package is used (arxiv 4.x): ``arxiv.Search`` builds the query, ``arxiv.Client``
does the paging (``results(search, offset)``) and the Atom parsing (its lxml parser,
``arxiv._feed.parse``; no feedparser). The endpoint is the client's documented
``query_url_format`` attribute, so a mirror or a test server on 127.0.0.1 is one option.
Only the HTTP step is replaced: ``_parse_feed`` (the package's fetch-one-page hook) goes
through ``PoliteClient`` so the rate limit, ``Retry-After`` and backoff rules are the same
for every source; ``delay_seconds`` is set to the enforced per-host interval (>= 3 s for
arxiv.org hosts). Around the package we add what it leaves out: a strict well-formedness
check (its parser recovers silently from broken XML), the API's error feeds (HTTP 400
``incorrect id format for abc``) turned into a clear message, DOIs from ``<link
title="doi">`` as well as ``<arxiv:doi>``, a licence when the feed carries one, and the
per-id bookkeeping (unknown ids, invalid ids, batches split when one id poisons them).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timezone
from typing import Optional

import arxiv
from arxiv import _feed as arxiv_feed
from lxml import etree

from sciga.schemas import ids
from sciga.transforms.common.errors import StageError
from sciga.transforms.fetch.http_client import FetchError, PoliteClient, host_of
from sciga.transforms.metadata.comment_venue import parse_comment_venue

log = logging.getLogger(__name__)

NS = {
    "atom": "http://www.w3.org/2005/Atom",
    "arxiv": "http://arxiv.org/schemas/atom",
    "opensearch": "http://a9.com/-/spec/opensearch/1.1/",
}
_ABS_ID_RE = re.compile(r"/abs/(?P<id>.+?)(?:v(?P<v>\d+))?$")
MAX_FEED_BYTES = 64 * 1024 * 1024


class ArxivApiError(Exception):
    """The API answered, but not with results: an error feed, malformed Atom, or a
    transport failure after retries. ``per_id`` marks errors that name one bad id."""

    def __init__(self, error_type: str, message: str, url: str, per_id: bool = False):
        super().__init__(message)
        self.error_type = error_type
        self.message = message
        self.url = url
        self.per_id = per_id

    def __reduce__(self):
        return (type(self), (self.error_type, self.message, self.url, self.per_id))


def normalize_id(raw: str) -> tuple[Optional[str], Optional[str]]:
    """``'2401.13641v2'`` -> ``('2401.13641', 'v2')``; ``'arXiv:astro-ph/0601001'`` ->
    ``('astro-ph/0601001', None)``; anything that is no arXiv id -> ``(None, None)``."""
    s = (raw or "").strip()
    s = re.sub(r"^(?:arxiv:|https?://(?:www\.|export\.)?arxiv\.org/(?:abs|pdf|html)/)", "", s, flags=re.I)
    s = re.sub(r"\.pdf$", "", s)
    pid, ver = ids.split_version(s)
    if ids.is_arxiv_id(pid):
        return pid, ver
    return None, None


def _iso(dt) -> Optional[str]:
    if dt is None:
        return None
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _clean(s: Optional[str]) -> Optional[str]:
    if s is None:
        return None
    s = re.sub(r"\s+", " ", s).strip()
    return s or None


@dataclass
class EntryExtras:
    dois: list = field(default_factory=list)
    license: Optional[str] = None


def _strict_root(body: bytes, url: str):
    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False, recover=False)
    try:
        root = etree.fromstring(body, parser=parser)
    except etree.XMLSyntaxError as e:
        raise ArxivApiError(
            "malformed_feed", f"{url} returned malformed Atom ({e}); the response was damaged, rerun later.", url
        ) from None
    if root is None or etree.QName(root).localname != "feed":
        raise ArxivApiError("malformed_feed", f"{url} did not return an Atom feed; check --arxiv-api-url.", url)
    return root


def _error_entry(root) -> Optional[str]:
    for entry in root.iterfind("atom:entry", NS):
        eid = entry.findtext("atom:id", default="", namespaces=NS)
        if "/api/errors" in eid:
            return _clean(entry.findtext("atom:summary", default="", namespaces=NS)) or eid
    return None


def _extras(root) -> dict[str, EntryExtras]:
    out = {}
    for entry in root.iterfind("atom:entry", NS):
        eid = entry.findtext("atom:id", default="", namespaces=NS)
        ex = EntryExtras()
        for d in entry.iterfind("arxiv:doi", NS):
            ex.dois.extend((d.text or "").split())
        for link in entry.iterfind("atom:link", NS):
            href = link.get("href") or ""
            if link.get("title") == "doi" and "doi.org/" in href:
                ex.dois.append(href.split("doi.org/", 1)[1])
            elif (link.get("rel") or "") == "license":
                ex.license = href or ex.license
        lic = entry.find("arxiv:license", NS)
        if lic is not None:
            ex.license = _clean(lic.text) or lic.get("href") or ex.license
        ex.dois = list(dict.fromkeys(ex.dois))  # first occurrence of each, in order
        out[eid] = ex
    return out


class PoliteArxivClient(arxiv.Client):
    """``arxiv.Client`` whose page fetch goes through ``PoliteClient``."""

    def __init__(self, http: PoliteClient, api_url: str, page_size: int = 100, num_retries: int = 3):
        super().__init__(
            page_size=page_size, delay_seconds=http.interval_for(host_of(api_url)), num_retries=num_retries
        )
        # Instance attribute: the package reads ``self.query_url_format`` for every page.
        self.query_url_format = api_url + ("&" if "?" in api_url else "?") + "{}"
        self.http = http
        self.extras: dict[str, EntryExtras] = {}
        self.pages = 0
        self.total_results: Optional[int] = None  # opensearch:totalResults of the first page

    def _parse_feed(self, url: str, first_page: bool = True, _try_index: int = 0):
        try:
            resp = self.http.get(url, max_bytes=MAX_FEED_BYTES, headers={"Accept": "application/atom+xml"})
        except FetchError as e:
            raise ArxivApiError("api_unavailable", f"the arXiv API could not be reached: {e.message}", url) from None
        self.pages += 1
        if resp.status != 200:
            msg = None
            if resp.body:
                try:
                    msg = _error_entry(_strict_root(resp.body, url))
                except ArxivApiError:
                    msg = None
            if resp.status == 400:
                raise ArxivApiError(
                    "bad_request", f"the arXiv API rejected the query ({msg or 'HTTP 400'})", url, per_id=True
                )
            raise ArxivApiError(
                f"http_{resp.status}",
                f"the arXiv API answered HTTP {resp.status} for {url}"
                + (f" ({msg})" if msg else "")
                + "; check --arxiv-api-url.",
                url,
            )
        try:
            root = _strict_root(resp.body, url)
        except ArxivApiError:
            if _try_index < self.num_retries:
                return self._parse_feed(url, first_page, _try_index + 1)
            raise
        err = _error_entry(root)
        if err:
            raise ArxivApiError("bad_request", f"the arXiv API rejected the query ({err})", url, per_id=True)
        feed = arxiv_feed.parse(resp.body)
        if first_page:
            self.total_results = feed.header.total_results
        self.extras.update(_extras(root))
        if not feed.results and not first_page:
            # The API sometimes returns an empty page in the middle of a result set.
            if _try_index < self.num_retries:
                return self._parse_feed(url, first_page, _try_index + 1)
            raise ArxivApiError(
                "empty_page",
                f"the arXiv API returned an empty page for {url} {_try_index + 1} time(s); rerun later to resume.",
                url,
            )
        return feed


def meta_from_result(r: arxiv.Result, extras: Optional[EntryExtras] = None) -> dict:
    """An ``arxiv.Result`` -> the metadata sidecar dict (``PaperMeta.from_dict`` shape)."""
    m = _ABS_ID_RE.search(r.entry_id or "")
    pid, ver = (
        (m.group("id"), f"v{m.group('v')}")
        if m and m.group("v")
        else ((m.group("id"), None) if m else (r.entry_id, None))
    )
    extras = extras or EntryExtras()
    dois = list(extras.dois)
    if r.doi:
        for d in r.doi.split():
            if d not in dois:
                dois.insert(0, d)
    comment = _clean(r.comment)
    conf = parse_comment_venue(comment)
    return {
        "id": pid,
        "version": ver,
        "title": _clean(r.title),
        "authors": [
            {"name": _clean(a.name) or "", "affiliations": [x for x in (_clean(s) for s in (a.affiliation or [])) if x]}
            for a in r.authors
        ],
        "published": _iso(r.published),
        "updated": _iso(r.updated),
        "categories": list(r.categories),
        "primary_category": r.primary_category or (r.categories[0] if r.categories else None),
        "comment": comment,
        "journal_ref": _clean(r.journal_ref),
        "dois": dois,
        "license": extras.license,
        "abstract": _clean(r.summary),
        "acm_classes": [],
        "msc_classes": [],
        "conference": {"venue": conf.venue, "year": conf.year, "track": conf.track} if conf else None,
        "abs_url": f"https://arxiv.org/abs/{pid}{ver or ''}",
    }


@dataclass
class IdLookup:
    found: dict  # paper id -> meta dict
    errors: dict  # requested id (as given) -> StageError


class ArxivMetadata:
    """Metadata by id list or by query, one polite client underneath."""

    def __init__(self, http: PoliteClient, api_url: str, page_size: int = 100):
        self.http = http
        self.api_url = api_url
        self.page_size = max(1, min(int(page_size), 2000))

    def _client(self, page_size: Optional[int] = None) -> PoliteArxivClient:
        return PoliteArxivClient(self.http, self.api_url, page_size=page_size or self.page_size)

    def by_ids(self, raw_ids: list[str]) -> IdLookup:
        """Metadata of each id; every id ends in ``found`` (by its bare id) or ``errors``."""
        found: dict = {}
        errors: dict = {}
        wanted: dict[str, tuple[str, Optional[str]]] = {}
        for raw in raw_ids:
            pid, ver = normalize_id(raw)
            if pid is None:
                errors[raw] = StageError(
                    "metadata",
                    "bad_id",
                    f"{raw!r} is not an arXiv id (expected e.g. 2401.13641 or astro-ph/0601001); fix the id list.",
                    raw,
                )
            else:
                wanted[raw] = (pid, ver)
        batch_ids = list(dict.fromkeys(pid + (ver or "") for pid, ver in wanted.values()))
        results: dict[str, dict] = {}
        failures: dict[str, StageError] = {}
        for start in range(0, len(batch_ids), self.page_size):
            self._lookup(batch_ids[start : start + self.page_size], results, failures)
        for raw, (pid, ver) in wanted.items():
            key = pid + (ver or "")
            if key in results:
                found[pid] = results[key]
            elif key in failures:
                errors[raw] = failures[key]
            else:
                errors[raw] = StageError(
                    "metadata",
                    "unknown_id",
                    f"arXiv has no paper {key} (the API returned no entry); check the id.",
                    pid,
                )
        return IdLookup(found=found, errors=errors)

    def _lookup(self, batch: list[str], results: dict, failures: dict) -> None:
        client = self._client()
        try:
            got = list(client.results(arxiv.Search(id_list=batch, max_results=len(batch))))
        except ArxivApiError as e:
            if e.per_id and len(batch) > 1:
                # One bad id makes the API reject the whole batch: find it by halving.
                mid = len(batch) // 2
                self._lookup(batch[:mid], results, failures)
                self._lookup(batch[mid:], results, failures)
                return
            for b in batch:
                pid, _ = ids.split_version(b)
                failures[b] = StageError("metadata", e.error_type, f"{b}: {e.message}", pid)
            return
        for r in got:
            meta = meta_from_result(r, client.extras.get(r.entry_id))
            pid, ver = meta["id"], meta["version"]
            for key in (pid + (ver or ""), pid):
                if key in batch:
                    results[key] = meta

    def search(self, query: str, max_results: Optional[int] = None, offset: int = 0, on_total=None) -> Iterator[dict]:
        """Metadata of every result of an arXiv query, in the API's order, from ``offset``.
        Raises ArxivApiError if a page cannot be fetched (the caller records how far it got).
        ``on_total(n)`` is called once with the API's total result count."""
        page = self.page_size if not max_results else min(self.page_size, max_results)
        client = self._client(page_size=page)
        told = False
        search = arxiv.Search(
            query=query,
            max_results=max_results,
            sort_by=arxiv.SortCriterion.Relevance,
            sort_order=arxiv.SortOrder.Descending,
        )
        for r in client.results(search, offset=offset):
            if not told and on_total is not None and client.total_results is not None:
                on_total(client.total_results)
                told = True
            yield meta_from_result(r, client.extras.get(r.entry_id))
