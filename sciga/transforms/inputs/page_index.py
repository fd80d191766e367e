"""The pages' SHA-256s, known before the pipeline starts, read again only when a page changed.

A result's key hashes its page's content (``result_store.result_key``), so every build used
to read every page once just to find out that nothing had changed (about 1 s per 1,000
pages here). The build now records, after it finished, each local page's size, mtime and
SHA-256 in ``<out>/.sciga/pages.json``; the next build stats the pages and hashes only
those whose size or mtime moved (as make and ninja decide what to rebuild), in parallel
threads. ``--rebuild`` ignores the record.

Pages on object stores (gs://, s3://) are not recorded: their planning stays in the
pipeline, where the workers hash them next to the data.
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import IO, Any, Optional

from sciga.transforms.common.input_files import is_local, local_path, parent_of
from sciga.transforms.common.result_store import hash_file
from sciga.transforms.inputs.listing_record import LISTING
from sciga.transforms.inputs.pages import CONVERT_PREFIX
from sciga.transforms.inputs.refused import RefusedInput

PAGE_INDEX = "pages.json"
RESULTS = "results"  # the record's vouches for the pages' results (``write/up_to_date.result_vouches``)
INDEX_VERSION = 1
HASH_THREADS = 8  # reading and hashing release the GIL; a few threads keep a disk or NFS busy


@dataclass(frozen=True)
class PageStat:
    size: int
    mtime_ns: int


@dataclass
class PageHashes:
    """What the launcher knows about the build's pages."""

    sha256: dict[str, str] = field(default_factory=dict)  # uri -> SHA-256 (pages it could read)
    stats: dict[str, PageStat] = field(default_factory=dict)  # uri -> size, mtime as now
    hashed: int = 0  # pages read and hashed in this build (new or changed since the record)
    recorded: int = 0  # pages whose hash came from the record
    unchanged: int = 0  # pages with the SHA-256 the record has
    n_inputs: int = 0
    record_pages: int = 0  # pages in the record (0: none, or --rebuild)
    record_signature: Optional[str] = None  # of the build that wrote the record (``write/up_to_date.py``)
    record_results: Optional[dict] = None  # the record's vouches for the pages' results (``write/up_to_date.py``)
    record_results_set_aside: bool = False  # read from the record again when needed (``set_aside_record_results``)
    listing: Optional[dict] = None  # what the next build needs to reuse this build's listing (``listing_record.py``)

    def set_aside_record_results(self) -> None:
        """The record's vouches are used before the build runs (is it up to date?) and once it
        has run (``previous_record_results``: vouches carried over), not while it runs. Held,
        they were ~1 KB a page in the launcher and in every worker forked from it (19 MB of
        Python objects at 20,000 pages, three times over in a build's summed memory)."""
        if self.record_results is not None:
            self.record_results, self.record_results_set_aside = None, True

    def previous_record_results(self, store_root: str) -> Optional[dict]:
        """The record's vouches for the pages' results, handed over to the caller, who uses
        them up (``up_to_date.result_vouches``); read again from the record if they were set
        aside (the record keeps them until the build records its own; a record that is gone
        gives none, and each result's header is read instead)."""
        if self.record_results is None and self.record_results_set_aside:
            results = load_record(store_root).get(RESULTS)
            return results if isinstance(results, dict) else None
        results, self.record_results = self.record_results, None
        return results

    def fill(self, known: dict[str, str], max_page_bytes: int) -> None:
        """Complete the hashes of a build that left them to its workers (``page_hashes``
        with ``hash_now=False``): a page gets the SHA-256 its worker read (``known``), or
        is read and hashed now (pages dead-lettered before any was computed), so that the
        record the build leaves is the one it would have left after hashing first."""
        for uri in self.stats:
            if uri not in self.sha256 and uri in known:
                self.sha256[uri] = known[uri]
        _hash_into(self, [u for u in self.stats if u not in self.sha256], max_page_bytes)

    @property
    def same_as_record(self) -> bool:
        """Every page has the SHA-256 the record has, and the record has no other page."""
        return 0 < self.record_pages == self.n_inputs and self.unchanged == len(self.sha256)


def index_path(store_root: str) -> str:
    return posixpath.join(store_root, PAGE_INDEX)


def record_identity(store_root: str) -> Optional[tuple[int, int, int]]:
    """(inode, size, mtime) of the record, None when there is none: the record is replaced,
    never rewritten in place, so a record read earlier is the one there while this holds."""
    if not is_local(store_root):
        return None
    try:
        st = os.stat(local_path(index_path(store_root)))
    except (OSError, ValueError):
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def load_record(store_root: str) -> dict:
    """The record of the last finished build (empty when there is none, or it is damaged)."""
    if not is_local(store_root):
        return {}
    try:
        with open(local_path(index_path(store_root)), encoding="utf-8") as f:
            raw = json.load(f)
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) and raw.get("version") == INDEX_VERSION else {}


def recorded_uris(raw: dict) -> list[str]:
    """The pages of a record, in its order (sorted, as ``save_page_index`` writes them)."""
    pages = raw.get("pages")
    return list(pages) if isinstance(pages, dict) else []


def _pages_of(raw: dict) -> dict[str, tuple[int, int, str]]:
    """uri -> (size, mtime_ns, sha256) of a record; empty when it has none (readable)."""
    try:
        return {u: (int(s), int(m), str(h)) for u, (s, m, h) in raw["pages"].items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        return {}  # a damaged record costs one round of hashing, never a wrong key


def _stat(uri: str) -> Optional[PageStat]:
    try:
        st = os.stat(local_path(uri))
    except (OSError, ValueError):
        return None
    return PageStat(st.st_size, st.st_mtime_ns)


def _hash(uri: str, max_page_bytes: int) -> Optional[str]:
    try:
        sha, n = hash_file(uri, limit=max_page_bytes, root=parent_of(uri))
    except Exception:  # noqa: BLE001 - the pipeline reads it again and says what is wrong
        return None
    return sha if n <= max_page_bytes else None  # too big: the parse stage says so


def page_hashes(
    inputs: Sequence[str],
    store_root: str,
    max_page_bytes: int,
    use_record: bool = True,
    hash_now: bool = True,
    record: Optional[dict] = None,
) -> Optional[PageHashes]:
    """The SHA-256 of every local page in ``inputs``, from the record where a page's size and
    mtime are unchanged, else read now. None when an input is not a local page (a convert
    request, a remote file): the pipeline plans those itself. ``hash_now=False``: pages the
    record does not vouch for are left unhashed (their stats are taken), for a build whose
    store holds no result to reuse: its workers hash each page as they read it, and
    ``PageHashes.fill`` takes those hashes afterwards. ``record``: the record, when the caller
    has read it already (``load_record``)."""
    if not inputs or not all(is_local(u) and not u.startswith(CONVERT_PREFIX) for u in inputs):
        return None
    raw = (load_record(store_root) if record is None else record) if use_record else {}
    record = _pages_of(raw)
    signature = raw.get("build")
    out = PageHashes(
        n_inputs=len(inputs),
        record_pages=len(record),
        record_signature=signature if isinstance(signature, str) else None,
        record_results=raw.get(RESULTS) if isinstance(raw.get(RESULTS), dict) else None,
    )
    todo: list[str] = []
    for uri in inputs:
        if isinstance(uri, RefusedInput):  # never read: nothing to hash (a link out is not even stat-ed)
            continue
        st = _stat(uri)
        if st is None:
            continue
        out.stats[uri] = st
        rec = record.get(uri)
        if rec is not None and rec[0] == st.size and rec[1] == st.mtime_ns:
            out.sha256[uri] = rec[2]
            out.recorded += 1
        else:
            todo.append(uri)
    if hash_now:
        _hash_into(out, todo, max_page_bytes)
    out.unchanged = sum(1 for u, h in out.sha256.items() if record.get(u, (0, 0, ""))[2] == h)
    return out


def _hash_into(out: PageHashes, uris: list[str], max_page_bytes: int) -> None:
    """Read and hash ``uris`` (in threads) into ``out``."""
    if not uris:
        return
    with ThreadPoolExecutor(min(HASH_THREADS, len(uris))) as pool:
        for uri, sha in zip(uris, pool.map(lambda u: _hash(u, max_page_bytes), uris)):
            if sha is not None:
                out.sha256[uri] = sha
    out.hashed += len(uris)


def save_page_index(store_root: str, hashes: PageHashes, signature: Optional[str], results: Any = None) -> None:
    """Record ``hashes`` and the finished build's ``signature`` (and ``results``, the vouches
    for the pages' results: a dict, or a ``write/up_to_date.VouchStream`` written page by
    page as it comes) for the next build; atomic (write, then rename), so a build killed
    here leaves the old record or the new one."""
    if not is_local(store_root):
        return
    stats = sorted(hashes.stats.items())
    pages = _Members((u, [st.size, st.mtime_ns, hashes.sha256[u]]) for u, st in stats if u in hashes.sha256)
    record: dict = {"version": INDEX_VERSION, "build": signature, "pages": pages}
    if isinstance(results, dict):
        record[RESULTS] = results
    elif results is not None:  # its folder list fills as its pages are written, before it is
        record[RESULTS] = _Members([("pages", _Members(results.pages)), ("dirs", results.dirs)])
    if hashes.listing is not None:
        record[LISTING] = hashes.listing
    _write_record(store_root, record)


def save_record(store_root: str, record: dict) -> None:
    """``record`` written atomically (write, then rename), on a local store only."""
    if is_local(store_root):
        _write_record(store_root, record)


class _Members:
    """A JSON object written member by member as its (name, value) pairs come, never held
    whole (the record of 145,000 pages is ~60 MB of JSON, ~300 MB as Python objects)."""

    def __init__(self, pairs: Iterable[tuple[str, Any]]):
        self.pairs = pairs


def _dump(f: IO[str], value: Any) -> None:
    """``json.dumps(value, separators=(",", ":"))`` into ``f``, a ``_Members`` as it comes."""
    if isinstance(value, dict) and any(isinstance(v, _Members) for v in value.values()):
        value = _Members(value.items())
    if not isinstance(value, _Members):
        f.write(json.dumps(value, separators=(",", ":")))
        return
    f.write("{")
    for i, (name, member) in enumerate(value.pairs):
        f.write(("," if i else "") + json.dumps(name) + ":")
        _dump(f, member)
    f.write("}")


def _write_record(store_root: str, record: dict) -> None:
    """The record written atomically (write, then rename); a record cut short by an error
    (a full disk) is removed, and the old one stays."""
    path = local_path(index_path(store_root))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            _dump(f, record)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def unclaim_page_index(store_root: str) -> None:
    """A build is about to store results: the record stops saying that the shards in OUT are
    the build its pages make (its signature is cleared; the pages' hashes stay). A build
    killed from here on has stored results its shards do not hold (a paper recomputed
    because its metadata sidecar changed keeps its key), and the next build must run to
    write them, not answer "up to date"."""
    raw = load_record(store_root)
    if raw.get("build") is not None:
        _write_record(store_root, {**raw, "build": None})


def forget_page_index(store_root: str) -> None:
    """A finished build that kept no record (pages not on local disk, pages made from
    e-prints): the old record no longer describes the build in OUT."""
    if is_local(store_root):
        try:
            os.remove(local_path(index_path(store_root)))
        except FileNotFoundError:
            pass
