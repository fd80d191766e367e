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

from sciga.schemas import ids
from sciga.transforms.common import input_files
from sciga.transforms.common.errors import StageError
from sciga.transforms.eprints.eprint import DEFAULT_LIMITS, Limits, SourceTree, read_eprint, read_source_dir

SOURCE_SUFFIXES = (".src.tar.gz", ".src.tgz", ".src.tar", ".src.gz", ".src.pdf", ".src")
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".gz", ".eprint")

_split_chain = input_files.split_chain  # ``zip://a/b.html::/x.zip`` -> (``zip://a/b.html``, ``/x.zip``)


def page_stem(uri: str) -> str:
    from sciga.transforms.inputs.pages import stem_of

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


def source_candidates(
    page_uri: Optional[str], paper_id: Optional[str], tex_dirs: Sequence[str] = ()
) -> list[tuple[str, str]]:
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
    if page_uri and _split_chain(page_uri)[1] is None:
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


def locate_source_checked(
    page_uri: Optional[str], paper_id: Optional[str], tex_dirs: Sequence[str] = ()
) -> tuple[Optional[str], list[str]]:
    """(the source found or None, the candidate places that held nothing before it)."""
    looked: list[str] = []
    for cand, what in source_candidates(page_uri, paper_id, tex_dirs):
        fs, p = input_files.fs_and_path(cand)
        ok, is_dir = _exists(fs, p)
        if ok and (what == "any" or (what == "dir") == is_dir):
            return _with_protocol(fs, p, cand), looked
        if not ok:
            looked.append(cand)
    return None, looked


LONE_EPRINT_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".gz", ".eprint", ".src")


def lone_eprint(folder_uri: str) -> Optional[str]:
    """The e-print file a folder holds when it holds nothing else (``1709.07020/`` holding
    ``1709.07020v1.tar.gz``, the layout the own-pages how-to documents), else None: such a
    folder is that e-print, not an extracted tree."""
    fs, path = input_files.fs_and_path(folder_uri)
    try:
        entries = fs.ls(path, detail=True)
    except OSError:
        return None
    if len(entries) != 1 or entries[0].get("type") == "directory":
        return None
    name = entries[0]["name"]
    if not name.lower().endswith(LONE_EPRINT_SUFFIXES):
        return None
    return _with_protocol(fs, name, folder_uri)


def _with_protocol(fs, path: str, like: str) -> str:
    """``path`` as fsspec returned it, with the protocol put back for remote stores."""
    proto = fs.protocol[0] if isinstance(fs.protocol, (list, tuple)) else fs.protocol
    if proto in ("file", "local") or "://" not in like:
        return path
    return f"{proto}://{path}"


def _refused(
    uri: str, e: input_files.OutsideRootError | input_files.NotAFileError, paper_id: Optional[str]
) -> StageError:
    if isinstance(e, input_files.OutsideRootError):
        return StageError(
            "tex_source",
            e.kind,
            f"{uri} is a link that leads outside its folder, so the TeX source was "
            "not read; copy the source into the folder instead of linking to it.",
            paper_id,
        )
    return StageError(
        "tex_source",
        e.kind,
        f"{uri} is {e.what}, not a regular file or folder, so the TeX source was not read.",
        paper_id,
    )


def load_source(uri: str, *, paper_id: Optional[str] = None, limits: Limits = DEFAULT_LIMITS) -> SourceTree:
    """A source folder or e-print file -> SourceTree (with the same safety limits). A
    source is read only inside the folder it was found in (``input_files``): a link out is
    refused (``outside_input``), and so is a FIFO or a device (``not_a_file``)."""
    fs, path = input_files.fs_and_path(uri)
    ok, is_dir = _exists(fs, path)
    if not ok:
        raise StageError("tex_source", "missing_source", f"{uri} disappeared before it could be read.", paper_id)
    root = input_files.parent_of(uri)
    if input_files.is_local(uri):
        try:
            input_files.check_inside(path, input_files.local_path(root))
        except input_files.OutsideRootError as e:
            raise _refused(uri, e, paper_id) from None
    if is_dir:
        lone = lone_eprint(uri)
        if lone is not None:
            return load_source(lone, paper_id=paper_id, limits=limits)
        return read_source_dir(uri, label=uri, paper_id=paper_id, limits=limits)
    try:
        size = input_files.file_size(uri, root)
        if size is not None and size > limits.max_total_bytes:
            raise StageError(
                "tex_source",
                "size_bomb",
                f"{uri} is {size // (1 << 20)} MiB, above the "
                f"{limits.max_total_bytes // (1 << 20)} MiB source limit; it was not read.",
                paper_id,
            )
        data = input_files.read_input(uri, root, limits.max_total_bytes)
    except (input_files.OutsideRootError, input_files.NotAFileError) as e:
        raise _refused(uri, e, paper_id) from None
    return read_eprint(data, label=uri, paper_id=paper_id, limits=limits)
