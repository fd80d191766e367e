"""The document walk: section tree, paragraphs and floats in one pass over the page.

Each direct child of a section that is not a heading, a float or a subsection is one
paragraph (an ``ltx_para``, a theorem, a list, a display equation), S2ORC-style. Text of a paper
written without sections goes to a synthetic section ``S0`` (LaTeXML's own prefix for "no
section"); in a sectioned paper, blocks before the first section are front matter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from sciga.schemas import ids
from sciga.schemas.records import Paragraph, Section
from sciga.transforms.parse.figures import FloatContext, add_float, float_kind, nearest_float
from sciga.transforms.parse.text import RenderOptions, TextBuilder, css_classes, plain_text, render_into

_SECTION_CLASSES = frozenset(
    {
        "ltx_section",
        "ltx_subsection",
        "ltx_subsubsection",
        "ltx_paragraph",
        "ltx_subparagraph",
        "ltx_appendix",
        "ltx_chapter",
        "ltx_part",
        "ltx_slide",
    }
)
_NOT_SECTIONS = frozenset({"ltx_bibliography", "ltx_index", "ltx_glossary", "ltx_TOC"})
# Front matter and page furniture: never body text.
_SKIP_BLOCKS = frozenset(
    {
        "ltx_authors",
        "ltx_abstract",
        "ltx_title_document",
        "ltx_dates",
        "ltx_keywords",
        "ltx_classification",
        "ltx_titlepage",
        "ltx_page_header",
        "ltx_page_footer",
        "ltx_page_navbar",
        "ltx_page_logo",
        "ltx_TOC",
        "ltx_bibliography",
        "ltx_index",
        "ltx_glossary",
        "ltx_pagination",
        "ltx_role_pagination",
    }
)
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})


def is_section(el, cls: tuple) -> bool:
    if not _NOT_SECTIONS.isdisjoint(cls):
        return False
    return el.tag == "section" or not _SECTION_CLASSES.isdisjoint(cls)


@dataclass
class _Pending:
    element: object
    section: Optional[Section]  # None: before the first section (the front matter's)
    paragraph: Paragraph
    anchors: list


@dataclass
class WalkResult:
    sections: list[Section] = field(default_factory=list)
    pending: list[_Pending] = field(default_factory=list)
    title_anchors: list = field(default_factory=list)  # (Section, anchors met in its title)


class DocumentWalker:
    def __init__(self, paper_id: str, floats: FloatContext):
        self.paper_id = paper_id
        self.floats = floats
        self.result = WalkResult()
        self.seen_section = False
        self._used_ids: set[str] = set()
        self._anon = 0
        self._front: Optional[Section] = None

    # -- sections -------------------------------------------------------------------
    def _new_section(self, el, parent: Optional[Section]) -> Section:
        html_id = el.get("id")
        local = ids.section_local_id(html_id) if html_id else None
        if not local or local in self._used_ids:
            self._anon += 1
            local = f"Sx{self._anon}" if not local else f"{local}.x{self._anon}"
            while local in self._used_ids:
                self._anon += 1
                local = f"Sx{self._anon}"
        self._used_ids.add(local)
        title, number = "", None
        anchors: list = []
        for child in el:
            if isinstance(child.tag, str) and child.tag in _HEADINGS:
                tb = TextBuilder()
                render_into(child, tb, RenderOptions(skip_floats=False, notes=False, anchors=anchors))
                title = tb.text()
                for sub in child.iter():
                    if isinstance(sub.tag, str) and "ltx_tag" in css_classes(sub):
                        number = plain_text(sub).rstrip(".:") or None
                        break
                break
        sec = Section(
            id=ids.section_id(self.paper_id, local),
            parent_id=parent.id if parent else None,
            level=(parent.level + 1) if parent else 1,
            number=number,
            title=title,
            body="",
            html_id=html_id,
        )
        self.result.sections.append(sec)
        if anchors:
            self.result.title_anchors.append((sec, anchors))
        return sec

    def _front_section(self) -> Section:
        if self._front is None:
            local = "S0"
            self._used_ids.add(local)
            self._front = Section(
                id=ids.section_id(self.paper_id, local),
                parent_id=None,
                level=1,
                number=None,
                title="",
                body="",
                html_id=None,
            )
            self.result.sections.insert(0, self._front)
        return self._front

    # -- walk -----------------------------------------------------------------------
    def walk(self, el, sec: Optional[Section]) -> None:
        for child in el:
            tag = child.tag
            if not isinstance(tag, str):
                continue
            kind = float_kind(child)
            if kind is not None:
                self._float(child, sec)
                continue
            cls = css_classes(child)
            if is_section(child, cls):
                self.seen_section = True
                self.walk(child, self._new_section(child, sec))
                continue
            if not _SKIP_BLOCKS.isdisjoint(cls) or tag in ("script", "style", "nav", "header", "footer"):
                continue
            if tag in _HEADINGS and sec is not None:
                continue  # the section's own title, read in _new_section
            figures = self._figures_unless_wrapper(child)
            if figures is None:
                self.walk(child, sec)
                continue
            if tag in _HEADINGS and "ltx_title" in " ".join(cls):
                continue  # stray titles outside sections (document title variants)
            self._paragraph(child, sec, figures)

    def _figures_unless_wrapper(self, el) -> Optional[list]:
        """None for a container of sections (page wrappers, divs around sections) rather than
        text; else the <figure> elements in ``el``, in document order. One pass over the
        block answers both: a paragraph was scanned once for a section and again for its
        figures."""
        figures = []
        for sub in el.iter("section", "figure"):
            if sub.tag == "section":
                return None
            figures.append(sub)
        return figures

    def _float(self, el, sec: Optional[Section]) -> None:
        n_before = len(self.floats.figures)
        add_float(el, self.floats, sec.id if sec else None, before_first_section=not self.seen_section)
        if sec is not None:
            sec.figure_ids.extend(f.id for f in self.floats.figures[n_before:])
        # Floats nested in a paragraph-like wrapper are found by _paragraph's scan.

    def _paragraph(self, el, sec: Optional[Section], figures: list) -> None:
        # Floats inside a paragraph block (LaTeXML leaves figures where \begin{figure} was).
        for sub in figures:
            if sub is not el and nearest_float(sub, el) is None:
                self._float(sub, sec)
        anchors: list = []
        citations: list = []
        tb = TextBuilder()
        render_into(el, tb, RenderOptions(anchors=anchors, citations=citations))
        text = tb.text()
        if not text:
            return
        para = Paragraph(text=text, html_id=el.get("id"), citation_spans=[(a, min(b, len(text))) for a, b in citations])
        self.result.pending.append(_Pending(el, sec, para, anchors))

    def title_anchors(self) -> list:
        """(Section, anchors) for every title that holds cross-references."""
        return self.result.title_anchors

    def finish(self) -> tuple[list[Section], list[tuple[Paragraph, list]]]:
        """Attach paragraphs to sections, dropping blocks a figure adopted (teaser strips).
        Returns the sections and each kept paragraph with the anchors met inside it."""
        kept = []
        has_sections = bool(self.result.sections)
        for item in self.result.pending:
            if item.element in self.floats.consumed:
                continue
            if item.section is None and has_sections:
                # Before the first section of a sectioned paper sit front-matter leftovers
                # (elsarticle affiliations, keywords, teaser strips), not body text.
                continue
            sec = item.section if item.section is not None else self._front_section()
            sec.paragraphs.append(item.paragraph)
            kept.append((item.paragraph, item.anchors))
        for sec in self.result.sections:
            sec.body = "\n\n".join(p.text for p in sec.paragraphs)
        return self.result.sections, kept
