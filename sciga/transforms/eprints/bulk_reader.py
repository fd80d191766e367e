"""E-prints from arXiv's bulk source archives, read where they are (a local folder or
``s3://arxiv/src/`` through fsspec), with a small resumable cache.

Built once (on the launcher) from the manifest::

    bulk = BulkEprints.open("s3://arxiv/src/", cache_dir="out/bulk")
    print(bulk.plan(paper_ids).warning)          # bytes to read and what S3 will bill
    report = bulk.extract(paper_ids)             # one verified pass per tar (resumable)
    data = bulk.source("2101.00001")             # the e-print's bytes, or a StageError

The cache (``cache_dir``, local or any fsspec URL)::

    tars/<arXiv_src_YYMM_NNN>.json   the verdict of one full pass over a tar (TarIndex):
                                     md5 against the manifest, each member's offset, size
                                     and sha256. Written last: a tar with an index is done.
    eprints/<safe id>.gz             the e-prints a build wanted, exactly as arXiv stores
                                     them (``--tex-input <cache>/eprints`` finds them)
    refused/<safe id>.json           why an e-print was refused (bad gzip, traversal...),
                                     so that a later run need not read it again
    .staging/                        a pass in progress; removed when a run starts

A killed run resumes: tars with an index are not read again; e-prints already in
``eprints/`` are not written again. One ``extract`` at a time per cache (it clears
``.staging/`` when it starts); tars are scanned ``max_workers`` at a time inside it. A later build that wants other papers of a scanned tar
reads just those members with range reads, checked against the sha256 in the index.

Reading ``s3://arxiv`` costs money: the bucket is requester-pays, so AWS bills the reader
for the transfer (about $0.09/GB to the internet from us-east-1, approximate, see
https://aws.amazon.com/s3/pricing/ ; free to machines in us-east-1). ``plan`` states the
bytes and the cost before anything is read.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Optional

import fsspec

from sciga.schemas import ids
from sciga.transforms.common.errors import StageError
from sciga.transforms.eprints.bulk_tar import (
    MANIFEST_NAME,
    STAGE,
    Manifest,
    MemberRecord,
    TarEntry,
    TarIndex,
    paper_problem,
    parse_manifest,
    scan_tar,
)
from sciga.transforms.eprints.eprint import DEFAULT_LIMITS, Limits, SourceTree, default_keep, read_eprint

log = logging.getLogger(__name__)

EGRESS_USD_PER_GB = 0.09  # AWS S3 data transfer out to the internet, us-east-1, first 10 TB/month (approximate)
REQUESTER_PAYS_BUCKETS = ("arxiv",)
SCAN_BLOCK = 32 << 20  # bytes per GET while a remote tar is streamed (fewer, larger requests)


@dataclass(frozen=True)
class BulkPlan:
    """What ``extract`` would read, before anything is read."""

    tars: tuple[str, ...]  # tar names that need a full verified pass
    bytes_to_scan: int  # their sizes, from the manifest
    range_reads: int  # members of already-scanned tars to fetch by range
    range_bytes: int
    papers: int  # papers covered by some tar
    not_covered: tuple[str, ...]  # paper ids no tar's range covers
    requester_pays: bool
    usd_estimate: float  # transfer cost at EGRESS_USD_PER_GB when requester_pays, else 0
    warning: Optional[str]  # one line to show before reading, when requester_pays


@dataclass
class ExtractReport:
    tars_scanned: list[str] = field(default_factory=list)  # full passes made by this run
    tars_reused: list[str] = field(default_factory=list)  # tars whose index a previous run left
    extracted: dict = field(default_factory=dict)  # paper id -> path of its e-print in the cache
    already: list[str] = field(default_factory=list)  # papers whose e-print a previous run wrote
    reasons: dict = field(default_factory=dict)  # paper id -> (error_type, message)
    bytes_read: int = 0


def _is_local(fs) -> bool:
    proto = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
    return "file" in proto or "local" in proto


def _join(base: str, *parts: str) -> str:
    return posixpath.join(base.rstrip("/"), *parts)


class BulkEprints:
    """The bulk archives under ``root`` plus the cache in ``cache_dir``. Holds only the
    manifest and strings, so it pickles to Beam workers; file systems open lazily."""

    def __init__(
        self,
        root: str,
        manifest: Manifest,
        cache_dir: str,
        *,
        storage_options: Optional[Mapping] = None,
        cache_storage_options: Optional[Mapping] = None,
        limits: Limits = DEFAULT_LIMITS,
        hash_members: bool = True,
        manifest_uri: Optional[str] = None,
    ):
        self.root = root.rstrip("/")
        self.manifest = manifest
        self.cache_dir = cache_dir.rstrip("/")
        self.storage_options = dict(storage_options or {})
        self.cache_storage_options = dict(cache_storage_options or {})
        self.limits = limits
        self.hash_members = hash_members
        self.manifest_uri = manifest_uri or _join(self.root, MANIFEST_NAME)
        self._fs = None
        self._cfs = None
        self._tar_paths: dict[str, str] = {}
        self._layout: Optional[str] = None
        self._indexes: dict[str, Optional[TarIndex]] = {}
        self._lock = threading.Lock()

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        root: str,
        cache_dir: str,
        *,
        storage_options: Optional[Mapping] = None,
        cache_storage_options: Optional[Mapping] = None,
        limits: Limits = DEFAULT_LIMITS,
        hash_members: bool = True,
    ) -> BulkEprints:
        """``root``: a folder or URL holding ``arXiv_src_manifest.xml`` (or the manifest's
        own path). ``s3://arxiv/...`` is read requester-pays with the caller's AWS
        credentials (the usual chain: environment, profile, instance role)."""
        opts = default_storage_options(root, storage_options)
        uri = root if root.endswith(".xml") else _join(root, MANIFEST_NAME)
        fs, path = fsspec.core.url_to_fs(uri, **opts)
        try:
            with fs.open(path, "rb") as f:
                xml = f.read()
        except FileNotFoundError:
            raise StageError(
                "eprint_bulk",
                "missing_manifest",
                f"{uri} does not exist; pass the folder (or URL) that "
                "holds arXiv_src_manifest.xml and the arXiv_src_*.tar files.",
            ) from None
        except OSError as e:
            raise StageError(
                "eprint_bulk",
                "missing_manifest",
                f"{uri} could not be read ({type(e).__name__}: {e}); "
                "check the path and, for s3://, your AWS credentials.",
            ) from None
        manifest = Manifest(parse_manifest(xml, label=uri))
        base = posixpath.dirname(uri)
        return cls(
            base,
            manifest,
            cache_dir,
            storage_options=opts,
            cache_storage_options=cache_storage_options,
            limits=limits,
            hash_members=hash_members,
            manifest_uri=uri,
        )

    def __getstate__(self):
        d = dict(self.__dict__)
        d["_fs"] = d["_cfs"] = None
        d["_lock"] = None
        d["_indexes"] = {}
        return d

    def __setstate__(self, d):
        self.__dict__.update(d)
        self._lock = threading.Lock()

    @property
    def fs(self):
        if self._fs is None:
            self._fs, _ = fsspec.core.url_to_fs(self.root or ".", **self.storage_options)
        return self._fs

    @property
    def cfs(self):
        if self._cfs is None:
            self._cfs, _ = fsspec.core.url_to_fs(self.cache_dir, **self.cache_storage_options)
        return self._cfs

    @property
    def requester_pays(self) -> bool:
        return bool(self.storage_options.get("requester_pays"))

    # -- where things are -----------------------------------------------------------------------
    def _strip(self, uri: str) -> str:
        return fsspec.core.url_to_fs(uri, **self.storage_options)[1] if "://" in uri else uri

    def tar_uri(self, entry: TarEntry) -> str:
        """The tar's location: the manifest's relative ``filename`` beside the manifest, or
        (arXiv's own layout: ``src/arXiv_src_manifest.xml`` naming ``src/arXiv_src_...``)
        its base name beside the manifest."""
        if entry.name in self._tar_paths:
            return self._tar_paths[entry.name]
        layouts = {
            "beside": _join(self.root, posixpath.basename(entry.filename)),
            "relative": _join(self.root, entry.filename.lstrip("/")),
        }
        if self._layout is None:  # decided on the first tar, then one rule for all (no probing per tar)
            self._layout = next((k for k, c in layouts.items() if self.fs.exists(self._strip(c))), "beside")
        found = layouts[self._layout]
        self._tar_paths[entry.name] = found
        return found

    def _index_path(self, name: str) -> str:
        return _join(self.cache_dir, "tars", name + ".json")

    def refusal_path(self, paper_id: str) -> str:
        return _join(self.cache_dir, "refused", ids.safe_filename(paper_id) + ".json")

    def refusal(self, paper_id: str, idx: TarIndex) -> Optional[tuple[str, str]]:
        """The reason a previous run refused this paper's e-print, if the member is the same."""
        try:
            with self.cfs.open(self.refusal_path(paper_id), "rb") as f:
                d = json.loads(f.read())
        except (FileNotFoundError, ValueError):
            return None
        rec = idx.by_paper().get(paper_id)
        if rec is None or d.get("tar") != idx.name or d.get("sha256") != rec.sha256:
            return None
        return d["error_type"], d["message"]

    def eprint_path(self, paper_id: str) -> str:
        return _join(self.cache_dir, "eprints", ids.safe_filename(paper_id) + ".gz")

    def label(self, paper_id: str) -> str:
        """How messages and dead letters name a paper's e-print in the bulk archives."""
        e = self.manifest.locate(paper_id)
        return f"{self.tar_uri(e)} ({paper_id})" if e else f"{self.manifest_uri} ({paper_id})"

    # -- the cache ------------------------------------------------------------------------------
    def index(self, name: str) -> Optional[TarIndex]:
        """The verified index of tar ``name`` a previous pass left in the cache, if it was
        made against the manifest's current md5."""
        if name in self._indexes:
            return self._indexes[name]
        entry = self.manifest.by_name.get(name)
        idx = None
        try:
            with self.cfs.open(self._index_path(name), "rb") as f:
                idx = TarIndex.from_json(json.loads(f.read()))
        except (FileNotFoundError, ValueError, TypeError, KeyError):
            idx = None
        if idx is not None and (entry is None or idx.expected_md5 != entry.md5sum):
            idx = None  # the manifest changed: the old verdict says nothing about the new tar
        if idx is not None:
            self._indexes[name] = idx
        return idx

    def write_atomic(self, path: str, data: bytes) -> None:
        """Write atomically: a temporary file renamed into place (local), or one object
        put (object stores write whole objects)."""
        if _is_local(self.cfs):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(path))
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, path)
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
        else:
            self.cfs.pipe_file(path, data)

    def _commit_file(self, local_tmp: str, dest: str) -> None:
        if _is_local(self.cfs):
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            os.replace(local_tmp, dest)
        else:
            self.cfs.put_file(local_tmp, dest)
            os.unlink(local_tmp)

    def _staging_root(self) -> str:
        if _is_local(self.cfs):
            return os.path.join(self.cache_dir, ".staging")
        return os.path.join(tempfile.gettempdir(), "sciga-bulk-staging")

    def has_eprint(self, paper_id: str) -> bool:
        return self.cfs.exists(self.eprint_path(paper_id))

    # -- planning -------------------------------------------------------------------------------
    def plan(self, paper_ids: Iterable[str]) -> BulkPlan:
        by_tar, missing = self.manifest.group(paper_ids)
        tars, scan_bytes, rr, rr_bytes = [], 0, 0, 0
        for name, pids in sorted(by_tar.items()):
            idx = self.index(name)
            if idx is None:
                tars.append(name)
                scan_bytes += self.manifest.by_name[name].size
                continue
            members = idx.by_paper()
            for pid in pids:
                m = members.get(pid)
                if idx.ok and m is not None and m.kind == "gz" and not m.error_type and not self.has_eprint(pid):
                    rr += 1
                    rr_bytes += m.size
        pays = self.requester_pays
        usd = (scan_bytes + rr_bytes) / 1e9 * EGRESS_USD_PER_GB if pays else 0.0
        warning = None
        if pays:
            warning = (
                f"Reading {len(tars)} tars ({scan_bytes / 1e9:.1f} GB) and {rr} members by range "
                f"({rr_bytes / 1e9:.2f} GB) from {self.root}, a requester-pays bucket: AWS bills your account "
                f"about ${usd:,.2f} at ~${EGRESS_USD_PER_GB}/GB internet egress (approximate; free inside "
                "us-east-1; https://aws.amazon.com/s3/pricing/)."
            )
        return BulkPlan(
            tars=tuple(tars),
            bytes_to_scan=scan_bytes,
            range_reads=rr,
            range_bytes=rr_bytes,
            papers=sum(len(v) for v in by_tar.values()),
            not_covered=tuple(missing),
            requester_pays=pays,
            usd_estimate=usd,
            warning=warning,
        )

    # -- one tar --------------------------------------------------------------------------------
    def scan(
        self,
        name: str,
        wanted: Iterable[str] = (),
        *,
        on_bytes: Optional[Callable[[int], None]] = None,
        rescan: bool = False,
    ) -> tuple[TarIndex, dict]:
        """One verified pass over tar ``name`` (the unit of work: a Beam stage can run one
        per element). Writes the e-prints of ``wanted`` papers into the cache, then the
        tar's index; returns (index, {paper id: e-print path written}). Does nothing but
        return the cached index when a previous pass finished, unless ``rescan``."""
        entry = self.manifest.by_name[name]
        if not rescan:
            idx = self.index(name)
            if idx is not None:
                return idx, {}
        uri = self.tar_uri(entry)
        stage = os.path.join(self._staging_root(), name)
        shutil.rmtree(stage, ignore_errors=True)
        os.makedirs(stage, exist_ok=True)
        staged: dict[str, str] = {}

        def sink(rec: MemberRecord):
            assert rec.paper_id is not None, "only the members of wanted papers are sunk"
            tmp = os.path.join(stage, ids.safe_filename(rec.paper_id) + ".gz")
            staged[rec.paper_id] = tmp
            return open(tmp, "wb")

        want = {p for p in wanted if not self.has_eprint(p)}
        try:
            try:
                # The manifest's size spares a HEAD per tar; a shorter or longer object
                # fails the md5/size check like any other mismatch.
                f = (
                    self.fs.open(self._strip(uri), "rb", block_size=SCAN_BLOCK, cache_type="readahead", size=entry.size)
                    if not _is_local(self.fs)
                    else open(self._strip(uri), "rb", buffering=0)
                )
            except (FileNotFoundError, OSError) as e:
                idx = TarIndex(
                    name=name,
                    filename=entry.filename,
                    expected_md5=entry.md5sum,
                    expected_size=entry.size,
                    error_type="bulk_tar_unreadable",
                    message=f"{uri} could not be opened ({type(e).__name__}: {e}); check the bulk folder.",
                )
                # Not cached: a missing file is worth trying again next run.
                return idx, {}
            with f:
                idx = scan_tar(
                    f,
                    entry,
                    label=uri,
                    wanted=want,
                    sink=sink,
                    limits=self.limits,
                    hash_members=self.hash_members,
                    on_bytes=on_bytes,
                )
            written: dict[str, str] = {}
            if idx.ok:
                for pid, tmp in sorted(staged.items()):
                    dest = self.eprint_path(pid)
                    self._commit_file(tmp, dest)
                    written[pid] = dest
            if idx.error_type == "bulk_tar_unreadable" or idx.size != idx.expected_size:
                # A read that broke off (network, missing object) or a tar of the wrong size
                # (a copy still arriving) is no verdict on the tar: tried again next run.
                return idx, written
            self.write_atomic(self._index_path(name), json.dumps(idx.to_json(), sort_keys=True).encode())
            with self._lock:
                self._indexes[name] = idx
            return idx, written
        finally:
            shutil.rmtree(stage, ignore_errors=True)

    # -- many papers ----------------------------------------------------------------------------
    def extract(
        self,
        paper_ids: Iterable[str],
        *,
        max_workers: int = 2,
        validate: bool = True,
        progress: Optional[Callable[[str, TarIndex], None]] = None,
    ) -> ExtractReport:
        """Put the e-prints of ``paper_ids`` into ``<cache>/eprints``: one verified pass
        per tar not scanned before, range reads for members of scanned tars. Resumable
        and idempotent; papers that cannot be had get a reason in the report. With
        ``validate`` each new e-print is also read with the e-print stage's rules
        (``read_eprint``, nothing kept): a bad gzip, a traversal or a bomb inside it is a
        reason in the report and the file is not kept, so ``eprints/`` only ever holds
        e-prints that pass."""
        ids_ = sorted(set(paper_ids))
        plan = self.plan(ids_)
        if plan.warning:
            log.warning(plan.warning)
        rep = ExtractReport()
        for pid in plan.not_covered:
            rep.reasons[pid] = (
                "not_in_bulk",
                f"no tar in {self.manifest_uri} covers {pid}; fetch it per paper instead.",
            )
        if _is_local(self.cfs):
            shutil.rmtree(self._staging_root(), ignore_errors=True)  # what a killed run left
        by_tar, _ = self.manifest.group(ids_)
        extraction = _Extraction(self, rep, by_tar, validate=validate, progress=progress)
        names = sorted(by_tar)
        if max_workers <= 1 or len(names) <= 1:
            for n in names:
                extraction.tar(n)
        else:
            with ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="bulk-tar") as pool:
                list(pool.map(extraction.tar, names))
        try:
            os.rmdir(self._staging_root())  # empty once every pass has committed or discarded
        except OSError:
            pass
        rep.tars_scanned.sort()
        rep.tars_reused.sort()
        rep.already.sort()
        return rep

    def _checked(self, idx: TarIndex, rec: MemberRecord, data, label: str):
        """The member's bytes if they are what the verified pass indexed, else a StageError."""
        import hashlib

        if isinstance(data, BaseException):
            return StageError(
                STAGE,
                "bulk_tar_unreadable",
                f"{label}: {rec.name} could not be read "
                f"({type(data).__name__}: {data}); check the bulk folder and run again.",
                rec.paper_id,
            )
        if len(data) != rec.size or (rec.sha256 and hashlib.sha256(data).hexdigest() != rec.sha256):
            return StageError(
                STAGE,
                "md5_mismatch",
                f"{label}: {rec.name} is not the member the verified pass "
                "indexed (its bytes changed since); it was not used. Delete "
                f"{self._index_path(idx.name)} to verify the tar again.",
                rec.paper_id,
            )
        return data

    def _range_read(self, idx: TarIndex, paper_id: str, label: str) -> bytes:
        """One member of a verified tar, by range, checked against the index's sha256."""
        out = self.range_read_many(idx, [paper_id], label)[paper_id]
        if isinstance(out, StageError):
            raise out
        return out

    def range_read_many(self, idx: TarIndex, paper_ids: list, label: str, batch: int = 32) -> dict:
        """{paper id: bytes or StageError} for members of one verified tar: byte ranges
        fetched ``batch`` at a time with ``cat_ranges`` (concurrent requests on S3)."""
        recs = idx.by_paper()
        path = self._strip(self.tar_uri(self.manifest.by_name[idx.name]))
        out: dict = {}
        todo = [recs[p] for p in paper_ids]
        for i in range(0, len(todo), batch):
            part = todo[i : i + batch]
            try:
                datas = self.fs.cat_ranges(
                    [path] * len(part), [r.offset for r in part], [r.offset + r.size for r in part], on_error="return"
                )
            except (FileNotFoundError, OSError) as e:
                datas = [e] * len(part)
            for rec, data in zip(part, datas):
                out[rec.paper_id] = self._checked(idx, rec, data, label)
        return out

    # -- one paper ------------------------------------------------------------------------------
    def problem(self, paper_id: str) -> Optional[StageError]:
        """Why ``paper_id`` has no usable bulk e-print, or None when ``source`` will give one."""
        try:
            self.source(paper_id)
            return None
        except StageError as e:
            return e

    def source(self, paper_id: str) -> bytes:
        """The e-print of ``paper_id`` as arXiv stores it (a gzipped tar or gzipped TeX
        file), from the cache, else by a range read of a verified tar. Raises a
        StageError (stage ``tex_source``) naming the reason: ``not_in_bulk``,
        ``pdf_only``, ``md5_mismatch``, ``unsafe_archive``, ``size_bomb``,
        ``bulk_tar_unreadable`` or ``bulk_not_scanned`` (no pass has read its tar yet)."""
        pid, _ = ids.split_version(paper_id)
        try:
            with self.cfs.open(self.eprint_path(pid), "rb") as f:
                return f.read()
        except FileNotFoundError:
            pass
        entry = self.manifest.locate(pid)
        if entry is None:
            raise StageError(
                STAGE, "not_in_bulk", f"no tar in {self.manifest_uri} covers {pid}; fetch it per paper instead.", pid
            )
        label = self.tar_uri(entry)
        idx = self.index(entry.name)
        if idx is None:
            raise StageError(
                STAGE,
                "bulk_not_scanned",
                f"{label} has not been verified yet, so {pid} cannot be read "
                "from it; extract the build's papers first (one pass per tar checks its md5).",
                pid,
            )
        err = paper_problem(idx, pid, label)
        if err is not None:
            raise err
        return self._range_read(idx, pid, label)

    def tree(self, paper_id: str, *, keep: Callable[[str], bool] = default_keep) -> SourceTree:
        """The paper's e-print read with the e-print stage's safety rules (``read_eprint``):
        a bad gzip is ``corrupt_source``, traversal or links ``unsafe_archive``, bombs
        ``size_bomb``, each naming the tar and the paper."""
        pid, _ = ids.split_version(paper_id)
        data = self.source(pid)
        return read_eprint(data, label=f"{self.label(pid)} e-print", paper_id=pid, limits=self.limits, keep=keep)


class _Extraction:
    """One ``BulkEprints.extract``: the papers of each tar (``tar``, run by worker threads)
    into the cache, their outcomes into the shared report under ``lock``."""

    def __init__(
        self,
        reader: BulkEprints,
        rep: ExtractReport,
        by_tar: dict,
        *,
        validate: bool,
        progress: Optional[Callable[[str, TarIndex], None]],
    ):
        self.reader = reader
        self.rep = rep
        self.by_tar = by_tar
        self.validate = validate
        self.progress = progress
        self.lock = threading.Lock()

    def count(self, n: int) -> None:
        with self.lock:
            self.rep.bytes_read += n

    def refused(self, pid: str, data: bytes) -> Optional[StageError]:
        """Why the e-print stage would refuse ``data`` (None: it would not, or not validating)."""
        if not self.validate:
            return None
        reader = self.reader
        try:
            read_eprint(
                data, label=f"{reader.label(pid)} e-print", paper_id=pid, limits=reader.limits, keep=lambda _: False
            )
        except StageError as e:
            return e
        return None

    def remember(self, pid: str, idx: TarIndex, err: StageError) -> None:
        """Keep a refusal so that a later run does not read the member again to refuse it."""
        rec = idx.by_paper()[pid]
        self.reader.write_atomic(
            self.reader.refusal_path(pid),
            json.dumps(
                {"tar": idx.name, "sha256": rec.sha256, "error_type": err.error_type, "message": err.message},
                sort_keys=True,
            ).encode(),
        )

    def tar(self, name: str) -> None:
        """The papers of the tar ``name``: a verified pass when it was never scanned, else range
        reads of its members."""
        reader, rep = self.reader, self.rep
        pids = self.by_tar[name]
        done = [p for p in pids if reader.has_eprint(p)]
        idx = reader.index(name)
        written: dict[str, str] = {}
        if idx is None:
            idx, written = reader.scan(name, pids, on_bytes=self.count)
            with self.lock:
                rep.tars_scanned.append(name)
        else:
            with self.lock:
                rep.tars_reused.append(name)
        label = reader.tar_uri(reader.manifest.by_name[name])
        fetched = reader.range_read_many(
            idx,
            [
                p
                for p in pids
                if p not in done
                and p not in written
                and paper_problem(idx, p, label) is None
                and not (self.validate and reader.refusal(p, idx))
            ],
            label,
        )
        for pid in pids:
            if pid in done:
                with self.lock:
                    rep.already.append(pid)
                continue
            if pid in written:
                err = self._check_scanned(pid, idx, written[pid])
            else:
                err = self._keep_range_read(pid, idx, label, fetched)
            with self.lock:
                if err is None:
                    rep.extracted[pid] = reader.eprint_path(pid)
                else:
                    rep.reasons[pid] = (err.error_type, err.message)
        if self.progress is not None:
            self.progress(name, idx)

    def _check_scanned(self, pid: str, idx: TarIndex, path: str) -> Optional[StageError]:
        """A paper the verified pass wrote to ``path``: removed again when the e-print stage would
        refuse it."""
        with self.reader.cfs.open(path, "rb") as f:
            err = self.refused(pid, f.read())
        if err is not None:
            self.reader.cfs.rm_file(path)
            self.remember(pid, idx, err)
        return err

    def _keep_range_read(self, pid: str, idx: TarIndex, label: str, fetched: dict) -> Optional[StageError]:
        """A paper of a scanned tar: its range-read bytes written to the cache, unless the index, a
        refusal remembered, or the e-print stage says why not."""
        reader = self.reader
        err = paper_problem(idx, pid, label)
        known = reader.refusal(pid, idx) if err is None and self.validate else None
        if known is not None:
            return StageError(STAGE, known[0], known[1], pid)
        if err is not None:
            return err
        try:
            data = fetched[pid]
            if isinstance(data, StageError):
                raise data
            self.count(len(data))
            err = self.refused(pid, data)
            if err is None:
                reader.write_atomic(reader.eprint_path(pid), data)
            else:
                self.remember(pid, idx, err)
        except StageError as e:
            err = e
        return err


def default_storage_options(root: str, given: Optional[Mapping] = None) -> dict:
    """``s3://arxiv/...`` is requester-pays: say so to S3 (or it answers 403)."""
    opts = dict(given or {})
    if root.startswith(("s3://", "s3a://")):
        bucket = root.split("://", 1)[1].split("/", 1)[0]
        if bucket in REQUESTER_PAYS_BUCKETS:
            opts.setdefault("requester_pays", True)
    return opts
