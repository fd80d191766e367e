"""Which papers a corpus holds: arXiv categories and a range of first-version dates.

SciGA's corpus is "cs, January 2021 to March 2024". The selection is applied to bulk
metadata (a snapshot line, an OAI-PMH record, the cache's metadata) before anything else
is fetched, so HTML and e-prints are only ever asked for papers that belong to the corpus.

* Categories: ``cs`` (an archive) matches a paper that lists any ``cs.*`` category in any
  position, primary or cross-list (``cs.DL astro-ph.IM`` is in ``cs``); ``cs.CV`` (a full
  category) matches that category only. Archives without subject classes (``hep-th``)
  match themselves. Several values: a paper matching any of them is in.
* Dates: the day (UTC) of the paper's first version, ``--from`` and ``--until`` both
  inclusive. The first version is when a paper entered arXiv; it never changes, unlike the
  last-version date or the OAI-PMH datestamp (the record's last modification, which arXiv
  has reset in bulk several times), so a corpus defined by it is the same whenever it is
  built. It is also what the arXiv API's ``published`` and the id's YYMM follow.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Optional

_DAY_RE = re.compile(r"^(\d{4})-(\d{2})(?:-(\d{2}))?$")
_CATEGORY_RE = re.compile(r"^[a-z]+(?:-[a-z]+)*(?:\.[A-Za-z]{2,})?$")


class SelectionError(ValueError):
    """A selection option that cannot be understood (one sentence naming the option)."""


def parse_day(value: str, option: str, *, end: bool = False) -> str:
    """``2021-01-05`` -> ``2021-01-05``; ``2021-01`` -> the month's first day (or its last
    day with ``end``). Raises SelectionError naming ``option``."""
    m = _DAY_RE.match((value or "").strip())
    if not m:
        raise SelectionError(f"{option} {value!r} is not a date; write YYYY-MM-DD (or YYYY-MM).")
    y, mo = int(m.group(1)), int(m.group(2))
    if not 1 <= mo <= 12:
        raise SelectionError(f"{option} {value!r} has no month {mo}; write YYYY-MM-DD.")
    last = calendar.monthrange(y, mo)[1]
    d = int(m.group(3)) if m.group(3) else (last if end else 1)
    if not 1 <= d <= last:
        raise SelectionError(f"{option} {value!r} has no day {d} in that month; write YYYY-MM-DD.")
    return f"{y:04d}-{mo:02d}-{d:02d}"


def parse_categories(values: Iterable[str]) -> tuple[str, ...]:
    """``["cs", "stat.ML,math.OC"]`` -> ``("cs", "stat.ML", "math.OC")`` (sorted, unique)."""
    out = set()
    for v in values or ():
        for c in re.split(r"[,\s]+", v or ""):
            if not c:
                continue
            if not _CATEGORY_RE.match(c):
                raise SelectionError(
                    f"--category {c!r} is not an arXiv archive or category (e.g. cs, cs.CV, astro-ph.IM)."
                )
            out.add(c)
    return tuple(sorted(out))


def archive_of(category: str) -> str:
    return category.split(".", 1)[0]


@dataclass(frozen=True)
class Selection:
    """Categories (archives or full categories) and an inclusive first-version day range
    (``YYYY-MM-DD`` strings, None for open ends). An empty selection takes everything."""

    categories: tuple[str, ...] = ()
    date_from: Optional[str] = None
    date_until: Optional[str] = None

    def __post_init__(self):
        if self.date_from and self.date_until and self.date_from > self.date_until:
            raise SelectionError(f"--from {self.date_from} is after --until {self.date_until}; swap them.")

    @property
    def dated(self) -> bool:
        return bool(self.date_from or self.date_until)

    def category_matches(self, categories: Iterable[str]) -> bool:
        if not self.categories:
            return True
        wanted = self.categories
        for c in categories:
            if c in wanted or archive_of(c) in wanted:
                return True
        return False

    def date_matches(self, first_version_day: Optional[str]) -> bool:
        """``first_version_day`` is ``YYYY-MM-DD`` (a longer ISO timestamp is cut to its day)."""
        if not self.dated:
            return True
        if not first_version_day:
            return False
        day = first_version_day[:10]
        if self.date_from and day < self.date_from:
            return False
        if self.date_until and day > self.date_until:
            return False
        return True

    def matches(self, categories: Iterable[str], first_version_day: Optional[str]) -> bool:
        return self.category_matches(categories) and self.date_matches(first_version_day)

    def describe(self) -> str:
        cats = " ".join(self.categories) if self.categories else "all categories"
        if not self.dated:
            return cats
        return f"{cats}, first version {self.date_from or '...'} to {self.date_until or '...'}"

    def to_json(self) -> dict:
        return {"categories": list(self.categories), "from": self.date_from, "until": self.date_until}


# OAI-PMH set of an archive: arXiv exposes cs, econ, eess, math, nlin, q-bio, q-fin and stat
# as top-level sets and the physics archives as sub-sets of ``physics`` ("physics:hep-th");
# a record is in the set of every archive it is listed in (cross-lists included).
_TOP_LEVEL_SETS = {"cs", "econ", "eess", "math", "nlin", "q-bio", "q-fin", "stat"}


def oai_set_of(selection: Selection) -> Optional[str]:
    """The one OAI-PMH set holding every paper the selection can match, or None (harvest
    everything) when its categories span several sets or it names none."""
    sets = set()
    for c in selection.categories:
        arch = archive_of(c)
        sets.add(arch if arch in _TOP_LEVEL_SETS else f"physics:{arch}")
    return sets.pop() if len(sets) == 1 else None
