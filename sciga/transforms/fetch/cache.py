"""The fetch cache: content-addressed blobs, a per-paper view the build reads, a journal.

Layout of a cache folder::

    blobs/ab/ab12...ef            every fetched body, named by its SHA-256 (HTML gzip-compressed)
    papers/<safe id>/<safe id>.html.gz       the page      } hard links into blobs/ (copies
    papers/<safe id>/<safe id>.src.tar.gz    the e-print   } where links are impossible);
    papers/<safe id>/<safe id>.api.json      the arXiv API record as fetched
    papers/<safe id>/<safe id>.meta.json     the metadata sidecar (API record + source, venue, classes)
    journal.jsonl                 one JSON line per finished part: {id, part, status, sha256, ...}
    queries/<hash>.json           how far a --query has been paged

``sciga build --input CACHE`` finds ``papers/*/*.html.gz`` with their sidecars, and the TeX
stage finds the ``.src.*`` file beside each page.

Crash safety: a blob is written to a temporary file, fsynced and renamed into place; a view
file is linked under a temporary name and renamed; only then is the journal line appended
(flushed and fsynced). A kill at any point leaves at worst an orphan temporary file (removed
on the next start) or a view file without its journal line, which ``recover()`` re-journals
from the file itself, so nothing that was completely downloaded is fetched again. A
truncated last journal line is ignored. The last line for an (id, part) wins.

``FsspecStore`` is the same contract without a journal, for ``sciga build --ids`` on
Dataflow (the cache on gs://): a part is done when its view file exists.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tempfile
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Optional

from sciga.schemas import ids
from sciga.transforms.eprints.eprint import detect_kind

JOURNAL = "journal.jsonl"
PARTS = ("meta", "html", "source")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def gzip_deterministic(data: bytes) -> bytes:
    if data[:2] == b"\x1f\x8b":
        return data
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=6, mtime=0) as gz:
        gz.write(data)
    return out.getvalue()


def eprint_suffix(data: bytes) -> str:
    """File suffix that says what an e-print is (the build sniffs content anyway)."""
    kind = detect_kind(data[:512])
    if kind == "gzip":
        try:
            head = gzip.GzipFile(fileobj=io.BytesIO(data)).read(512)
        except (OSError, EOFError):
            return ".src.gz"
        if len(head) >= 262 and head[257:262] == b"ustar":
            return ".src.tar.gz"
        if head[:4] == b"%PDF":
            return ".src.pdf.gz"
        return ".src.gz"
    return {"pdf": ".src.pdf", "tar": ".src.tar", "ps": ".src.ps"}.get(kind, ".src")


def canonical_json(obj) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, sort_keys=True, indent=1) + "\n").encode("utf-8")


@dataclass
class PartRecord:
    id: str
    part: str
    status: str  # "ok" | "failed"
    sha256: Optional[str] = None
    bytes: int = 0
    file: Optional[str] = None  # view file, relative to the cache root
    url: Optional[str] = None
    etag: Optional[str] = None
    last_modified: Optional[str] = None
    error_type: Optional[str] = None
    message: Optional[str] = None
    permanent: bool = False
    info: Optional[dict] = None  # part-specific facts (generator, e-print kind, source label)

    def to_json(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v not in (None, False) or k in ("id", "part", "status")}

    @classmethod
    def from_json(cls, d: dict) -> PartRecord:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def fsync_path(path: str) -> None:
    """Flush a file or a folder's entries to disk (best effort)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _remove_temporaries(dirs: Iterable[str]) -> int:
    """Remove the ``.tmp-*`` files (half-written by a killed run) in ``dirs``; returns how many."""
    n = 0
    for d in dirs:
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for name in names:
            if name.startswith(".tmp-"):
                try:
                    os.unlink(os.path.join(d, name))
                    n += 1
                except OSError:
                    pass
    return n


class FetchCache:
    """A local cache folder (see module doc). Thread-safe.

    ``indexed``: the parts whose journal records are held in memory (all by default). A bulk
    metadata import passes ``("html", "source")``: its memory then does not grow with the
    number of papers it writes, and a ``meta`` part is looked up by its view file (present
    = done, as in ``FsspecStore``; it is renamed into place only once complete)."""

    def __init__(self, root: str, fsync: bool = True, *, indexed: tuple = PARTS):
        self.root = os.path.abspath(root)
        self.fsync = fsync
        self.indexed = frozenset(indexed)
        os.makedirs(os.path.join(self.root, "blobs"), exist_ok=True)
        os.makedirs(os.path.join(self.root, "papers"), exist_ok=True)
        os.makedirs(os.path.join(self.root, "queries"), exist_ok=True)
        self._lock = threading.RLock()
        self._state: dict[tuple[str, str], PartRecord] = {}
        self._journal_path = os.path.join(self.root, JOURNAL)
        self._clean_temporaries()
        self._load()
        self._journal = open(self._journal_path, "ab")

    # -- paths -------------------------------------------------------------------------
    def blob_path(self, digest: str) -> str:
        return os.path.join(self.root, "blobs", digest[:2], digest)

    def paper_dir(self, paper_id: str) -> str:
        return os.path.join(self.root, "papers", ids.safe_filename(paper_id))

    def view_path(self, paper_id: str, suffix: str) -> str:
        safe = ids.safe_filename(paper_id)
        return os.path.join(self.root, "papers", safe, safe + suffix)

    def page_path(self, paper_id: str) -> str:
        return self.view_path(paper_id, ".html.gz")

    def sidecar_path(self, paper_id: str) -> str:
        return self.view_path(paper_id, ".meta.json")

    # -- journal -----------------------------------------------------------------------
    def _load(self) -> None:
        if not os.path.exists(self._journal_path):
            return
        with open(self._journal_path, "rb") as f:
            good_end = _parse_journal(f, self._state, self.indexed)
            size = f.seek(0, os.SEEK_END)
        if good_end < size:
            # Drop the torn tail so the next appended line starts clean.
            with open(self._journal_path, "r+b") as f:
                f.truncate(good_end)

    def _append(self, rec: PartRecord) -> None:
        line = json.dumps(rec.to_json(), ensure_ascii=False, sort_keys=True).encode("utf-8") + b"\n"
        with self._lock:
            self._journal.write(line)
            self._journal.flush()
            if self.fsync:
                os.fsync(self._journal.fileno())
            if rec.part in self.indexed:
                self._state[(rec.id, rec.part)] = rec

    def record(self, paper_id: str, part: str) -> Optional[PartRecord]:
        """The last journal record of a part (the cache lookup); for a part that is not
        ``indexed``, a record made from its view file (no sha256, no failures)."""
        if part in self.indexed:
            return self._state.get((paper_id, part))
        views = self._views_of(paper_id, part)
        if not views:
            return None
        path = sorted(views)[0]
        return PartRecord(id=paper_id, part=part, status="ok", file=os.path.relpath(path, self.root))

    def sync_journal(self) -> None:
        """Journal lines appended so far are on disk (for a cache opened with fsync=False)."""
        with self._lock:
            self._journal.flush()
            os.fsync(self._journal.fileno())

    def records(self) -> Iterator[PartRecord]:
        with self._lock:
            return iter(list(self._state.values()))

    def close(self) -> None:
        with self._lock:
            if not self._journal.closed:
                self._journal.close()

    # -- atomic writes -------------------------------------------------------------------
    def _clean_temporaries(self) -> None:
        """Remove what a killed run left half-written (paper folders: see ``recover``)."""
        dirs = [self.root, os.path.join(self.root, "queries"), os.path.join(self.root, "harvests")]
        blobs = os.path.join(self.root, "blobs")
        dirs += [os.path.join(blobs, d) for d in os.listdir(blobs)]
        _remove_temporaries(dirs)

    def write_atomic(self, dest: str, data: bytes) -> None:
        d = os.path.dirname(dest)
        os.makedirs(d, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=d)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                if self.fsync:
                    os.fsync(f.fileno())
            os.replace(tmp, dest)
            if self.fsync:
                fsync_path(d)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def put_blob(self, data: bytes) -> str:
        digest = sha256(data)
        path = self.blob_path(digest)
        if not os.path.exists(path):
            self.write_atomic(path, data)
        return digest

    def _link_view(self, digest: str, dest: str) -> None:
        d = os.path.dirname(dest)
        os.makedirs(d, exist_ok=True)
        try:
            if os.path.samefile(self.blob_path(digest), dest):
                return  # already this content (rename() of two links to one file is a no-op)
        except OSError:
            pass
        tmp = os.path.join(d, f".tmp-{os.getpid()}-{threading.get_ident()}-{os.path.basename(dest)}")
        try:
            os.link(self.blob_path(digest), tmp)
        except OSError:
            with open(self.blob_path(digest), "rb") as f:
                self.write_atomic(tmp, f.read())
        os.replace(tmp, dest)
        if os.path.lexists(tmp):
            os.unlink(tmp)

    # -- parts -----------------------------------------------------------------------------
    def save(
        self,
        paper_id: str,
        part: str,
        data: bytes,
        *,
        suffix: str,
        url: Optional[str] = None,
        etag: Optional[str] = None,
        last_modified: Optional[str] = None,
        info: Optional[dict] = None,
    ) -> PartRecord:
        digest = self.put_blob(data)
        view = self.view_path(paper_id, suffix)
        self._link_view(digest, view)
        # Old view files of this part with another suffix (an e-print that changed type).
        for old in self._views_of(paper_id, part):
            if old != view:
                try:
                    os.unlink(old)
                except OSError:
                    pass
        rec = PartRecord(
            id=paper_id,
            part=part,
            status="ok",
            sha256=digest,
            bytes=len(data),
            file=os.path.relpath(view, self.root),
            url=url,
            etag=etag,
            last_modified=last_modified,
            info=info,
        )
        self._append(rec)
        return rec

    def touch(self, rec: PartRecord) -> PartRecord:
        """A 304 on a refresh: the stored copy is current; journal that it was checked."""
        self._append(rec)
        return rec

    def fail(
        self, paper_id: str, part: str, error_type: str, message: str, *, permanent: bool, url: Optional[str] = None
    ) -> PartRecord:
        # A failed part has no view file (its blob, if any, stays): so a view file next to a
        # "failed" record can only come from a later success cut short before its journal line.
        for old in self._views_of(paper_id, part):
            try:
                os.unlink(old)
            except OSError:
                pass
        rec = PartRecord(
            id=paper_id,
            part=part,
            status="failed",
            url=url,
            error_type=error_type,
            message=message,
            permanent=permanent,
        )
        self._append(rec)
        return rec

    def _views_of(self, paper_id: str, part: str) -> list[str]:
        d = self.paper_dir(paper_id)
        safe = ids.safe_filename(paper_id)
        if not os.path.isdir(d):
            return []
        out = []
        for name in os.listdir(d):
            if name.startswith(".tmp-"):
                continue
            if part == "html" and name == safe + ".html.gz":
                out.append(os.path.join(d, name))
            elif part == "meta" and name == safe + ".api.json":
                out.append(os.path.join(d, name))
            elif part == "source" and name.startswith(safe + ".src"):
                out.append(os.path.join(d, name))
        return out

    def read_part(self, paper_id: str, part: str) -> Optional[bytes]:
        rec = self.record(paper_id, part)
        if rec is None or rec.status != "ok" or not (rec.sha256 or rec.file):
            return None
        try:
            with open(self.blob_path(rec.sha256) if rec.sha256 else os.path.join(self.root, rec.file or ""), "rb") as f:
                return f.read()
        except OSError:
            return None

    def write_sidecar(self, paper_id: str, meta: dict) -> str:
        path = self.sidecar_path(paper_id)
        data = canonical_json(meta)
        try:
            with open(path, "rb") as f:
                if f.read() == data:
                    return path
        except OSError:
            pass
        self.write_atomic(path, data)
        return path

    def remove_paper_temporaries(self) -> int:
        """Remove the half-written files a killed run left in paper folders (``recover``
        starts with this, then journals the complete files); returns how many."""
        papers = os.path.join(self.root, "papers")
        if not os.path.isdir(papers):
            return 0
        return _remove_temporaries(e.path for e in os.scandir(papers) if e.is_dir())

    def recover(self) -> int:
        """Journal view files that a kill left unjournaled (complete, since they were
        renamed into place only after being fully written). Returns how many."""
        self.remove_paper_temporaries()  # half-written by a killed run: never journaled
        n = 0
        papers = os.path.join(self.root, "papers")
        for safe in sorted(os.listdir(papers)):
            d = os.path.join(papers, safe)
            if not os.path.isdir(d):
                continue
            for name in sorted(os.listdir(d)):
                if name == safe + ".html.gz":
                    part = "html"
                elif name == safe + ".api.json":
                    part = "meta"
                elif name.startswith(safe + ".src"):
                    part = "source"
                else:
                    continue
                pid = id_from_safe(safe)
                rec = self.record(pid, part)
                path = os.path.join(d, name)
                if rec is not None and rec.status == "ok" and rec.file == os.path.relpath(path, self.root):
                    continue
                with open(path, "rb") as f:
                    data = f.read()
                digest = self.put_blob(data)
                self._append(
                    PartRecord(
                        id=pid,
                        part=part,
                        status="ok",
                        sha256=digest,
                        bytes=len(data),
                        file=os.path.relpath(path, self.root),
                        info={"recovered": True},
                    )
                )
                n += 1
        return n

    # -- query progress ----------------------------------------------------------------------
    def query_state_path(self, query: str, max_results: Optional[int]) -> str:
        key = sha256(f"{query}\n{max_results}".encode())[:16]
        return os.path.join(self.root, "queries", key + ".json")

    def load_query(self, query: str, max_results: Optional[int]) -> dict:
        path = self.query_state_path(query, max_results)
        try:
            with open(path, "rb") as f:
                return json.loads(f.read())
        except (OSError, ValueError):
            return {"query": query, "max_results": max_results, "ids": [], "complete": False}

    def save_query(self, state: dict) -> None:
        self.write_atomic(self.query_state_path(state["query"], state.get("max_results")), canonical_json(state))


def _parse_journal(lines, state: dict, keep=PARTS) -> int:
    """Journal lines (a binary file, read line by line) -> ``state[(id, part)] = last
    PartRecord`` for the parts in ``keep``; returns where the good lines end. A line cut
    by a kill (no newline, or not JSON) and everything after it are ignored: a part whose
    line was lost has its view file, which ``recover()`` journals again."""
    good_end = 0
    raw_decode = json.JSONDecoder().raw_decode  # skips loads()' per-call encoding sniffing
    for line in lines:
        if not line.endswith(b"\n"):
            break
        line = line[:-1]
        if line:
            try:
                txt = line.decode("utf-8")
                d, end = raw_decode(txt)
                if end != len(txt):
                    raise ValueError("trailing bytes")
                rec = PartRecord(**d)
            except (ValueError, TypeError):
                try:
                    rec = PartRecord.from_json(json.loads(line))  # a field from a newer version: keep the known ones
                except (ValueError, TypeError, AttributeError):
                    break
            if rec.part in keep:
                state[(rec.id, rec.part)] = rec
        good_end += len(line) + 1
    return good_end


def read_journal(root: str) -> dict:
    """The journal index of a cache folder, read only (nothing created, repaired or locked):
    ``{(id, part): PartRecord}``; empty when there is no cache there."""
    state: dict = {}
    try:
        with open(os.path.join(root, JOURNAL), "rb") as f:
            _parse_journal(f, state)
    except OSError:
        pass
    return state


def id_from_safe(safe: str) -> str:
    pid, _ = ids.paper_id_from_filename(safe)
    return pid or safe


class FsspecStore:
    """Journal-less store on any fsspec path (gs://...) with the ``FetchCache`` methods the
    fetcher uses: a part is done when its view file exists. Used by the in-pipeline fetch
    of ``sciga build --ids`` (a retried bundle finds its finished parts and skips them)."""

    _SUFFIX = {
        "meta": (".api.json",),
        "html": (".html.gz",),
        "source": (".src.tar.gz", ".src.gz", ".src.pdf", ".src.tar", ".src.ps", ".src.pdf.gz", ".src"),
    }

    def __init__(self, root: str):
        import fsspec

        self.root = root.rstrip("/")
        self.fs, self._root = fsspec.core.url_to_fs(self.root)
        self._records: dict[tuple[str, str], PartRecord] = {}

    def path_of(self, paper_id: str, suffix: str) -> str:
        safe = ids.safe_filename(paper_id)
        return f"{self._root}/papers/{safe}/{safe}{suffix}"

    def uri(self, paper_id: str, suffix: str) -> str:
        safe = ids.safe_filename(paper_id)
        return f"{self.root}/papers/{safe}/{safe}{suffix}"

    def page_path(self, paper_id: str) -> str:
        return self.uri(paper_id, ".html.gz")

    def _write(self, path: str, data: bytes) -> None:
        d = path.rsplit("/", 1)[0]
        self.fs.makedirs(d, exist_ok=True)
        tmp = f"{d}/.tmp-{os.getpid()}-{threading.get_ident()}-{path.rsplit('/', 1)[1]}"
        with self.fs.open(tmp, "wb") as f:
            f.write(data)
        self.fs.mv(tmp, path)

    def record(self, paper_id: str, part: str) -> Optional[PartRecord]:
        rec = self._records.get((paper_id, part))
        if rec is not None:
            return rec
        for suf in self._SUFFIX[part]:
            p = self.path_of(paper_id, suf)
            if self.fs.exists(p):
                rec = PartRecord(id=paper_id, part=part, status="ok", file=p)
                self._records[(paper_id, part)] = rec
                return rec
        failed = self.path_of(paper_id, f".{part}.failed.json")
        if self.fs.exists(failed):
            try:
                with self.fs.open(failed, "rb") as f:
                    rec = PartRecord.from_json(json.loads(f.read()))
            except (OSError, ValueError, TypeError):
                return None
            self._records[(paper_id, part)] = rec
            return rec
        return None

    def put_blob(self, data: bytes) -> str:
        digest = sha256(data)
        p = f"{self._root}/blobs/{digest[:2]}/{digest}"
        if not self.fs.exists(p):
            self._write(p, data)
        return digest

    def save(
        self,
        paper_id: str,
        part: str,
        data: bytes,
        *,
        suffix: str,
        url: Optional[str] = None,
        etag: Optional[str] = None,
        last_modified: Optional[str] = None,
        info: Optional[dict] = None,
    ) -> PartRecord:
        p = self.path_of(paper_id, suffix)
        self._write(p, data)
        failed = self.path_of(paper_id, f".{part}.failed.json")
        if self.fs.exists(failed):
            self.fs.rm(failed)
        rec = PartRecord(
            id=paper_id,
            part=part,
            status="ok",
            sha256=sha256(data),
            bytes=len(data),
            file=p,
            url=url,
            etag=etag,
            last_modified=last_modified,
            info=info,
        )
        self._records[(paper_id, part)] = rec
        return rec

    def fail(
        self, paper_id: str, part: str, error_type: str, message: str, *, permanent: bool, url: Optional[str] = None
    ) -> PartRecord:
        rec = PartRecord(
            id=paper_id,
            part=part,
            status="failed",
            url=url,
            error_type=error_type,
            message=message,
            permanent=permanent,
        )
        self._records[(paper_id, part)] = rec
        if permanent:
            # Remembered so a rerun does not ask again (transient failures are retried).
            self._write(self.path_of(paper_id, f".{part}.failed.json"), canonical_json(rec.to_json()))
        return rec

    def read_part(self, paper_id: str, part: str) -> Optional[bytes]:
        rec = self.record(paper_id, part)
        if rec is None or rec.status != "ok" or not rec.file:
            return None
        with self.fs.open(rec.file, "rb") as f:
            return f.read()

    def write_sidecar(self, paper_id: str, meta: dict) -> str:
        self._write(self.path_of(paper_id, ".meta.json"), canonical_json(meta))
        return self.uri(paper_id, ".meta.json")
