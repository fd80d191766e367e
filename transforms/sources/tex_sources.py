"""Where a paper's TeX source is, and how it is read (safely).

For a page ``.../<stem>.html[.gz]`` of paper ``<id>``, sources are looked for as
``<stem>.src.tar.gz`` / ``.src.gz`` / ``.src.tar`` / ``.src.pdf`` / ``.src`` beside the page
(the ``sciga fetch`` cache layout), a ``source/`` folder beside the page, and in each
``--tex-input`` folder ``<stem>/`` or ``<safe id>/`` (an extracted tree, or a folder
holding one e-print file such as ``1709.07020v1.tar.gz``) or ``<stem>.tar.gz`` etc.
``locate_source_checked`` also says which places held nothing, so a result can depend on
them (an e-print added there later recomputes the paper).
"""
from __future__ import annotations

import posixpath
from collections.abc import Sequence
from typing import Optional

import fsspec

from sciga.schemas import ids
from sciga.transforms.common.errors import StageError
from sciga.transforms.sources.eprint import DEFAULT_LIMITS, Limits, SourceTree, read_eprint, read_source_dir

SOURCE_SUFFIXES = (".src.tar.gz", ".src.tgz", ".src.tar", ".src.gz", ".src.pdf", ".src")
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".gz", ".eprint")

def _split_chain(uri: str) -> tuple[str, Optional[str]]:
    """``zip://a/b.html::/x.zip`` -> (``zip://a/b.html``, ``/x.zip``)."""
    if "::" in uri:
        inner, outer = uri.split("::", 1)
        return inner, outer
    return uri, None


def page_stem(uri: str) -> str:
    from sciga.transforms.sources.local_files import stem_of

    return stem_of(_split_chain(uri)[0])


def _exists(fs, path: str) -> tuple[bool, bool]:
    """(exists, is a folder)."""
    try:
        info = fs.info(path)
    except (FileNotFoundError, OSError):
        return False, False
    return True, info.get("type") == "directory"


def _join(base: str, *parts: str) -> str:
    return posixpath.join(base.rstrip("/"), *parts) if base else posixpath.join(*parts)


def source_candidates(page_uri: Optional[str], paper_id: Optional[str], tex_dirs: Sequence[str] = ()) -> list[tuple[str, str]]:
    """Where the paper's TeX source may be, in the order they are tried: (URI, what counts
    there: "file", "dir" or "any")."""
    names = []
    if page_uri:
        names.append(page_stem(page_uri))
    if paper_id:
        for n in (ids.safe_filename(paper_id), paper_id.replace("/", "")):
            if n not in names:
                names.append(n)
    out: list[tuple[str, str]] = []
    if page_uri and "::" not in page_uri:
        page_dir = posixpath.dirname(page_uri.replace("\\", "/"))
        for stem in names[:1]:
            for suf in SOURCE_SUFFIXES:
                out.append((_join(page_dir, stem + suf), "file"))
        out.append((_join(page_dir, "source"), "dir"))
    for tex_dir in tex_dirs:
        for stem in names:
            out.append((_join(tex_dir, stem), "any"))
            for suf in SOURCE_SUFFIXES + ARCHIVE_SUFFIXES:
                out.append((_join(tex_dir, stem + suf), "file"))
    return out


def locate_source(page_uri: Optional[str], paper_id: Optional[str], tex_dirs: Sequence[str] = ()) -> Optional[str]:
    """The URI of the paper's TeX source (a file or a folder), or None."""
    return locate_source_checked(page_uri, paper_id, tex_dirs)[0]


def locate_source_checked(page_uri: Optional[str], paper_id: Optional[str],
                          tex_dirs: Sequence[str] = ()) -> tuple[Optional[str], list[str]]:
    """(the source found or None, the candidate places that held nothing before it)."""
    looked: list[str] = []
    for cand, what in source_candidates(page_uri, paper_id, tex_dirs):
        fs, p = fsspec.core.url_to_fs(cand)
        ok, is_dir = _exists(fs, p)
        if ok and (what == "any" or (what == "dir") == is_dir):
            return _with_protocol(fs, p, cand), looked
        if not ok:
            looked.append(cand)
    return None, looked


def _with_protocol(fs, path: str, like: str) -> str:
    """``path`` as fsspec returned it, with the protocol put back for remote stores."""
    proto = fs.protocol[0] if isinstance(fs.protocol, (list, tuple)) else fs.protocol
    if proto in ("file", "local") or "://" not in like:
        return path
    return f"{proto}://{path}"


def load_source(uri: str, *, paper_id: Optional[str] = None, limits: Limits = DEFAULT_LIMITS) -> SourceTree:
    """A source folder or e-print file -> SourceTree (with the same safety limits)."""
    fs, path = fsspec.core.url_to_fs(uri)
    ok, is_dir = _exists(fs, path)
    if not ok:
        raise StageError("tex_source", "missing_source", f"{uri} disappeared before it could be read.", paper_id)
    if is_dir:
        entries = [e for e in fs.ls(path, detail=True)]
        files = [e for e in entries if e.get("type") != "directory"]
        # A folder that holds just one e-print file (1709.07020/1709.07020v1.tar.gz).
        if len(entries) == 1 and len(files) == 1 and files[0]["name"].lower().endswith(
                (".tar.gz", ".tgz", ".tar", ".gz", ".eprint", ".src")):
            return load_source(_with_protocol(fs, files[0]["name"], uri), paper_id=paper_id, limits=limits)
        return read_source_dir(uri, label=uri, paper_id=paper_id, limits=limits)
    size = fs.size(path)
    if size is not None and size > limits.max_total_bytes:
        raise StageError("tex_source", "size_bomb", f"{uri} is {size // (1 << 20)} MiB, above the "
                         f"{limits.max_total_bytes // (1 << 20)} MiB source limit; it was not read.", paper_id)
    with fs.open(path, "rb") as f:
        data = f.read(limits.max_total_bytes + 1)
    return read_eprint(data, label=uri, paper_id=paper_id, limits=limits)
