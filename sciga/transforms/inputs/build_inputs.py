"""List the inputs of a build, before the pipeline starts (no Apache Beam here: a build with
nothing to do answers without importing it). Planning them, what must be computed and what
can be reused, is ``inputs/plan.py``.
"""

from __future__ import annotations

import json
import logging
import posixpath
from collections.abc import Mapping, Sequence
from typing import Optional, Union

from sciga.transforms.common.input_files import parent_of, read_input
from sciga.transforms.inputs.listing_record import InputListing
from sciga.transforms.inputs.pages import (
    MAX_SIDECAR_BYTES,
    META_SUFFIX,
    fallback_paper_id,
    list_inputs,
    list_metadata,
    page_candidates,
)
from sciga.transforms.inputs.refused import RefusedInput, from_line

log = logging.getLogger("sciga.build")


# ------------------------------------------------------------------ listing (before the pipeline)


def input_list_lines(inputs: Sequence[str], page_sha256: Optional[Mapping[str, str]] = None) -> list[str]:
    """The lines of a build's input-list file: one JSON string each, ASCII (newlines,
    ``::``, spaces and any Unicode in a name are escaped, so no name splits or merges);
    ``[uri, sha256]`` for a page whose SHA-256 the launcher already knows;
    ``[uri, null, error_type, message]`` for an input the listing refused (``refused.py``)."""
    known = page_sha256 or {}
    return [json.dumps(_line_value(u, known), ensure_ascii=True) + "\n" for u in inputs]


def _line_value(uri: str, known: Mapping[str, str]):
    if isinstance(uri, RefusedInput):
        return uri.line()
    return [uri, known[uri]] if uri in known else uri


def largest_first(inputs: Sequence[str], sizes: Mapping[str, int]) -> list[str]:
    """``inputs`` with the largest pages first (those of unknown size last, in their order).

    The local runner deals a stage's elements to its worker processes in turn, in the order
    they come, and each worker keeps what it was dealt: in name order, one worker could get
    the long papers (a corpus of a few pages repeated gave one worker 29% more bytes, and the
    other waited 2 s at the end). Dealt largest first, the shares differ by at most one page,
    and the longest papers start first. Results and shards do not depend on this order."""
    order = sorted(range(len(inputs)), key=lambda i: (-sizes.get(inputs[i], -1), i))
    return [inputs[i] for i in order]


def input_from_line(line: str) -> str:
    """An input URI back from its input-list line (``input_list_lines``); a refused input as
    its pipeline element (``RefusedInput.element``: a string no file can be named)."""
    got = json.loads(line)
    gone = from_line(got)
    if gone is not None:
        return gone.element()
    return got[0] if isinstance(got, list) else got


def planned_input_from_line(line: str) -> Union[str, tuple[str, str]]:
    """The input URI, or (URI, page SHA-256) when the line carries it (``inputs/plan.py``);
    a refused input as its pipeline element."""
    got = json.loads(line)
    gone = from_line(got)
    if gone is not None:
        return gone.element()
    return (got[0], got[1]) if isinstance(got, list) else got


def _normalized(uri: str) -> str:
    """A location in one spelling: local paths absolute and resolved, URLs without a trailing slash."""
    import os

    if "://" in uri and not uri.startswith("file://"):
        return uri.rstrip("/")
    path = uri[len("file://") :] if uri.startswith("file://") else uri
    return os.path.realpath(path)


def is_inside(uri: str, folder: str) -> bool:
    """``uri`` is ``folder`` or lies below it (both spelled as the listing spells them)."""
    u, f = _normalized(uri), _normalized(folder)
    return u == f or u.startswith(f.rstrip("/") + "/")


def output_inside_inputs(specs: Sequence[str], output: str) -> list[str]:
    """The input folders the build's output folder lies inside (``--input . --output out``)."""
    return [s for s in specs if "::" not in s and not any(ch in s for ch in "*?[") and is_inside(output, s)]


def list_build_inputs(specs: Sequence[str], html_from: str = "ar5iv", exclude: Optional[str] = None) -> list[str]:
    """The input-list lines: pages, and with ``--html-from latexml|auto`` requests to make a
    paper's page from its e-print (``latexml:<metadata sidecar>``). Nothing below ``exclude``
    (the build's own output folder, when it lies inside an input folder) is an input: its
    browse pages and reports are no papers, and a rerun must not read them."""
    return build_input_listing(specs, html_from, exclude).inputs


def warn_without_page(listing: InputListing) -> None:
    if listing.without_page:
        log.warning(
            "%d papers have metadata but no page (e.g. %s); they are not built: --html-from auto converts "
            "their e-prints with LaTeXML",
            listing.without_page,
            listing.first_without_page,
        )


def build_input_listing(specs: Sequence[str], html_from: str = "ar5iv", exclude: Optional[str] = None) -> InputListing:
    """``list_build_inputs``, with what the listing warned about (the page index records both,
    ``inputs/listing_record.py``)."""
    pages = list_inputs(specs)  # a spec that does not exist: FileNotFoundError, one sentence from the CLI
    metas = list_metadata(specs)
    if exclude and output_inside_inputs(specs, exclude):
        pages = [p for p in pages if not is_inside(p, exclude)]
        metas = [m for m in metas if not is_inside(m, exclude)]
    page_set = set(pages)
    # Sidecars beside a page, as a set: ``m not in`` a list of them was quadratic (5.5 s of a
    # no-op rebuild of 20,000 pages).
    beside = {m for m in metas if any(c in page_set for c in page_candidates(m))}
    if html_from == "ar5iv":
        without_page = [m for m in metas if m not in beside]
        listing = InputListing(pages, len(without_page), without_page[0] if without_page else "")
        warn_without_page(listing)
        return listing
    from sciga.transforms.inputs.tex_inputs import id_keys, page_keys, source_paper_id, tex_sources
    from sciga.transforms.latexml.pages_from_eprints import convert_request

    # A paper is known by its id: a sidecar or TeX folder elsewhere than the paper's page still has that page.
    keys = page_keys([p for p in pages if not isinstance(p, RefusedInput)])  # a refused page stands for no paper
    metas_by_id = {m: _meta_id(m) for m in metas if m not in beside or html_from == "latexml"}
    meta_keys = {_meta_key(k) for k in metas_by_id.values()}
    sources = [
        t
        for t in tex_sources(specs, skip=keys if html_from == "auto" else ())
        if not (id_keys(source_paper_id(t)[0]) & meta_keys) and not (exclude and is_inside(t, exclude))
    ]
    if html_from == "auto":
        convert = [m for m in metas if m not in beside and not (id_keys(metas_by_id[m]) & keys)]
        convert += [t for t in sources if not (id_keys(source_paper_id(t)[0]) & keys)]
        return InputListing(sorted(pages + [convert_request(m) for m in convert]))
    # latexml: every paper with metadata or a TeX source gets its page from its e-print; other pages stay.
    replaced = {c for m in metas for c in page_candidates(m)}
    converted = set().union(
        *(id_keys(i) for i in metas_by_id.values()), *(id_keys(source_paper_id(t)[0]) for t in sources)
    )
    kept = [p for p in pages if isinstance(p, RefusedInput) or (p not in replaced and not (page_keys([p]) & converted))]
    return InputListing(sorted(kept + [convert_request(m) for m in metas] + [convert_request(t) for t in sources]))


def _meta_id(meta_uri: str) -> Optional[str]:
    """The paper a sidecar is for: an arXiv id in its file name is taken as it is (a fetch
    cache names sidecars after their paper; at corpus scale reading each costs minutes on a
    bucket), else the id written inside it."""
    from sciga.schemas import ids
    from sciga.transforms.latexml.pages_from_eprints import meta_paper_id

    named, _ = ids.paper_id_from_filename(posixpath.basename(meta_uri)[: -len(META_SUFFIX)])
    if named:
        return named
    from sciga.transforms.common.errors import StageError
    from sciga.transforms.inputs.pages import read_sidecar_bytes

    try:
        return meta_paper_id(meta_uri, read_sidecar_bytes(meta_uri))  # contained: a link out is not read
    except StageError:
        return None  # the build dead-letters it when it reads it


def _meta_key(paper_id: Optional[str]) -> str:
    from sciga.schemas import ids

    return ids.split_version(paper_id)[0] if paper_id else ""


def input_paper_ids(inputs: Sequence[str]) -> list[str]:
    """The arXiv ids the inputs are for, as far as the names and sidecars say (for bulk
    e-print extraction before the pipeline)."""
    from sciga.transforms.latexml.pages_from_eprints import CONVERT_PREFIX, meta_paper_id

    out = set()
    for line in inputs:
        if isinstance(line, RefusedInput):  # never read, its sidecar neither
            continue
        if line.startswith(CONVERT_PREFIX):
            uri = line[len(CONVERT_PREFIX) :]
            if not uri.endswith(META_SUFFIX):  # a TeX source given as an input: its name is the id
                from sciga.transforms.inputs.tex_inputs import source_paper_id

                pid, how = source_paper_id(uri)
                if how == "filename" and pid:
                    out.add(pid)
                continue
            try:
                out.add(meta_paper_id(uri, read_input(uri, parent_of(uri), MAX_SIDECAR_BYTES)))
            except OSError:
                continue
        else:
            pid, how = fallback_paper_id(line)
            if how == "filename" and pid:
                out.add(pid)
            elif line.endswith(".html") or ".html" in line:
                side = line.split(".htm", 1)[0] + META_SUFFIX
                try:
                    out.add(meta_paper_id(side, read_input(side, parent_of(side), MAX_SIDECAR_BYTES)))
                except (OSError, ValueError):
                    pass
    return sorted(out)
