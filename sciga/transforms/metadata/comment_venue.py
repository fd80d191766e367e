"""Author comment -> accepted venue, year and track (main conference or workshop).

SciGA used the arXiv author comment to find papers accepted at major CV / NLP / ML
conferences and to tell main-conference from workshop papers. Comments are free text:

    "Accepted to CVPR 2025 (main conference). 8 pages"      -> CVPR 2025 main
    "CVPRW'23 oral"                                          -> CVPR 2023 workshop
    "Workshop on Haptics for Creative Tools at CHI 2025"     -> CHI 2025 workshop
    "Findings of EMNLP 2023"                                 -> EMNLP 2023 main
    "Submitted to NeurIPS 2024" / "under review at ICLR"     -> nothing (not accepted)

Rules: a venue name must stand as a word (``ACL`` is not ``NAACL``), a year is 4 digits
(1980-2049) or 2 digits after an apostrophe or the name (``ICCV'21``, ``ECCV22``); a
mention preceded by "submitted to", "under review", "rejected" is not an acceptance; the
first accepted mention wins. The track is "workshop" when the mention says workshop (or
uses the ``W`` suffix, ``CVPRW``), else "main".
"""

from __future__ import annotations

import functools
import re
from typing import Optional

from sciga.schemas.records import Conference

# Canonical name -> spellings (regex fragments, matched case-insensitively as words).
VENUES: dict[str, tuple[str, ...]] = {
    "CVPR": ("CVPR",),
    "ICCV": ("ICCV",),
    "ECCV": ("ECCV",),
    "NeurIPS": ("NeurIPS", "NIPS"),
    "ICML": ("ICML",),
    "ICLR": ("ICLR",),
    "ACL": ("ACL",),
    "EMNLP": ("EMNLP",),
    "NAACL": ("NAACL", "NAACL-HLT"),
    "EACL": ("EACL",),
    "AACL": ("AACL", "AACL-IJCNLP"),
    "COLING": ("COLING",),
    "AAAI": ("AAAI",),
    "IJCAI": ("IJCAI",),
    "WACV": ("WACV",),
    "BMVC": ("BMVC",),
    "ACCV": ("ACCV",),
    "3DV": ("3DV",),
    "MICCAI": ("MICCAI",),
    "ISBI": ("ISBI",),
    "MIDL": ("MIDL",),
    "IPMI": ("IPMI",),
    "CHI": ("CHI",),
    "UIST": ("UIST",),
    "SIGGRAPH Asia": ("SIGGRAPH\\s+Asia",),
    "SIGGRAPH": ("SIGGRAPH",),
    "ACM MM": ("ACM\\s+MM", "ACM\\s+Multimedia", "ACMMM"),
    "KDD": ("KDD", "SIGKDD"),
    "WWW": ("WWW", "The\\s+Web\\s+Conference", "TheWebConf"),
    "SIGIR": ("SIGIR",),
    "CIKM": ("CIKM",),
    "WSDM": ("WSDM",),
    "RecSys": ("RecSys",),
    "AISTATS": ("AISTATS",),
    "UAI": ("UAI",),
    "COLT": ("COLT",),
    "CoRL": ("CoRL",),
    "ICRA": ("ICRA",),
    "IROS": ("IROS",),
    "RSS": ("Robotics:\\s*Science\\s+and\\s+Systems",),
    "ICASSP": ("ICASSP",),
    "Interspeech": ("Interspeech", "INTERSPEECH"),
    "ICPR": ("ICPR",),
    "ICIP": ("ICIP",),
    "ICDAR": ("ICDAR",),
    "ICME": ("ICME",),
    "LREC": ("LREC", "LREC-COLING"),
    "CoNLL": ("CoNLL",),
    "TMLR": ("TMLR",),
}

_SPELLINGS = sorted(((sp, name) for name, sps in VENUES.items() for sp in sps), key=lambda x: -len(x[0]))
_VENUE_RE = re.compile(
    r"(?<![A-Za-z0-9\-])(?P<name>" + "|".join(f"(?:{sp})" for sp, _ in _SPELLINGS) + r")"
    r"(?P<w>W(?![a-z]))?"  # CVPRW, ICCVW
    r"(?:\s*(?:'|’|`|-)?\s*(?P<y2>\d{2})(?!\d)|\s*[-_]?\s*(?P<y4>(?:19[89]|20[0-4])\d)(?!\d))?"
    r"(?![A-Za-z])",
    re.I,
)
_YEAR_RE = re.compile(r"(?<!\d)((?:19[89]|20[0-4])\d)(?!\d)")
_NEGATIVE_RE = re.compile(
    r"(submitted|submission|under\s+review|in\s+review|for\s+review|rejected|withdrawn|to\s+be\s+submitted|"
    r"preprint\s+of\s+a\s+paper\s+under|review\s+at|consideration)\W*(?:\w+\W+){0,6}$",
    re.I,
)
_WORKSHOP_RE = re.compile(r"workshop|\bWS\b|\bwkshp\b", re.I)
_CLAUSE_SPLIT = re.compile(
    r"[;.\n]|\)\s*,|,\s*(?=(?:and\s+)?(?:accepted|published|appear|presented|extended|submitted|under)\b)", re.I
)


@functools.lru_cache(maxsize=4096)  # the same few spellings recur in every comment
def _canonical(spelling: str) -> Optional[str]:
    for sp, name in _SPELLINGS:
        if re.fullmatch(sp, spelling, re.I):
            return name
    return None


def _year(m: re.Match, clause: str) -> Optional[int]:
    if m.group("y4"):
        return int(m.group("y4"))
    if m.group("y2"):
        y = int(m.group("y2"))
        return 2000 + y if y < 50 else 1900 + y
    # "CVPR (2023)", "in ICCV, 2021", "2024 CVPR": the nearest 4-digit year in the clause.
    years = [(abs(ym.start() - m.start()), int(ym.group(1))) for ym in _YEAR_RE.finditer(clause)]
    return min(years)[1] if years else None


def _clauses(comment: str) -> list[str]:
    # Keep decimal points inside numbers ("v2.1") from splitting clauses.
    text = re.sub(r"(?<=\d)\.(?=\d)", "\u2024", comment)
    return [c.replace("\u2024", ".").strip() for c in _CLAUSE_SPLIT.split(text) if c and c.strip()]


def parse_comment_venue(comment: Optional[str]) -> Optional[Conference]:
    """The accepted venue named in an arXiv author comment, or None."""
    if not comment or not comment.strip():
        return None
    for clause in _clauses(comment):
        for m in _VENUE_RE.finditer(clause):
            spelled = m.group("name")
            name = _canonical(spelled)
            if name is None:
                continue
            # Short all-caps acronyms must be written in capitals ("chi" or "Chi" is a word).
            if (
                spelled.isalpha()
                and len(spelled) <= 4
                and spelled != spelled.upper()
                and name not in ("NeurIPS", "CoRL", "CoNLL", "RecSys")
            ):
                continue
            before = clause[: m.start()]
            if _NEGATIVE_RE.search(before):
                continue
            track = "workshop" if (m.group("w") or _WORKSHOP_RE.search(clause)) else "main"
            return Conference(venue=name, year=_year(m, clause), track=track)
    return None
