"""Title, authors, abstract, page identity and generator of a LaTeXML page."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional
from urllib.parse import urljoin, urlsplit

from sciga.schemas import ids
from sciga.schemas.records import Author
from sciga.transforms.parse.text import RenderOptions, TextBuilder, css_classes, plain_text, render_into

_GENERATOR_RE = re.compile(
    r"Generated\s+(?:on\s+[^<>]*?\s+)?by\s+(LaTeXML(?:\s*oxide)?|latexml[-_ ]oxide)\s*\(?\s*(?:version\s*)?v?(\d+(?:\.\d+)*(?:-[A-Za-z0-9]+)?)?",
    re.I,
)
# ASCII digits: an id is compared after ``ids.normalize_id`` (a fullwidth or zero-width
# spelling of another paper's id is that paper's id, never a "different" one).
_ID_IN_URL_RE = re.compile(
    r"/(?:html|abs|pdf)/((?:[0-9]{4}\.[0-9]{4,5}|[a-z]+(?:-[a-z]+)*(?:\.[A-Z]{2})?/[0-9]{7})(?:v[0-9]+)?)"
)
_TITLE_ID_RE = re.compile(r"^\s*\[((?:[0-9]{4}\.[0-9]{4,5}|[a-z\-]+(?:\.[A-Z]{2})?/[0-9]{7})(?:v[0-9]+)?)\]\s*")
_EMAIL_RE = re.compile(r"\S+@\S+")


@dataclass
class PageIdentity:
    paper_id: Optional[str]
    version: Optional[str]
    page_url: Optional[str]  # where the page lives (canonical / og:url)
    base_url: Optional[str]  # what relative image paths resolve against
    source: str  # ar5iv | arxiv_html | local


def generator_of(text) -> tuple[Optional[str], Optional[str]]:
    """('LaTeXML' | 'LaTeXML oxide', version) from the generator stamp, or (None, None).
    The stamp sits in the head (and the footer): only the two ends are searched."""
    if isinstance(text, bytes):
        n = len(text)
        text = (text[:200_000] + b"\n" + text[max(200_000, n - 200_000) :]).decode("utf-8", "replace")
    m = _GENERATOR_RE.search(text, 0, 200_000) or _GENERATOR_RE.search(text, max(0, len(text) - 200_000))
    if not m:
        return None, None
    name = "LaTeXML oxide" if "oxide" in m.group(1).lower() else "LaTeXML"
    version = (m.group(2) or "").rstrip(".") or None
    return name, version


def page_identity(root, title_text: Optional[str]) -> PageIdentity:
    head_links: dict[str, str] = {}
    # These live in <head>: searching only there keeps the body (most of the page) untouched.
    head = root.find("head")
    for el in (head if head is not None else root).iter("link", "meta", "base"):
        tag = el.tag
        if tag == "link" and (el.get("rel") or "").lower() == "canonical":
            head_links.setdefault("canonical", el.get("href"))
        elif tag == "meta" and (el.get("property") or "").lower() == "og:url":
            head_links.setdefault("og", el.get("content"))
        elif tag == "base":
            head_links.setdefault("base", el.get("href"))
    page_url = head_links.get("canonical") or head_links.get("og")
    base_href = head_links.get("base")
    pid = ver = None
    for cand in (page_url, base_href):
        if cand:
            cand = ids.normalize_id(cand)
            m = _ID_IN_URL_RE.search(cand if cand.startswith("/") or "://" in cand else "/" + cand)
            if m:
                pid, ver = ids.split_version(m.group(1))
                break
    if pid is None and title_text:
        m = _TITLE_ID_RE.match(ids.normalize_id(title_text))
        if m:
            pid, ver = ids.split_version(m.group(1))
    host = urlsplit(page_url).netloc.lower() if page_url else ""
    if "ar5iv" in host:
        source = "ar5iv"
    elif "arxiv.org" in host:
        source = "arxiv_html"
    elif base_href and _ID_IN_URL_RE.search(base_href):
        source = "arxiv_html"
    else:
        source = "local"
    if page_url and base_href:
        base_url = urljoin(page_url, base_href)
    elif page_url:
        base_url = page_url
    elif base_href and urlsplit(base_href).scheme:
        base_url = base_href
    elif base_href and base_href.startswith("/html/"):
        base_url = urljoin("https://arxiv.org/", base_href)
    else:
        base_url = None
    return PageIdentity(pid, ver, page_url, base_url, source)


# arXiv's HTML pages (LaTeXML oxide) have no <base href> and no canonical link; the
# watermark of their info box names the paper: ``<div id="watermark-tr">arXiv:2410.00260v2 [cs.CL] ...``.
_WATERMARK_RE = re.compile(
    rb'id="watermark-tr"[^>]*>\s*arXiv:((?:\d{4}\.\d{4,5}|[a-z]+(?:-[a-z]+)*(?:\.[A-Z]{2})?/\d{7})(?:v\d+)?)\b'
)


def with_watermark(ident: PageIdentity, utf8: bytes) -> PageIdentity:
    """A page that names no paper in its head (arXiv's oxide pages): the id and version
    from arXiv's watermark, and arXiv's URL of that version as what images resolve against
    (``<id>vN/fig.png`` -> ``https://arxiv.org/html/<id>vN/fig.png``). Unchanged otherwise."""
    if ident.paper_id is not None or ident.base_url is not None:
        return ident
    at = utf8.find(b'id="watermark-tr"')  # a plain search first: pages without it cost one memchr scan
    m = _WATERMARK_RE.match(utf8, at) if at >= 0 else None
    if not m:
        return ident
    ref = m.group(1).decode("ascii")
    pid, ver = ids.split_version(ref)
    base = f"https://arxiv.org/html/{ref}" if ver else None
    return PageIdentity(pid, ver, ident.page_url, base, "arxiv_html" if ident.source == "local" else ident.source)


def document_title(doc, html_title: Optional[str]) -> str:
    for el in doc.iter("h1", "h2", "div", "p"):
        if "ltx_title_document" in css_classes(el):
            tb = TextBuilder()
            render_into(el, tb, RenderOptions(skip_floats=False, notes=False))
            return tb.text()
    if html_title:
        t = _TITLE_ID_RE.sub("", html_title)
        return re.sub(r"\s*[|\-–]\s*(?:arXiv|ar5iv)\s*$", "", t).strip()
    return ""


def _split_names(line: str) -> list[str]:
    parts = re.split(r"\s*(?:,|;|\band\b|&)\s*", line)
    out = []
    for p in parts:
        p = p.strip(" *†‡§¶∗0123456789")
        if p and not _EMAIL_RE.search(p) and re.search(r"[^\W\d_]", p) and len(p.split()) <= 6:
            out.append(p)
    return out


def _lines(el) -> list[str]:
    """Text of an element split at <br>, dropping superscript marks and notes."""
    lines, tb = [], TextBuilder()

    def walk(e):
        if e.text:
            tb.add(e.text)
        for c in e:
            if isinstance(c.tag, str):
                cls = css_classes(c)
                if c.tag == "br":
                    lines.append(tb.text())
                    tb.parts.clear()
                    tb.length, tb.space = 0, True
                elif c.tag in ("sup", "math") or "ltx_note" in cls or "ltx_author_notes" in cls or "ltx_contact" in cls:
                    pass
                else:
                    walk(c)
            if c.tail:
                tb.add(c.tail)

    walk(el)
    lines.append(tb.text())
    return [ln for ln in lines if ln]


def authors_of(doc) -> list[Author]:
    authors: list[Author] = []
    # Authors live in div.ltx_authors near the top: find it first instead of testing
    # every span of the document.
    block = next((el for el in doc.iter("div") if "ltx_authors" in (el.get("class") or "").split()), doc)
    for el in block.iter("span", "div"):
        cls = css_classes(el)
        if "ltx_creator" not in cls or "ltx_role_author" not in cls:
            continue
        person = None
        affs: list[str] = []
        for sub in el.iter():
            if not isinstance(sub.tag, str):
                continue
            scls = css_classes(sub)
            if person is None and "ltx_personname" in scls:
                person = sub
            elif "ltx_role_affiliation" in scls:
                t = plain_text(sub)
                if t:
                    affs.append(t)
        if person is None:
            continue
        lines = _lines(person)
        if not lines:
            continue
        names = _split_names(lines[0])
        extra = [ln for ln in lines[1:] if not _EMAIL_RE.search(ln)]
        if len(names) == 1:
            authors.append(Author(name=names[0], affiliations=affs or extra))
        else:
            authors.extend(Author(name=n, affiliations=list(affs)) for n in names)
    return authors


def abstract_of(doc) -> str:
    for el in doc.iter("div", "section", "blockquote"):
        if "ltx_abstract" in css_classes(el):
            tb = TextBuilder()
            opts = RenderOptions()
            if el.text:
                tb.add(el.text)
            for child in el:
                if isinstance(child.tag, str) and "ltx_title_abstract" not in css_classes(child):
                    render_into(child, tb, opts)
                    tb.boundary()
                if child.tail:
                    tb.add(child.tail)
            return tb.text()
    return ""
