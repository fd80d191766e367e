"""``sciga fetch --plan``: what a corpus definition will cost before anything is fetched.

For each part of each paper (metadata, HTML page, TeX e-print) the plan decides which
source serves it, in the order the fetch and the build use them, and adds up papers,
requests, bytes and the wall time at the configured politeness:

* metadata: the snapshot (local file, no requests), OAI-PMH (1 request per 1,000
  records), the arXiv API (1 request per 100 ids, or per page of a query), or the cache;
* HTML: the cache, an ar5iv dump (``--html-dump``, read locally), LaTeXML conversion of
  the e-print (``--html-from latexml`` / ``auto``: no request), else HTTP from
  ``--html-base-url`` (ar5iv or arxiv.org/html, one request per paper);
* e-print: the cache, the bulk source tars (``--eprints-bulk``, coverage from
  ``arXiv_src_manifest.xml``: the tars needed, their bytes, and the requester-pays cost
  when they are on S3), else HTTP from ``--eprint-base-url`` (one request per paper).

Wall time: requests to one host are one at a time, ``--rate-limit`` seconds apart (3 s at
least for arXiv hosts), plus their bytes at ``bandwidth_mbit``; the fetch's workers run
side by side, so hosts overlap and the slowest host sets the wall time.

Nothing is sent: local files are read (the snapshot, dump indexes, a local manifest, the
cache's journal), remote ones are not and the plan says what it could not count. Sizes
that cannot be read are estimated and listed under "assumed".
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Optional

from sciga.transforms.eprints.bulk_coverage import BulkEprintCoverage, bulk_eprint_coverage, is_remote
from sciga.transforms.fetch.cache import read_journal
from sciga.transforms.fetch.endpoints import Endpoints
from sciga.transforms.fetch.http_client import ARXIV_MIN_INTERVAL, host_of, is_arxiv_host
from sciga.transforms.metadata.corpus_selection import Selection
from sciga.transforms.metadata.oai_pmh import OaiHarvestOptions

# Estimates used only when neither the cache nor the manifest gives a measured mean.
DEFAULT_HTML_BYTES = 150 << 10  # gzip on the wire; the shared corpus's real ar5iv pages: 97-197 KiB gzipped
DEFAULT_EPRINT_BYTES = 2 << 20
API_ENTRY_BYTES = 3 << 10  # one Atom entry of the arXiv API
API_IDS_PER_REQUEST = 100
OAI_RECORDS_PER_REQUEST = 1000  # arXiv's ListRecords page
OAI_RECORD_BYTES = 2500  # an arXivRaw record
S3_USD_PER_GB = 0.09  # AWS data transfer out to the internet, first 10 TB / month; free inside us-east-1
MIN_SAMPLES = 20  # cache parts needed before their mean size replaces an assumption


@dataclass(frozen=True)
class PlanOptions:
    cache: str
    endpoints: Endpoints = field(default_factory=Endpoints)
    parts: tuple = ("meta", "html", "source")
    ids: tuple = ()
    query: Optional[str] = None
    max_results: Optional[int] = None
    page_size: int = 100
    snapshot: Optional[str] = None
    oai: Optional[OaiHarvestOptions] = None
    cached_metadata: bool = False
    selection: Selection = field(default_factory=Selection)
    html_dumps: tuple = ()
    eprints_bulk: Optional[str] = None
    eprints_manifest: Optional[str] = None  # a local copy of the manifest of a remote --eprints-bulk
    html_from: str = "ar5iv"  # ar5iv: HTTP for what dumps and the cache miss; latexml / auto: convert instead
    bandwidth_mbit: float = 100.0
    refresh: bool = False
    retry_failed: bool = False


@dataclass
class PlanRow:
    part: str  # metadata | html | e-print
    source: str
    papers: Optional[int] = 0
    requests: Optional[int] = 0
    bytes: Optional[float] = 0
    host: Optional[str] = None  # requests go there (rate-limited), None: no requests
    seconds: Optional[float] = 0.0
    note: str = ""


@dataclass
class FetchPlan:
    corpus: str
    papers: Optional[int]
    rows: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    assumptions: list = field(default_factory=list)
    wall_seconds: Optional[float] = 0.0
    interrupted: bool = False
    exit_code: int = 0

    def row(self, part: str, source: str) -> Optional[PlanRow]:
        return next((r for r in self.rows if r.part == part and r.source == source), None)

    def text(self) -> str:
        n = "unknown" if self.papers is None else f"{self.papers:,}"
        out = [f"sciga fetch --plan: {n} papers ({self.corpus}); nothing was sent", ""]
        head = ("part", "source", "papers", "requests", "bytes", "time")
        table = [head]
        for r in self.rows:
            table.append((r.part, r.source, _num(r.papers), _num(r.requests), _bytes(r.bytes), _dur(r.seconds)))
        widths = [max(len(str(row[i])) for row in table) for i in range(len(head))]
        for k, row in enumerate(table):
            out.append(
                "  "
                + "  ".join(
                    str(c).ljust(widths[i]) if i < 2 else str(c).rjust(widths[i]) for i, c in enumerate(row)
                ).rstrip()
            )
            if k == 0:
                out.append("  " + "  ".join("-" * w for w in widths))
        out.append("")
        out.append(f"  wall time  {_dur(self.wall_seconds)} (hosts side by side; one request at a time per host)")
        for r in self.rows:
            if r.note:
                out.append(f"  {r.part} / {r.source}: {r.note}")
        for note in self.notes:
            out.append(f"  note: {note}")
        for a in self.assumptions:
            out.append(f"  assumed: {a}")
        return "\n".join(out)

    def to_json(self) -> dict:
        return {
            "corpus": self.corpus,
            "papers": self.papers,
            "wall_seconds": self.wall_seconds,
            "notes": self.notes,
            "assumptions": self.assumptions,
            "rows": [r.__dict__ for r in self.rows],
        }


def _num(v) -> str:
    return "?" if v is None else f"{int(v):,}"


def _bytes(v) -> str:
    if v is None:
        return "?"
    v = float(v)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if v < 1024 or unit == "TiB":
            return f"{v:,.0f} {unit}" if unit == "B" else f"{v:,.1f} {unit}"
        v /= 1024
    return f"{v:.1f} TiB"


def _dur(s) -> str:
    if s is None:
        return "?"
    s = float(s)
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{s / 60:.0f} min"
    if s < 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d"


# -- the accumulator: one paper at a time, counters only ---------------------------------------
class _Planner:
    def __init__(self, o: PlanOptions, plan: FetchPlan):
        self.o = o
        self.plan = plan
        self.journal = read_journal(o.cache) if os.path.isdir(o.cache) else {}
        self.rows: dict[tuple[str, str], PlanRow] = {}
        self.tars: dict[str, int] = {}
        self.dump_index = self._dumps()
        self.coverage = self._coverage()
        self.html_mean, self.html_measured = self._mean("html", DEFAULT_HTML_BYTES)
        self.eprint_mean, self.eprint_measured = self._mean("source", DEFAULT_EPRINT_BYTES)
        self.papers = 0
        self.unknown = False  # the corpus's size cannot be known without asking
        self.eprint_default_used = False

    def _dumps(self) -> dict:
        from sciga.transforms.inputs import ar5iv_dump

        local = [d for d in self.o.html_dumps if not is_remote(d)]
        for d in self.o.html_dumps:
            if is_remote(d):
                self.plan.notes.append(f"--html-dump {d} is remote: not read with --plan, its pages are not counted")
        return ar5iv_dump.index_by_id(local) if local else {}

    def _coverage(self) -> Optional[BulkEprintCoverage]:
        o = self.o
        if not o.eprints_bulk and not o.eprints_manifest:
            return None
        src = o.eprints_manifest or o.eprints_bulk
        if is_remote(src):
            self.plan.notes.append(
                f"--eprints-bulk {o.eprints_bulk} is remote and --plan sends nothing: its manifest was "
                "not read, so no paper is counted as served by the bulk tars; pass a local copy with "
                "--eprints-manifest arXiv_src_manifest.xml"
            )
            return None
        return bulk_eprint_coverage(src)

    def _mean(self, part: str, default: float) -> tuple[float, bool]:
        sizes = [r.bytes for (_, p), r in self.journal.items() if p == part and r.status == "ok" and r.bytes]
        if len(sizes) >= MIN_SAMPLES:
            return sum(sizes) / len(sizes), True
        return default, False

    def _row(self, part: str, source: str, host: Optional[str] = None) -> PlanRow:
        key = (part, source)
        r = self.rows.get(key)
        if r is None:
            r = self.rows[key] = PlanRow(part=part, source=source, host=host)
        return r

    def _cached(self, pid: str, part: str) -> Optional[str]:
        """ "ok" / "failed" (permanently, not retried) / None (to fetch) for a cached part."""
        rec = self.journal.get((pid, part))
        if rec is None:
            return None
        if rec.status == "ok":
            return "ok"
        if rec.permanent and not self.o.retry_failed:
            return "failed"
        return None

    def add(self, pid: str) -> None:
        """One paper of the corpus (its metadata is counted by the caller)."""
        self.papers += 1
        converted = False
        if "html" in self.o.parts:
            html = self._html_source(pid)
            converted = html[0] == "LaTeXML from the e-print"
            self._count("html", *html)
        if "source" in self.o.parts or converted:
            self._count("e-print", *self._eprint_source(pid))

    def _count(self, part: str, source: str, host: Optional[str], requests: int, nbytes: float) -> None:
        r = self._row(part, source, host)
        r.papers += 1
        r.requests += requests
        r.bytes += nbytes

    def _html_source(self, pid: str) -> tuple:
        """(source label, host or None, requests, bytes) of a paper's page."""
        o = self.o
        host = host_of(o.endpoints.html_base_url)
        c = self._cached(pid, "html")
        if c == "failed":
            return "failed before (skipped; --retry-failed)", None, 0, 0
        if c == "ok":
            return ("cache", None, 0, 0) if not o.refresh else (f"cache, re-checked over HTTP {host}", host, 1, 0)
        if pid in self.dump_index:
            return "ar5iv dump (local zip)", None, 0, 0
        if o.html_from in ("latexml", "auto"):
            return "LaTeXML from the e-print", None, 0, 0
        return f"HTTP {host}", host, 1, self.html_mean

    def _eprint_source(self, pid: str) -> tuple:
        o = self.o
        host = host_of(o.endpoints.eprint_base_url)
        c = self._cached(pid, "source")
        if c == "failed":
            return "failed before (skipped; --retry-failed)", None, 0, 0
        if c == "ok":
            return ("cache", None, 0, 0) if not o.refresh else (f"cache, re-checked over HTTP {host}", host, 1, 0)
        tar = self.coverage.tar_for(pid) if self.coverage is not None else None
        if tar is not None:
            first = tar.filename not in self.tars
            self.tars.setdefault(tar.filename, tar.size)
            if o.eprints_bulk and is_remote(o.eprints_bulk):
                where = "S3" if o.eprints_bulk.startswith("s3://") else host_of(o.eprints_bulk)
                return f"bulk tars ({where})", "bulk", int(first), tar.size if first else 0
            return "bulk tars (local)", None, 0, tar.size if first else 0
        mean = self.coverage.mean_item_bytes(pid) if self.coverage is not None else None
        if not mean:
            self.eprint_default_used = not self.eprint_measured
        return f"HTTP {host}", host, 1, mean or self.eprint_mean

    def finish(self) -> None:
        o = self.o
        bw = max(o.bandwidth_mbit, 0.001) * 1e6 / 8
        for r in self.rows.values():
            if r.requests is None or r.bytes is None:
                r.seconds = None
            elif r.host is None:
                r.seconds = 0.0
                if r.source == "bulk tars (local)":
                    r.note = f"{len(self.tars):,} tars, {_bytes(r.bytes)} read from local disk"
            elif r.host == "bulk":
                r.seconds = r.bytes / bw
                cost = r.bytes / 1e9 * S3_USD_PER_GB
                r.note = (
                    f"{r.requests:,} tars streamed once each; the requester pays about ${cost:,.2f} at "
                    f"${S3_USD_PER_GB}/GB (internet egress; transfers inside AWS us-east-1 are free)"
                )
            else:
                r.seconds = r.requests * _interval(r.host, o.endpoints.rate_limit) + r.bytes / bw
        http_html = any(r.part == "html" and r.source.startswith("HTTP") for r in self.rows.values())
        http_eprint = any(r.part == "e-print" and r.source.startswith("HTTP") for r in self.rows.values())
        if http_html and not self.html_measured:
            self.plan.assumptions.append(
                f"{_bytes(DEFAULT_HTML_BYTES)} per HTML page (fewer than {MIN_SAMPLES} pages in "
                "the cache to measure; real ar5iv pages are 97-197 KiB gzipped)"
            )
        if http_eprint and self.eprint_default_used:
            self.plan.assumptions.append(
                f"{_bytes(DEFAULT_EPRINT_BYTES)} per e-print where the bulk manifest has no "
                f"tars of the paper's month and the cache has fewer than {MIN_SAMPLES} e-prints "
                "to measure"
            )
        elif http_eprint and self.coverage is not None:
            self.plan.assumptions.append("e-prints over HTTP: the mean item size of the bulk tars of their month")
        order = ("metadata", "html", "e-print")
        self.plan.rows = sorted(self.rows.values(), key=lambda r: (order.index(r.part), r.source))
        by_host: dict[str, float] = {}
        unknown = False
        for r in self.plan.rows:
            if r.seconds is None:
                unknown = True
            elif r.seconds:
                by_host[r.host] = by_host.get(r.host, 0.0) + r.seconds
        self.plan.wall_seconds = max(by_host.values(), default=0.0)
        if unknown:
            self.plan.notes.append("the wall time leaves out what cannot be counted without asking (the rows with ?)")
        if self.tars and self.coverage is not None:
            self.plan.notes.append(
                f"bulk e-prints: {len(self.tars):,} of the manifest's {len(self.coverage.tars):,} tars "
                f"are needed ({_bytes(sum(self.tars.values()))})"
            )
        conv = self.rows.get(("html", "LaTeXML from the e-print"))
        if conv:
            self.plan.notes.append(
                f"{conv.papers:,} pages are to be converted with LaTeXML during the build "
                "(CPU time: see the LaTeXML benchmark in docs/explanation/benchmarks.md)"
            )
        self.plan.papers = None if self.unknown else self.papers


def _interval(host: str, rate: float) -> float:
    return max(rate, ARXIV_MIN_INTERVAL) if is_arxiv_host(host) else rate


def _meta_row(planner: _Planner, source: str, host: Optional[str] = None) -> PlanRow:
    return planner._row("metadata", source, host)


# -- corpus definitions -----------------------------------------------------------------------------
def plan_fetch(o: PlanOptions) -> FetchPlan:
    if o.html_from not in ("ar5iv", "latexml", "auto"):
        raise ValueError(f"--html-from {o.html_from!r}: use ar5iv, latexml or auto.")
    plan = FetchPlan(corpus="", papers=0)
    pl = _Planner(o, plan)
    what = []
    if o.snapshot:
        what.append(_plan_snapshot(o, pl))
    if o.oai is not None:
        what.append(_plan_oai(o, pl))
    if o.ids:
        what.append(_plan_ids(o, pl))
    if o.query:
        what.append(_plan_query(o, pl))
    if o.cached_metadata or not what:
        what.append(_plan_cache(o, pl))
    plan.corpus = "; ".join(w for w in what if w)
    pl.finish()
    return plan


def _plan_snapshot(o: PlanOptions, pl: _Planner) -> str:
    from sciga.transforms.metadata.snapshot import SnapshotOptions, count_selected

    label = f"snapshot {o.snapshot}, {o.selection.describe()}"
    if is_remote(o.snapshot):
        pl.unknown = True
        _meta_row(pl, "snapshot").papers = None
        pl.plan.notes.append(
            f"--metadata-snapshot {o.snapshot} is remote: not read with --plan; copy it locally to count"
        )
        return label
    ids: list[str] = []
    read, selected, bad = count_selected(
        SnapshotOptions(uri=o.snapshot, selection=o.selection, max_line_bytes=16 << 20), ids_out=ids
    )
    _meta_row(pl, "snapshot (local file)").papers += selected
    for pid in ids:
        pl.add(pid)
    pl.plan.notes.append(f"snapshot: {read:,} lines read, {bad:,} malformed")
    return label


def _plan_oai(o: PlanOptions, pl: _Planner) -> str:

    oai = o.oai
    host = host_of(oai.url)
    label = f"OAI-PMH {oai.url}" + (f" set {oai.set_spec}" if oai.set_spec else "") + f", {o.selection.describe()}"
    state_path = os.path.join(o.cache, "harvests", oai.key() + ".json")
    state = None
    try:
        with open(state_path, "rb") as f:
            state = json.loads(f.read())
    except (OSError, ValueError):
        pass
    row = _meta_row(pl, f"OAI-PMH {host}", host)
    if state is None:
        row.papers = row.requests = row.bytes = None
        pl.unknown = True
        row.note = (
            f"not harvested yet: the record count is only known by harvesting ({OAI_RECORDS_PER_REQUEST:,} records "
            f"per request, {_interval(host, o.endpoints.rate_limit):g} s apart: about "
            f"{_dur(1000 * _interval(host, o.endpoints.rate_limit))} per million records read)"
        )
        pl.plan.notes.append(
            "HTML and e-print rows cover no papers until the metadata is harvested; run the harvest, "
            "then --plan again (it then counts the harvested papers)"
        )
        return label
    if state.get("complete"):
        row.requests = 1
        row.note = (
            f"harvested before ({state.get('pages', 0):,} pages); the next run asks only for changes since "
            f"{state.get('harvested_through')}: 1 request or more"
        )
    else:
        row.requests = None
        row.note = f"a harvest stopped at page {state.get('pages', 0):,}; the rest is unknown until it resumes"
    _cached_corpus(o, pl, row)
    return label


def _plan_ids(o: PlanOptions, pl: _Planner) -> str:
    from sciga.transforms.fetch.arxiv_api import normalize_id

    host = host_of(o.endpoints.arxiv_api_url)
    seen, bad, missing = set(), 0, 0
    for raw in o.ids:
        pid, _ = normalize_id(raw)
        if pid is None:
            bad += 1
            continue
        if pid in seen:
            continue
        seen.add(pid)
        c = pl._cached(pid, "meta")
        if c == "ok" and not o.refresh:
            _meta_row(pl, "cache").papers += 1
        elif c == "failed":
            _meta_row(pl, "failed before (skipped; --retry-failed)").papers += 1
            continue
        else:
            missing += 1
        pl.add(pid)
    if missing:
        r = _meta_row(pl, f"arXiv API {host}", host)
        r.papers += missing
        r.requests += math.ceil(missing / API_IDS_PER_REQUEST)
        r.bytes += missing * API_ENTRY_BYTES
    if bad:
        pl.plan.notes.append(f"{bad:,} of the ids are not arXiv ids and would be reported as failures")
    return f"{len(seen):,} ids"


def _plan_query(o: PlanOptions, pl: _Planner) -> str:
    from sciga.transforms.fetch.cache import sha256

    host = host_of(o.endpoints.arxiv_api_url)
    key = sha256(f"{o.query}\n{o.max_results}".encode())[:16]
    state = None
    try:
        with open(os.path.join(o.cache, "queries", key + ".json"), "rb") as f:
            state = json.loads(f.read())
    except (OSError, ValueError):
        pass
    known = list((state or {}).get("ids") or [])
    for pid in known:
        _meta_row(pl, "cache").papers += 1
        pl.add(pid)
    if state and state.get("complete"):
        return f"query {o.query!r} (paged before: {len(known):,} results)"
    r = _meta_row(pl, f"arXiv API {host}", host)
    if o.max_results:
        rest = max(0, o.max_results - len(known))
        r.papers += rest
        r.requests += math.ceil(rest / max(1, min(o.page_size, o.max_results)))
        r.bytes += rest * API_ENTRY_BYTES
        pl.plan.notes.append(
            f"the query's {rest:,} remaining results (at most --max-results) are counted for metadata "
            "only: which papers they are is known once the API answers"
        )
    else:
        r.papers = r.requests = r.bytes = None
        pl.unknown = True
        pl.plan.notes.append("the query's result count is only known by asking the API; give --max-results to bound it")
    return f"query {o.query!r}"


def _plan_cache(o: PlanOptions, pl: _Planner) -> str:
    row = _meta_row(pl, "cache")
    _cached_corpus(o, pl, row)
    return f"the papers whose metadata is in {o.cache}" + (
        "" if not (o.selection.categories or o.selection.dated) else f", {o.selection.describe()}"
    )


def _cached_corpus(o: PlanOptions, pl: _Planner, row: PlanRow) -> None:
    """Every paper with metadata in the cache that the selection keeps. The view files are
    the truth (a bulk import killed between a file and its journal line leaves the line
    to ``recover()``), so they are listed rather than the journal."""
    from sciga.transforms.fetch.cache import id_from_safe
    from sciga.transforms.metadata.arxiv_records import first_version_day

    needs_meta = bool(o.selection.categories or o.selection.dated)
    papers = os.path.join(o.cache, "papers")
    try:
        names = sorted(e.name for e in os.scandir(papers) if e.is_dir())
    except OSError:
        names = []
    n = 0
    for safe in names:
        path = os.path.join(papers, safe, safe + ".api.json")
        if needs_meta:
            try:
                with open(path, "rb") as f:
                    meta = json.loads(f.read())
            except (OSError, ValueError):
                continue
            if not isinstance(meta, dict) or not o.selection.matches(
                meta.get("categories") or [], first_version_day(meta)
            ):
                continue
        elif not os.path.exists(path):
            continue
        n += 1
        pl.add(id_from_safe(safe))
    if row.papers is None:
        row.papers = n
    else:
        row.papers += n
