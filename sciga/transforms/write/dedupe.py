"""Two inputs for one paper id: keep one, dead-letter the others (never both, never none).

The rule works on a few facts of each copy (version, figure and paragraph counts, input
URI, content hash), so the build can apply it to small result references without holding
the papers themselves.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Optional, TypeVar

from sciga.schemas.records import DeadLetter, Paper
from sciga.transforms.inputs.pages import fallback_paper_id

T = TypeVar("T")


def version_number(version: Optional[str]) -> int:
    v = (version or "").lstrip("v")
    return int(v) if v.isdigit() else 0


def named_for(uri: Optional[str], paper_id: Optional[str]) -> bool:
    """Whether the input's file name is the paper's arXiv id (``2401.00099v2.html`` for
    2401.00099)."""
    if not uri or not paper_id:
        return False
    pid, how = fallback_paper_id(uri)
    return how == "filename" and pid == paper_id


def rank(
    version: Optional[str], n_figures: int, n_paragraphs: int, uri: Optional[str], paper_id: Optional[str] = None
) -> tuple:
    """Sort key: a copy whose file name is the paper's id first (a page named otherwise that
    claims the id never displaces it); then the newest version; among equals, the richest
    record; then the first input URI (a deterministic tie-break, independent of arrival order)."""
    return (-int(named_for(uri, paper_id)), -version_number(version), -n_figures, -n_paragraphs, uri or "")


def duplicate_dead_letter(
    paper_id: str,
    uri: Optional[str],
    version: Optional[str],
    content_sha256: Optional[str],
    kept_uri: Optional[str],
    kept_version: Optional[str],
    kept_sha256: Optional[str],
) -> DeadLetter:
    same = content_sha256 == kept_sha256
    why = (
        "an identical copy"
        if same
        else f"another copy ({version or 'no version'} vs kept {kept_version or 'no version'})"
    )
    return DeadLetter(
        paper_id=paper_id,
        stage="dedupe",
        error_type="duplicate",
        message=f"{uri} is {why} of paper {paper_id}, kept {kept_uri}; remove one of them from the input to silence this.",
        input_uri=uri,
    )


def choose(papers: Iterable[Paper]) -> tuple[Paper, list[DeadLetter]]:
    """Keep one copy of a paper (see ``rank``); the others become dead letters."""
    ps: Sequence[Paper] = sorted(
        papers,
        key=lambda p: rank(
            p.version, len(p.figures), sum(len(s.paragraphs) for s in p.sections), p.provenance.input_uri, p.id
        ),
    )
    kept, rest = ps[0], ps[1:]
    dead = [
        duplicate_dead_letter(
            p.id,
            p.provenance.input_uri,
            p.version,
            p.provenance.content_sha256,
            kept.provenance.input_uri,
            kept.version,
            kept.provenance.content_sha256,
        )
        for p in rest
    ]
    return kept, dead
