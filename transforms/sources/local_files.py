"""Input listing and reading for HTML pages on any fsspec path (local, gs://, hf://).

An input is a folder (searched recursively for ``*.html``, ``*.htm``, ``*.xhtml`` and their
``.gz`` forms), a glob, a single file, or an ar5iv dump ``*.zip`` (its pages are read in
place through chained URLs ``zip://member::dump.zip``). A page may have a metadata sidecar
next to it, ``<stem>.meta.json`` (written by ``sciga fetch`` and shipped with the samples);
a sidecar whose comment names an accepted venue gets ``conference`` filled in from it.
"""
from __future__ import annotations

import hashlib
import json
import os
import posixpath
from collections.abc import Iterable
from typing import Optional

import fsspec

from sciga.schemas import ids
from sciga.schemas.records import PaperMeta
from sciga.transforms.common.errors import StageError
from sciga.transforms.common.sizes import mib

HTML_SUFFIXES = (".html", ".htm", ".xhtml", ".html.gz", ".htm.gz", ".xhtml.gz")
META_SUFFIX = ".meta.json"


def _fs_and_path(uri: str):
    fs, path = fsspec.core.url_to_fs(uri)
    return fs, path


def _protocol(fs) -> str:
    return fs.protocol[0] if isinstance(fs.protocol, (list, tuple)) else fs.protocol


def _join_protocol(fs, path: str) -> str:
    proto = _protocol(fs)
    if proto in ("file", "local"):
        return os.path.abspath(path)
    return f"{proto}://{path}"


def _files_under(fs, path: str) -> list[str]:
    """Every file below folder ``path``. On a local disk through ``os.walk`` (scandir): a
    corpus folder holds ~170 figure files per paper, and fsspec's ``find`` asks for the
    details of each, which at 2,000 papers cost seconds before the build even started."""
    if _protocol(fs) not in ("file", "local"):
        return fs.find(path)
    out = []
    for root, _dirs, files in os.walk(path, followlinks=True):  # as fsspec does: linked folders are walked
        out.extend(os.path.join(root, f) for f in files)
    return out


def list_inputs(specs: Iterable[str]) -> list[str]:
    """Every page the specs name, sorted and de-duplicated (deterministic order)."""
    from sciga.transforms.sources import ar5iv_dump

    found: set[str] = set()
    for spec in specs:
        if ar5iv_dump.is_dump(spec) and "::" not in spec:
            found.update(ar5iv_dump.page_uris(spec))
            continue
        fs, path = _fs_and_path(spec)
        if any(ch in path for ch in "*?["):
            matches = fs.glob(path)
        elif fs.isdir(path):
            # Files only: a folder named like a page is walked into, never taken as one.
            found.update(_join_protocol(fs, p) for p in _files_under(fs, path) if p.lower().endswith(HTML_SUFFIXES))
            continue
        elif fs.exists(path):
            matches = [path]
        else:
            raise FileNotFoundError(f"input {spec} does not exist; give a folder, a glob or a file of .html pages.")
        for m in matches:
            if m.lower().endswith(HTML_SUFFIXES) and not fs.isdir(m):
                found.add(_join_protocol(fs, m))
    return sorted(found)


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


def input_list_hash(uris: list[str]) -> str:
    """Identifies the input set of a build (names and sizes, cheap to compute)."""
    h = hashlib.sha256()
    for u in uris:
        fs, path = _fs_and_path(u)
        try:
            size = fs.size(path)
        except OSError:
            size = -1
        h.update(f"{u}\t{size}\n".encode())
    return h.hexdigest()


def _inner(uri: str) -> str:
    """The member part of a chained URL (``zip://a/b.html::x.zip`` -> ``zip://a/b.html``)."""
    return uri.split("::", 1)[0] if "::" in uri else uri


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


def read_bytes(uri: str, max_bytes: int) -> bytes:
    fs, path = _fs_and_path(uri)
    try:
        size = fs.size(path)
    except FileNotFoundError:
        raise StageError("read", "missing", f"{uri} disappeared before it could be read; check the input folder.") from None
    except OSError as e:
        raise StageError("read", "unreadable", f"{uri} could not be read ({e}); check permissions and retry.") from None
    if size is not None and size > max_bytes:
        raise StageError(
            "read", "too_large",
            f"{uri} is {mib(size)}, above the {mib(max_bytes)} page limit; "
            "raise --max-page-mb if the page is genuine.",
        )
    try:
        with fs.open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as e:
        raise StageError("read", "unreadable", f"{uri} could not be read ({e}); check permissions and retry.") from None
    from sciga.transforms.sources.html_pages import failed_conversion

    why = failed_conversion(data)
    if why:
        raise StageError("read", "conversion_failed", f"{uri}: {why}; there is no paper text in it "
                         "(its TeX source may still be fetched with `sciga fetch`).")
    return data


def sidecar_uri(uri: str) -> str:
    base, chain = (uri.split("::", 1) + [""])[:2] if "::" in uri else (uri, "")
    for suf in sorted(HTML_SUFFIXES, key=len, reverse=True):
        if base.lower().endswith(suf):
            base = base[: -len(suf)]
            break
    return base + META_SUFFIX + (f"::{chain}" if chain else "")


def sidecar_candidates(uri: str, metadata_dir: Optional[str] = None) -> list[str]:
    """Where a page's metadata sidecar may be, in the order they are tried."""
    cands = [sidecar_uri(uri)]
    if metadata_dir:
        cands.append(posixpath.join(metadata_dir.rstrip("/"), stem_of(uri) + META_SUFFIX))
    return cands


def find_sidecar(uri: str, metadata_dir: Optional[str] = None) -> tuple[Optional[str], list[str]]:
    """(the sidecar found or None, the places looked at before it)."""
    looked = []
    for side in sidecar_candidates(uri, metadata_dir):
        fs, path = _fs_and_path(side)
        if fs.exists(path):
            return side, looked
        looked.append(side)
    return None, looked


def read_sidecar(uri: str, metadata_dir: Optional[str] = None) -> Optional[PaperMeta]:
    """Metadata sidecar of a page, if one exists: ``<stem>.meta.json`` beside the page,
    else in ``metadata_dir``. A broken sidecar is an error of the paper (dead letter),
    not something to ignore silently."""
    found, _ = find_sidecar(uri, metadata_dir)
    data = None
    if found is not None:
        fs, path = _fs_and_path(found)
        with fs.open(path, "rb") as f:
            data = f.read()
    return sidecar_meta(uri, found, data)


def sidecar_meta(uri: str, found: Optional[str], data: Optional[bytes]) -> Optional[PaperMeta]:
    """The metadata of page ``uri`` from its sidecar ``found`` (content ``data``), or what
    is known without one."""
    if found is None:
        # A page read from inside an ar5iv dump: say so in its provenance.
        return PaperMeta(source="ar5iv_dump") if "::" in uri else None
    try:
        meta = PaperMeta.from_dict(json.loads(data.decode("utf-8")))
    except (ValueError, TypeError, UnicodeDecodeError, AttributeError) as e:
        raise StageError("read", "bad_metadata", f"{found} is not valid metadata JSON ({e}); fix or delete it.") from None
    return enrich_meta(meta)


def enrich_meta(meta: PaperMeta) -> PaperMeta:
    """Venue from the author comment when the sidecar does not already name one."""
    from sciga.transforms.sources.comment_venue import parse_comment_venue

    if meta.conference is None and meta.comment:
        meta.conference = parse_comment_venue(meta.comment)
    return meta
