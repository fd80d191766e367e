"""The grammar of typed figure mentions: "Figure 3", "Fig. 3b", "Figs. 4a-c", "Figures 1 and 2",
"Figure 2(a)", "Fig. S1", "Figures 1-3", "Fig. 3(a) and (b)", "Figure 2-(left)".

Pure text in, ``Expression`` records out; nothing here knows which figures a paper has
(``targets.FigureIndex`` maps printed numbers to ids).

An expression is a keyword followed by one or more items. Each item names one printed
figure number and optionally panels (letters, or a position such as "left"). Spans:

- the first item's span starts at the keyword ("Figs. 2"), later items cover only their own
  text ("3" in "Figs. 2 and 3"), so every item has its own surface and no two items of an
  expression share characters;
- a range expands into several items that all carry the range's span ("Figures 1-3" gives
  items 1, 2, 3 with the span "Figures 1-3"); a panel range stays one item with several
  panels ("Fig. 4a-c": number 4, panels a, b, c).

Guards against false positives, each from a real pattern:
- a list continues with a new number only after a plural keyword ("Figures 1 and 2"); after
  "Figure 3 and" a number is more often a count ("Figure 3 and 10 other examples");
- a bare panel letter must be attached to the number ("3b"; "Figure 3 a model" is an
  article) and list continuations must keep letters increasing ("Fig. 3a, b" but not
  "Fig. 3b, a simple ...");
- a figure of another work is not ours: a mention inside a citation element (a natbib
  note, "(see figure 3 of Kim et al., 2021)"), or followed by "of"/"in"/"from" plus a
  citation ("Fig. 2 of [12]", "Figure 4 in (Saharia et al., 2022)", "Fig. 3 in Smith et
  al. (2019)"), an author ("Smith's paper"), a citation key LaTeXML could not resolve
  ("figure 1 of smith2018", "Zhu2022CVPR", "lee_robust_2019", "Author:2019:title") or an
  unresolved reference (``LABEL:``, "??"), or preceded by "their"/"its" ("their Figure
  4"), is returned with ``foreign=True`` and never linked (the linking stage counts it as
  a rejected candidate). What follows the preposition decides, and this paper's own parts
  come first: "of the main manuscript", "in Section 3", "in the appendix", "in the
  supplement" keep the link;
- "Extended Data Fig. 2" / "Supplementary Figure 3" are marked ``qualified`` (their numbers
  are a separate sequence; the resolver only accepts them as S-numbers).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Optional

# Keyword: Figure(s), Fig(s)., FIG., FIGURE(S); lower case mid-sentence too.
KEYWORD = r"(?:[Ff]ig(?:ure)?s?\.?|FIG(?:URE)?S?\.?)"
_KEYWORD_RE = re.compile(r"(?<![A-Za-z0-9_\-./])(?P<kw>" + KEYWORD + r")(?=\s*(?:[A-Z]{1,2}\.?)?\d)")
# A printed figure number: 3, 12, S1, A.2, 3.2 (per-section numbering).
_NUMBER = r"(?:[A-Z]{1,2}\.?)?\d+(?:\.\d+)*"
_NUMBER_RE = re.compile(r"(?P<num>" + _NUMBER + r")(?![0-9]|\.\d|[A-Za-z]{2})")
_INT_RE = re.compile(r"\d+$")

_POS_WORD = r"(?:top|bottom|upper|lower|middle|center|centre|left|right)"
_POS = _POS_WORD + r"(?:[ \-]+" + _POS_WORD + r")?"
_POS_TAIL = r"(?:\s+(?:panels?|columns?|rows?|side|plots?|images?|parts?))?"
_DASHES = "-\u2013\u2014"

# Panels attached to a number.
_BARE_RE = re.compile(
    r"(?P<a>[a-zA-Z])(?![A-Za-z0-9])(?:\s*[" + _DASHES + r"]\s*(?:\d+)?(?P<b>[a-zA-Z])(?![A-Za-z0-9]))?"
)
_PAREN_LETTERS_RE = re.compile(
    r"[ ]?\(\s*(?P<inner>[a-zA-Z](?:\s*(?:,|[" + _DASHES + r"]|and|&)\s*[a-zA-Z])*)\s*\)"
    r"(?:\s*[" + _DASHES + r"]\s*\(\s*(?P<b>[a-zA-Z])\s*\))?"
)
_PAREN_POS_RE = re.compile(r"(?:[ ]?|-)\(\s*(?P<pos>" + _POS + r")" + _POS_TAIL + r"\s*\)", re.I)

# Between items of a list / a range.
_SEP_RE = re.compile(r"(?:\s*,\s*(?:(?:and|&|or)\s+)?|\s+(?:and|&|or|as\s+well\s+as)\s+)")
_RANGE_RE = re.compile(r"\s*(?:[" + _DASHES + r"]|\s+to\s+)\s*")
_PANEL_ONLY_BARE_RE = re.compile(r"(?P<a>[a-zA-Z])(?![A-Za-z0-9'])")

# Another work's figure is decided from what follows "of" / "in" / "from" after the mention.
# This paper's own parts keep the link: "of the main manuscript", "in Section 3", "in the
# appendix", "in the supplement", "of this paper", an unresolved label of one of its parts
# ("in LABEL:sec:appendix"). They are checked first, so no key-like word below can take them.
_PREP_RE = re.compile(r"\s+(?:in|of|from)(?=[\s\]])\s*")
_OWN_PART_RE = re.compile(
    r"(?:(?:this|our|the\s+(?:present|current))\s+(?:paper|work|article|study|manuscript|submission|letter|report|thesis)\b|"
    r"the\s+main\s+(?:paper|text|manuscript|body|article|submission|document)\b|"
    r"the\s+(?:supplement(?:ary|al)?|appendix|appendices|SI)\b(?:\s+(?:material|materials|information|document|file|section))?|"
    r"(?:Sections?|Sects?\.|Secs?\.|\u00a7|Appendix|Appendices|Apps?\.|Supplement(?:ary|al)?|Suppl?\.|Supp\.|SI|Chapters?|Chap\.|"
    r"Parts?)\s*(?:[A-Z]\b|\d|[IVX]+\b|(?:material|materials|information|section|note|text)\b)|"
    r"LABEL:(?:s|ss|sub|subsec|sec|sect|section|app|appx|appendix|ch|chap|chapter|part|fig|figure|tab|table|"
    r"eq|eqn|alg|lst|thm|lem|def)[:._\-][^\s,;()\[\]]*)",
    re.I,
)
# ...anything else that reads as a citation names another work: a bracket or parenthesis
# ("of [12]", "in (Saharia et al., 2022)"), the close of a natbib note printed raw when
# \citep is unknown ("[see figure 3 of][]key"), an author ("Smith et al.", "Smith and Jones
# (2019)", "Planck Collaboration III 2020", "Smith's paper"), "their paper", "another
# paper" (a link into another paper's HTML is not kept by the parser), an unresolved
# reference ("LABEL:smith18", "??"), or a citation key LaTeXML printed because it could not
# resolve it: a word with an underscore or a colon inside (Zotero / Better BibTeX
# "lee_robust_2019", "Author:2019:title", INSPIRE "ATLAS:2008xda", "cv:sr:kim16-vdsr") or
# with a year inside ("Zhu2022CVPR", "kimNeuralFieldsSurvey2021", "author-title-2019",
# "Wagner2009-CVPR"; not "mid-2020"). "Figure 3 in March 2020" is a date, not an author
# and a year.
_MONTH = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|December|"
    r"Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec|Spring|Summer|Fall|Autumn|Winter)\.?\s+"
    r"(?:\d{1,2}(?:st|nd|rd|th)?,?\s+)?(?:19|20)\d\d"
)
_CITATION_LIKE_RE = re.compile(
    r"(?:\]|\(|\[|[Rr]efs?\b|[Rr]eference|the\s+(?:original|cited)\b|their\b|"
    r"(?:an)?other\s+(?:paper|work|article|study)|a\s+(?:different|previous|prior)\s+(?:paper|work|study)|"
    r"(?!" + _MONTH + r")[A-Z][\w\-']+(?:\s+(?:and|&)\s+[A-Z][\w\-']+)?\s+(?:et\s+al|\(|\[|\d{4})|"
    r"(?!" + _MONTH + r")(?:[A-Z][\w\-']+\s+){1,3}(?:[IVXLC]+\s+)?\(?(?:19|20)\d\d\b|"
    r"[A-Z][\w\-]*['\u2019]s\s|\?\?|LABEL:|"
    r"[A-Za-z][\w\-]*[_:][\w\-:]*[A-Za-z0-9]|"
    r"(?!(?:mid|pre|post|early|late|end|circa)-)[A-Za-z][A-Za-z\-]*(?:19|20)\d\d[\w\-]*)"
)
# "their Figure 4", "its Fig. 2": a possessive right before the keyword.
_FOREIGN_BEFORE_RE = re.compile(r"(?<![A-Za-z])(?:their|its)\s+$", re.I)
_QUALIFIER_RE = re.compile(r"(?:Extended\s+Data|Supplementary|Supplemental|Suppl\.|Supp\.|SI)\s*$", re.I)

_MAX_RANGE = 20
_MAX_PANEL_RANGE = 12

MATH_TOKEN_RE = re.compile(r"<MATH>.*?</MATH>", re.S)
TAG_TOKEN_RE = re.compile(r"<TAG>.*?</TAG>", re.S)


@dataclass(frozen=True)
class Item:
    number: str  # printed number as written ("3", "S1", "3.2")
    panels: tuple[str, ...]  # "a", "b" (lower case) or positions ("left", "top left"); () = whole figure
    start: int
    end: int


@dataclass(frozen=True)
class Expression:
    start: int
    end: int
    keyword: str
    items: tuple[Item, ...]
    qualified: bool = False  # "Extended Data Fig. 2", "Supplementary Figure 3"
    foreign: bool = False  # names a figure of another work ("Figure 1 of [12]", "their Figure 4")


def mask_tokens(text: str, patterns=(MATH_TOKEN_RE, TAG_TOKEN_RE)) -> str:
    """Same-length copy of ``text`` with token blocks blanked out, so offsets stay valid
    and nothing inside ``<MATH>``/``<TAG>`` is read as a mention."""
    if "<" not in text:
        return text
    out = text
    for rx in patterns:
        out = rx.sub(lambda m: " " * len(m.group(0)), out)
    return out


def _norm_pos(pos: str) -> str:
    words = re.split(r"[ \-]+", pos.lower().strip())
    words = [{"upper": "top", "lower": "bottom", "centre": "middle", "center": "middle"}.get(w, w) for w in words]
    return " ".join(words)


def _letters_between(a: str, b: str) -> Optional[tuple[str, ...]]:
    a, b = a.lower(), b.lower()
    if ord(b) <= ord(a) or ord(b) - ord(a) >= _MAX_PANEL_RANGE:
        return None
    return tuple(chr(c) for c in range(ord(a), ord(b) + 1))


def _parse_letter_inner(inner: str) -> Optional[tuple[str, ...]]:
    """'a' | 'a,b' | 'a-c' | 'a and b' -> letters, increasing; None if not a panel list."""
    parts = re.split(r"\s*(,|[" + _DASHES + r"]|and|&)\s*", inner.strip())
    letters: list[str] = []
    i = 0
    while i < len(parts):
        tok = parts[i]
        if len(tok) != 1 or not tok.isalpha():
            return None
        if i >= 2 and parts[i - 1] in _DASHES and letters:
            rng = _letters_between(letters[-1], tok)
            if rng is None:
                return None
            letters.extend(rng[1:])
        else:
            if letters and ord(tok.lower()) <= ord(letters[-1]):
                return None
            letters.append(tok.lower())
        i += 2
    return tuple(letters) or None


def parse_panels(text: str, pos: int, after_letter: Optional[str] = None) -> tuple[tuple[str, ...], int]:
    """Panels written right after a figure number at ``pos``: "b", "a-c", "(b)", " (a,b)",
    "(a)-(c)", "-(left)", " (top right panel)". Returns (panels, end) or ((), pos)."""
    m = _BARE_RE.match(text, pos)
    if m:
        a, b = m.group("a"), m.group("b")
        if b:
            rng = _letters_between(a, b)
            if rng:
                return rng, m.end()
        return (a.lower(),), m.end("a")
    m = _PAREN_LETTERS_RE.match(text, pos)
    if m:
        letters = _parse_letter_inner(m.group("inner"))
        if letters:
            if m.group("b"):
                rng = _letters_between(letters[-1], m.group("b"))
                if rng:
                    return letters + rng[1:], m.end()
            return letters, text.index(")", m.end("inner")) + 1
    m = _PAREN_POS_RE.match(text, pos)
    if m:
        return (_norm_pos(m.group("pos")),), m.end()
    return (), pos


def continue_panels(text: str, pos: int, last: str) -> Optional[tuple[tuple[str, ...], int, int]]:
    """A panel-only list continuation after a separator: ", b", " and (c)". Letters must
    keep increasing after ``last``. Returns (panels, start, end) or None."""
    m = _SEP_RE.match(text, pos)
    if not m or len(last) != 1:
        return None
    start = m.end()
    b = _PANEL_ONLY_BARE_RE.match(text, start)
    if b and ord(b.group("a").lower()) > ord(last):
        # "3a, b" but not "3a, b2" or "3a and b)" mid-word; a following panel range "b-d" too
        panels, end = parse_panels(text, start)
        if panels and len(panels[0]) == 1:
            return panels, start, end
    if text.startswith("(", start):
        panels, end = parse_panels(text, start)
        if panels and len(panels[0]) == 1 and ord(panels[0]) > ord(last):
            return panels, start, end
    return None


def _int_range(a: str, b: str) -> Optional[list[str]]:
    if not (_INT_RE.match(a) and _INT_RE.match(b)):
        return None
    lo, hi = int(a), int(b)
    if hi <= lo or hi - lo > _MAX_RANGE:
        return None
    return [str(n) for n in range(lo, hi + 1)]


def _is_plural(keyword: str) -> bool:
    k = keyword.rstrip(".").lower()
    return k.endswith("s")


def _starts_citation(citations: Sequence[tuple[int, int]], text: str, pos: int) -> bool:
    """Does a citation element begin at ``pos`` (spaces aside)?"""
    return any(pos <= s and not text[pos:s].strip() for s, _ in citations)


def _names_other_work(text: str, pos: int, citations: Sequence[tuple[int, int]]) -> bool:
    """Does the text at ``pos``, right after "of" / "in" / "from", name another work?"""
    if _starts_citation(citations, text, pos):
        return True
    own = _OWN_PART_RE.match(text, pos)
    if own:
        # "the appendix of [12]" is another work's appendix
        m = _PREP_RE.match(text, own.end())
        return bool(m) and _names_other_work(text, m.end(), citations)
    return bool(_CITATION_LIKE_RE.match(text, pos))


def is_foreign(text: str, start: int, end: int, citations: Sequence[tuple[int, int]] = ()) -> bool:
    """Does the mention ``text[start:end]`` name a figure of another work? It does when it
    sits inside a citation element (``citations``: (start, end) spans in ``text``, e.g. a
    natbib note "see figure 3 of"), when "of" / "in" / "from" and a citation follow it, or
    when a possessive ("their", "its") precedes it."""
    if any(s <= start < e for s, e in citations):
        return True
    if _FOREIGN_BEFORE_RE.search(text, max(0, start - 8), start):
        return True
    m = _PREP_RE.match(text, end)
    return bool(m) and _names_other_work(text, m.end(), citations)


def find_expressions(
    text: str, foreign: bool = False, citations: Sequence[tuple[int, int]] = ()
) -> Iterator[Expression]:
    """Every typed figure-mention expression in ``text`` (tokens must be masked by the
    caller when the text holds <MATH>/<TAG> blocks: see ``mask_tokens``). Mentions of
    another work's figures are left out, or with ``foreign=True`` returned marked
    ``Expression.foreign`` (so a caller can count them). ``citations`` are the spans of
    the text's citation elements, where the parser kept them."""
    pos = 0
    n = len(text)
    while pos < n:
        m = _KEYWORD_RE.search(text, pos)
        if not m:
            return
        expr = _expression_at(text, m)
        if expr is None:
            pos = m.end()
            continue
        pos = expr.end
        if is_foreign(text, expr.start, expr.end, citations):
            if foreign:
                yield replace(expr, foreign=True)
            continue
        yield expr


def _expression_at(text: str, m: re.Match) -> Optional[Expression]:
    kw = m.group("kw")
    start = m.start("kw")
    p = m.end("kw")
    while p < len(text) and text[p].isspace():
        p += 1
    items: list[Item] = []
    item_start = start
    plural = _is_plural(kw)
    first = True
    while True:
        nm = _NUMBER_RE.match(text, p)
        if not nm:
            break
        number = nm.group("num")
        panels, end = parse_panels(text, nm.end())
        # A range of whole figures: "Figures 1-3", "Figs. 2 to 4".
        rm = _RANGE_RE.match(text, end) if not panels else None
        if rm:
            nm2 = _NUMBER_RE.match(text, rm.end())
            if nm2:
                nums = _int_range(number, nm2.group("num"))
                if nums:
                    end = nm2.end()
                    items.extend(Item(x, (), item_start, end) for x in nums)
                    p = end
                    first = False
                    cont = _next_number(text, p, plural)
                    if cont is None:
                        break
                    item_start, p = cont
                    continue
        # A panel range over a repeated number: "Fig. 4a-4c".
        if panels and len(panels) == 1 and len(panels[0]) == 1:
            rm2 = re.compile(r"\s*[" + _DASHES + r"]\s*" + re.escape(number) + r"(?P<b>[a-zA-Z])(?![A-Za-z0-9])").match(
                text, end
            )
            if rm2:
                rng = _letters_between(panels[0], rm2.group("b"))
                if rng:
                    panels, end = rng, rm2.end()
        items.append(Item(number, panels, item_start, end))
        p = end
        first = False
        # Panel-only continuations: "3a, b", "3(a) and (b)".
        while panels and len(panels[-1]) == 1:
            cont = continue_panels(text, p, panels[-1])
            if cont is None:
                break
            panels2, s2, e2 = cont
            items.append(Item(number, panels2, s2, e2))
            panels, p = panels2, e2
        cont = _next_number(text, p, plural)
        if cont is None:
            break
        item_start, p = cont
    if first or not items:
        return None
    qualified = bool(_QUALIFIER_RE.search(text, max(0, start - 24), start))
    return Expression(start=start, end=max(i.end for i in items), keyword=kw, items=tuple(items), qualified=qualified)


def _next_number(text: str, p: int, plural: bool) -> Optional[tuple[int, int]]:
    """After a plural keyword, a separator followed by another number continues the list."""
    if not plural:
        return None
    sm = _SEP_RE.match(text, p)
    if not sm:
        return None
    q = sm.end()
    if _NUMBER_RE.match(text, q) and not _KEYWORD_RE.match(text, q):
        return q, q
    return None


# -- helpers for anchors and label leftovers ---------------------------------------------------

_KEYWORD_BEFORE_RE = re.compile(r"(?<![A-Za-z0-9_\-])(?P<kw>" + KEYWORD + r"|[Ff]ig,|(?:Tables?|Tabs?\.?|TABLES?))\s*$")


def keyword_before(text: str, start: int) -> Optional[int]:
    """Start of the figure/table keyword typed right before ``start`` ("Figure~\\ref{}"
    renders as "Figure " + anchor "3"), or None."""
    m = _KEYWORD_BEFORE_RE.search(text, max(0, start - 12), start)
    return m.start("kw") if m else None


def parse_item(printed: str) -> Optional[Item]:
    """A printed reference such as "3", "3a", "2(b)", "S1" (a TeX label's number) -> Item."""
    s = printed.strip()
    m = _NUMBER_RE.match(s)
    if not m:
        return None
    panels, end = parse_panels(s, m.end())
    if s[end:].strip():
        return None
    return Item(m.group("num"), panels, 0, len(s))


LABEL_RE = re.compile(r"LABEL:(?P<label>[^\s,;()\[\]]+?)(?=[.,;:)\]]*(?:\s|$))")
