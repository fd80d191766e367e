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

Every paper id has one of two forms, checked wherever an id enters (a metadata sidecar, the
page's canonical URL, a file name, the GA manifest): an **arXiv id**, new style
(``2401.13641``) or old style (``astro-ph/0601001``, ``math.GT/0309136``), ASCII digits
only; or a **local id** for a paper arXiv does not know (a local LaTeXML conversion):
ASCII letters, digits, ``.`` and ``-``, starting with a letter or digit, no ``..``, at most
128 characters. Before it is checked an id is normalised (``normalize_id``): Unicode NFKC
(fullwidth ``２４０１.０００９９`` is ``2401.00099``), without control, format or
bidirectional characters (zero-width spaces, RTL marks), so that two spellings of one
paper are one paper and no id carries path syntax (``..``, ``/etc/passwd``).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Optional

# New-style ids (0704.0001 ... 2401.13641) and old-style ids (astro-ph/0601001, math.GT/0309136).
# ASCII digits only ([0-9]: Python's \d also matches fullwidth and other scripts' digits).
NEW_ID = r"[0-9]{4}\.[0-9]{4,5}"
OLD_ID = r"[a-z]+(?:-[a-z]+)*(?:\.[A-Z]{2})?/[0-9]{7}"
ARXIV_ID_RE = re.compile(rf"^(?:{NEW_ID}|{OLD_ID})$")
_VERSIONED_RE = re.compile(rf"^(?P<id>{NEW_ID}|{OLD_ID})(?:v(?P<v>[0-9]+))?$")
# Old-style ids as they appear in file names, with the slash dropped or replaced.
_FILE_OLD_RE = re.compile(r"^(?P<arch>[a-z]+(?:-[a-z]+)*(?:\.[A-Z]{2})?)[_/]?(?P<num>[0-9]{7})(?:v(?P<v>[0-9]+))?$")
# A local id (what ``local_id_from_stem`` makes of a file name).
LOCAL_ID_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9\-]|\.(?!\.))*$")
MAX_LOCAL_ID = 128
# Unicode categories an id never keeps: control (Cc), format (Cf: zero-width characters,
# bidirectional marks), line and paragraph separators, unassigned, private use, surrogates.
_DROPPED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cn", "Co", "Cs"})


class BadIdError(ValueError):
    """An id that is neither an arXiv id nor a local id; the message says what is wrong."""


def normalize_id(raw: str) -> str:
    """``raw`` as ids are compared: NFKC, without control, format or bidirectional
    characters, without surrounding white space."""
    text = unicodedata.normalize("NFKC", raw)
    text = "".join(ch for ch in text if unicodedata.category(ch) not in _DROPPED_CATEGORIES)
    return text.strip()


def is_local_id(paper_id: str) -> bool:
    return len(paper_id) <= MAX_LOCAL_ID and bool(LOCAL_ID_RE.match(paper_id))


def checked_paper_id(raw: str) -> tuple[str, Optional[str]]:
    """(paper id, version) of an id as given (``2401.13641v2``, ``astro-ph/0601001``, a local
    id), normalised; ``BadIdError`` when it is neither form."""
    text = normalize_id(raw)
    pid, ver = split_version(text)
    if is_arxiv_id(pid):
        return pid, ver
    if is_local_id(text):
        return text, None
    if not text:
        why = "is empty"
    elif len(text) > MAX_LOCAL_ID:
        why = f"is longer than {MAX_LOCAL_ID} characters"
    elif "/" in text or "\\" in text or ".." in text:
        why = "holds path syntax ('/', '\\', '..')"
    else:
        why = "holds characters other than letters, digits, '.' and '-'"
    raise BadIdError(
        f"{why}: a paper id is an arXiv id (2401.13641, astro-ph/0601001) or a local id (letters, digits, '.' and '-')"
    )


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
    ``astro-ph0601001`` or ``astro-ph_0601001`` (normalised first: a fullwidth or zero-width
    spelling names the same paper). Returns ``(None, None)`` if it is no id."""
    stem = normalize_id(stem)
    pid, ver = split_version(stem)
    if is_arxiv_id(pid):
        return pid, ver
    m = _FILE_OLD_RE.match(stem)
    if m:
        return f"{m.group('arch')}/{m.group('num')}", (f"v{m.group('v')}" if m.group("v") else None)
    return None, None


def local_id_from_stem(stem: str) -> Optional[str]:
    """An id for a page that names no arXiv paper (a local LaTeXML conversion): the file
    stem, normalised and restricted to what a local id holds (runs of dots become one)."""
    s = re.sub(r"[^A-Za-z0-9.\-]+", "-", normalize_id(stem))
    s = re.sub(r"\.{2,}", ".", s).strip("-.")
    return s[:MAX_LOCAL_ID].rstrip("-.") or None


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
