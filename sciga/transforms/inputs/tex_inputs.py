"""TeX sources given as build inputs, for ``--html-from auto|latexml``: no sidecar needed.

A folder given with ``--input`` may hold papers as TeX sources, the way ``--tex-input``
folders do: one folder per paper (``2603.21852/`` with its ``.tex`` files, or holding one
e-print file such as ``1709.07020v1.tar.gz``) or one e-print file per paper
(``2401.13641v1.tar.gz``); a folder that is itself one paper's TeX tree can be given too. The
paper id comes from the folder or file name (``2603.21852``; a name that is no arXiv id
gives a local id, as a page's file name does). Such a source is converted with LaTeXML when
its paper has no page among the inputs (``auto``) or always (``latexml``).

Whether a paper "has a page" is decided by id, not by file name: a page's id is what its
file name says (``2401.13641v2.html`` -> ``2401.13641``), so a metadata sidecar or TeX folder
in one place and the paper's page in another never give the same paper twice.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Sequence
from typing import Optional

import fsspec

from sciga.schemas import ids

TEX_SUFFIX = ".tex"
EPRINT_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".eprint")
HTML_SUFFIXES = (".html", ".htm", ".xhtml", ".html.gz", ".htm.gz", ".xhtml.gz")
NOT_A_PAPER = frozenset({"source", "figures", "figs", "images", "sections", "tables", "assets"})


def source_stem(uri: str) -> str:
    name = posixpath.basename(uri.rstrip("/"))
    for suf in EPRINT_SUFFIXES:
        if name.lower().endswith(suf):
            return name[: -len(suf)]
    return name


def source_paper_id(uri: str) -> tuple[Optional[str], str]:
    """(paper id, how) from a TeX folder's or e-print's name: ("2603.21852", "filename") or a
    local id from the name ("dd3d", "stem")."""
    stem = source_stem(uri)
    pid, _ = ids.paper_id_from_filename(stem)
    if pid:
        return pid, "filename"
    return ids.local_id_from_stem(stem), "stem"


def id_keys(paper_id: Optional[str]) -> set[str]:
    """The names a paper id can appear under in file names (old-style ids lose their slash)."""
    if not paper_id:
        return set()
    base = ids.split_version(paper_id)[0]
    return {base, ids.safe_filename(base), base.replace("/", "")}


def page_keys(pages: Iterable[str]) -> set[str]:
    """Every id (and file-name form of it) the pages stand for, from their names."""
    from sciga.transforms.inputs.pages import fallback_paper_id, stem_of

    keys: set[str] = set()
    for page in pages:
        keys.add(stem_of(page))
        pid, _ = fallback_paper_id(page)
        keys |= id_keys(pid)
    return keys


def _is_tex_tree(names: list[str]) -> bool:
    return any(n.lower().endswith(TEX_SUFFIX) for n in names)


def _one_eprint(names: list[str]) -> bool:
    return len(names) == 1 and names[0].lower().endswith(EPRINT_SUFFIXES)


def _named_by_id(name: str) -> bool:
    """An e-print named for its paper (``1709.07020v1.tar.gz``): in a folder given with
    ``--input`` it is one paper of a folder of e-prints, not the folder's own source."""
    return source_paper_id(name)[1] == "filename"


def tex_sources(specs: Sequence[str], skip: Iterable[str] = ()) -> list[str]:
    """The TeX sources (folders and e-print files) the ``--input`` folders hold, sorted. A
    folder that holds pages is a folder of pages (its ``source/`` is that page's), not a source.
    Folders named like an id in ``skip`` (papers that have a page) are not looked into: a
    folder of a hundred thousand paper folders costs one listing per paper without a page."""
    skip = set(skip)
    found: set[str] = set()
    for spec in specs:
        if "::" in spec or any(ch in spec for ch in "*?["):
            continue
        fs, root = fsspec.core.url_to_fs(spec)
        try:
            if not fs.isdir(root):
                if root.lower().endswith(EPRINT_SUFFIXES) and fs.isfile(root):
                    found.add(_keep_protocol(spec, root))  # one e-print file given as the input
                continue
            entries = fs.ls(root, detail=True)
        except OSError:
            continue
        files = [posixpath.basename(e["name"]) for e in entries if e.get("type") != "directory"]
        if any(f.lower().endswith(HTML_SUFFIXES) for f in files):
            continue
        if _is_tex_tree(files) or (_one_eprint(files) and not _named_by_id(files[0])):
            found.add(_keep_protocol(spec, root))  # the folder given is one paper's source
            continue
        for e in entries:
            name = posixpath.basename(e["name"].rstrip("/"))
            if name.startswith(".") or name.lower() in NOT_A_PAPER or source_stem(name) in skip:
                continue
            if e.get("type") == "directory":
                try:
                    inner = [
                        posixpath.basename(x["name"])
                        for x in fs.ls(e["name"], detail=True)
                        if x.get("type") != "directory"
                    ]
                except OSError:
                    continue
                if any(f.lower().endswith(HTML_SUFFIXES) for f in inner):
                    continue  # a page's folder
                if _is_tex_tree(inner) or _one_eprint(inner):
                    found.add(_keep_protocol(spec, e["name"]))
            elif name.lower().endswith(EPRINT_SUFFIXES) and source_paper_id(name)[1] == "filename":
                found.add(_keep_protocol(spec, e["name"]))
    return sorted(found)


def _keep_protocol(spec: str, path: str) -> str:
    if "://" in spec:
        return spec.split("://", 1)[0] + "://" + path.lstrip("/")
    return path
