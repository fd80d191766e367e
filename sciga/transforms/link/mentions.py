"""Paper -> rows of the ``mentions`` config: one row per figure ref span of a linked paper.

Texts that can mention a figure: body paragraphs (``context`` "paragraph", with section id
and paragraph index), section titles ("title") and the captions of other floats
("caption", ``context_id`` = the figure / subfigure / table whose caption it is). Offsets
index that text. A span naming several panels ("Fig. 4a-c") gives one row per panel
element, all with the same offsets; panels a figure has no element for are one row of the
figure with their names in ``panels``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional

from sciga.schemas.ids import FIGURE_ID_RE
from sciga.schemas.records import MentionRow, Paper, RefSpan


def _rows(
    paper: Paper,
    text: str,
    spans: list[RefSpan],
    section_id: Optional[str],
    paragraph_index: Optional[int],
    context: str,
    context_id: Optional[str],
) -> Iterator[MentionRow]:
    for span in spans:
        if not FIGURE_ID_RE.match(span.ref_id):
            continue  # tables are ref spans too, but not figure mentions
        sentence = None
        if span.sentence_start is not None and span.sentence_end is not None:
            sentence = text[span.sentence_start : span.sentence_end]
        yield MentionRow(
            paper_id=paper.id,
            figure_id=span.ref_id,
            section_id=section_id,
            paragraph_index=paragraph_index,
            char_start=span.start,
            char_end=span.end,
            surface=span.text,
            sentence=sentence,
            sentence_start=span.sentence_start,
            resolution=span.resolution or "anchor",
            context=context,
            context_id=context_id,
            panels=list(span.panels or []),
        )


def mention_rows(paper: Paper) -> list[MentionRow]:
    rows: list[MentionRow] = []
    for sec in paper.sections:
        rows.extend(_rows(paper, sec.title, sec.title_ref_spans, sec.id, None, "title", None))
        for pi, para in enumerate(sec.paragraphs):
            rows.extend(_rows(paper, para.text, para.ref_spans, sec.id, pi, "paragraph", None))
    for fig in paper.figures:
        rows.extend(_rows(paper, fig.caption, fig.caption_ref_spans, fig.section_id, None, "caption", fig.id))
        for sub in fig.subfigures:
            rows.extend(_rows(paper, sub.caption, sub.caption_ref_spans, fig.section_id, None, "caption", sub.id))
    for tab in paper.tables:
        rows.extend(_rows(paper, tab.caption, tab.caption_ref_spans, tab.section_id, None, "caption", tab.id))
    return rows
