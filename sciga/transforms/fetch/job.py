"""Fetching papers into a cache: arXiv ids, a query or the cache's own metadata -> their
metadata, HTML pages and TeX e-prints (``sciga fetch``; the command line is
``pipelines/fetch.py``).

Three workers run side by side, one per host, so each host sees one polite request at a
time:

    metadata (arXiv API, batches of 100 ids, or the query's pages)
        -> HTML pages (ar5iv / arxiv.org / --html-dump)
        -> e-prints (arxiv.org/e-print, unless the bulk tars hold them)

An id goes to the HTML and e-print workers once its metadata is known (so invalid and
unknown ids never reach them). A paper's sidecar is written when its last part is done.
Ctrl-C stops after the requests in flight; every finished part is already journaled, and
rerunning the same job resumes with nothing fetched twice. The per-part logic is
``fetcher.py``; a query's paging state is kept in the cache (``FetchCache.load_query``).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from sciga.transforms.fetch.endpoints import Endpoints, HttpOptions
from sciga.transforms.metadata.corpus_selection import Selection

if TYPE_CHECKING:
    from sciga.transforms.fetch.paper_parts import Outcome

log = logging.getLogger("sciga.fetch")
_DONE = object()
IN_BULK = "in bulk tars"  # an e-print left to the bulk tars (--eprints-bulk): not fetched over HTTP
PARTS = ("meta", "html", "source")


@dataclass(frozen=True)
class FetchOptions:
    output: str  # the cache folder
    endpoints: Endpoints
    http: HttpOptions = field(default_factory=HttpOptions)
    ids: tuple[str, ...] = ()  # arXiv ids as given (versions allowed)
    query: Optional[str] = None  # an arXiv API search query
    max_results: Optional[int] = None
    cached_metadata: bool = False  # the papers whose metadata is already in the cache
    selection: Selection = field(default_factory=Selection)  # narrows cached_metadata
    parts: tuple[str, ...] = PARTS
    html_dumps: tuple[str, ...] = ()  # ar5iv dump zips read before HTTP
    eprints_manifest: Optional[str] = None  # bulk tars' manifest (or folder): their e-prints are not fetched
    page_size: int = 100
    refresh: bool = False
    retry_failed: bool = False
    max_eprint_bytes: int = 512 << 20
    progress: bool = True
    # Papers whose HTML and e-print are re-checked (conditional requests) though cached, their
    # metadata being kept: a new version came (`sciga update`).
    refresh_ids: frozenset = frozenset()


@dataclass
class FetchSummary:
    cache: str
    papers: int = 0
    complete: int = 0  # metadata and HTML in the cache
    with_source: int = 0
    fetched: int = 0
    cached: int = 0
    failed: int = 0
    bytes: int = 0
    interrupted: bool = False
    seconds: float = 0.0
    failures: list = field(default_factory=list)  # (id, part, error_type, message)
    requests: int = 0
    retries: int = 0
    dump_pages: int = 0  # pages read from local ar5iv dumps (no request)
    dump_bytes: int = 0
    in_bulk: int = 0

    @property
    def exit_code(self) -> int:
        """130 interrupted, 1 when a part of some id failed (the ids are listed), else 0."""
        return 130 if self.interrupted else (1 if self.failures else 0)

    @property
    def failed_ids(self) -> list[str]:
        return sorted({pid for pid, *_ in self.failures})

    def text(self) -> str:
        mib = self.bytes / (1 << 20)
        head = "interrupted" if self.interrupted else "done"
        lines = [
            f"sciga fetch {head} in {self.seconds:.1f} s: {self.papers} papers in {self.cache}",
            f"  papers  {self.complete} complete (metadata + HTML), {self.with_source} with TeX source",
            f"  parts   fetched {self.fetched}, cached {self.cached}, failed {self.failed}"
            + (f", {self.in_bulk} e-prints left to the bulk tars" if self.in_bulk else ""),
            f"  network {mib:.2f} MiB downloaded in {self.requests} requests ({self.retries} retries)",
        ]
        if self.dump_pages:
            lines.append(
                f"  dumps   {self.dump_pages} pages ({self.dump_bytes / (1 << 20):.2f} MiB) read from local "
                "ar5iv dumps, no request"
            )
        for pid, part, et, msg in self.failures[:20]:
            lines.append(f"  failed  {pid} {part} [{et}]: {msg}")
        if len(self.failures) > 20:
            lines.append(f"  ... and {len(self.failures) - 20} more failures (see report.json)")
        if self.failures:
            ids = self.failed_ids
            lines.append(
                f"  failed ids ({len(ids)}): {' '.join(ids[:50])}"
                + (" ..." if len(ids) > 50 else "")
                + f"; details in {self.cache}/report.json; `--retry-failed` tries permanent failures again"
            )
        if self.interrupted:
            lines.append("  rerun the same command to resume: finished parts are kept and not fetched again.")
        lines.append(f"  build   sciga build --input {self.cache} --output OUT")
        return "\n".join(lines)


class FetchProgress:
    """A progress bar of parts (tqdm on stderr), growing as parts become known."""

    def __init__(self, enabled: bool):
        self.bar = None
        self.lock = threading.Lock()
        self.counts = {"fetched": 0, "cached": 0, "failed": 0}
        self.known = 0
        self.interrupted = False
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(
                total=0,
                unit="part",
                dynamic_ncols=True,
                file=sys.stderr,
                smoothing=0.1,
                bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]",
            )

    def grow(self, n: int) -> None:
        """``n`` more parts are known to be coming."""
        with self.lock:
            self.known += n
            if self.bar is not None and self.known > (self.bar.total or 0):
                self.bar.total = self.known
                self.bar.refresh()

    def expect(self, n: int) -> None:
        """The whole run will have about ``n`` parts (a query's total): a real ETA early on."""
        with self.lock:
            if self.bar is not None and n > (self.bar.total or 0):
                self.bar.total = n
                self.bar.refresh()

    def done(self, status: str) -> None:
        with self.lock:
            self.counts[status] = self.counts.get(status, 0) + 1
            if self.bar is not None:
                self.bar.set_postfix(self.counts, refresh=False)
                self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            if self.bar.n < (self.bar.total or 0) and not self.interrupted:
                self.bar.total = self.bar.n  # parts of failed papers never came
            self.bar.refresh()
            self.bar.close()


def run_fetch_job(opts: FetchOptions) -> FetchSummary:
    """Fetch what ``opts`` asks for into the cache ``opts.output``; the summary (also written to
    the cache as report.json). Resumable: finished parts are journaled and never fetched
    again; Ctrl-C stops after the requests in flight."""
    return _FetchJob(opts).run()


class _FetchJob:
    """One ``run_fetch_job``: the metadata worker and one worker per part (HTML, e-print), each a
    thread, sharing the summary, the papers in flight and ``lock``. Each method is one worker or
    one step a worker takes; ``run`` starts the threads and waits for them."""

    def __init__(self, opts: FetchOptions):
        from sciga.transforms.fetch.arxiv_api import ArxivMetadata
        from sciga.transforms.fetch.cache import FetchCache
        from sciga.transforms.inputs import ar5iv_dump

        self.t0 = time.time()
        self.opts = opts
        self.endpoints = opts.endpoints
        self.http = opts.http.client(self.endpoints)
        self.api = ArxivMetadata(self.http, self.endpoints.arxiv_api_url, page_size=opts.page_size)
        self.cache = FetchCache(opts.output)
        recovered = self.cache.recover()
        if recovered:
            log.info("journaled %d parts a previous run finished but could not record", recovered)
        self.dump_index = ar5iv_dump.index_by_id(list(opts.html_dumps)) if opts.html_dumps else None
        self.bulk = None
        if opts.eprints_manifest:
            from sciga.transforms.eprints.bulk_coverage import bulk_eprint_coverage

            self.bulk = bulk_eprint_coverage(opts.eprints_manifest)
        self.summary = FetchSummary(cache=opts.output)
        self.progress = FetchProgress(enabled=opts.progress)
        self.stop = threading.Event()
        self.work: dict[str, queue.Queue] = {p: queue.Queue() for p in ("html", "source") if p in opts.parts}
        self.pending: dict[str, int] = {}  # paper id -> parts still to finish
        self.versions: dict[str, Optional[str]] = {}
        self.seen: list[str] = []
        self.lock = threading.Lock()
        self.errors: list[BaseException] = []

    def run(self) -> FetchSummary:
        threads = [threading.Thread(target=self.meta_worker, name="fetch-meta", daemon=True)]
        threads += [
            threading.Thread(target=self.part_worker, args=(p,), name=f"fetch-{p}", daemon=True) for p in self.work
        ]
        self._wait_for(threads)
        if self.errors and not self.summary.interrupted:
            e = self.errors[0]
            if isinstance(e, KeyboardInterrupt):
                self.summary.interrupted = True
            else:
                raise e
        self._count_papers()
        write_fetch_report(self.cache, self.summary, self.endpoints)
        self.cache.close()
        return self.summary

    def _wait_for(self, threads: list[threading.Thread]) -> None:
        """Start ``threads`` and wait for them; Ctrl-C stops them after the requests in flight."""
        for t in threads:
            t.start()
        try:
            while any(t.is_alive() for t in threads):
                for t in threads:
                    t.join(timeout=0.2)
        except KeyboardInterrupt:
            self.stop.set()
            self.summary.interrupted = self.progress.interrupted = True
            deadline = time.time() + 5.0
            for t in threads:
                t.join(timeout=max(0.0, deadline - time.time()))
        finally:
            self.progress.close()

    def _count_papers(self) -> None:
        summary, cache = self.summary, self.cache
        with self.lock:
            ids_seen = list(self.seen)
        summary.papers = len({o[0] for o in summary.failures if not o[0].startswith("query ")} | set(ids_seen))
        summary.complete = sum(1 for pid in ids_seen if (cache.record(pid, "html") or _NoRec).status == "ok")
        summary.with_source = sum(1 for pid in ids_seen if (cache.record(pid, "source") or _NoRec).status == "ok")
        summary.requests = self.http.stats.requests
        summary.retries = self.http.stats.retries
        summary.seconds = time.time() - self.t0

    def record(self, o: Outcome) -> None:
        """Count one part's outcome in the summary and the progress bar."""
        from sciga.transforms.fetch import paper_parts as fx

        summary = self.summary
        with self.lock:
            if o.status == fx.FETCHED:
                summary.fetched += 1
            elif o.status == fx.CACHED:
                summary.cached += 1
            elif o.status == IN_BULK:
                summary.in_bulk += 1
            else:
                summary.failed += 1
                summary.failures.append((o.paper_id, o.part, o.error_type or "failed", o.message or ""))
            if getattr(o, "source", "http") == "dump":
                summary.dump_bytes += o.bytes
                summary.dump_pages += o.status == fx.FETCHED
            else:
                summary.bytes += o.bytes
        self.progress.done(o.status)

    def part_done(self, pid: str) -> None:
        """One part of ``pid`` finished: its sidecar is written when it was the last."""
        from sciga.transforms.fetch import paper_parts as fx

        with self.lock:
            self.pending[pid] -= 1
            last = self.pending[pid] == 0
        if last:
            fx.finalize(self.cache, pid)

    def admit(self, pid: str, version: Optional[str]) -> None:
        """Metadata known: hand the paper to the HTML and e-print workers."""
        from sciga.transforms.fetch import paper_parts as fx

        with self.lock:
            if pid in self.pending:
                return
            self.pending[pid] = len(self.work)
            self.versions[pid] = version
            self.seen.append(pid)
        if not self.work:
            fx.finalize(self.cache, pid)
            return
        self.progress.grow(len(self.work))
        for q in self.work.values():
            q.put(pid)

    def meta_worker(self) -> None:
        """The metadata worker: the ids given, then the query's results, then the cached papers."""
        try:
            if self.opts.ids:
                self._ids()
            if self.opts.query:
                self._query(self.opts.query)
            if self.opts.cached_metadata:
                self._cached()
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            self.errors.append(e)
        finally:
            for q in self.work.values():
                q.put(_DONE)

    def _ids(self) -> None:
        """The ids given, in batches of the API's page size."""
        from sciga.transforms.fetch import paper_parts as fx
        from sciga.transforms.fetch.arxiv_api import normalize_id

        wanted = []
        for raw in dict.fromkeys(self.opts.ids):
            pid, ver = normalize_id(raw)
            wanted.append((pid or raw, raw, ver))
        self.progress.grow(len(wanted))
        self.progress.expect(len(wanted) * (1 + len(self.work)))
        page_size = self.api.page_size
        for start in range(0, len(wanted), page_size):
            if self.stop.is_set():
                return
            batch = wanted[start : start + page_size]
            outs = fx.fetch_meta_batch(
                self.cache,
                self.api,
                [(pid, raw) for pid, raw, _ in batch],
                refresh=self.opts.refresh,
                retry_failed=self.opts.retry_failed,
            )
            by_pid = {o.paper_id: o for o in outs}
            for pid, _raw, ver in batch:
                o = by_pid.get(pid)
                if o is None:
                    continue
                self.record(o)
                rec = self.cache.record(pid, "meta")
                if rec is not None and rec.status == "ok":
                    self.admit(pid, ver)

    def _cached(self) -> None:
        """Every paper with metadata in the cache that the selection keeps."""
        from sciga.transforms.fetch import paper_parts as fx
        from sciga.transforms.metadata.arxiv_records import first_version_day

        selection = self.opts.selection
        for rec in sorted(self.cache.records(), key=lambda r: r.id):
            if self.stop.is_set():
                return
            if rec.part != "meta" or rec.status != "ok":
                continue
            if selection.categories or selection.dated:
                try:
                    meta = json.loads(self.cache.read_part(rec.id, "meta") or b"{}")
                except ValueError:
                    continue
                if not selection.matches(meta.get("categories") or [], first_version_day(meta)):
                    continue
            self.progress.grow(1)
            self.record(fx.Outcome(rec.id, "meta", fx.CACHED))
            self.admit(rec.id, None)

    def _query(self, query: str) -> None:
        """The query's results, resuming where a previous run's paging stopped."""
        from sciga.transforms.fetch import paper_parts as fx
        from sciga.transforms.fetch.arxiv_api import ArxivApiError

        opts, cache, progress = self.opts, self.cache, self.progress
        state = cache.load_query(query, opts.max_results)
        for pid in state["ids"]:
            progress.grow(1)
            self.record(fx.Outcome(pid, "meta", fx.CACHED))
            self.admit(pid, None)
        if state.get("complete"):
            return
        # Resume at the start of the last page that was not finished: API pages are cut at
        # multiples of the page size, and ids seen twice are skipped below.
        page = self.api.page_size if not opts.max_results else min(self.api.page_size, opts.max_results)
        offset = len(state["ids"]) - len(state["ids"]) % page
        known = set(state["ids"])
        try:

            def on_total(n: int) -> None:
                progress.expect(min(n, opts.max_results or n) * (1 + len(self.work)))

            for meta in self.api.search(query, opts.max_results, offset=offset, on_total=on_total):
                if self.stop.is_set():
                    break
                pid = meta["id"]
                if pid in known:
                    continue  # re-read from a partly finished page
                rec = cache.record(pid, "meta")
                progress.grow(1)
                if rec is None or rec.status != "ok" or opts.refresh:
                    r = fx.save_meta(cache, meta)
                    self.record(fx.Outcome(pid, "meta", fx.FETCHED, r.bytes))
                else:
                    self.record(fx.Outcome(pid, "meta", fx.CACHED))
                known.add(pid)
                state["ids"].append(pid)
                self.admit(pid, None)
                if len(state["ids"]) % page == 0:
                    cache.save_query(state)
            else:
                state["complete"] = True
        except ArxivApiError as e:
            with self.lock:
                self.summary.failed += 1
                self.summary.failures.append(
                    (
                        f"query {query!r}",
                        "meta",
                        e.error_type,
                        f"paging stopped after {len(state['ids'])} results: {e.message}",
                    )
                )
        finally:
            cache.save_query(state)

    def part_worker(self, part: str) -> None:
        """The worker of one part ("html" or "source"): the papers the metadata worker admits."""
        q = self.work[part]
        while True:
            pid = q.get()
            if pid is _DONE:
                return
            if self.stop.is_set():
                continue
            self.record(self._fetch_part(part, pid))
            self.part_done(pid)

    def _fetch_part(self, part: str, pid: str) -> Outcome:
        from sciga.transforms.fetch import paper_parts as fx

        opts, cache = self.opts, self.cache
        if (
            part == "source"
            and self.bulk is not None
            and pid in self.bulk
            and not (cache.record(pid, "source") or _NoRec).status
        ):
            return fx.Outcome(pid, part, IN_BULK)  # the build reads it from the bulk tars
        try:
            refresh = opts.refresh or pid in opts.refresh_ids
            if part == "html":
                return fx.fetch_html_part(
                    cache,
                    self.http,
                    self.endpoints,
                    pid,
                    self.versions.get(pid),
                    refresh=refresh,
                    retry_failed=opts.retry_failed,
                    dump_index=self.dump_index,
                )
            return fx.fetch_source_part(
                cache,
                self.http,
                self.endpoints,
                pid,
                self.versions.get(pid),
                refresh=refresh,
                retry_failed=opts.retry_failed,
                max_bytes=opts.max_eprint_bytes,
            )
        except Exception as e:  # noqa: BLE001 - one paper never stops the run
            log.warning("unexpected error fetching %s %s: %r", part, pid, e)
            cache.fail(
                pid,
                part,
                "internal",
                f"{pid}: unexpected {type(e).__name__} ({e}); please report this id.",
                permanent=False,
            )
            return fx.Outcome(pid, part, fx.FAILED, 0, f"unexpected {type(e).__name__}: {e}", "internal")


class _NoRec:
    status = None


def write_fetch_report(cache, summary: FetchSummary, endpoints) -> None:
    """The last run's summary, every failure with its reason, as the cache's report.json."""
    report = {
        "cache": summary.cache,
        "interrupted": summary.interrupted,
        "papers": summary.papers,
        "complete": summary.complete,
        "with_source": summary.with_source,
        "parts": {"fetched": summary.fetched, "cached": summary.cached, "failed": summary.failed},
        "bytes": summary.bytes,
        "requests": summary.requests,
        "retries": summary.retries,
        "dump_pages": summary.dump_pages,
        "dump_bytes": summary.dump_bytes,
        "seconds": round(summary.seconds, 3),
        "finished_unix": int(time.time()),
        "endpoints": {
            "arxiv_api_url": endpoints.arxiv_api_url,
            "html_base_url": endpoints.html_base_url,
            "eprint_base_url": endpoints.eprint_base_url,
            "rate_limit": endpoints.rate_limit,
        },
        "failures": [{"id": a, "part": b, "error_type": c, "message": d} for a, b, c, d in summary.failures],
    }
    path = os.path.join(cache.root, "report.json")
    cache.write_atomic(path, (json.dumps(report, indent=1, ensure_ascii=False) + "\n").encode("utf-8"))
