"""arXiv's own metadata records -> the metadata dict the fetch cache keeps (``<id>.meta.json``,
read by ``PaperMeta.from_dict``), the same shape ``arxiv_api.meta_from_result`` writes.

Three inputs carry arXiv's internal record, field for field:

* the metadata snapshot (JSON lines as distributed on Kaggle): ``id``, ``authors`` (TeX
  string), ``authors_parsed`` ([keyname, forenames, suffix, affiliation...]), ``title``,
  ``comments``, ``journal-ref``, ``doi``, ``report-no``, ``categories`` (space separated,
  primary first), ``license``, ``abstract``, ``versions`` ([{version, created}]),
  ``update_date``;
* OAI-PMH ``arXivRaw``: the same fields as XML elements, versions as
  ``<version version="v2"><date>Tue, 24 Jul 2007 20:10:27 GMT</date><size>..</size>``,
  plus ``acm-class`` and ``msc-class``;
* OAI-PMH ``arXiv``: authors split into ``keyname`` / ``forenames`` / ``suffix`` /
  ``affiliation``, ``created`` and ``updated`` days instead of versions.

Mapping: ``published`` is the first version's time and ``updated`` the last one's (ISO,
UTC, like the API; the ``arXiv`` format only has days), ``version`` the last version,
``primary_category`` the first listed category (arXiv lists the primary first), DOIs split
on whitespace, ACM / MSC classes parsed as the fetcher parses the API's, the venue from the
comment by the shared comment parser. Author names written in TeX (``Bal\\'azs``) become
Unicode (``Balázs``) with pylatexenc, as the API shows them.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any, Optional

from sciga.schemas import ids
from sciga.transforms.fetch.arxiv_api import normalize_id
from sciga.transforms.metadata.classifications import acm_from_metadata, msc_from_metadata
from sciga.transforms.metadata.comment_venue import parse_comment_venue

_MONTHS = {
    m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)
}
_RFC_RE = re.compile(
    r"^(?:\w{3},\s*)?(\d{1,2})\s+(\w{3})\s+(\d{4})\s+(\d{1,2}):(\d{2})(?::(\d{2}))?\s*(?:GMT|UT|UTC|\+0000)?$"
)
_VERSION_RE = re.compile(r"^v(\d+)$")


class RecordError(ValueError):
    """A record that cannot become metadata; the message says which field and why."""


def clean(s: Any) -> Optional[str]:
    if s is None:
        return None
    if not isinstance(s, str):
        s = str(s)
    s = " ".join(s.split())
    return s or None


def rfc_to_iso(value: str) -> str:
    """``Mon, 2 Apr 2007 19:18:42 GMT`` -> ``2007-04-02T19:18:42Z`` (RecordError if not a date)."""
    v = (value or "").strip()
    parts = v.split()
    # Fast path for arXiv's own form, "Mon, 2 Apr 2007 19:18:42 GMT".
    if (
        len(parts) == 6
        and parts[5] == "GMT"
        and parts[2] in _MONTHS
        and len(parts[4]) == 8
        and parts[3].isdigit()
        and parts[1].isdigit()
        and len(parts[3]) == 4
        and parts[4][2] == ":"
        and parts[4][5] == ":"
    ):
        return f"{parts[3]}-{_MONTHS[parts[2]]:02d}-{int(parts[1]):02d}T{parts[4]}Z"
    m = _RFC_RE.match(v)
    if m and m.group(2) in _MONTHS:
        d, mon, y, hh, mm, ss = m.groups()
        return f"{y}-{_MONTHS[mon]:02d}-{int(d):02d}T{int(hh):02d}:{mm}:{ss or '00'}Z"
    try:
        dt = parsedate_to_datetime(v)
    except (TypeError, ValueError, IndexError):
        dt = None
    if dt is None:
        raise RecordError(f"version date {value!r} is not an RFC 2822 date")
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_day(value: str) -> str:
    """``2007-04-02`` (the ``arXiv`` format's created / updated) checked as a day."""
    v = (value or "").strip()
    try:
        datetime.strptime(v[:10], "%Y-%m-%d")
    except ValueError:
        raise RecordError(f"date {value!r} is not YYYY-MM-DD") from None
    return v[:10]


@functools.lru_cache(maxsize=65536)
def tex_to_unicode(s: str) -> str:
    """TeX accents and special letters in a name -> Unicode (``Erd\\H{o}s`` -> ``Erdős``).
    The accents arXiv's author fields use are rewritten by table (a few microseconds);
    anything else with a backslash goes to pylatexenc (about 0.5 ms). Names recur across
    records, hence the cache; text without TeX is returned as is."""
    if "\\" not in s and "{" not in s and "~" not in s:
        return s
    fast = _SYMBOL_ACCENT_RE.sub(_accent, s)
    fast = _LETTER_ACCENT_RE.sub(_accent, fast)
    fast = _SPECIAL_LETTER_RE.sub(lambda m: _SPECIAL_LETTERS[m.group(1)], fast)
    if "\\" not in fast:
        return clean(unicodedata.normalize("NFC", fast.replace("{", "").replace("}", "").replace("~", " "))) or s
    try:
        out = _latex2text().latex_to_text(s)
    except Exception:  # noqa: BLE001 - a name that pylatexenc cannot read stays as written
        return s
    return clean(out.replace("\u00a0", " ")) or s


_COMBINING = {
    "'": "\u0301",
    "`": "\u0300",
    "^": "\u0302",
    '"': "\u0308",
    "~": "\u0303",
    "=": "\u0304",
    ".": "\u0307",
    "u": "\u0306",
    "v": "\u030c",
    "H": "\u030b",
    "c": "\u0327",
    "k": "\u0328",
    "r": "\u030a",
    "d": "\u0323",
    "b": "\u0331",
}
_BASE = r"(?:\{\s*(\\[ij](?![A-Za-z])|[A-Za-z])\s*\}|(\\[ij])(?![A-Za-z])\s*|([A-Za-z]))"
_SYMBOL_ACCENT_RE = re.compile(r"\{?\\([`'^\"~=.])\s*" + _BASE + r"\}?")
_LETTER_ACCENT_RE = re.compile(
    r"\{?\\([uvHckrdb])(?:\s*\{\s*(\\[ij](?![A-Za-z])|[A-Za-z])\s*\}|\s+(\\[ij])(?![A-Za-z])\s*|\s+([A-Za-z]))\}?"
)
_SPECIAL_LETTERS = {
    "ss": "ß",
    "ae": "æ",
    "AE": "Æ",
    "oe": "œ",
    "OE": "Œ",
    "aa": "å",
    "AA": "Å",
    "o": "ø",
    "O": "Ø",
    "l": "ł",
    "L": "Ł",
    "i": "ı",
    "j": "ȷ",
}
_SPECIAL_LETTER_RE = re.compile(r"\\(ss|ae|AE|oe|OE|aa|AA|o|O|l|L|i|j)(?![A-Za-z])\s*")


def _accent(m: re.Match) -> str:
    base = m.group(2) or m.group(3) or m.group(4)
    if base.startswith("\\"):
        base = base[1]  # an accent on a dotless \i or \j is an accented i or j
    return unicodedata.normalize("NFC", base + _COMBINING[m.group(1)])


@functools.lru_cache(maxsize=1)
def _latex2text():
    from pylatexenc.latex2text import LatexNodes2Text

    return LatexNodes2Text(math_mode="verbatim", strict_latex_spaces=True)


# -- authors -----------------------------------------------------------------------------------
# Separators between authors (outside parentheses): commas, semicolons, "and", "&".
_PLAIN_SPLIT_RE = re.compile(r"\s*[,;&]\s*(?:and\s+)?|\s+and\s+", re.I)
_TOKEN_RE = re.compile(r"([(),;&]|\s+and\s+)", re.I)
_AND_TOKEN_RE = re.compile(r"\s+and\s+|&", re.I)
_NESTED_RE = re.compile(r"\([^()]*\(")
_GROUP_RE = re.compile(r"\(([^()]*)\)")
_TABLE_RE = re.compile(r"^\(\s*\d+\s*\)")
_TABLE_SPLIT_RE = re.compile(r"\(\s*(\d+)\s*\)")
_MARKS_RE = re.compile(r"^\s*\d+(?:\s*[,;]\s*\d+)*\s*$")


def _author(name: str, affiliations: list[str]) -> dict:
    """Name and affiliations from whitespace-normalized text (TeX letters -> Unicode)."""
    return {
        "name": tex_to_unicode(name.strip()),
        "affiliations": [tex_to_unicode(a) for a in (x.strip() for x in affiliations) if a],
    }


def split_author_string(s: str) -> list[dict]:
    """arXiv's author field -> [{name, affiliations}].

    ``A. One, B. Two and C. Three``; an affiliation in parentheses after a name
    (``B. Two (MIT)``); numbered affiliations (``A. One (1), B. Two (1, 2) ((1) MIT, (2)
    CMU)``). Commas, ``and`` and ``&`` separate authors only outside parentheses."""
    s = clean(s) or ""
    if not s:
        return []
    if "(" not in s:  # the common case: names and separators only
        return [_author(t, []) for t in _PLAIN_SPLIT_RE.split(s) if t.strip()]
    if not _NESTED_RE.search(s) and s.count("(") == s.count(")"):
        # One level of parentheses ("A. One (MIT), B. Two"): groups set aside, names split.
        found = _GROUP_RE.findall(s)
        if not any(_TABLE_RE.match(g) or _MARKS_RE.match(g) for g in found):
            out, k = [], 0
            for piece in _PLAIN_SPLIT_RE.split(_GROUP_RE.sub("\x00", s)):
                n = piece.count("\x00")
                text = piece.replace("\x00", "").strip()
                if text:
                    out.append(_author(text, found[k : k + n]))
                k += n
            return out
    entries: list[tuple[str, list[str]]] = []  # (name text, parenthesized groups after it)
    name: list[str] = []
    groups: list[str] = []
    buf: list[str] = []
    depth = 0

    def close_name():
        text = "".join(name).strip()
        if text or groups:
            entries.append((text, list(groups)))
        name.clear()
        groups.clear()

    for tok in _TOKEN_RE.split(s):
        if not tok:
            continue
        if depth == 0:
            if tok == "(":
                depth = 1
                buf.clear()
            elif tok == ")":
                continue  # a stray closing parenthesis
            elif tok in (",", ";") or _AND_TOKEN_RE.fullmatch(tok):
                close_name()
            else:
                name.append(tok)
        else:
            if tok == "(":
                depth += 1
            elif tok == ")":
                depth -= 1
                if depth == 0:
                    groups.append("".join(buf).strip())
                    continue
            buf.append(tok)
    if depth and buf:  # an unclosed "(": keep its text as an affiliation
        groups.append("".join(buf).strip())
    close_name()

    # A group that starts with "(1)" is a footnote table ("((1) MIT, (2) CMU)"), usually
    # after the last name; the names carry its numbers ("A. One (1, 2)").
    table: dict[str, str] = {}
    for _, grps in entries:
        for g in [g for g in grps if _TABLE_RE.match(g)]:
            grps.remove(g)
            parts = _TABLE_SPLIT_RE.split(g)
            for k in range(1, len(parts) - 1, 2):
                table[parts[k]] = parts[k + 1].strip(" ,;")
    out = []
    for text, grps in entries:
        if not text:
            continue
        affs: list[str] = []
        for g in grps:
            if _MARKS_RE.match(g):
                affs.extend(table.get(k, "") for k in re.findall(r"\d+", g))
            elif g:
                affs.append(g)
        out.append(_author(text, [a for a in affs if a]))
    return out


def authors_from_parsed(parsed: Any) -> Optional[list[dict]]:
    """The snapshot's ``authors_parsed`` ([[keyname, forenames, suffix, affiliation...]])."""
    if not isinstance(parsed, list) or not parsed:
        return None
    out = []
    for a in parsed:
        if not isinstance(a, list) or not a or not all(isinstance(x, str) for x in a):
            return None
        keyname, forenames, suffix = (list(a) + ["", ""])[:3]
        name = " ".join(x.strip() for x in (forenames, keyname, suffix) if x and x.strip())
        out.append(_author(name, list(a[3:])))
    return out


# -- the record ----------------------------------------------------------------------------------
def versions_of(versions: list) -> tuple[Optional[str], Optional[str], Optional[str]]:
    """[(label, RFC date)] -> (last version label, first version ISO, last version ISO)."""
    if not versions:
        raise RecordError("no versions")
    parsed = []
    for label, date in versions:
        m = _VERSION_RE.match((label or "").strip())
        if not m:
            raise RecordError(f"version label {label!r} is not v<N>")
        parsed.append((int(m.group(1)), rfc_to_iso(date)))
    parsed.sort()
    return f"v{parsed[-1][0]}", parsed[0][1], parsed[-1][1]


def paper_id_of(raw: Any) -> str:
    if not isinstance(raw, str):
        raise RecordError(f"id {raw!r} is not a string")
    raw = raw.strip()
    if ids.is_arxiv_id(raw):  # bulk records carry bare ids
        return raw
    pid, _ = normalize_id(raw)
    if pid is None:
        raise RecordError(f"id {raw!r} is not an arXiv id")
    return pid


def build_meta(
    *,
    pid: str,
    version: Optional[str],
    published: Optional[str],
    updated: Optional[str],
    title: Any,
    authors: list[dict],
    categories: Any,
    comment: Any,
    journal_ref: Any,
    doi: Any,
    license: Any,
    abstract: Any,
    acm_class: Any = None,
    msc_class: Any = None,
) -> dict:
    """The sidecar dict (``arxiv_api.meta_from_result``'s keys and shapes)."""
    if categories is None:
        cats: list[str] = []
    elif isinstance(categories, str):
        cats = categories.split()
    else:
        raise RecordError(f"categories {categories!r} is not a space-separated string")
    if not cats:
        raise RecordError("no categories")
    comment = clean(comment)
    conf = parse_comment_venue(comment)
    dois = []
    for d in (clean(doi) or "").split():
        if d not in dois:
            dois.append(d)
    return {
        "id": pid,
        "version": version,
        "title": clean(title),
        "authors": authors,
        "published": published,
        "updated": updated,
        "categories": cats,
        "primary_category": cats[0],
        "comment": comment,
        "journal_ref": clean(journal_ref),
        "dois": dois,
        "license": clean(license),
        "abstract": clean(abstract),
        "acm_classes": acm_from_metadata(clean(acm_class)),
        "msc_classes": msc_from_metadata(clean(msc_class)),
        "conference": {"venue": conf.venue, "year": conf.year, "track": conf.track} if conf else None,
        "abs_url": f"https://arxiv.org/abs/{pid}{version or ''}",
    }


def meta_from_snapshot(obj: Any) -> dict:
    """One parsed snapshot line -> metadata (RecordError names the bad field)."""
    if not isinstance(obj, dict):
        raise RecordError("the line is not a JSON object")
    pid = paper_id_of(obj.get("id"))
    versions = obj.get("versions")
    if not isinstance(versions, list) or not all(isinstance(v, dict) for v in versions):
        raise RecordError("versions is not a list of {version, created}")
    version, published, updated = versions_of([(v.get("version"), v.get("created")) for v in versions])
    authors = authors_from_parsed(obj.get("authors_parsed"))
    if authors is None:
        raw = obj.get("authors")
        if raw is not None and not isinstance(raw, str):
            raise RecordError("authors is not a string")
        authors = split_author_string(raw or "")
    return build_meta(
        pid=pid,
        version=version,
        published=published,
        updated=updated,
        title=obj.get("title"),
        authors=authors,
        categories=obj.get("categories"),
        comment=obj.get("comments"),
        journal_ref=obj.get("journal-ref"),
        doi=obj.get("doi"),
        license=obj.get("license"),
        abstract=obj.get("abstract"),
        acm_class=obj.get("acm-class"),
        msc_class=obj.get("msc-class"),
    )


def meta_from_arxiv_raw(fields: dict) -> dict:
    """OAI-PMH ``arXivRaw`` fields (element local name -> text; ``versions`` -> [(label,
    date)]) -> metadata."""
    pid = paper_id_of(fields.get("id"))
    version, published, updated = versions_of(fields.get("versions") or [])
    return build_meta(
        pid=pid,
        version=version,
        published=published,
        updated=updated,
        title=fields.get("title"),
        authors=split_author_string(fields.get("authors") or ""),
        categories=fields.get("categories"),
        comment=fields.get("comments"),
        journal_ref=fields.get("journal-ref"),
        doi=fields.get("doi"),
        license=fields.get("license"),
        abstract=fields.get("abstract"),
        acm_class=fields.get("acm-class"),
        msc_class=fields.get("msc-class"),
    )


def meta_from_arxiv_format(fields: dict) -> dict:
    """OAI-PMH ``arXiv`` fields (``authors`` -> [(keyname, forenames, suffix,
    [affiliations])]) -> metadata. This format has days, not versions: ``published`` is the
    ``created`` day, ``updated`` the ``updated`` day (or ``created``), ``version`` unknown."""
    pid = paper_id_of(fields.get("id"))
    created = iso_day(fields.get("created") or "")
    updated = iso_day(fields["updated"]) if fields.get("updated") else created
    authors = []
    for keyname, forenames, suffix, affs in fields.get("authors") or []:
        name = " ".join(x.strip() for x in (forenames, keyname, suffix) if x and x.strip())
        authors.append(_author(name, affs))
    return build_meta(
        pid=pid,
        version=None,
        published=created,
        updated=updated,
        title=fields.get("title"),
        authors=authors,
        categories=fields.get("categories"),
        comment=fields.get("comments"),
        journal_ref=fields.get("journal-ref"),
        doi=fields.get("doi"),
        license=fields.get("license"),
        abstract=fields.get("abstract"),
        acm_class=fields.get("acm-class"),
        msc_class=fields.get("msc-class"),
    )


def first_version_day(meta: dict) -> Optional[str]:
    p = meta.get("published")
    return p[:10] if isinstance(p, str) and p else None
