"""arXiv metadata over OAI-PMH (``ListRecords``, ``arXivRaw`` or ``arXiv`` format) ->
``<id>.meta.json`` of every selected paper in the fetch cache. Nothing else is fetched.

Why not sickle or oaipmh-scythe: both are good general clients, but (1) each brings its
own HTTP loop (requests / httpx) with its own retry rules, where every request of this
project goes through ``PoliteClient`` (per-host rate limit with the 3 s floor for arXiv
hosts, ``Retry-After`` shared by all callers of a host, size limit and deadline on every
body, one User-Agent); (2) each turns a page into a full DOM and every record into a
generic dict (``xml_to_dict``), which loses arXiv's structure (a version's date belongs to
its ``version`` attribute, an affiliation to its author) and is the slow path (see
``bench/oai_pmh.py``: the full-DOM baseline); (3) neither resumes across runs or recovers
from an expired resumption token, the two things a multi-hour harvest needs. So this
module speaks the protocol directly: one polite GET per page, then ``lxml.etree.iterparse``
over the page, each record handled and cleared as soon as it ends, so memory holds one
page's bytes and one record's tree, whatever the size of the harvest.

Protocol handling:

* resumption tokens; the list ends at an empty or absent token;
* ``503`` + ``Retry-After`` (arXiv's flow control) and other transient failures: the
  polite client waits and retries; when retries run out the harvest stops with its
  progress saved;
* ``badResumptionToken`` (a token that expired, e.g. after a pause or a kill): the list
  is restarted with ``from`` = the last datestamp seen, when the server has been sending
  records in datestamp order (checked as they come; else from the start of the pass).
  Records seen again are identical and are not written twice (``MetadataSink``);
* ``noRecordsMatch`` is an empty, complete harvest; other OAI-PMH errors (``badArgument``,
  ``cannotDisseminateFormat``, ``noSetHierarchy``...) stop with one sentence;
* a page that is not well-formed XML is asked again (the token is still valid).

Dates: the selection's dates are first-version dates (``corpus_selection``). OAI-PMH can
only select by datestamp, the record's last modification, which is never before its
first version: ``from`` = the selection's first day is a safe lower bound, while an
``until`` would drop papers revised later, so none is sent. ``datestamp_from`` /
``datestamp_until`` ask for an explicit datestamp window instead.

Progress lives in ``CACHE/harvests/<key>.json`` (key: endpoint, format, set, selection,
window), saved after each page's records are durable: a killed harvest resumes at the
page it was on. A complete harvest is incremental on the next run: it asks only for
records changed since the day its last pass started.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from typing import Optional
from urllib.parse import urlencode

from lxml import etree

from sciga.transforms.fetch.cache import FetchCache, canonical_json
from sciga.transforms.fetch.http_client import FetchError, PoliteClient
from sciga.transforms.metadata.arxiv_records import (
    RecordError,
    first_version_day,
    iso_day,
    meta_from_arxiv_format,
    meta_from_arxiv_raw,
    versions_of,
)
from sciga.transforms.metadata.cache_sink import ImportReport, MetadataSink, make_durable
from sciga.transforms.metadata.corpus_selection import Selection

log = logging.getLogger(__name__)

DEFAULT_OAI_URL = "https://oaipmh.arxiv.org/oai"
OAI_NS = "http://www.openarchives.org/OAI/2.0/"
FORMAT_NS = {"arXivRaw": "http://arxiv.org/OAI/arXivRaw/", "arXiv": "http://arxiv.org/OAI/arXiv/"}
MAX_PAGE_BYTES = 256 << 20

_O = "{" + OAI_NS + "}"
_RECORD, _HEADER, _METADATA, _TOKEN, _ERROR, _RESPONSE_DATE = (
    _O + "record",
    _O + "header",
    _O + "metadata",
    _O + "resumptionToken",
    _O + "error",
    _O + "responseDate",
)
_IDENTIFIER, _DATESTAMP = _O + "identifier", _O + "datestamp"


class OaiError(Exception):
    """The endpoint answered with something the harvest cannot go on from."""


@dataclass(frozen=True)
class OaiHarvestOptions:
    url: str = DEFAULT_OAI_URL
    metadata_prefix: str = "arXivRaw"
    set_spec: Optional[str] = None
    selection: Selection = field(default_factory=Selection)
    datestamp_from: Optional[str] = None  # an explicit OAI-PMH window (last-modified days)
    datestamp_until: Optional[str] = None
    max_page_bytes: int = MAX_PAGE_BYTES
    max_restarts: int = 3  # expired tokens in a row without getting further
    max_bad_pages: int = 3  # malformed answers to one request before stopping

    def __post_init__(self):
        if self.metadata_prefix not in FORMAT_NS:
            raise ValueError(f"--oai-format {self.metadata_prefix!r}: use one of {', '.join(FORMAT_NS)}.")

    def key(self) -> str:
        d = {
            "url": self.url,
            "prefix": self.metadata_prefix,
            "set": self.set_spec,
            "selection": self.selection.to_json(),
            "datestamp_from": self.datestamp_from,
            "datestamp_until": self.datestamp_until,
        }
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]

    def first_from(self) -> Optional[str]:
        """``from`` of the first pass: the explicit window, else the day before the
        selection's first day (a datestamp is never before the first version; the day of
        margin covers a datestamp written in another time zone than the version's GMT)."""
        if self.datestamp_from:
            return self.datestamp_from
        if self.selection.date_from:
            return (date.fromisoformat(self.selection.date_from) - timedelta(days=1)).isoformat()
        return None


# -- one page ------------------------------------------------------------------------------------
@dataclass
class OaiItem:
    identifier: str
    datestamp: str
    deleted: bool = False
    fields: Optional[dict] = None  # element local name -> text; "versions" / "authors" as lists


class ListRecordsPage:
    """A ``ListRecords`` answer read as a stream: ``items()`` yields each record as soon as
    its end tag is parsed (its tree is freed right after); once they are consumed,
    ``token``, ``error_code`` and the rest describe the page. ``items()`` raises
    ``etree.XMLSyntaxError`` where the page stops being well-formed."""

    def __init__(self, body: bytes, metadata_prefix: str):
        self.body = body
        self.ns = "{" + FORMAT_NS[metadata_prefix] + "}"
        self.root_tag = self.ns + metadata_prefix
        self.prefix = metadata_prefix
        self.token: Optional[str] = None
        self.has_token_element = False
        self.cursor: Optional[int] = None
        self.complete_list_size: Optional[int] = None
        self.error_code: Optional[str] = None
        self.error_message: Optional[str] = None
        self.response_date: Optional[str] = None
        self.root_seen = False

    def items(self) -> Iterator[OaiItem]:
        ctx = etree.iterparse(
            io.BytesIO(self.body),
            events=("end",),
            tag=(_RECORD, _TOKEN, _ERROR, _RESPONSE_DATE),
            resolve_entities=False,
            no_network=True,
            huge_tree=False,
            load_dtd=False,
        )
        for _, el in ctx:
            tag = el.tag
            if tag == _RECORD:
                item = self._record(el)
                # Free the record and what came before it: memory stays at one record.
                el.clear(keep_tail=False)
                parent = el.getparent()
                if parent is not None:
                    while el.getprevious() is not None:
                        del parent[0]
                if item is not None:
                    yield item
            elif tag == _TOKEN:
                self.has_token_element = True
                self.token = (el.text or "").strip() or None
                self.cursor = _int(el.get("cursor"))
                self.complete_list_size = _int(el.get("completeListSize"))
            elif tag == _ERROR:
                self.error_code = el.get("code") or "unknown"
                self.error_message = " ".join((el.text or "").split()) or None
            elif tag == _RESPONSE_DATE:
                self.response_date = (el.text or "").strip() or None
        root = ctx.root
        if root is None or etree.QName(root).localname != "OAI-PMH":
            raise OaiError("the answer is XML but not an OAI-PMH response")
        self.root_seen = True

    def _record(self, el) -> Optional[OaiItem]:
        # Children walked directly: ElementPath's find() costs more than the record's fields.
        header = md = None
        for child in el:
            t = child.tag
            if t == _HEADER:
                header = child
            elif t == _METADATA:
                md = child
        if header is None:
            return None
        ident = stamp = ""
        for h in header:
            t = h.tag
            if t == _IDENTIFIER:
                ident = (h.text or "").strip()
            elif t == _DATESTAMP:
                stamp = (h.text or "").strip()
        item = OaiItem(identifier=ident, datestamp=stamp, deleted=header.get("status") == "deleted")
        if item.deleted:
            return item
        body = None if md is None or len(md) == 0 else md[0]
        if body is None or body.tag != self.root_tag:
            item.fields = {}
            return item
        item.fields = _raw_fields(body, self.ns) if self.prefix == "arXivRaw" else _arxiv_fields(body, self.ns)
        return item


def _int(v: Optional[str]) -> Optional[int]:
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


_LOCAL_NAMES: dict = {}  # "{ns}local" -> "local", filled as tags are met


def _local(tag) -> Optional[str]:
    local = _LOCAL_NAMES.get(tag)
    if local is None and isinstance(tag, str) and tag.startswith("{"):
        local = _LOCAL_NAMES.setdefault(tag, tag.split("}", 1)[1])
    return local


def _raw_fields(body, ns: str) -> dict:
    fields: dict = {}
    versions = []
    date_tag = ns + "date"
    for child in body:
        tag = child.tag
        if not isinstance(tag, str) or not tag.startswith(ns):
            continue
        local = _local(tag)
        if local == "version":
            d = None
            for v in child:
                if v.tag == date_tag:
                    d = v.text
                    break
            versions.append((child.get("version"), d))
        else:
            fields[local] = child.text
    fields["versions"] = versions
    return fields


def _arxiv_fields(body, ns: str) -> dict:
    n = len(ns)
    fields: dict = {}
    for child in body:
        tag = child.tag
        if not isinstance(tag, str) or not tag.startswith(ns):
            continue
        local = tag[n:]
        if local == "authors":
            authors = []
            for a in child:
                authors.append(
                    (
                        a.findtext(ns + "keyname") or "",
                        a.findtext(ns + "forenames") or "",
                        a.findtext(ns + "suffix") or "",
                        [x.text or "" for x in a.iterfind(ns + "affiliation")],
                    )
                )
            fields["authors"] = authors
        else:
            fields[local] = child.text
    return fields


def select_item(item: OaiItem, prefix: str, selection: Selection) -> Optional[dict]:
    """A record -> its metadata when the selection keeps it, else None (RecordError when
    the record is malformed). Categories and the first-version date are checked before the
    rest of the record is mapped."""
    f = item.fields or {}
    if not f.get("id"):
        raise RecordError("the record has no arXiv metadata (no id)")
    cats = (f.get("categories") or "").split()
    if not cats:
        raise RecordError("no categories")
    if not selection.category_matches(cats):
        return None
    if selection.dated:
        if prefix == "arXivRaw":
            _, first, _ = versions_of(f.get("versions") or [])
        else:
            first = iso_day(f.get("created") or "")
        if not selection.date_matches(first):
            return None
    meta = meta_from_arxiv_raw(f) if prefix == "arXivRaw" else meta_from_arxiv_format(f)
    return meta if selection.date_matches(first_version_day(meta)) else None


# -- the harvest ---------------------------------------------------------------------------------
def _utc_day(ts: Optional[str]) -> Optional[str]:
    return ts[:10] if ts else None


class OaiHarvester:
    """One harvest (a pass over ``ListRecords``) into a cache, resumable across runs."""

    def __init__(self, options: OaiHarvestOptions, http: PoliteClient, cache: FetchCache, *, page_reader=None):
        self.o = options
        self.http = http
        self.cache = cache
        # page_reader(body, prefix) -> an object like ListRecordsPage (the benchmark's
        # full-DOM baseline plugs in here).
        self.page_reader = page_reader or ListRecordsPage
        self.state_path = os.path.join(cache.root, "harvests", options.key() + ".json")

    # -- state -----------------------------------------------------------------------------
    def load_state(self) -> dict:
        try:
            with open(self.state_path, "rb") as f:
                st = json.loads(f.read())
            if isinstance(st, dict) and st.get("key") == self.o.key():
                return st
        except (OSError, ValueError):
            pass
        return {
            "key": self.o.key(),
            "options": self._options_json(),
            "pass_from": self.o.first_from(),
            "pass_until": self.o.datestamp_until,
            "token": None,
            "last_datestamp": None,
            "monotonic": True,
            "pass_started": None,
            "complete": False,
            "harvested_through": None,
            "passes": 0,
            "pages": 0,
            "restarts_here": 0,
        }

    def _options_json(self) -> dict:
        return {
            "url": self.o.url,
            "metadata_prefix": self.o.metadata_prefix,
            "set": self.o.set_spec,
            "selection": self.o.selection.to_json(),
            "datestamp_from": self.o.datestamp_from,
            "datestamp_until": self.o.datestamp_until,
        }

    def save_state(self, st: dict) -> None:
        os.makedirs(os.path.dirname(self.state_path), exist_ok=True)
        self.cache.write_atomic(self.state_path, canonical_json(st))
        if not self.cache.fsync:  # the state says a page is done: make that as durable as its records
            make_durable(self.cache.root, [self.state_path])

    # -- requests --------------------------------------------------------------------------
    def request_url(self, st: dict) -> str:
        if st.get("token"):
            q = {"verb": "ListRecords", "resumptionToken": st["token"]}
        else:
            q = {"verb": "ListRecords", "metadataPrefix": self.o.metadata_prefix}
            if self.o.set_spec:
                q["set"] = self.o.set_spec
            if st.get("pass_from"):
                q["from"] = st["pass_from"]
            if st.get("pass_until"):
                q["until"] = st["pass_until"]
        return self.o.url + ("&" if "?" in self.o.url else "?") + urlencode(q)

    # -- run ---------------------------------------------------------------------------------
    def run(
        self,
        *,
        should_stop: Callable[[], bool] = lambda: False,
        on_page: Optional[Callable[[ImportReport, Optional[int]], None]] = None,
    ) -> ImportReport:
        t0 = time.time()
        o = self.o
        report = ImportReport(mode="oai-pmh", source=o.url, cache=self.cache.root, selection=o.selection.to_json())
        sink = MetadataSink(self.cache, "oai-pmh")
        st = self.load_state()
        req0, retry0 = self.http.stats.requests, self.http.stats.retries
        if st["complete"]:
            if o.datestamp_until:
                report.notes.append(
                    f"the window up to {o.datestamp_until} was harvested completely before; nothing to ask."
                )
                return self._finish(report, sink, t0, req0, retry0)
            # Incremental: only what changed since the day the last complete pass started.
            st.update(
                pass_from=st["harvested_through"] or st["pass_from"],
                token=None,
                last_datestamp=None,
                monotonic=True,
                pass_started=None,
                complete=False,
                restarts_here=0,
            )
            report.notes.append(f"incremental harvest: records changed since {st['pass_from']}")
        elif st.get("token"):
            report.notes.append(f"resumed a harvest at page {st['pages'] + 1}")
        if o.set_spec:
            report.notes.append(
                f"OAI-PMH set {o.set_spec}, format {o.metadata_prefix}"
                + (f", datestamps from {st['pass_from']}" if st.get("pass_from") else "")
            )
        bad_pages = 0
        try:
            while True:
                if should_stop():
                    report.interrupted = True
                    break
                url = self.request_url(st)
                try:
                    resp = self.http.get(
                        url, max_bytes=o.max_page_bytes, headers={"Accept": "text/xml, application/xml"}
                    )
                except FetchError as e:
                    report.stopped = (
                        f"the OAI-PMH endpoint {o.url} could not be reached ({e.message}); "
                        "progress is saved, rerun later to resume."
                    )
                    break
                page = self.page_reader(resp.body, o.metadata_prefix)
                prev = st.get("last_datestamp")
                last, monotonic = prev, st["monotonic"]
                try:
                    for item in page.items():
                        report.read += 1
                        if item.datestamp:
                            if last and item.datestamp < last:
                                monotonic = False
                            last = item.datestamp if not last or item.datestamp > last else last
                        self._take(item, report, sink)
                except OaiError as e:
                    report.stopped = f"{o.url} did not answer as an OAI-PMH endpoint ({e}); check --oai-url."
                    break
                except etree.XMLSyntaxError as e:
                    if resp.status != 200:
                        report.stopped = (
                            f"the OAI-PMH endpoint {o.url} answered HTTP {resp.status} without an OAI-PMH "
                            "response; check --oai-url."
                        )
                        break
                    bad_pages += 1
                    if bad_pages >= o.max_bad_pages:
                        report.stopped = (
                            f"{o.url} sent a malformed page {bad_pages} times in a row ({e}); "
                            "progress is saved, rerun later to resume."
                        )
                        break
                    log.warning("malformed OAI-PMH page from %s (%s); asking again", url, e)
                    continue
                bad_pages = 0
                sink.checkpoint()
                if page.error_code:
                    done = self._error(page, st, report)
                    if done:
                        break
                    continue
                if resp.status != 200:
                    report.stopped = f"the OAI-PMH endpoint {o.url} answered HTTP {resp.status}; check --oai-url."
                    break
                if st["pass_started"] is None:
                    st["pass_started"] = page.response_date or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
                if last != prev:
                    st["restarts_here"] = 0
                st["last_datestamp"], st["monotonic"] = last, monotonic
                st["pages"] += 1
                st["token"] = page.token
                if not page.token:
                    self._complete(st)
                self.save_state(st)
                if on_page is not None:
                    on_page(report, page.complete_list_size)
                if st["complete"]:
                    break
        except KeyboardInterrupt:
            report.interrupted = True
        report.complete = bool(st["complete"])
        return self._finish(report, sink, t0, req0, retry0)

    def _take(self, item: OaiItem, report: ImportReport, sink: MetadataSink) -> None:
        if item.deleted:
            report.deleted += 1
            return
        try:
            meta = select_item(item, self.o.metadata_prefix, self.o.selection)
        except RecordError as e:
            report.problem(
                f"record {item.identifier or '(no identifier)'} ({item.datestamp or 'no datestamp'})", str(e)
            )
            return
        if meta is None:
            return
        report.selected += 1
        sink.put(meta, {"datestamp": item.datestamp})

    def _complete(self, st: dict) -> None:
        st["complete"] = True
        st["token"] = None
        st["passes"] = st.get("passes", 0) + 1
        st["harvested_through"] = _utc_day(st["pass_started"])

    def _error(self, page: ListRecordsPage, st: dict, report: ImportReport) -> bool:
        """Handle an OAI-PMH error answer; True when the harvest ends here."""
        code, msg = page.error_code, page.error_message or ""
        if code == "noRecordsMatch":
            if st["pass_started"] is None:
                st["pass_started"] = page.response_date or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            self._complete(st)
            self.save_state(st)
            return True
        if code == "badResumptionToken" and st.get("token"):
            st["restarts_here"] = st.get("restarts_here", 0) + 1
            if st["restarts_here"] > self.o.max_restarts:
                report.stopped = (
                    f"{self.o.url} rejected {st['restarts_here']} resumption tokens in a row without the "
                    "harvest getting further (they expire too fast); progress is saved, rerun later."
                )
                st["token"] = None
                self.save_state(st)
                return True
            report.restarts += 1
            restart_from = (
                _utc_day(st["last_datestamp"]) if st["monotonic"] and st.get("last_datestamp") else st["pass_from"]
            )
            if st["pass_from"] and restart_from and restart_from < st["pass_from"]:
                restart_from = st["pass_from"]
            report.notes.append(
                f"resumption token expired ({msg or code}); restarted the list from datestamp "
                f"{restart_from or 'the beginning'}"
            )
            # pass_started stays: the restarted list is still part of this pass.
            st.update(token=None, pass_from=restart_from)
            self.save_state(st)
            return False
        hints = {
            "badArgument": "check --set, --datestamp-from / --datestamp-until and --oai-url",
            "cannotDisseminateFormat": "use --oai-format arXivRaw or arXiv",
            "noSetHierarchy": "drop --set",
            "badVerb": "check --oai-url (it must be the OAI-PMH base URL)",
            "badResumptionToken": "rerun to start the list again",
        }
        report.stopped = (
            f"the OAI-PMH endpoint {self.o.url} answered error {code}"
            + (f" ({msg})" if msg else "")
            + f"; {hints.get(code or '', 'check the options')}."
        )
        return True

    def _finish(self, report: ImportReport, sink: MetadataSink, t0: float, req0: int, retry0: int) -> ImportReport:
        sink.checkpoint()
        report.take_counts(sink.counts)
        report.requests = self.http.stats.requests - req0
        report.retries = self.http.stats.retries - retry0
        report.seconds = time.time() - t0
        return report
