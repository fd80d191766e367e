"""One paper's parts (arXiv metadata, HTML page, TeX e-print) fetched into a cache.

The functions here decide, per part, whether to skip (already in the cache), refresh
(conditional request), fetch, or record a failure, and they compose the metadata sidecar
the build reads. ``pipelines/fetch.py`` runs them for many papers with a progress bar; the
in-pipeline fetch of ``sciga build --ids`` runs them on Dataflow workers.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Optional, Union

from sciga.transforms.common.errors import StageError
from sciga.transforms.eprints.eprint import read_eprint
from sciga.transforms.fetch.arxiv_api import ArxivMetadata
from sciga.transforms.fetch.cache import (
    FetchCache,
    FsspecStore,
    PartRecord,
    canonical_json,
    eprint_suffix,
    gzip_deterministic,
)
from sciga.transforms.fetch.endpoints import Endpoints
from sciga.transforms.fetch.html_pages import conversion_problem, fetch_eprint, fetch_html, generator_of
from sciga.transforms.fetch.http_client import PoliteClient
from sciga.transforms.inputs import ar5iv_dump
from sciga.transforms.metadata.classifications import (
    acm_from_metadata,
    classes_from_html,
    merge_classes,
    msc_from_metadata,
)
from sciga.transforms.metadata.comment_venue import parse_comment_venue

log = logging.getLogger(__name__)
# Where parts are kept: the local fetch cache, or a store on any fsspec path (a build's --ids on gs://).
PartStore = Union[FetchCache, FsspecStore]

# Outcome of one part: "cached" (nothing requested, or 304), "fetched", "failed".
CACHED, FETCHED, FAILED = "cached", "fetched", "failed"


@dataclass
class Outcome:
    paper_id: str
    part: str
    status: str
    bytes: int = 0
    message: Optional[str] = None
    error_type: Optional[str] = None
    source: str = "http"  # "http" | "dump" (read from a local ar5iv dump: no request, no network)


def needs_fetch(rec: Optional[PartRecord], *, refresh: bool, retry_failed: bool) -> bool:
    if rec is None:
        return True
    if rec.status == "ok":
        return refresh
    # Transient failures are retried on every run; permanent ones only when asked.
    return retry_failed or not rec.permanent


def _conditional_get(cache: PartStore, paper_id: str, part: str, rec: Optional[PartRecord], url: str, fetch):
    """One (conditional) download of a part: (response, None), or (None, the Outcome to
    report) when the server said 304, or failed. A transient failure keeps a good copy
    already in the cache; any other failure is journaled."""
    ok_before = rec is not None and rec.status == "ok"
    try:
        resp = fetch(etag=rec.etag if ok_before else None, last_modified=rec.last_modified if ok_before else None)
    except StageError as e:
        if ok_before and not e.permanent:
            return None, Outcome(paper_id, part, CACHED, 0, e.message, e.error_type)  # keep the good copy
        cache.fail(paper_id, part, e.error_type, e.message, permanent=bool(e.permanent), url=url)
        return None, Outcome(paper_id, part, FAILED, 0, e.message, e.error_type)
    if resp.not_modified:
        return None, Outcome(paper_id, part, CACHED, 0)
    return resp, None


def fetch_html_part(
    cache: PartStore,
    http: PoliteClient,
    endpoints: Endpoints,
    paper_id: str,
    version: Optional[str],
    *,
    refresh: bool = False,
    retry_failed: bool = False,
    dump_index: Optional[dict] = None,
    max_bytes: int = 256 * 1024 * 1024,
) -> Outcome:
    rec = cache.record(paper_id, "html")
    if not needs_fetch(rec, refresh=refresh, retry_failed=retry_failed):
        return Outcome(paper_id, "html", CACHED if rec.status == "ok" else FAILED, 0, rec.message, rec.error_type)
    if dump_index and paper_id in dump_index:
        dump, member = dump_index[paper_id]
        try:
            body = ar5iv_dump.read_member(dump, member, max_bytes)
        except StageError as e:
            cache.fail(paper_id, "html", e.error_type, e.message, permanent=True, url=f"zip://{member}::{dump}")
            return Outcome(paper_id, "html", FAILED, 0, e.message, e.error_type)
        problem = conversion_problem(body)
        if problem:
            msg = f"{paper_id}: {member} in {dump}: {problem[1]}; the paper is skipped."
            cache.fail(paper_id, "html", problem[0], msg, permanent=True, url=f"zip://{member}::{dump}")
            return Outcome(paper_id, "html", FAILED, 0, msg, problem[0])
        stored = gzip_deterministic(body)
        cache.save(
            paper_id,
            "html",
            stored,
            suffix=".html.gz",
            url=f"zip://{member}::{dump}",
            info={"source": "ar5iv_dump", "generator": generator_of(body)},
        )
        return Outcome(paper_id, "html", FETCHED, len(body), source="dump")
    page, done = _conditional_get(
        cache,
        paper_id,
        "html",
        rec,
        endpoints.html_url(paper_id, version),
        lambda **kw: fetch_html(http, endpoints, paper_id, version, max_bytes=max_bytes, **kw),
    )
    if done is not None:
        return done
    stored = gzip_deterministic(page.body)
    cache.save(
        paper_id,
        "html",
        stored,
        suffix=".html.gz",
        url=page.url,
        etag=page.etag,
        last_modified=page.last_modified,
        info={"source": page.source, "generator": page.generator, "fatal_marked": page.fatal_marked or None},
    )
    return Outcome(paper_id, "html", FETCHED, len(page.body))


def fetch_source_part(
    cache: PartStore,
    http: PoliteClient,
    endpoints: Endpoints,
    paper_id: str,
    version: Optional[str],
    *,
    refresh: bool = False,
    retry_failed: bool = False,
    max_bytes: int = 512 * 1024 * 1024,
) -> Outcome:
    rec = cache.record(paper_id, "source")
    if not needs_fetch(rec, refresh=refresh, retry_failed=retry_failed):
        return Outcome(paper_id, "source", CACHED if rec.status == "ok" else FAILED, 0, rec.message, rec.error_type)
    resp, done = _conditional_get(
        cache,
        paper_id,
        "source",
        rec,
        endpoints.eprint_url(paper_id, version),
        lambda **kw: fetch_eprint(http, endpoints, paper_id, version, max_bytes=max_bytes, **kw),
    )
    if done is not None:
        return done
    # Validate before the e-print becomes visible to the build: an unsafe or corrupt
    # archive is recorded as a failure of this part (the blob is kept for inspection).
    try:
        tree = read_eprint(resp.body, label=f"{paper_id} e-print ({resp.url})", paper_id=paper_id)
    except StageError as e:
        digest = cache.put_blob(resp.body)
        permanent = e.error_type not in ("corrupt_source", "empty_source")
        rec = cache.fail(
            paper_id,
            "source",
            e.error_type,
            e.message + f" (kept as blob {digest[:12]})",
            permanent=permanent,
            url=resp.url,
        )
        return Outcome(paper_id, "source", FAILED, len(resp.body), rec.message, e.error_type)
    cache.save(
        paper_id,
        "source",
        resp.body,
        suffix=eprint_suffix(resp.body),
        url=resp.url,
        etag=resp.etag,
        last_modified=resp.last_modified,
        info={"kind": tree.kind, "files": len(tree.files)},
    )
    return Outcome(paper_id, "source", FETCHED, len(resp.body))


def save_meta(cache: PartStore, meta: dict) -> PartRecord:
    return cache.save(meta["id"], "meta", canonical_json(meta), suffix=".api.json", url=meta.get("abs_url"))


def fetch_meta_batch(
    cache: PartStore,
    api: ArxivMetadata,
    wanted: list[tuple[str, str]],
    *,
    refresh: bool = False,
    retry_failed: bool = False,
) -> list[Outcome]:
    """``wanted``: (paper id, id as requested). One API call per 100 ids."""
    todo = [
        (pid, raw)
        for pid, raw in wanted
        if needs_fetch(cache.record(pid, "meta"), refresh=refresh, retry_failed=retry_failed)
    ]
    out = []
    for pid, raw in wanted:
        if (pid, raw) in todo:
            continue
        rec = cache.record(pid, "meta")
        out.append(
            Outcome(
                pid,
                "meta",
                CACHED if rec.status == "ok" else FAILED,
                0,
                None if rec.status == "ok" else rec.message,
                None if rec.status == "ok" else rec.error_type,
            )
        )
    if not todo:
        return out
    look = api.by_ids([raw for _, raw in todo])
    for pid, raw in todo:
        meta = look.found.get(pid)
        if meta is not None:
            rec = save_meta(cache, meta)
            out.append(Outcome(pid, "meta", FETCHED, rec.bytes))
            continue
        err = look.errors.get(raw)
        if err is None:
            err = StageError("metadata", "unknown_id", f"arXiv has no paper {raw}; check the id.", pid)
        permanent = err.error_type in ("bad_id", "unknown_id", "bad_request")
        cache.fail(pid, "meta", err.error_type, err.message, permanent=permanent)
        out.append(Outcome(pid, "meta", FAILED, 0, err.message, err.error_type))
    return out


def compose_sidecar(cache: PartStore, paper_id: str, meta: Optional[dict] = None) -> Optional[dict]:
    """The ``<id>.meta.json`` the build reads: the API record, plus where the page came
    from, the venue parsed from the comment, and ACM / MSC classes from the metadata, the
    page and the TeX source. ``meta``: the cached ``meta`` part when the caller has it in
    hand (a bulk import), else it is read from the cache."""
    if meta is None:
        raw = cache.read_part(paper_id, "meta")
        if raw is None:
            return None
        meta = json.loads(raw)
    else:
        meta = dict(meta)  # only top-level keys are set below: the caller's dict stays as it is
    html_rec = cache.record(paper_id, "html")
    src_rec = cache.record(paper_id, "source")
    html = cache.read_part(paper_id, "html")
    acm_html, msc_html = classes_from_html(html) if html else ([], [])
    acm_tex, msc_tex = [], []
    src = cache.read_part(paper_id, "source")
    if src:
        try:
            from sciga.transforms.eprints.tex_graphics import parse_document

            doc = parse_document(read_eprint(src, paper_id=paper_id))
            acm_tex, msc_tex = doc.acm_classes, doc.msc_classes
        except StageError:
            pass
    meta["acm_classes"] = merge_classes(
        acm_from_metadata("; ".join(meta.get("acm_classes") or [])) or meta.get("acm_classes"), acm_html, acm_tex
    )
    meta["msc_classes"] = merge_classes(msc_from_metadata(", ".join(meta.get("msc_classes") or [])), msc_html, msc_tex)
    if not meta.get("conference"):
        conf = parse_comment_venue(meta.get("comment"))
        meta["conference"] = {"venue": conf.venue, "year": conf.year, "track": conf.track} if conf else None
    if html_rec is not None and html_rec.status == "ok":
        info = html_rec.info or {}
        meta["source"] = info.get("source") or meta.get("source")
        meta["url"] = html_rec.url
        meta["html_generator"] = info.get("generator")
    else:
        meta["source"] = None
        meta["url"] = None
    if src_rec is not None and src_rec.status == "ok":
        meta["eprint"] = {"url": src_rec.url, "kind": (src_rec.info or {}).get("kind"), "sha256": src_rec.sha256}
    return meta


def finalize(cache: PartStore, paper_id: str, meta: Optional[dict] = None) -> Optional[str]:
    meta = compose_sidecar(cache, paper_id, meta)
    if meta is None:
        return None
    return cache.write_sidecar(paper_id, meta)
