"""Two inputs for one paper id: keep one, dead-letter the others (never both, never none)."""
from __future__ import annotations

from typing import Iterable

from sciga.schemas.records import DeadLetter, Paper


def _version_number(p: Paper) -> int:
    v = (p.version or "").lstrip("v")
    return int(v) if v.isdigit() else 0


def choose(papers: Iterable[Paper]) -> tuple[Paper, list[DeadLetter]]:
    """Keep the newest version; among equals, the richest record; then the first input
    URI (a deterministic tie-break, independent of arrival order)."""
    ps = sorted(
        papers,
        key=lambda p: (-_version_number(p), -len(p.figures), -sum(len(s.paragraphs) for s in p.sections),
                       p.provenance.input_uri or ""),
    )
    kept, rest = ps[0], ps[1:]
    dead = []
    for p in rest:
        same = p.provenance.content_sha256 == kept.provenance.content_sha256
        why = "an identical copy" if same else f"another copy ({p.version or 'no version'} vs kept {kept.version or 'no version'})"
        dead.append(
            DeadLetter(
                paper_id=p.id,
                stage="dedupe",
                error_type="duplicate",
                message=f"{p.provenance.input_uri} is {why} of paper {p.id}, kept {kept.provenance.input_uri}; "
                "remove one of them from the input to silence this.",
                input_uri=p.provenance.input_uri,
            )
        )
    return kept, dead
