"""LaTeXML element -> text with SciGA tokens, whitespace normalized on the fly.

Tokens (one space inside each tag, as SciGA writes them):
``<MATH> alttext </MATH>``, ``<NOTE> footnote text </NOTE>``, ``<TAG> Figure 2: </TAG>``.
MATH may sit inside NOTE; nothing else nests.

Normalizing while appending (instead of once at the end) keeps every character offset
valid the moment it is taken, so figure-reference anchors get exact spans in one pass.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

MATH_OPEN, MATH_CLOSE = "<MATH>", "</MATH>"
NOTE_OPEN, NOTE_CLOSE = "<NOTE>", "</NOTE>"
TAG_OPEN, TAG_CLOSE = "<TAG>", "</TAG>"

# Elements whose content is never text of the document.
_SKIP_TAGS = frozenset(
    {"script", "style", "head", "nav", "button", "noscript", "template", "svg", "img", "object", "iframe", "input"}
)
# Block-level elements: their edges are word boundaries.
_BLOCK_TAGS = frozenset(
    {
        "p",
        "div",
        "li",
        "ul",
        "ol",
        "td",
        "th",
        "tr",
        "table",
        "tbody",
        "thead",
        "tfoot",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "blockquote",
        "section",
        "figcaption",
        "dd",
        "dt",
        "dl",
        "br",
        "hr",
        "article",
        "pre",
        "caption",
        "header",
        "footer",
    }
)
_FLOAT_CLASSES = frozenset({"ltx_figure", "ltx_table", "ltx_float", "ltx_figure_panel", "ltx_teaserfigure"})
_NOTE_ROLES = ("ltx_role_footnote", "ltx_role_endnote", "ltx_role_thanks", "ltx_role_footnotetext")


class TextBuilder:
    """Accumulates normalized text: runs of whitespace become one space, none leading."""

    __slots__ = ("parts", "length", "space")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.space = True  # the last emitted char is a space (or nothing was emitted)

    def add(self, s: Optional[str]) -> None:
        if not s:
            return
        # str.split() is C-speed and splits on the same Unicode whitespace as \s.
        words = s.split()
        if not words:
            if not self.space:
                self.parts.append(" ")
                self.length += 1
                self.space = True
            return
        t = " ".join(words)
        if s[0].isspace() and not self.space:
            t = " " + t
        if s[-1].isspace():
            t += " "
        self.parts.append(t)
        self.length += len(t)
        self.space = t[-1] == " "

    def boundary(self) -> None:
        if not self.space:
            self.parts.append(" ")
            self.length += 1
            self.space = True

    def text(self) -> str:
        return "".join(self.parts).rstrip()


@dataclass
class Anchor:
    """A cross-reference link met while rendering (``a.ltx_ref``), with its text span."""

    href: str
    title: Optional[str]
    start: int
    end: int
    text: str = ""


@dataclass
class RenderOptions:
    skip_floats: bool = True  # body text: figures/tables are records of their own
    notes: bool = True  # footnotes as <NOTE>; False drops them (titles, author names)
    tags: bool = True  # ltx_tag as <TAG>; False keeps them as plain text
    math: bool = True  # math as <MATH>; False: alttext as plain text
    anchors: Optional[list] = field(default=None)  # collect Anchor objects when a list
    citations: Optional[list] = field(default=None)  # collect (start, end) of citation elements when a list


def math_alttext(el) -> str:
    alt = el.get("alttext")
    if alt is None:
        for ann in el.iter("annotation"):
            if (ann.get("encoding") or "").endswith("tex"):
                alt = "".join(ann.itertext())
                break
    if alt is None:
        alt = "".join(el.itertext())
    return " ".join(alt.split())


def css_classes(el) -> tuple:
    """An element's CSS classes (LaTeXML marks every construct with ``ltx_*`` classes)."""
    c = el.get("class")
    return tuple(c.split()) if c else ()


def plain_text(el) -> str:
    """Plain text of an element (no tokens), normalized."""
    tb = TextBuilder()
    _render_into(el, tb, RenderOptions(skip_floats=False, notes=False, tags=False, math=False), False, False, False)
    return tb.text()


def render(el, opts: Optional[RenderOptions] = None, tb: Optional[TextBuilder] = None) -> str:
    """Render one element's content (not its tail) into tokenized text."""
    own = tb is None
    tb = tb or TextBuilder()
    _render_children(el, tb, opts or RenderOptions(), False, False, False)
    return tb.text() if own else ""


def render_into(el, tb: TextBuilder, opts: RenderOptions) -> None:
    """Render one element itself (tag handling included, tail excluded) into ``tb``."""
    _render_into(el, tb, opts, False, False, False)


# Substrings of the class attribute that need a closer look; anything else renders as
# plain inline or block content (the prefilter runs on every element, so it is cheap).
_SPECIAL = re.compile(r"ltx_(?:note|tag|ERROR|figure|table|float|picture|bibliography|teaserfigure)").search


def _render_children(el, tb, opts, in_note, in_tag, in_ref):
    # .text and .tail make a new string on every read: each is read once.
    text = el.text
    if text:
        tb.add(text)
    for child in el:
        _render_into(child, tb, opts, in_note, in_tag, in_ref)
        tail = child.tail
        if tail:
            tb.add(tail)


def _render_into(el, tb, opts, in_note, in_tag, in_ref):
    tag = el.tag
    if not isinstance(tag, str):  # comments, processing instructions
        return
    if tag == "math":  # the HTML parser never namespaces tags
        alt = math_alttext(el)
        if opts.math and not in_tag:
            tb.add(f"{MATH_OPEN} {alt} {MATH_CLOSE}" if alt else f"{MATH_OPEN} {MATH_CLOSE}")
        else:
            tb.add(alt)
        return
    if tag in _SKIP_TAGS:
        return
    c = el.get("class")
    cls: tuple = tuple(c.split()) if c and _SPECIAL(c) else ()
    if cls:
        if "ltx_note" in cls:
            if not opts.notes or in_note or in_tag or not any(r in cls for r in _NOTE_ROLES):
                return
            content = None
            for sub in el.iter("span", "div"):
                sc = sub.get("class")
                if sc and "ltx_note_content" in sc.split():
                    content = sub
                    break
            tb.boundary()
            tb.add(NOTE_OPEN + " ")
            _render_children(content if content is not None else el, tb, opts, True, in_tag, in_ref)
            tb.boundary()
            tb.add(NOTE_CLOSE)
            return
        if "ltx_note_mark" in cls or "ltx_ERROR" in cls or "ltx_tag_note" in cls:
            return
        if "ltx_tag" in cls:
            if opts.tags and not in_tag and not in_ref:
                inner = TextBuilder()
                _render_children(el, inner, opts, in_note, True, in_ref)
                t = inner.text()
                if t:
                    tb.boundary()
                    tb.add(f"{TAG_OPEN} {t} {TAG_CLOSE} ")
                return
            _render_children(el, tb, opts, in_note, True, in_ref)
            tb.add(" ")
            return
        if opts.skip_floats and (tag == "figure" or not _FLOAT_CLASSES.isdisjoint(cls)):
            return
        if "ltx_picture" in cls or "ltx_bibliography" in cls:
            return
    elif tag == "figure" and opts.skip_floats:
        return
    if tag == "a" and opts.anchors is not None and not in_ref and c and "ltx_ref" in c.split():
        href = el.get("href") or ""
        start, end = _rendered_span(el, tb, opts, in_note, in_tag, True)
        if href and end > start:
            opts.anchors.append(Anchor(href=href, title=el.get("title"), start=start, end=end))
        return
    if tag == "cite" and opts.citations is not None:
        # A citation, resolved ("Smith et al., 2019", "[12]") or not (the raw key), with a
        # natbib note inside it ("see figure 3 of ..."): the linking stage needs its span.
        start, end = _rendered_span(el, tb, opts, in_note, in_tag, in_ref)
        if end > start:
            opts.citations.append((start, end))
        return
    block = tag in _BLOCK_TAGS
    if block:
        tb.boundary()
        if tag == "br":
            return
    # The children loop, inlined: this is the path nearly every element takes.
    add = tb.add
    text = el.text
    if text:
        add(text)
    for child in el:
        _render_into(child, tb, opts, in_note, in_tag, in_ref)
        tail = child.tail
        if tail:
            add(tail)
    if block:
        tb.boundary()


def _rendered_span(el, tb: TextBuilder, opts, in_note, in_tag, in_ref) -> tuple[int, int]:
    """Render ``el``'s content and return the offsets it took, without the separating
    space normalization may have put at either edge."""
    start = tb.length
    _render_children(el, tb, opts, in_note, in_tag, in_ref)
    end = tb.length
    if end > start:
        if _char_at(tb, start) == " ":
            start += 1
        if end > start and _char_at(tb, end - 1) == " ":
            end -= 1
    return start, end


def _char_at(tb: TextBuilder, pos: int) -> str:
    """Character at an absolute offset of the builder (walks parts from the end: the
    positions asked for are always near the end)."""
    end = tb.length
    for part in reversed(tb.parts):
        start = end - len(part)
        if start <= pos < end:
            return part[pos - start]
        end = start
    return ""
