"""Shared helpers of the linking tests: where the pages are, parsed+linked papers
(cached per test session), and the mention facts verified by reading the HTML."""

from __future__ import annotations

import functools
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from lxml import etree

from sciga.schemas.records import PaperMeta
from sciga.transforms.link.link_paper import link_paper
from sciga.transforms.link.mentions import mention_rows
from sciga.transforms.link.sentences import Sentencizer
from sciga.transforms.parse import parse_latexml_html

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples" / "html"


from conftest import CORPUS  # noqa: E402  (the one corpus lookup of the tests)

needs_corpus = pytest.mark.corpus

SAMPLE_STEMS = ("2511.99001", "2511.99002", "2511.99003", "q-bio0601999")
CORPUS_PAGES = {
    "2303.17564": "html/2303.17564.html",
    "submission-5393936": "html/submission-5393936.html",
    "a1709": "latexml/a1709.html",
    "dd3d": "latexml/dd3d.html",
    "distildoc": "latexml/distildoc.html",
    "eml": "latexml/eml.html",
    "honline": "latexml/honline.html",
    "muse": "latexml/muse.html",
}


# LaTeXML 0.8.7 pages made from TeX written for the tests (tests/pages/, SOURCES.md there):
# the hard cases of panels, other works' figures and multi-figure spans.
TEST_PAGES_DIR = ROOT / "tests" / "pages" / "html"
TEST_PAGES = ("panels", "foreign", "foreign_natbib", "multi", "layout_rows", "foreign_keys", "foreign_raw")


def page_path(key: str) -> Path:
    if key in CORPUS_PAGES:
        return CORPUS / CORPUS_PAGES[key]
    if key in TEST_PAGES:
        return TEST_PAGES_DIR / f"{key}.html"
    return SAMPLES / key / f"{key}.html"


@functools.cache
def sentencizer() -> Sentencizer:
    return Sentencizer()


def parse(key: str, meta: PaperMeta | None = None):
    path = page_path(key)
    return parse_latexml_html(path.read_bytes(), meta, input_uri=str(path), fallback_id=key)


@functools.cache
def linked(key: str):
    """The page parsed and linked with the default sentencizer (do not mutate)."""
    return link_paper(parse(key), sentencizer=sentencizer())


@functools.cache
def mentions(key: str):
    return mention_rows(linked(key))


# -- facts read off the HTML ---------------------------------------------------------------


def html_figure_anchors(key: str) -> list[tuple[str, str, str]]:
    """Every ``a.ltx_ref`` of the page that points at a figure or subfigure element, except
    those in the bibliography (LaTeXML links bib entries mentioning "Figure 6" to our
    Figure 6) and self references inside a figure. [(target id, anchor text, where)] with
    where = "caption" | "title" | "text"."""
    root = etree.parse(str(page_path(key)), etree.HTMLParser(huge_tree=True)).getroot()
    figure_ids = set()
    for el in root.iter("figure"):
        cls = (el.get("class") or "").split()
        if el.get("id") and ("ltx_figure" in cls or "ltx_teaserfigure" in cls or "ltx_figure_panel" in cls):
            figure_ids.add(el.get("id"))
    out = []
    for a in root.iter("a"):
        if "ltx_ref" not in (a.get("class") or "").split():
            continue
        href = a.get("href") or ""
        if "#" not in href:
            continue
        target = href.split("#", 1)[1]
        if urlsplit(href).path and key not in href:
            continue
        if target not in figure_ids:
            continue
        where, top_float, skip = "text", None, False
        p = a.getparent()
        while p is not None:
            cls = (p.get("class") or "").split()
            if "ltx_bibliography" in cls:
                skip = True
            if p.tag == "figcaption":
                where = "caption"
            if p.tag in ("h1", "h2", "h3", "h4", "h5", "h6") and where == "text":
                where = "title"
            if p.tag == "figure":
                top_float = p  # the outermost float holding the anchor
            p = p.getparent()
        if skip:
            continue
        if top_float is not None:
            tid = top_float.get("id") or ""
            if target == tid or target.startswith(tid + "."):
                continue  # a caption naming its own figure
        out.append((target, "".join(a.itertext()), where))
    return out


# Typed (unlinked) figure mentions, checked by reading each page: (paragraph html id,
# surface, figure id). A range or panel list gives one entry per figure/panel.
VERIFIED_TEXT_MENTIONS = {
    "2511.99001": [
        ("S1.p3", "Figs. 2", "2511.99001_F2"),
        ("S1.p3", "3", "2511.99001_F3"),
        ("S4.SS0.SSS0.Px1.p1", "Fig. 3b", "2511.99001_F3.2"),
        ("S4.SS0.SSS0.Px1.p1", "Fig. 3(a)", "2511.99001_F3.1"),
    ],
    "2511.99002": [],
    "2511.99003": [
        ("S1.p2", "Figures 1", "2511.99003_F1"),
        ("S1.p2", "2", "2511.99003_F2"),
        ("S2.SS2.p1", "Figure 2(a)", "2511.99003_F2.1"),  # panel of a figure without subfigure elements
        ("S3.SS0.SSS0.Px1.p1", "Fig. 4a-c", "2511.99003_F4.1"),
        ("S3.SS0.SSS0.Px1.p1", "Fig. 4a-c", "2511.99003_F4.2"),
        ("S3.SS0.SSS0.Px1.p1", "Fig. 4a-c", "2511.99003_F4.3"),
    ],
    "q-bio0601999": [],
    # The corpus pages link every figure mention; their typed look-alikes are not ours:
    # muse "(see Figure 4 in (Saharia et al., 2022))" names a figure of another paper,
    # eml's Figure 1 caption says "Supplementary Information, Fig. S1" (no Figure S1 here),
    # 2303.17564 "the Figure does not show" has no number.
    "2303.17564": [],
    "submission-5393936": [],
    "a1709": [],
    "dd3d": [],
    "distildoc": [],
    "eml": [],
    "honline": [],
    "muse": [],
}

# Every anchored mention of the sample, read off the HTML (EXPECTED.md): (paragraph html
# id, surface as a reader sees it, figure id).
VERIFIED_SAMPLE_ANCHORS = {
    "2511.99001": [
        ("S1.p1", "Figure 1", "2511.99001_F1"),
        ("S3.p1", "Figure 2", "2511.99001_F2"),
        ("S4.SS0.SSS0.Px1.p1", "Fig. 3", "2511.99001_F3"),
        # LaTeXML 0.8.7 prints Figure 3's panels as "2(a)".."2(c)"; the href decides.
        ("S4.SS0.SSS0.Px1.p1", "Figure 2(a)", "2511.99001_F3.1"),
        ("S4.SS0.SSS0.Px1.p1", "Figure 2(b)", "2511.99001_F3.2"),
        ("S4.SS0.SSS0.Px1.p1", "Figure 2(c)", "2511.99001_F3.3"),
    ],
    "2511.99002": [
        ("S1.p1", "Figure 1", "2511.99002_F1"),
        # Both \ref{fig:setup} and \ref{fig:times} print "3" and point at #S3.F3, the
        # element holding the captions "Figure 2." (LaTeXML repeats it; the parser keeps
        # one) and "Figure 3.": the printed number in the anchor picks our figure 3.
        ("S3.p1", "Figure 3", "2511.99002_F3"),
        ("S3.p1", "Figure 3", "2511.99002_F3"),
        ("S3.p2", "Figure 4", "2511.99002_F4"),
        ("S3.SS0.SSS0.Px1.p1", "Figure 5", "2511.99002_F5"),
        ("A1.p1", "Figure 6", "2511.99002_F6"),
    ],
    "2511.99003": [
        ("S1.p2", "Figure 1", "2511.99003_F1"),
        ("S1.p2", "Figure 1c", "2511.99003_F1.3"),
        ("S3.p1", "Figure 3", "2511.99003_F3"),
        ("S3.SS0.SSS0.Px1.p1", "Figure 4c", "2511.99003_F4.3"),
        ("S3.SS0.SSS0.Px2.p1", "Figure 5", "2511.99003_F5"),
    ],
    "q-bio0601999": [],
}


def paragraph_html_id(paper, row) -> str | None:
    for sec in paper.sections:
        if sec.id == row.section_id and row.paragraph_index is not None:
            return sec.paragraphs[row.paragraph_index].html_id
    return None
