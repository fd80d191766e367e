"""Input listing and reading for HTML pages on any fsspec path (local, gs://, hf://).

An input is a folder (searched recursively for ``*.html``, ``*.htm``, ``*.xhtml`` and their
``.gz`` forms), a glob, a single file, or an ar5iv dump ``*.zip`` (its pages are read in
place through chained URLs ``zip://member::dump.zip``). A page may have a metadata sidecar
next to it, ``<stem>.meta.json`` (written by ``sciga fetch`` and shipped with the samples);
a sidecar whose comment names an accepted venue gets ``conference`` filled in from it.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import logging
import os
import posixpath
from collections.abc import Iterable, Mapping
from typing import Optional

from sciga.schemas import ids
from sciga.schemas.records import MetaFieldError, PaperMeta
from sciga.transforms.common import input_files
from sciga.transforms.common.errors import StageError
from sciga.transforms.common.input_files import NotAFileError, OutsideRootError, parent_of, split_chain
from sciga.transforms.common.sizes import mib
from sciga.transforms.inputs import refused as refusals

HTML_SUFFIXES = (".html", ".htm", ".xhtml", ".html.gz", ".htm.gz", ".xhtml.gz")
META_SUFFIX = ".meta.json"
CONVERT_PREFIX = "latexml:"  # an input-list line asking for a page made from an e-print (latexml/)
MAX_SIDECAR_BYTES = 16 * 1024 * 1024  # real sidecars are a few KB (the abstract is the longest field)
log = logging.getLogger("sciga.build")

_fs_and_path = input_files.fs_and_path  # a local name keeps ``::`` (never an fsspec chain)


def _protocol(fs) -> str:
    return fs.protocol[0] if isinstance(fs.protocol, (list, tuple)) else fs.protocol


def _join_protocol(fs, path: str) -> str:
    proto = _protocol(fs)
    if proto in ("file", "local"):
        return os.path.abspath(path)
    return f"{proto}://{path}"


def _files_under(fs, path: str) -> list[str]:
    """Every file below folder ``path``. On a local disk through ``input_files.walk_files``
    (scandir; links to folders inside ``path`` are walked, each real folder once, so link
    loops end): a corpus folder holds ~170 figure files per paper, and fsspec's ``find``
    asks for the details of each, which at 2,000 papers cost seconds before the build
    even started."""
    if _protocol(fs) not in ("file", "local"):
        return fs.find(path)
    return list(input_files.walk_files(path))


def _glob_parts(pattern: str) -> tuple[str, list[str]]:
    """(the folder before the first wildcard, the pattern's segments after it)."""
    parts = pattern.split("/")
    for i, part in enumerate(parts):
        if any(ch in part for ch in "*?["):
            return "/".join(parts[:i]) or ("/" if pattern.startswith("/") else "."), parts[i:]
    return pattern, []


def _segments_match(names: list[str], pats: list[str]) -> bool:
    """Glob segments against path segments; ``**`` matches any number of segments."""
    if not pats:
        return not names
    if pats[0] == "**":
        return any(_segments_match(names[i:], pats[1:]) for i in range(len(names) + 1))
    return bool(names) and fnmatch.fnmatchcase(names[0], pats[0]) and _segments_match(names[1:], pats[1:])


def _local_glob(pattern: str) -> list[str]:
    """A glob on the local disk, matched while walking the folder before its first wildcard
    (``walk_files``: loops end, links out of that folder are not walked into)."""
    base, pats = _glob_parts(pattern)
    if not os.path.isdir(base):
        return []
    out = []
    for p in input_files.walk_files(base):
        if _segments_match(os.path.relpath(p, base).split(os.sep), pats):
            out.append(p)
    return out


def _named(paths: Iterable[str]) -> list[str]:
    """Names the dataset can hold; a file name that is not valid UTF-8 (Linux allows any
    bytes) cannot be an ``input_uri`` in Parquet, so it becomes a refused input named with
    ``\\xNN`` escapes (``refusals.not_utf8``): counted and dead-lettered, never dropped."""
    out: list[str] = []
    for p in paths:
        out.append(p if refusals.is_utf8(p) else refusals.not_utf8(refusals.escaped_name(p)))
    return out


def _once_per_file(paths: Iterable[str]) -> list[str]:
    """A local page reached twice (a link beside the file it points at) is listed once, by
    its own name. Links to anything else stay: each is read (or refused) on its own, so two
    links to one file outside the input are two dead letters, never one lost input."""
    paths = sorted(set(_named(paths)))
    names = set(paths)
    return [
        p
        for p in paths
        if isinstance(p, refusals.RefusedInput)
        or not (input_files.is_local(p) and os.path.islink(p) and os.path.realpath(p) in names)
    ]


def _is_page(name: str) -> bool:
    return name.lower().endswith(HTML_SUFFIXES)


def _local_pages(folder: str) -> Iterable[str]:
    """The pages below a local folder, and what the listing meets there but will not read
    (``input_files.walk_met``: behind a link out of the folder, a path too long to open)."""
    for path, why in input_files.walk_met(folder):
        if why is None:
            if _is_page(path):
                yield os.path.abspath(path)
        elif why == input_files.OUTSIDE:
            if _is_page(path):
                yield refusals.outside(os.path.abspath(path))
            elif os.path.islink(path) and os.path.isdir(path):  # the link itself: the folder was too big to list
                yield refusals.outside_folder(os.path.abspath(path), input_files.MAX_OUTSIDE_ENTRIES)
        elif _is_page(path):
            yield refusals.too_long(os.path.abspath(path), input_files.path_bytes(path), input_files.PATH_MAX)


def _remote_pages(fs, path: str) -> Iterable[str]:
    """The pages below a folder of an object store. An object whose key ends in ``/`` but
    holds bytes (a page uploaded under a folder's name) is refused, not skipped: no reader
    can open it as a file."""
    try:
        found = fs.find(path)
    except FileNotFoundError:
        return
    for name in found:
        if _is_page(name):
            yield _join_protocol(fs, name)
    for key in _folder_keys_with_bytes(fs, path):
        if _is_page(key.rstrip("/")):
            yield refusals.key_is_folder(_join_protocol(fs, key))


def _folder_keys_with_bytes(fs, path: str) -> list[str]:
    """Keys ending in ``/`` that hold bytes, below ``path`` (fsspec's listings leave them out:
    they read as folder markers). S3 is asked directly; other stores have no such keys."""
    if "s3" not in (fs.protocol if isinstance(fs.protocol, (list, tuple)) else (fs.protocol,)):
        return []
    bucket, _, prefix = path.partition("/")
    prefix = prefix.rstrip("/") + "/" if prefix else ""
    out: list[str] = []
    token = None
    while True:
        kw = {"Bucket": bucket, "Prefix": prefix, **({"ContinuationToken": token} if token else {})}
        page = fs.call_s3("list_objects_v2", **kw)
        out += [f"{bucket}/{o['Key']}" for o in page.get("Contents", []) if o["Key"].endswith("/") and o.get("Size")]
        token = page.get("NextContinuationToken")
        if not page.get("IsTruncated") or not token:
            return out


def list_inputs(specs: Iterable[str]) -> list[str]:
    """Every page the specs name, sorted and de-duplicated (deterministic order), and every
    one the listing meets but will not read, as a ``refusals.RefusedInput`` (a link out of
    the input, a path too long to open, a name that is not UTF-8, an unsafe dump member...)."""
    from sciga.transforms.inputs import ar5iv_dump

    found: set[str] = set()
    for spec in specs:
        if ar5iv_dump.is_dump(spec) and not input_files.is_chain(spec):
            found.update(ar5iv_dump.page_uris(spec))
            continue
        fs, path = _fs_and_path(spec)
        local = _protocol(fs) in ("file", "local")
        if any(ch in path for ch in "*?["):
            matches = _local_glob(path) if local else fs.glob(path)
        elif fs.isdir(path):
            # Files only: a folder named like a page is walked into, never taken as one.
            found.update(_local_pages(path) if local else _remote_pages(fs, path))
            continue
        elif fs.exists(path):
            matches = [path]
        else:
            raise FileNotFoundError(f"input {spec} does not exist; give a folder, a glob or a file of .html pages.")
        for m in matches:
            if _is_page(m) and not fs.isdir(m):
                found.add(_join_protocol(fs, m))
    return _once_per_file(found)


def list_metadata(specs: Iterable[str]) -> list[str]:
    """Every metadata sidecar (``*.meta.json``) in the folders the specs name, sorted."""
    found: set[str] = set()
    for spec in specs:
        if "::" in spec or spec.lower().endswith(".zip"):
            continue
        fs, path = _fs_and_path(spec)
        if any(ch in path for ch in "*?[") or not fs.isdir(path):
            continue
        for m in _files_under(fs, path):
            if m.endswith(META_SUFFIX):
                found.add(_join_protocol(fs, m))
    return sorted(found)


def page_candidates(meta_uri: str) -> list[str]:
    """The pages a sidecar ``<stem>.meta.json`` belongs to, in the suffix order pages have."""
    base = meta_uri[: -len(META_SUFFIX)]
    return [base + suf for suf in HTML_SUFFIXES]


def input_list_hash(uris: list[str], sizes: Optional[Mapping[str, int]] = None) -> str:
    """Identifies the input set of a build (names and sizes, cheap to compute); ``sizes``:
    those already known (the launcher stats local pages anyway)."""
    h = hashlib.sha256()
    for u in uris:
        size = sizes.get(u) if sizes is not None else None
        if isinstance(u, refusals.RefusedInput):
            size = -1  # never looked at (a link out of the input is not even stat-ed)
        if size is None:
            fs, path = _fs_and_path(u)
            try:
                size = fs.size(path)
            except OSError:
                size = -1
        h.update(f"{u}\t{size}\n".encode())
    return h.hexdigest()


def _inner(uri: str) -> str:
    """The member part of a chained URL (``zip://a/b.html::x.zip`` -> ``zip://a/b.html``)."""
    return split_chain(uri)[0]


def stem_of(uri: str) -> str:
    name = posixpath.basename(_inner(uri).replace("\\", "/"))
    for suf in sorted(HTML_SUFFIXES, key=len, reverse=True):
        if name.lower().endswith(suf):
            return name[: -len(suf)]
    return name.rsplit(".", 1)[0]


def fallback_paper_id(uri: str) -> tuple[Optional[str], str]:
    """(id, how) from the file name: an arXiv id (``2401.13641v1.html``,
    ``astro-ph0601001.html``) -> "filename", else the sanitized stem -> "stem"."""
    stem = stem_of(uri)
    pid, _ = ids.paper_id_from_filename(stem)
    if pid:
        return pid, "filename"
    return ids.local_id_from_stem(stem), "stem"


def refused(uri: str, e: OutsideRootError | NotAFileError, what: str = "") -> StageError:
    """The dead letter of a file the build may not read: a link out of its folder, or not a
    regular file (the link's target is not named: the row may be published)."""
    if isinstance(e, OutsideRootError):
        return StageError(
            "read",
            OutsideRootError.kind,
            f"{uri}{what} is a link that leads outside its folder, so it "
            "was not read; copy the file into the input folder instead of linking to it.",
        )
    return StageError(
        "read",
        NotAFileError.kind,
        f"{uri}{what} is {e.what}, not a regular file, so it was not read; give a regular file.",
    )


def read_bytes(uri: str, max_bytes: int) -> bytes:
    """A page's bytes, read within its own folder, at most ``max_bytes``."""
    root = parent_of(uri)
    try:
        size = input_files.file_size(uri, root)
        if size is None:
            raise FileNotFoundError(uri)
    except FileNotFoundError:
        raise StageError(
            "read", "missing", f"{uri} disappeared before it could be read; check the input folder."
        ) from None
    except (OutsideRootError, NotAFileError) as e:
        raise refused(uri, e) from None
    except OSError as e:
        raise StageError("read", "unreadable", f"{uri} could not be read ({e}); check permissions and retry.") from None
    if size is not None and size > max_bytes:
        raise StageError(
            "read",
            "too_large",
            f"{uri} is {mib(size)}, above the {mib(max_bytes)} page limit; raise --max-page-mb if the page is genuine.",
        )
    try:
        data = input_files.read_input(uri, root, max_bytes)
    except (OutsideRootError, NotAFileError) as e:
        raise refused(uri, e) from None
    except OSError as e:
        raise StageError("read", "unreadable", f"{uri} could not be read ({e}); check permissions and retry.") from None
    from sciga.transforms.common.conversion_check import failed_conversion

    why = failed_conversion(data, max_bytes)
    if why:
        raise StageError(
            "read",
            "conversion_failed",
            f"{uri}: {why}; there is no paper text in it (its TeX source may still be fetched with `sciga fetch`).",
        )
    return data


def sidecar_uri(uri: str) -> str:
    base, chain = split_chain(uri)
    for suf in sorted(HTML_SUFFIXES, key=len, reverse=True):
        if base.lower().endswith(suf):
            base = base[: -len(suf)]
            break
    return base + META_SUFFIX + (f"::{chain}" if chain is not None else "")


def sidecar_candidates(uri: str, metadata_dir: Optional[str] = None) -> list[str]:
    """Where a page's metadata sidecar may be, in the order they are tried."""
    cands = [sidecar_uri(uri)]
    if metadata_dir:
        cands.append(posixpath.join(metadata_dir.rstrip("/"), stem_of(uri) + META_SUFFIX))
    return cands


def find_sidecar(uri: str, metadata_dir: Optional[str] = None) -> tuple[Optional[str], list[str]]:
    """(the sidecar found or None, the places looked at before it)."""
    looked: list[str] = []
    for side in sidecar_candidates(uri, metadata_dir):
        fs, path = _fs_and_path(side)
        if fs.exists(path) or (input_files.is_local(side) and os.path.islink(path)):  # found, then refused
            return side, looked
        looked.append(side)
    return None, looked


def read_sidecar_bytes(found: str) -> bytes:
    """A sidecar's bytes, read within its own folder (a link out, a FIFO, a sidecar of
    gigabytes: a dead letter of stage ``read``)."""
    try:
        data = input_files.read_input(found, parent_of(found), MAX_SIDECAR_BYTES)
    except (OutsideRootError, NotAFileError) as e:
        raise refused(found, e, " (metadata sidecar)") from None
    except FileNotFoundError:
        raise StageError(
            "read", "missing", f"{found} disappeared before it could be read; check the input folder."
        ) from None
    except OSError as e:
        raise StageError(
            "read", "unreadable", f"{found} could not be read ({e}); check permissions and retry."
        ) from None
    if len(data) > MAX_SIDECAR_BYTES:
        raise StageError(
            "read",
            "bad_metadata",
            f"{found} is larger than {MAX_SIDECAR_BYTES >> 20} MiB, which no metadata sidecar is; fix or delete it.",
        )
    return data


def read_sidecar(uri: str, metadata_dir: Optional[str] = None) -> Optional[PaperMeta]:
    """Metadata sidecar of a page, if one exists: ``<stem>.meta.json`` beside the page,
    else in ``metadata_dir``. A broken sidecar is an error of the paper (dead letter),
    not something to ignore silently."""
    found, _ = find_sidecar(uri, metadata_dir)
    data = read_sidecar_bytes(found) if found is not None else None
    return sidecar_meta(uri, found, data)


def sidecar_meta(uri: str, found: Optional[str], data: Optional[bytes]) -> Optional[PaperMeta]:
    """The metadata of page ``uri`` from its sidecar ``found`` (content ``data``), or what
    is known without one."""
    if found is None:
        # A page read from inside an ar5iv dump: say so in its provenance.
        return PaperMeta(source="ar5iv_dump") if "::" in uri else None
    try:
        meta = PaperMeta.from_dict(json.loads((data or b"").decode("utf-8")))
    except MetaFieldError as e:
        raise StageError("read", "bad_metadata", f"{found}: {e}; fix the field or delete the sidecar.") from None
    except (ValueError, TypeError, UnicodeDecodeError, AttributeError, RecursionError) as e:
        raise StageError(
            "read", "bad_metadata", f"{found} is not valid metadata JSON ({e}); fix or delete it."
        ) from None
    return enrich_meta(meta)


def enrich_meta(meta: PaperMeta) -> PaperMeta:
    """Venue from the author comment when the sidecar does not already name one."""
    from sciga.transforms.metadata.comment_venue import parse_comment_venue

    if meta.conference is None and meta.comment:
        meta.conference = parse_comment_venue(meta.comment)
    return meta
