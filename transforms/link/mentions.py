"""Paper -> rows of the ``mentions`` config from the ref spans on its paragraphs."""
from __future__ import annotations

from sciga.schemas.ids import FIGURE_ID_RE
from sciga.schemas.records import MentionRow, Paper


def mention_rows(paper: Paper) -> list[MentionRow]:
    rows: list[MentionRow] = []
    for sec in paper.sections:
        for pi, para in enumerate(sec.paragraphs):
            for span in para.ref_spans:
                if not FIGURE_ID_RE.match(span.ref_id):
                    continue  # tables are ref spans too, but not figure mentions
                rows.append(
                    MentionRow(
                        paper_id=paper.id,
                        figure_id=span.ref_id,
                        section_id=sec.id,
                        paragraph_index=pi,
                        char_start=span.start,
                        char_end=span.end,
                        surface=span.text,
                        resolution="anchor",
                    )
                )
    return rows
