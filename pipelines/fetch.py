"""`sciga fetch`: arXiv ids or a query -> metadata, HTML and TeX sources in a local cache.

Composition only (the per-part logic is ``transforms/sources/fetcher.py``). Three workers
run side by side, one per host, so each host sees one polite request at a time:

    metadata (arXiv API, batches of 100 ids, or the query's pages)
        -> HTML pages (ar5iv / arxiv.org / --html-dump)
        -> e-prints (arxiv.org/e-print)

An id goes to the HTML and e-print workers once its metadata is known (so invalid and
unknown ids never reach them). A paper's sidecar is written when its last part is done.
Ctrl-C stops after the requests in flight; every finished part is already journaled, and
rerunning the same command resumes with nothing fetched twice.

Bulk metadata (``--metadata-snapshot``, ``--oai-pmh``) writes the selected papers'
``<id>.meta.json`` and fetches nothing else; ``--cached-metadata`` then fetches their pages
and e-prints. ``--plan`` prints what a corpus definition will cost and sends nothing.
The logic of each lives in ``transforms/sources/`` (metadata_snapshot, oai_pmh, fetch_plan).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import queue
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Optional

log = logging.getLogger("sciga.fetch")
_DONE = object()
IN_BULK = "in bulk tars"  # an e-print left to the bulk tars (--eprints-bulk): not fetched over HTTP


def add_fetch_arguments(ap: argparse.ArgumentParser) -> None:
    from sciga.transforms.sources.endpoints import add_endpoint_arguments

    what = ap.add_argument_group("what to fetch (any combination)")
    what.add_argument("--query", default=None, metavar="QUERY",
                      help="arXiv API search query, e.g. 'cat:cs.CV AND submittedDate:[202101010000 TO 202403312359]'")
    what.add_argument("--ids", nargs="+", default=[], metavar="ID", help="arXiv ids (2401.13641, 2401.13641v2, astro-ph/0601001)")
    what.add_argument("--id-file", default=None, metavar="FILE", help="file with one arXiv id per line (# comments allowed)")
    what.add_argument("--max-results", type=int, default=None, metavar="N", help="stop a --query after N results (default: all)")
    what.add_argument("--cached-metadata", action="store_true",
                      help="the papers whose metadata is already in --output (e.g. from --metadata-snapshot or --oai-pmh), "
                           "narrowed by --category / --from / --until: fetch their other --parts")

    bulk = ap.add_argument_group("bulk metadata: write <id>.meta.json of the selected papers into --output, fetch nothing else")
    bulk.add_argument("--metadata-snapshot", default=None, metavar="FILE.jsonl",
                      help="arXiv metadata snapshot (JSON lines as on Kaggle; local or any fsspec path; .gz/.bz2/.xz/.zst read as such)")
    bulk.add_argument("--oai-pmh", action="store_true", help="harvest arXiv's OAI-PMH interface (resumable, incremental on rerun)")
    bulk.add_argument("--oai-url", default=None, metavar="URL",
                      help="OAI-PMH base URL (env SCIGA_OAI_URL; default https://oaipmh.arxiv.org/oai)")
    bulk.add_argument("--oai-format", default="arXivRaw", choices=("arXivRaw", "arXiv"),
                      help="OAI-PMH metadataPrefix: arXivRaw (default: versions with times, as in the snapshot) or arXiv "
                           "(authors split, with affiliations; dates are days)")
    bulk.add_argument("--set", dest="oai_set", default=None, metavar="SET",
                      help="OAI-PMH set (cs, math, physics:hep-th ...; default: the one set holding every --category, else all)")
    bulk.add_argument("--datestamp-from", default=None, metavar="YYYY-MM-DD",
                      help="OAI-PMH: harvest only records changed on or after this day (default: the day before --from; "
                           "a complete harvest is incremental on the next run)")
    bulk.add_argument("--datestamp-until", default=None, metavar="YYYY-MM-DD",
                      help="OAI-PMH: harvest only records changed on or before this day (default: no bound)")

    sel = ap.add_argument_group("selection (of --metadata-snapshot, --oai-pmh, --cached-metadata and --plan)")
    sel.add_argument("--category", action="append", default=[], metavar="CAT",
                     help="arXiv archive or category, repeatable or comma-separated: 'cs' keeps a paper listing any cs.* "
                          "category, primary or cross-list (cs.DL astro-ph.IM is in cs); 'cs.CV' keeps that category")
    sel.add_argument("--from", dest="date_from", default=None, metavar="YYYY-MM-DD",
                     help="keep papers whose FIRST version (v1) is on or after this day (UTC; YYYY-MM means its 1st)")
    sel.add_argument("--until", dest="date_until", default=None, metavar="YYYY-MM-DD",
                     help="keep papers whose FIRST version (v1) is on or before this day (UTC; YYYY-MM means its last day)")

    plan = ap.add_argument_group("plan: print what the corpus will cost (papers, sources, requests, bytes, time); send nothing")
    plan.add_argument("--plan", action="store_true", help="plan only: nothing is fetched or written")
    plan.add_argument("--eprints-bulk", default=None, metavar="DIR_OR_URL",
                      help="arXiv bulk source tars with arXiv_src_manifest.xml (a folder, or s3://arxiv/src/): e-prints they "
                           "hold are not fetched over HTTP")
    plan.add_argument("--eprints-manifest", default=None, metavar="FILE",
                      help="a local copy of arXiv_src_manifest.xml, to plan a remote --eprints-bulk without sending anything")
    plan.add_argument("--html-from", default="ar5iv", choices=("ar5iv", "latexml", "auto"),
                      help="--plan: pages the cache and --html-dump lack come over HTTP (ar5iv, default) or are converted "
                           "from the e-print by the build (latexml, auto)")
    plan.add_argument("--bandwidth", type=float, default=100.0, metavar="MBIT",
                      help="--plan: download speed assumed for the wall time (default 100 Mbit/s)")
    ap.add_argument("--output", required=True, metavar="CACHE", help="cache folder (created; rerun to resume)")
    ap.add_argument("--parts", default="meta,html,source", help="comma list of meta, html, source (default all three)")
    ap.add_argument("--html-dump", action="append", default=[], metavar="ZIP",
                    help="ar5iv dump zip(s): take pages from them instead of over HTTP when they hold the paper")
    ap.add_argument("--page-size", type=int, default=100, help="arXiv API results per request (max 2000)")
    ap.add_argument("--refresh", action="store_true", help="re-check cached parts with conditional requests (ETag / Last-Modified)")
    ap.add_argument("--retry-failed", action="store_true", help="retry parts that failed permanently before (404, failed conversion)")
    ap.add_argument("--max-eprint-mb", type=int, default=512, help="e-prints above this size are not downloaded")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar (the final summary is still printed)")
    add_endpoint_arguments(ap)


def read_id_file(path: str) -> list[str]:
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
        return 130 if self.interrupted else 0

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
            lines.append(f"  dumps   {self.dump_pages} pages ({self.dump_bytes / (1 << 20):.2f} MiB) read from local "
                         "ar5iv dumps, no request")
        for pid, part, et, msg in self.failures[:20]:
            lines.append(f"  failed  {pid} {part} [{et}]: {msg}")
        if len(self.failures) > 20:
            lines.append(f"  ... and {len(self.failures) - 20} more failures (see report.json)")
        if self.interrupted:
            lines.append("  rerun the same command to resume: finished parts are kept and not fetched again.")
        lines.append(f"  build   sciga build --input {self.cache} --output OUT")
        return "\n".join(lines)


class _Progress:
    def __init__(self, enabled: bool):
        self.bar = None
        self.lock = threading.Lock()
        self.counts = {"fetched": 0, "cached": 0, "failed": 0}
        self.known = 0
        self.interrupted = False
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=0, unit="part", dynamic_ncols=True, file=sys.stderr, smoothing=0.1,
                            bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]")

    def grow(self, n: int) -> None:
        """``n`` more parts are known to be coming."""
        with self.lock:
            self.known += n
            if self.bar is not None and self.known > self.bar.total:
                self.bar.total = self.known
                self.bar.refresh()

    def expect(self, n: int) -> None:
        """The whole run will have about ``n`` parts (a query's total): a real ETA early on."""
        with self.lock:
            if self.bar is not None and n > self.bar.total:
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
            if self.bar.n < self.bar.total and not self.interrupted:
                self.bar.total = self.bar.n  # parts of failed papers never came
            self.bar.refresh()
            self.bar.close()


def run_fetch(args: argparse.Namespace) -> FetchSummary:
    from sciga.transforms.sources import ar5iv_dump
    from sciga.transforms.sources import fetcher as fx
    from sciga.transforms.sources.arxiv_api import ArxivApiError, ArxivMetadata, normalize_id
    from sciga.transforms.sources.endpoints import endpoints_from
    from sciga.transforms.sources.fetch_cache import FetchCache
    from sciga.transforms.sources.http_client import PoliteClient

    t0 = time.time()
    raw_ids = list(args.ids or [])
    if args.id_file:
        raw_ids += read_id_file(args.id_file)
    mode = _check_corpus_flags(args, raw_ids)
    if mode == "plan":
        return run_plan(args, raw_ids)
    if mode == "snapshot":
        return run_snapshot_import(args)
    if mode == "oai":
        return run_oai_harvest(args)
    if not raw_ids and not args.query and not args.cached_metadata:
        raise SystemExit("sciga fetch: give --query QUERY, --ids ID ..., --id-file FILE, --cached-metadata, "
                         "--metadata-snapshot FILE or --oai-pmh.")
    selection = selection_from(args)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    bad = [p for p in parts if p not in ("meta", "html", "source")]
    if bad or "meta" not in parts:
        raise SystemExit("sciga fetch: --parts is a comma list of meta, html, source and must include meta.")
    endpoints = endpoints_from(args)
    http = PoliteClient(endpoints.rate_limit, max_retries=args.max_retries, read_timeout=args.timeout,
                        total_timeout=max(args.timeout * 10, 60.0), backoff_base=args.retry_backoff)
    api = ArxivMetadata(http, endpoints.arxiv_api_url, page_size=args.page_size)
    cache = FetchCache(args.output)
    recovered = cache.recover()
    if recovered:
        log.info("journaled %d parts a previous run finished but could not record", recovered)
    dump_index = ar5iv_dump.index_by_id(args.html_dump) if args.html_dump else None
    bulk = None
    if args.eprints_bulk or args.eprints_manifest:
        from sciga.transforms.sources.eprint_coverage import bulk_eprint_coverage

        bulk = bulk_eprint_coverage(args.eprints_manifest or args.eprints_bulk)

    summary = FetchSummary(cache=args.output)
    progress = _Progress(enabled=not args.no_progress)
    stop = threading.Event()
    work = {p: queue.Queue() for p in ("html", "source") if p in parts}
    pending: dict[str, int] = {}
    versions: dict[str, Optional[str]] = {}
    seen: list[str] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def record(o) -> None:
        with lock:
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
        progress.done(o.status)

    def part_done(pid: str) -> None:
        with lock:
            pending[pid] -= 1
            last = pending[pid] == 0
        if last:
            fx.finalize(cache, pid)

    def admit(pid: str, version: Optional[str]) -> None:
        """Metadata known: hand the paper to the HTML and e-print workers."""
        with lock:
            if pid in pending:
                return
            pending[pid] = len(work)
            versions[pid] = version
            seen.append(pid)
        if not work:
            fx.finalize(cache, pid)
            return
        progress.grow(len(work))
        for q in work.values():
            q.put(pid)

    def meta_worker() -> None:
        try:
            if raw_ids:
                wanted = []
                for raw in dict.fromkeys(raw_ids):
                    pid, ver = normalize_id(raw)
                    wanted.append((pid or raw, raw, ver))
                progress.grow(len(wanted))
                progress.expect(len(wanted) * (1 + len(work)))
                for start in range(0, len(wanted), api.page_size):
                    if stop.is_set():
                        return
                    batch = wanted[start:start + api.page_size]
                    outs = fx.fetch_meta_batch(cache, api, [(pid, raw) for pid, raw, _ in batch],
                                               refresh=args.refresh, retry_failed=args.retry_failed)
                    by_pid = {o.paper_id: o for o in outs}
                    for pid, _raw, ver in batch:
                        o = by_pid.get(pid)
                        if o is None:
                            continue
                        record(o)
                        rec = cache.record(pid, "meta")
                        if rec is not None and rec.status == "ok":
                            admit(pid, ver)
            if args.query:
                _query(args.query)
            if args.cached_metadata:
                _cached()
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)
        finally:
            for q in work.values():
                q.put(_DONE)

    def _cached() -> None:
        """Every paper with metadata in the cache that the selection keeps."""
        from sciga.transforms.sources.arxiv_records import first_version_day

        for rec in sorted(cache.records(), key=lambda r: r.id):
            if stop.is_set():
                return
            if rec.part != "meta" or rec.status != "ok":
                continue
            if selection.categories or selection.dated:
                try:
                    meta = json.loads(cache.read_part(rec.id, "meta") or b"{}")
                except ValueError:
                    continue
                if not selection.matches(meta.get("categories") or [], first_version_day(meta)):
                    continue
            progress.grow(1)
            record(fx.Outcome(rec.id, "meta", fx.CACHED))
            admit(rec.id, None)

    def _query(query: str) -> None:
        state = cache.load_query(query, args.max_results)
        for pid in state["ids"]:
            progress.grow(1)
            record(fx.Outcome(pid, "meta", fx.CACHED))
            admit(pid, None)
        if state.get("complete"):
            return
        # Resume at the start of the last page that was not finished: API pages are cut at
        # multiples of the page size, and ids seen twice are skipped below.
        page = api.page_size if not args.max_results else min(api.page_size, args.max_results)
        offset = len(state["ids"]) - len(state["ids"]) % page
        known = set(state["ids"])
        try:
            def on_total(n: int) -> None:
                progress.expect(min(n, args.max_results or n) * (1 + len(work)))

            for meta in api.search(query, args.max_results, offset=offset, on_total=on_total):
                if stop.is_set():
                    break
                pid = meta["id"]
                if pid in known:
                    continue  # re-read from a partly finished page
                rec = cache.record(pid, "meta")
                progress.grow(1)
                if rec is None or rec.status != "ok" or args.refresh:
                    r = fx.save_meta(cache, meta)
                    record(fx.Outcome(pid, "meta", fx.FETCHED, r.bytes))
                else:
                    record(fx.Outcome(pid, "meta", fx.CACHED))
                known.add(pid)
                state["ids"].append(pid)
                admit(pid, None)
                if len(state["ids"]) % page == 0:
                    cache.save_query(state)
            else:
                state["complete"] = True
        except ArxivApiError as e:
            with lock:
                summary.failed += 1
                summary.failures.append((f"query {query!r}", "meta", e.error_type,
                                         f"paging stopped after {len(state['ids'])} results: {e.message}"))
        finally:
            cache.save_query(state)

    def part_worker(part: str) -> None:
        q = work[part]
        while True:
            pid = q.get()
            if pid is _DONE:
                return
            if stop.is_set():
                continue
            if part == "source" and bulk is not None and pid in bulk and not (cache.record(pid, "source") or _NoRec).status:
                record(fx.Outcome(pid, part, IN_BULK))  # the build reads it from the bulk tars
                part_done(pid)
                continue
            try:
                if part == "html":
                    o = fx.fetch_html_part(cache, http, endpoints, pid, versions.get(pid), refresh=args.refresh,
                                           retry_failed=args.retry_failed, dump_index=dump_index)
                else:
                    o = fx.fetch_source_part(cache, http, endpoints, pid, versions.get(pid), refresh=args.refresh,
                                             retry_failed=args.retry_failed, max_bytes=args.max_eprint_mb << 20)
            except Exception as e:  # noqa: BLE001 - one paper never stops the run
                log.warning("unexpected error fetching %s %s: %r", part, pid, e)
                cache.fail(pid, part, "internal", f"{pid}: unexpected {type(e).__name__} ({e}); please report this id.",
                           permanent=False)
                o = fx.Outcome(pid, part, fx.FAILED, 0, f"unexpected {type(e).__name__}: {e}", "internal")
            record(o)
            part_done(pid)

    threads = [threading.Thread(target=meta_worker, name="fetch-meta", daemon=True)]
    threads += [threading.Thread(target=part_worker, args=(p,), name=f"fetch-{p}", daemon=True) for p in work]
    for t in threads:
        t.start()
    try:
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(timeout=0.2)
    except KeyboardInterrupt:
        stop.set()
        summary.interrupted = progress.interrupted = True
        deadline = time.time() + 5.0
        for t in threads:
            t.join(timeout=max(0.0, deadline - time.time()))
    finally:
        progress.close()
    if errors and not summary.interrupted:
        e = errors[0]
        if isinstance(e, KeyboardInterrupt):
            summary.interrupted = True
        else:
            raise e
    with lock:
        ids_seen = list(seen)
    summary.papers = len({o[0] for o in summary.failures if not o[0].startswith("query ")} | set(ids_seen))
    summary.complete = sum(1 for pid in ids_seen if (cache.record(pid, "html") or _NoRec).status == "ok")
    summary.with_source = sum(1 for pid in ids_seen if (cache.record(pid, "source") or _NoRec).status == "ok")
    summary.requests = http.stats.requests
    summary.retries = http.stats.retries
    summary.seconds = time.time() - t0
    _write_report(cache, summary, endpoints)
    cache.close()
    return summary


class _NoRec:
    status = None


def _write_report(cache, summary: FetchSummary, endpoints) -> None:
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
        "endpoints": {"arxiv_api_url": endpoints.arxiv_api_url, "html_base_url": endpoints.html_base_url,
                      "eprint_base_url": endpoints.eprint_base_url, "rate_limit": endpoints.rate_limit},
        "failures": [{"id": a, "part": b, "error_type": c, "message": d} for a, b, c, d in summary.failures],
    }
    path = os.path.join(cache.root, "report.json")
    cache.write_atomic(path, (json.dumps(report, indent=1, ensure_ascii=False) + "\n").encode("utf-8"))


# -- bulk metadata and the plan ------------------------------------------------------------------
_OAI_ONLY = (("oai_url", "--oai-url"), ("oai_set", "--set"), ("datestamp_from", "--datestamp-from"),
             ("datestamp_until", "--datestamp-until"))
_PLAN_ONLY = (("html_from", "--html-from", "ar5iv"), ("bandwidth", "--bandwidth", 100.0))


def _check_corpus_flags(args: argparse.Namespace, raw_ids: list) -> str:
    """Which command this is ("plan", "snapshot", "oai", "fetch"); SystemExit with one
    sentence for flags that do not go together."""
    def fail(msg: str):
        raise SystemExit(f"sciga fetch: {msg}")

    if args.metadata_snapshot and args.oai_pmh:
        fail("give --metadata-snapshot or --oai-pmh, not both.")
    for attr, flag in _OAI_ONLY:
        if getattr(args, attr) and not args.oai_pmh:
            fail(f"{flag} goes with --oai-pmh.")
    if args.oai_format != "arXivRaw" and not args.oai_pmh:
        fail("--oai-format goes with --oai-pmh.")
    selecting = args.category or args.date_from or args.date_until
    bulk = args.metadata_snapshot or args.oai_pmh
    if args.plan:
        return "plan"
    for attr, flag, default in _PLAN_ONLY:
        if getattr(args, attr) != default:
            fail(f"{flag} goes with --plan.")
    if bulk:
        if raw_ids or args.query or args.cached_metadata:
            fail("--metadata-snapshot / --oai-pmh only write metadata; run --ids / --query / --cached-metadata "
                 "as a second command.")
        return "snapshot" if args.metadata_snapshot else "oai"
    if selecting and not args.cached_metadata:
        fail("--category / --from / --until select from --metadata-snapshot, --oai-pmh or --cached-metadata "
             "(for --query, write the selection in the query).")
    return "fetch"


def selection_from(args: argparse.Namespace):
    from sciga.transforms.sources.corpus_selection import Selection, SelectionError, parse_categories, parse_day

    try:
        return Selection(categories=parse_categories(args.category),
                         date_from=parse_day(args.date_from, "--from") if args.date_from else None,
                         date_until=parse_day(args.date_until, "--until", end=True) if args.date_until else None)
    except SelectionError as e:
        raise SystemExit(f"sciga fetch: {e}") from None


def oai_options_from(args: argparse.Namespace, selection):
    from sciga.transforms.sources.corpus_selection import SelectionError, oai_set_of, parse_day
    from sciga.transforms.sources.oai_pmh import DEFAULT_OAI_URL, OaiHarvestOptions

    url = args.oai_url or os.environ.get("SCIGA_OAI_URL") or DEFAULT_OAI_URL
    try:
        dfrom = parse_day(args.datestamp_from, "--datestamp-from") if args.datestamp_from else None
        duntil = parse_day(args.datestamp_until, "--datestamp-until", end=True) if args.datestamp_until else None
    except SelectionError as e:
        raise SystemExit(f"sciga fetch: {e}") from None
    return OaiHarvestOptions(url=url, metadata_prefix=args.oai_format, set_spec=args.oai_set or oai_set_of(selection),
                             selection=selection, datestamp_from=dfrom, datestamp_until=duntil)


def _http_from(args: argparse.Namespace):
    from sciga.transforms.sources.endpoints import endpoints_from
    from sciga.transforms.sources.http_client import PoliteClient

    endpoints = endpoints_from(args)
    return endpoints, PoliteClient(endpoints.rate_limit, max_retries=args.max_retries, read_timeout=args.timeout,
                                   total_timeout=max(args.timeout * 10, 60.0), backoff_base=args.retry_backoff)


def _write_import_report(cache, report) -> None:
    d = report.to_json()
    d["finished_unix"] = int(time.time())
    cache.write_atomic(os.path.join(cache.root, "report.json"),
                        (json.dumps(d, indent=1, ensure_ascii=False) + "\n").encode("utf-8"))


def run_snapshot_import(args: argparse.Namespace):
    from sciga.transforms.sources.metadata_sink import open_for_import
    from sciga.transforms.sources.metadata_snapshot import SnapshotOptions, import_snapshot, snapshot_size

    options = SnapshotOptions(uri=args.metadata_snapshot, selection=selection_from(args))
    cache = open_for_import(args.output)
    bar = None
    if not args.no_progress:
        from tqdm import tqdm

        bar = tqdm(total=snapshot_size(options.uri), unit="B", unit_scale=True, unit_divisor=1024, file=sys.stderr,
                   dynamic_ncols=True, desc="snapshot")

    def progress(pos: int) -> None:
        if bar is not None:
            bar.update(max(0, pos - bar.n))

    try:
        report = import_snapshot(options, cache, progress=progress)
    finally:
        if bar is not None:
            bar.close()
    _write_import_report(cache, report)
    cache.close()
    return report


def run_oai_harvest(args: argparse.Namespace):
    from sciga.transforms.sources.metadata_sink import open_for_import
    from sciga.transforms.sources.oai_pmh import OaiHarvester

    options = oai_options_from(args, selection_from(args))
    _, http = _http_from(args)
    cache = open_for_import(args.output)
    bar = None
    if not args.no_progress:
        from tqdm import tqdm

        bar = tqdm(total=None, unit="rec", file=sys.stderr, dynamic_ncols=True, desc="OAI-PMH")

    def on_page(report, total) -> None:
        if bar is not None:
            if total and (bar.total or 0) < total:
                bar.total = total
            bar.update(max(0, report.read - bar.n))
            bar.set_postfix(selected=report.selected, refresh=False)

    try:
        report = OaiHarvester(options, http, cache).run(on_page=on_page)
    finally:
        if bar is not None:
            bar.close()
    _write_import_report(cache, report)
    cache.close()
    return report


def run_plan(args: argparse.Namespace, raw_ids: list):
    from sciga.transforms.sources.fetch_plan import PlanOptions, plan_fetch

    endpoints, _ = _http_from(args)
    parts = tuple(p.strip() for p in args.parts.split(",") if p.strip())
    selection = selection_from(args)
    options = PlanOptions(
        cache=os.path.abspath(args.output), endpoints=endpoints, parts=parts, ids=tuple(raw_ids), query=args.query,
        max_results=args.max_results, page_size=args.page_size, snapshot=args.metadata_snapshot,
        oai=oai_options_from(args, selection) if args.oai_pmh else None, cached_metadata=args.cached_metadata,
        selection=selection, html_dumps=tuple(args.html_dump), eprints_bulk=args.eprints_bulk,
        eprints_manifest=args.eprints_manifest, html_from=args.html_from, bandwidth_mbit=args.bandwidth,
        refresh=args.refresh, retry_failed=args.retry_failed)
    return plan_fetch(options)
