"""Stable ids derived from the paper itself.

Paper ids are arXiv ids without version (``2401.13641``, ``astro-ph/0601001``).
Everything inside a paper hangs off it:

=============  ==========================  ==============================================
thing          example                     derived from
=============  ==========================  ==============================================
section        ``2401.13641_S2.1``         the LaTeXML element id (``S2.SS1``), compacted
figure         ``2401.13641_F3``           order of appearance among figures (1-based)
subfigure      ``2401.13641_F3.2``         order of appearance inside its figure
table          ``2401.13641_T1``           order of appearance among tables
graph. abstr.  ``2401.13641_GA``           one per paper
=============  ==========================  ==============================================

Figure ids use the order of appearance rather than the printed number because printed
numbers repeat (per-section numbering, ``Figure 3.2``), can be absent (uncaptioned figures)
or be shared by one LaTeXML element holding two captions. The printed number is kept in
its own field.
"""

from __future__ import annotations

import re
from typing import Optional

# New-style ids (0704.0001 ... 2401.13641) and old-style ids (astro-ph/0601001, math.GT/0309136).
NEW_ID = r"\d{4}\.\d{4,5}"
OLD_ID = r"[a-z]+(?:-[a-z]+)*(?:\.[A-Z]{2})?/\d{7}"
ARXIV_ID_RE = re.compile(rf"^(?:{NEW_ID}|{OLD_ID})$")
_VERSIONED_RE = re.compile(rf"^(?P<id>{NEW_ID}|{OLD_ID})(?:v(?P<v>\d+))?$")
# Old-style ids as they appear in file names, with the slash dropped or replaced.
_FILE_OLD_RE = re.compile(r"^(?P<arch>[a-z]+(?:-[a-z]+)*(?:\.[A-Z]{2})?)[_/]?(?P<num>\d{7})(?:v(?P<v>\d+))?$")

SECTION_ID_RE = re.compile(r"^(?P<paper>.+)_(?P<local>(?:Pt\d+\.)?(?:S|A|Sx|Ch|P)[\w.]*)$")
FIGURE_ID_RE = re.compile(r"^(?P<paper>.+)_F(?P<fig>\d+)(?:\.(?P<sub>\d+))?$")
TABLE_ID_RE = re.compile(r"^(?P<paper>.+)_T(?P<tab>\d+)$")
GA_ID_RE = re.compile(r"^(?P<paper>.+)_GA$")


def split_version(raw: str) -> tuple[str, str | None]:
    """``'2401.13641v2'`` -> ``('2401.13641', 'v2')``; unknown forms come back unchanged."""
    raw = raw.strip()
    m = _VERSIONED_RE.match(raw)
    if m:
        return m.group("id"), (f"v{m.group('v')}" if m.group("v") else None)
    return raw, None


def is_arxiv_id(paper_id: str) -> bool:
    return bool(ARXIV_ID_RE.match(paper_id))


def paper_id_from_filename(stem: str) -> tuple[str | None, str | None]:
    """Guess ``(paper_id, version)`` from a file stem such as ``2401.13641v1``,
    ``astro-ph0601001`` or ``astro-ph_0601001``. Returns ``(None, None)`` if it is no id."""
    stem = stem.strip()
    pid, ver = split_version(stem)
    if is_arxiv_id(pid):
        return pid, ver
    m = _FILE_OLD_RE.match(stem)
    if m:
        return f"{m.group('arch')}/{m.group('num')}", (f"v{m.group('v')}" if m.group("v") else None)
    return None, None


def local_id_from_stem(stem: str) -> Optional[str]:
    """An id for a page that names no arXiv paper (a local LaTeXML conversion): the file
    stem, restricted to characters that are safe in ids and file names."""
    s = re.sub(r"[^A-Za-z0-9.\-]+", "-", stem).strip("-.")
    return s or None


def safe_filename(paper_id: str) -> str:
    """A file-system friendly form of an id (old-style ids contain a slash)."""
    return paper_id.replace("/", "_")


_SECTION_PART_RE = re.compile(r"^(?:SS|SSS)(x?)(\d+)$")
_PARAGRAPH_PART_RE = re.compile(r"^(?:Px|SP)(\d+)$")


def section_local_id(latexml_id: str) -> str:
    """Compact a LaTeXML section id: ``S2.SS1`` -> ``S2.1``, ``A1.SS2.SSS3`` -> ``A1.2.3``,
    ``S3.SS2.SSS0.Px1`` -> ``S3.2.0.P1``, ``Sx1`` stays ``Sx1``."""
    out = []
    for part in latexml_id.split("."):
        m = _SECTION_PART_RE.match(part)
        if m:
            out.append(m.group(1) + m.group(2))
            continue
        m = _PARAGRAPH_PART_RE.match(part)
        if m:
            out.append("P" + m.group(1))
            continue
        out.append(part)
    return ".".join(out)


def section_id(paper_id: str, local: str) -> str:
    return f"{paper_id}_{local}"


def figure_id(paper_id: str, index: int) -> str:
    return f"{paper_id}_F{index}"


def subfigure_id(parent_figure_id: str, index: int) -> str:
    return f"{parent_figure_id}.{index}"


def table_id(paper_id: str, index: int) -> str:
    return f"{paper_id}_T{index}"


def ga_id(paper_id: str) -> str:
    return f"{paper_id}_GA"


def paper_of(record_id: str) -> str:
    """The paper id a section / figure / table / GA id belongs to."""
    for rx in (FIGURE_ID_RE, TABLE_ID_RE, GA_ID_RE, SECTION_ID_RE):
        m = rx.match(record_id)
        if m:
            return m.group("paper")
    raise ValueError(f"{record_id!r} is not a sciga record id")
