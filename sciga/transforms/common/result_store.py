"""The result store: one file per input, keyed by everything the result depends on.

Why it exists: a paper's result (its papers row, figure rows, mentions) is made once by the
per-paper stages and then only *referenced*. Shuffles carry a few hundred bytes per paper
(``ResultRef``), never the paper, so no step holds more than one paper (or one shard group)
in memory whatever the corpus size. The same files make builds incremental and resumable:
a paper whose key and dependencies are unchanged is not parsed again, and a killed build
finds every result it had finished.

Layout under the build folder (any fsspec path)::

    .sciga/results/<k[:2]>/<key>.zip   header.json + one Arrow IPC stream per config

The key (``result_key``) hashes the builder and schema versions, a fingerprint of the code
and of every option that changes results, the input URI and the page's SHA-256. Other
inputs (sidecar, e-print, images, GA-manifest row) are recorded in the header as
``FileDep``s and checked before reuse (size and change token first, content hash when the
token moved), like a build system's dependency file.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import io
import json
import os
import posixpath
import stat
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Optional

import fsspec
import pyarrow as pa
import pyarrow.ipc as ipc

from sciga.schemas.arrow import SCHEMAS
from sciga.schemas.build import FileDep, ResultHeader, ResultRef
from sciga.schemas.version import BUILDER_VERSION, SCHEMA_VERSION
from sciga.transforms.common.input_files import fs_and_path, is_local, local_path, open_input, walk_files

STORE_DIR = ".sciga"
RESULTS = "results"
SHARD_MEMBERS = "shard_members"  # what each shard holds (``write/finalize.py``)
FINALIZING = "finalizing"  # a marker: the shards are being moved (``write/finalize.py``)
HEADER = "header.json"
_ZIP_DATE = (2000, 1, 1, 0, 0, 0)  # fixed: the same result, the same file
READ_CHUNK = 1 << 20

# The figures rows as stored: the published columns (image_uri says where the image file
# is) plus what identifies the bytes read from it.
STORED_FIGURES = (
    SCHEMAS["figures"].append(pa.field("image_sha256", pa.string())).append(pa.field("image_size", pa.int64()))
)
STORED_SCHEMAS = {**SCHEMAS, "figures": STORED_FIGURES}
TABLES = ("papers", "figures", "mentions")


def store_root(out_dir: str) -> str:
    return posixpath.join(out_dir.rstrip("/"), STORE_DIR)


# ------------------------------------------------------------------ keys and dependencies


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def result_key(uri: str, page_sha256: str, fingerprint: str) -> str:
    blob = json.dumps([BUILDER_VERSION, SCHEMA_VERSION, fingerprint, uri, page_sha256], separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def change_token(info: Mapping) -> Optional[str]:
    """What changes when a file is rewritten, without reading it (local mtime, GCS
    generation / md5, S3 ETag); None when the filesystem says nothing useful."""
    for k in ("mtime", "generation", "md5Hash", "ETag", "etag", "crc32c", "LastModified", "updated"):
        v = info.get(k)
        if v not in (None, ""):
            return f"{k}={v}"
    return None


def file_info(uri: str) -> Optional[dict]:
    """fsspec info of a file, None when there is no file."""
    if is_local(uri):
        path = local_path(uri)
        try:
            st = os.stat(path)
        except (OSError, ValueError):  # ValueError: a NUL byte in the name (no file has one)
            return None
        if not stat.S_ISREG(st.st_mode):  # a folder (or a FIFO, a device: never a valid file dependency)
            return {"type": "directory", "size": 0, "mtime": st.st_mtime_ns}
        return {"type": "file", "size": st.st_size, "mtime": st.st_mtime_ns}
    try:
        fs, path = fs_and_path(uri)
        info = fs.info(path)
    except (FileNotFoundError, OSError, ValueError):
        return None
    return info


def hash_file(uri: str, limit: Optional[int] = None, root: Optional[str] = None) -> tuple[str, int]:
    """(sha256, size) of a file's content, streamed; a local file must be a regular file
    (inside ``root`` when given: ``input_files.open_input``)."""
    h = hashlib.sha256()
    n = 0
    with open_input(uri, root) as f:
        while True:
            chunk = f.read(READ_CHUNK)
            if not chunk:
                break
            h.update(chunk)
            n += len(chunk)
            if limit is not None and n > limit:
                break
    return h.hexdigest(), n


def file_dep(uri: str, data: Optional[bytes] = None, root: Optional[str] = None) -> FileDep:
    """The dependency on ``uri`` as it is now (absent, or size + token + content hash).
    Pass ``data`` when the content was just read, to hash it without a second read; ``root``:
    the folder the file must stay in to be hashed (``input_files.open_input``)."""
    info = file_info(uri)
    if info is None:
        return FileDep(uri=uri)
    if info.get("type") == "directory":
        return dir_dep(uri)
    sha = sha256_hex(data) if data is not None else hash_file(uri, root=root)[0]
    return FileDep(uri=uri, size=int(info.get("size") or 0), token=change_token(info), sha256=sha)


def stat_dep(uri: str) -> FileDep:
    """The dependency on ``uri`` by size and change token only (no content hash): for big
    files read elsewhere, where a touched file may as well be recomputed."""
    info = file_info(uri)
    if info is None:
        return FileDep(uri=uri)
    if info.get("type") == "directory":
        return dir_dep(uri)
    return FileDep(uri=uri, size=int(info.get("size") or 0), token=change_token(info))


def absent_dep(uri: str) -> FileDep:
    return FileDep(uri=uri)


def dir_dep(uri: str) -> FileDep:
    """A folder read as a whole (an extracted TeX tree): names, sizes and tokens of its files."""
    fs, path = fs_and_path(uri)
    h = hashlib.sha256()
    try:
        found = fs.find(path, detail=True)
    except (FileNotFoundError, OSError):
        return FileDep(uri=uri, kind="dir")
    for name in sorted(found):
        info = found[name]
        h.update(f"{posixpath.relpath(name, path)}\t{info.get('size')}\t{change_token(info)}\n".encode())
    return FileDep(uri=uri, size=len(found), token=h.hexdigest(), kind="dir")


def dep_still_valid(dep: FileDep, checkers: Optional[Mapping[str, Callable[[FileDep], bool]]] = None) -> bool:
    """True when ``dep`` still describes what is there now."""
    if dep.kind not in ("file", "dir"):
        check = (checkers or {}).get(dep.kind)
        return bool(check and check(dep))
    if dep.kind == "dir":
        return dir_dep(dep.uri).token == dep.token
    info = file_info(dep.uri)
    if dep.absent:
        return info is None
    if info is None or info.get("type") == "directory" or int(info.get("size") or 0) != dep.size:
        return False
    if dep.token is not None and change_token(info) == dep.token:
        return True
    try:
        return dep.sha256 is not None and hash_file(dep.uri)[0] == dep.sha256
    except OSError:
        return False


def ref_from_header(header: ResultHeader, reused: bool) -> ResultRef:
    """The ``ResultRef`` a stored result stands for."""
    return ResultRef(
        uri=header.uri,
        key=header.key,
        paper_id=header.paper_id,
        is_paper=header.is_paper,
        reused=reused,
        version=header.version,
        n_figures=header.n_figures,
        n_paragraphs=header.n_paragraphs,
        content_sha256=header.content_sha256,
        license=header.license,
        dead=list(header.dead),
        stats=dict(header.stats),
        sizes={k: list(v) for k, v in header.sizes.items()},
        digests=dict(header.digests),
    )


def reusable(
    header: Optional[ResultHeader], checkers: Optional[Mapping[str, Callable[[FileDep], bool]]] = None
) -> bool:
    """A stored result that can stand for the input as it is now (complete, final: not made
    while a tool was interrupted or an I/O error struck, and its dependencies unchanged)."""
    if header is None or not header.complete or not header.final:
        return False
    return all(dep_still_valid(d, checkers) for d in header.deps)


# ------------------------------------------------------------------ the store


class StoredResult:
    """A result read back: its header and its tables (pyarrow, stored schemas)."""

    def __init__(self, header: ResultHeader, tables: dict[str, pa.Table]):
        self.header = header
        self.tables = tables


def _ipc_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    with ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue()


def _from_ipc(data: bytes) -> pa.Table:
    return ipc.open_stream(pa.BufferReader(data)).read_all()


# The zip records ``stored_member`` reads (little-endian): the end of the central directory,
# a central directory entry, a local file header.
_END = struct.Struct("<4s4H2LH")
_ENTRY = struct.Struct("<4s6H3L5H2L")
_LOCAL = struct.Struct("<4s5H3L2H")
_TAIL = 4096  # a result's directory (four entries) is ~250 bytes at the end of its file


def stored_member(path: str, name: str) -> Optional[bytes]:
    """Member ``name`` of a local result file, read in place: the file's tail (its central
    directory), the member's local header and its bytes, CRC-checked. ``zipfile`` parsed
    the whole directory in Python after a copy of the whole file, ~0.2 ms of each of the
    ~4,000 reads a build of 1,000 papers makes (a header to plan each, a table for each
    config's part). Only the layout ``ResultStore.write`` makes is read here (members
    stored uncompressed, no archive comment, no data descriptors); None for anything else,
    which the caller reads with ``zipfile`` (and which says what is wrong with it). An
    absent member raises ``KeyError``, as ``zipfile`` does."""
    want = name.encode("utf-8")
    with open(path, "rb", buffering=0) as f:
        size = os.fstat(f.fileno()).st_size
        tail_at = max(0, size - _TAIL)
        f.seek(tail_at)
        tail = f.read(_TAIL)
        try:
            sig, _, _, _, entries, _, directory_at, comment = _END.unpack_from(tail, len(tail) - _END.size)
            if sig != b"PK\x05\x06" or comment or directory_at < tail_at:
                return None
            pos = directory_at - tail_at
            for _ in range(entries):
                entry = _ENTRY.unpack_from(tail, pos)
                if entry[0] != b"PK\x01\x02":
                    return None
                flags, method, crc, csize, usize, nlen, xlen, clen, offset = entry[3], entry[4], *entry[7:13], entry[16]
                found = tail[pos + _ENTRY.size : pos + _ENTRY.size + nlen]
                pos += _ENTRY.size + nlen + xlen + clen
                if found != want:
                    continue
                if method != 0 or flags & 0x08 or csize != usize:
                    return None
                f.seek(offset)
                local = _LOCAL.unpack(f.read(_LOCAL.size))
                if local[0] != b"PK\x03\x04":
                    return None
                f.seek(offset + _LOCAL.size + local[9] + local[10])
                data = f.read(csize)
                return data if len(data) == csize and zlib.crc32(data) == crc else None
        except struct.error:  # a record cut short: not a file this store wrote whole
            return None
    raise KeyError(name)


def table_size(table: pa.Table) -> list[int]:
    """[rows, Arrow bytes, bytes of the image files it refers to] of a table as it is read
    back from the store: what the shard writer needs to cut parts, known without reading."""
    images = 0
    if "image_size" in table.column_names and table.num_rows:
        import pyarrow.compute as pc

        images = pc.sum(table.column("image_size")).as_py() or 0  # nulls are no bytes
    return [table.num_rows, table.nbytes, images]


class ResultStore:
    """Results by key under ``<root>/results`` (local folder, gs://, s3:// ...)."""

    def __init__(self, root: str):
        self.root = root.rstrip("/")
        self._fs, self._base = fsspec.core.url_to_fs(posixpath.join(self.root, RESULTS))
        # A local store is read with the builtin open: fsspec's local file object costs 3x more
        # per small read, which a build that checks 1,000 headers before starting pays 1,000 times.
        self._open = open if is_local(self.root) else self._fs.open
        self._made: set[str] = set()  # folders of a local store this process made or found

    def path(self, key: str) -> str:
        return posixpath.join(self._base, key[:2], key + ".zip")

    def exists(self, key: str) -> bool:
        return self._fs.exists(self.path(key))

    def write(self, key: str, header: ResultHeader, tables: Mapping[str, pa.Table]) -> ResultHeader:
        """Atomically (temporary name, then a rename): a reader never sees half a file,
        and a retried write of the same key writes the same bytes. The header gets the
        ``sizes`` of the tables (``table_size``: the shard writer cuts parts by them without
        reading the tables back) and their ``digests``; the header as stored is returned."""
        streams = {name: _ipc_bytes(tables[name]) for name in TABLES if name in tables and tables[name] is not None}
        header = replace(
            header,
            # Of the table as given: its Arrow size is the one read back from the stream (a
            # built table holds no validity buffer without nulls, and no slack; a test reads
            # the sample's tables back to hold this).
            sizes={name: table_size(tables[name]) for name in streams},
            digests={name: sha256_hex(data) for name, data in streams.items()},
        )
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
            zf.writestr(
                zipfile.ZipInfo(HEADER, _ZIP_DATE), json.dumps(header.to_json(), sort_keys=True).encode("utf-8")
            )
            for name, data in streams.items():
                zf.writestr(zipfile.ZipInfo(name + ".arrow", _ZIP_DATE), data)
        path = self.path(key)
        tmp = f"{path}.{os.getpid()}.{id(buf):x}.tmp"
        if self._open is open:  # a local store: without fsspec's file objects (~0.25 ms a result)
            folder = posixpath.dirname(path)
            if folder not in self._made:  # os.makedirs of a folder that exists raises inside: ~0.3 ms
                os.makedirs(folder, exist_ok=True)
                self._made.add(folder)
            try:
                f = open(tmp, "wb")
            except FileNotFoundError:  # the folder went since (removed by hand): make it again
                os.makedirs(folder, exist_ok=True)
                f = open(tmp, "wb")
            with f:
                f.write(buf.getvalue())
            os.replace(tmp, path)
            return header
        self._fs.makedirs(posixpath.dirname(path), exist_ok=True)
        with self._fs.open(tmp, "wb") as f:
            f.write(buf.getvalue())
        self._fs.mv(tmp, path)
        return header

    def header(self, key: str) -> Optional[ResultHeader]:
        """The header alone (the zip's directory says where it is; tables are not read)."""
        try:
            return ResultHeader.from_json(json.loads(self._member(key, HEADER)))
        except (FileNotFoundError, OSError, KeyError, TypeError, ValueError, zipfile.BadZipFile):
            return None

    def _member(self, key: str, name: str) -> bytes:
        """One member of a stored result: read in place from a local file laid out as
        ``write`` lays it out (``stored_member``), else through ``zipfile``."""
        path = self.path(key)
        if self._open is open:
            data = stored_member(path, name)
            if data is not None:
                return data
        with self._open(path, "rb") as f, zipfile.ZipFile(f) as zf:
            return zf.read(name)

    def read(self, key: str, tables: Iterable[str] = TABLES) -> Optional[StoredResult]:
        try:
            with self._open(self.path(key), "rb") as f:
                data = f.read()
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                header = ResultHeader.from_json(json.loads(zf.read(HEADER)))
                names = set(zf.namelist())
                out = {t: _from_ipc(zf.read(t + ".arrow")) for t in tables if t + ".arrow" in names}
        except (FileNotFoundError, OSError, KeyError, TypeError, ValueError, zipfile.BadZipFile):
            return None
        return StoredResult(header, out)

    def read_table(self, key: str, name: str) -> Optional[pa.Table]:
        """One stored table, its header not parsed (the shard writer reads each result's
        table of one config: the header's JSON was a third of that read); None when the
        result or the table is not there or cannot be read."""
        try:
            return _from_ipc(self._member(key, name + ".arrow"))
        except (FileNotFoundError, OSError, KeyError, TypeError, ValueError, zipfile.BadZipFile):
            return None

    def _files(self) -> list[str]:
        """Every file under the store's results folder ([] when there is none). A local one
        is walked with ``os.scandir`` (``walk_files``): fsspec's ``find`` asks each entry's
        info, ~45 ms for a store of 1,000 results, which a build's finalizing paid twice."""
        if not is_local(self.root):
            try:
                return list(self._fs.find(self._base))
            except (FileNotFoundError, OSError):
                return []
        return sorted(walk_files(local_path(self._base)))

    def keys(self) -> Iterator[str]:
        for p in self._files():
            name = posixpath.basename(p)
            if name.endswith(".zip"):
                yield name[:-4]

    def prune(self, keep: set[str]) -> int:
        """Delete results no longer referenced (inputs removed or changed), and leftovers
        of killed writers (``.tmp``); the count of results deleted."""
        files = self._files()
        gone = [p for p in files if p.endswith(".zip") and posixpath.basename(p)[:-4] not in keep]
        self._remove([*gone, *(p for p in files if p.endswith(".tmp"))])
        return len(gone)

    def remove_partial_writes(self) -> int:
        """Delete the ``.tmp`` files of writers that were stopped (Ctrl-C, SIGTERM) once no
        writer runs; the count deleted."""
        partial = [p for p in self._files() if p.endswith(".tmp")]
        self._remove(partial)
        return len(partial)

    def _remove(self, paths: list[str]) -> None:
        for p in paths:
            try:
                self._fs.rm(p)
            except (FileNotFoundError, OSError):
                pass


# The modules whose code makes a paper's result: each per-paper step (and, through its
# imports, its pure core), the vision stage's models and the shard writer that turns results
# into rows.
# Everything they import within ``sciga.schemas`` / ``sciga.transforms``, found from the code
# (``result_code_files``), is fingerprinted; nothing else is (harvesters, fetchers, the CLI).
RESULT_STAGES = (
    "sciga.transforms.inputs.plan_step",
    "sciga.transforms.parse.step",
    "sciga.transforms.tex_recovery.step",
    "sciga.transforms.link.step",
    "sciga.transforms.vision.stage",
    "sciga.transforms.write.steps",
)
FINGERPRINTED_PACKAGES = ("sciga.schemas", "sciga.transforms")
DATA_SUFFIXES = (".txt", ".json")  # data files beside a module that its code reads (keyword lists)


def _sciga_dir() -> str:
    import sciga

    return os.path.dirname(os.path.abspath(sciga.__file__))  # sciga/<pkg> is a link in a checkout


def _module_file(module: str, sciga_dir: str) -> Optional[str]:
    """The source file of ``sciga.a.b`` under ``sciga_dir`` (``a/b.py`` or ``a/b/__init__.py``),
    None when it is not a module there."""
    rel = os.path.join(*module.split(".")[1:]) if "." in module else ""
    for cand in (os.path.join(sciga_dir, rel + ".py"), os.path.join(sciga_dir, rel, "__init__.py")):
        if rel and os.path.isfile(cand):
            return cand
    return None


def _in_scope(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in FINGERPRINTED_PACKAGES)


def _imported_modules(tree: ast.AST, module: str, is_package: bool) -> Iterator[str]:
    """Every module an ``import`` anywhere in ``tree`` names (lazy imports inside functions
    included), with ``from x import y`` giving both ``x`` and ``x.y`` (y may be a module)."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield target
            for alias in node.names:
                yield f"{target}.{alias.name}"


_IMPORTS: dict[tuple[str, str, bool], tuple[str, ...]] = {}  # (content sha256, module, is package) -> imports
_IMPORTS_FILE_VERSION = 1


def _imports_cache_file() -> str:
    """Where the imports found in each source file are kept between runs: parsing the ~80
    files of the result code costs ~0.8 s, which a build that has nothing to do should not
    pay. Keyed by each file's content hash, so a stale entry is never used."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "sciga-builder", "code-imports.json")


def _load_imports_cache() -> None:
    try:
        with open(_imports_cache_file(), encoding="utf-8") as f:
            raw = json.load(f)
        if raw.get("version") == _IMPORTS_FILE_VERSION:
            for digest, module, is_package, imports in raw["entries"]:
                _IMPORTS.setdefault((digest, module, bool(is_package)), tuple(imports))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass  # no cache, or not ours: parse the files


def _save_imports_cache() -> None:
    path = _imports_cache_file()
    entries = sorted([d, m, p, list(i)] for (d, m, p), i in _IMPORTS.items())
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"version": _IMPORTS_FILE_VERSION, "entries": entries[-2000:]}, f)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home: the next run parses again


def _imports_of(digest: str, source: bytes, module: str, is_package: bool) -> tuple[str, ...]:
    """The modules ``source`` imports, parsed once per content and module."""
    key = (digest, module, is_package)
    if key not in _IMPORTS:
        _IMPORTS[key] = tuple(_imported_modules(ast.parse(source), module, is_package))
    return _IMPORTS[key]


def result_code_files(sciga_dir: Optional[str] = None, stages: Iterable[str] = RESULT_STAGES) -> list[str]:
    """The files of the code that makes results, relative to ``sciga_dir``: the ``stages``
    and, transitively, every module of ``sciga.schemas`` / ``sciga.transforms`` they import
    (with the packages that importing it runs), plus the data files beside them. Walked with
    ``ast``, so nothing is imported."""
    sciga_dir = sciga_dir or _sciga_dir()
    if not _IMPORTS:
        _load_imports_cache()
    known = len(_IMPORTS)
    seen: dict[str, str] = {}
    todo = list(stages)
    while todo:
        module = todo.pop()
        if module in seen or not _in_scope(module):
            continue
        path = _module_file(module, sciga_dir)
        if path is None:
            continue
        seen[module] = path
        parts = module.split(".")
        todo.extend(".".join(parts[:i]) for i in range(2, len(parts)))  # the packages it lives in
        with open(path, "rb") as f:
            source = f.read()
        todo.extend(_imports_of(hashlib.sha256(source).hexdigest(), source, module, path.endswith("__init__.py")))
    if len(_IMPORTS) != known:
        _save_imports_cache()
    files = {os.path.relpath(p, sciga_dir) for p in seen.values()}
    for folder in {os.path.dirname(p) for p in seen.values()}:
        for name in os.listdir(folder):
            if name.endswith(DATA_SUFFIXES) and os.path.isfile(os.path.join(folder, name)):
                files.add(os.path.relpath(os.path.join(folder, name), sciga_dir))
    return sorted(f.replace(os.sep, "/") for f in files)


def hash_code_files(sciga_dir: str, stages: Iterable[str] = RESULT_STAGES) -> str:
    """The SHA-256 of the names and contents of ``result_code_files``, read now."""
    h = hashlib.sha256()
    for rel in result_code_files(sciga_dir, stages):
        h.update(rel.encode())
        with open(os.path.join(sciga_dir, rel), "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


@functools.cache
def _cached_code_fingerprint(sciga_dir: str, stages: tuple[str, ...]) -> str:
    return hash_code_files(sciga_dir, stages)


def code_fingerprint(sciga_dir: Optional[str] = None, stages: Iterable[str] = RESULT_STAGES) -> str:
    """The source of the code that makes results (``result_code_files``): results made by
    other code are not reused, even when nobody bumped the builder version, while a change
    to code that makes no results (a harvester, a fetcher, the CLI) keeps every result.
    Computed once per process (the code does not change under a running build)."""
    return _cached_code_fingerprint(os.path.abspath(sciga_dir or _sciga_dir()), tuple(stages))
