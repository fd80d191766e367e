"""``parse_latexml_html(html, meta) -> Paper``: the pure core of the build.

Knows nothing of Beam, files or HTTP. Bytes in, one Paper out, or a ParseError whose
message says what was wrong with the page.
"""

from __future__ import annotations

import hashlib
from typing import Optional

from lxml import etree

from sciga.schemas import ids
from sciga.schemas.records import Conference, Paper, PaperMeta, Provenance, Subjects
from sciga.schemas.version import BUILDER_VERSION, SCHEMA_VERSION
from sciga.transforms.parse import front_matter, row_bounds
from sciga.transforms.parse.anchors import caption_ref_spans, ref_spans
from sciga.transforms.parse.decode import DEFAULT_MAX_BYTES, decode_page
from sciga.transforms.parse.errors import ParseError
from sciga.transforms.parse.figures import FloatContext
from sciga.transforms.parse.math_bodies import kept_every_formula, without_math_bodies
from sciga.transforms.parse.sections import DocumentWalker
from sciga.transforms.parse.text import css_classes

_PARSER = None


def _parser():
    global _PARSER
    if _PARSER is None:
        # huge_tree: real pages reach 50 MB and deep MathML; comments are not needed
        # (the generator stamp is read from the text). collect_ids=False: libxml2 keeps no
        # table of the page's ids, which nothing here looks up (LaTeXML gives an id to most
        # elements); parsing and freeing a 440 KB page took 7.2 + 3.6 ms with it, 5.9 + 2.8 without.
        _PARSER = etree.HTMLParser(
            encoding="utf-8",
            huge_tree=True,
            remove_comments=True,
            remove_pis=True,
            no_network=True,
            collect_ids=False,
        )
    return _PARSER


def _tree(utf8: bytes, input_uri: str):
    """The page's tree, built without the bodies of its formulas where that gives the same
    tree less those bodies (``math_bodies``), else from the whole page."""
    cut = without_math_bodies(utf8)
    if cut is not utf8:
        try:
            root = etree.fromstring(cut, _parser())
        except (etree.ParserError, ValueError):
            root = None
        if root is not None and kept_every_formula(root, cut):
            return root
        del root
    try:
        root = etree.fromstring(utf8, _parser())
    except (etree.ParserError, ValueError) as e:
        raise ParseError("unparseable", f"{input_uri} could not be parsed as HTML ({e}); refetch it.") from None
    if root is None:
        raise ParseError("unparseable", f"{input_uri} holds no HTML elements; refetch it.")
    return root


def first_descendant(root, tag: str):
    """``root.find(".//" + tag)``: the first ``tag`` below ``root`` in document order, found
    child by child. lxml's iterators look one match ahead, so a plain ``find`` of the page's
    only <title> walks the whole tree after finding it in <head> (0.4 ms for 15,000
    elements, more than rendering a paragraph); child by child, that look-ahead stays
    inside the child that holds the match."""
    for child in root:
        if not isinstance(child.tag, str):  # a comment or processing instruction
            continue
        if child.tag == tag:
            return child
        found = child.find(".//" + tag)
        if found is not None:
            return found
    return None


def _document_root(root):
    """``article.ltx_document`` (bare article or inside ``div.ltx_page_main``)."""
    fallback = None
    for el in root.iter("article", "div", "body", "main"):
        c = el.get("class") or ""
        if "ltx_document" in c.split():
            return el
        if fallback is None and ("ltx_page_content" in c or "ltx_page_main" in c):
            fallback = el
    if fallback is not None:
        return fallback
    body = root.find("body")
    return body if body is not None else root


def _identity(
    meta: PaperMeta,
    ident: front_matter.PageIdentity,
    fallback_id: Optional[str],
    fallback_id_source: str,
    input_uri: str,
) -> tuple[str, Optional[str], str]:
    """(paper id, version, where the id came from): the metadata's id wins over the page's, the
    page's over ``fallback_id``; ParseError when none names the paper."""
    paper_id: Optional[str]
    if meta.id:
        paper_id, v = ids.split_version(meta.id)
        version, id_source = meta.version or v or ident.version, "metadata"
    elif ident.paper_id:
        paper_id, version, id_source = ident.paper_id, ident.version, "page"
    else:
        paper_id, version, id_source = fallback_id, None, fallback_id_source
    if not paper_id:
        raise ParseError(
            "no_paper_id",
            f"{input_uri} does not say which arXiv paper it is (no canonical URL, <base href> or id in the file name); "
            "name the file <arxiv_id>.html or pass metadata.",
        )
    if fallback_id_source == "filename" and fallback_id and id_source != "filename" and paper_id != fallback_id:
        # A page (or sidecar) that names another paper than its file: never let it take that
        # paper's place quietly (the genuine page may be in the same build, or not).
        said_by = "metadata sidecar" if id_source == "metadata" else "page (its canonical URL, <base href> or title)"
        raise ParseError(
            "id_mismatch",
            f"{input_uri} is named for paper {fallback_id}, but its {said_by} says it is {paper_id}; it was not "
            f"built, so that it cannot stand in for {paper_id}: rename the file or fix the {said_by.split(' (')[0]}.",
            paper_id=fallback_id,
        )
    return paper_id, version, id_source


def _link_references(walker: DocumentWalker, floats: FloatContext, paragraphs: list, paper_id: str) -> None:
    """Resolve the anchors of paragraphs, section titles and captions into reference spans to the
    figures and tables they point at."""
    numbers = {f.id: f.number for f in floats.figures}
    numbers.update({t.id: t.number for t in floats.tables})
    for para, anchors in paragraphs:
        if anchors:
            para.ref_spans = ref_spans(para.text, anchors, floats.by_html_id, numbers, paper_id)
    for sec, anchors in walker.title_anchors():
        sec.title_ref_spans = ref_spans(sec.title, anchors, floats.by_html_id, numbers, paper_id)
    for record, anchors in floats.caption_anchors:
        record.caption_ref_spans = caption_ref_spans(record, anchors, floats.by_html_id, numbers, paper_id)


def _base_url(ident: front_matter.PageIdentity, meta: PaperMeta) -> Optional[str]:
    """What relative image paths resolve against: the page's own (<base href>, canonical
    link, arXiv's watermark), else the URL the page was fetched from (oxide pages name
    neither: ``2410.00260v2/fig.png`` under ``https://arxiv.org/html/2410.00260v2``)."""
    if ident.base_url:
        return ident.base_url
    if meta.url and meta.url.lower().startswith(("http://", "https://")):
        return meta.url
    return None


_ERROR_XPATH = etree.XPath("count(.//*[contains(concat(' ', normalize-space(@class), ' '), ' ltx_ERROR ')])")
# A failed conversion's article holds no more than this much text besides its errors.
FAILED_CONVERSION_MAX_CHARS = 200


def latexml_errors(doc, utf8: bytes) -> int:
    """``ltx_ERROR`` elements in the article: what LaTeXML could not convert (undefined
    macros, unknown environments). Outside formulas: the tree is built without their MathML
    (``math_bodies``), where LaTeXML marks an undefined macro as ``merror``. The page's bytes
    are searched first: most pages have none."""
    if b"ltx_ERROR" not in utf8:
        return 0
    return int(_ERROR_XPATH(doc))


def _check_conversion(doc, sections, paragraphs, floats, abstract, errors, input_uri, paper_id) -> None:
    """A page whose conversion failed is a dead letter, not a paper: arXiv publishes such
    pages ("Untitled Document", no heading or abstract, the article one paragraph of
    ``ltx_ERROR`` undefined macros). A page with real content and a few errors stays a paper
    (its count is in ``provenance.latexml_errors``)."""
    if abstract or floats.figures or floats.tables or any(sec.title for sec in sections):
        return
    if any("ltx_title_document" in css_classes(el) for el in doc.iter("h1", "h2", "div", "p")):
        return
    chars = sum(len(para.text) for para, _ in paragraphs)
    if chars > FAILED_CONVERSION_MAX_CHARS:
        return
    raise ParseError(
        "failed_conversion",
        f"{input_uri} is a failed LaTeXML conversion: no title, heading or abstract, only {errors} LaTeXML "
        f"error{'s' if errors != 1 else ''} (ltx_ERROR: undefined macros) and {chars} characters of text; "
        "build the paper from its TeX source instead (--html-from auto).",
        paper_id,
    )


def parse_latexml_html(
    html: bytes,
    meta: Optional[PaperMeta] = None,
    *,
    input_uri: str = "<bytes>",
    fallback_id: Optional[str] = None,
    fallback_id_source: str = "filename",
    source: Optional[str] = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    content_sha256: Optional[str] = None,
) -> Paper:
    """Parse one LaTeXML page. ``meta`` (arXiv API, sidecar) wins over what the page says
    about identity and bibliographic fields; the page gives the text and the figures.
    ``fallback_id`` (e.g. from the file name) is used when neither names the paper.
    ``content_sha256``: the SHA-256 of ``html`` where the caller has it already."""
    meta = meta or PaperMeta()
    utf8, decode_errors = decode_page(html, input_uri, max_bytes)
    row_bounds.check_page_size(utf8, input_uri)  # before a tree of millions of elements is built
    generator, gen_version = front_matter.generator_of(utf8)
    root = _tree(utf8, input_uri)
    title_el = first_descendant(root, "title")
    html_title = title_el.text if title_el is not None else None
    ident = front_matter.with_watermark(front_matter.page_identity(root, html_title), utf8)

    paper_id, version, id_source = _identity(meta, ident, fallback_id, fallback_id_source, input_uri)
    doc = _document_root(root)
    if "ltx_document" not in css_classes(doc) and not doc.xpath(".//*[starts-with(@class, 'ltx_')]"):
        raise ParseError(
            "not_latexml", f"{input_uri} is HTML but not LaTeXML output; only ar5iv / arXiv HTML pages are supported."
        )

    floats = FloatContext(paper_id=paper_id, base_url=_base_url(ident, meta))
    walker = DocumentWalker(paper_id, floats)
    try:
        walker.walk(doc, None)
    except RecursionError:
        raise ParseError(
            "too_deep", f"{input_uri} nests elements too deeply to be a real paper page; check the file."
        ) from None
    sections, paragraphs = walker.finish()
    row_bounds.check_figure_rows(len(floats.figures) + sum(len(f.subfigures) for f in floats.figures), input_uri)

    _link_references(walker, floats, paragraphs, paper_id)

    title = front_matter.document_title(doc, html_title)
    abstract = front_matter.abstract_of(doc)
    errors = latexml_errors(doc, utf8)
    if errors:
        _check_conversion(doc, sections, paragraphs, floats, abstract, errors, input_uri, paper_id)
    authors = meta.authors or front_matter.authors_of(doc)
    if not title and not meta.title and not sections and not floats.figures:
        raise ParseError(
            "empty_document",
            f"{input_uri} is a LaTeXML page with no title, text or figures; the conversion probably failed upstream.",
        )
    provenance = Provenance(
        source=source or meta.source or ident.source,
        url=meta.url or ident.page_url,
        input_uri=input_uri,
        content_sha256=content_sha256 or hashlib.sha256(html).hexdigest(),
        generator=generator,
        generator_version=gen_version,
        builder_version=BUILDER_VERSION,
        schema_version=SCHEMA_VERSION,
        decode_errors=decode_errors,
        id_source=id_source,
        latexml_errors=errors,
    )
    return Paper(
        id=paper_id,
        version=version,
        title=meta.title or title,
        abstract=abstract or (meta.abstract or ""),
        authors=authors,
        published=meta.published,
        updated=meta.updated,
        subjects=Subjects(arxiv=list(meta.categories), acm=list(meta.acm_classes), msc=list(meta.msc_classes)),
        primary_category=meta.primary_category or (meta.categories[0] if meta.categories else None),
        comment=meta.comment,
        journal_ref=meta.journal_ref,
        conference=meta.conference or Conference(),
        dois=list(meta.dois),
        license=meta.license,
        sections=sections,
        figures=floats.figures,
        tables=floats.tables,
        teaser=[f.id for f in floats.figures if f.is_teaser],
        provenance=provenance,
        figure_labels=dict(meta.figure_labels or {}),
    )
