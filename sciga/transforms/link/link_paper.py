"""``link_paper(paper) -> paper``: the paper-level linking stage (pure, no Beam).

In order:
1. subcaptions: compound figures whose panels have no caption get theirs split from the
   parent caption (``subcaptions.py``) - first, so typed mentions of panels ("Fig. 2(a)")
   can use the labels found there;
2. ref spans of every text that can mention a figure - body paragraphs, section titles,
   and the captions of figures, HTML subcaptions and tables (``spans.py``: anchors, then
   ``LABEL:`` leftovers, then typed mentions; self references in captions are dropped);
3. sentences: only texts with a figure reference are segmented (pysbd is ~16 KB/s), and
   each figure span gets the bounds of the sentence that holds it. Titles are one sentence.

Typed mentions of another work's figures that name one of this paper's figure numbers
("Figure 1 of [12]", "their Figure 4", "(see figure 3 of Kim et al., 2021)" inside a
citation, whose spans the parser kept) are not linked; their count is left on the paper
(``Paper.rejected_mentions["other_work"]``, transient) for the build's stats, and so is the
number of mentions whose sentence was cut to a bounded window (``SENTENCE_CUT``: a caption
of thousands of characters without a sentence boundary; see ``sentences.MAX_SENTENCE``).

A paper keeps at most ``MAX_MENTIONS`` figure mentions, the first in reading order (body
text, then captions): a page that references one figure 200,000 times is not a paper whose
every mention is worth a row (a page with more internal links than that is refused before
parsing, ``parse/row_bounds.py``). The mentions left out are counted (``MENTIONS_CAPPED``,
the manifest's ``stats.mentions_capped``), never segmented into sentences.

The mentions config is then a plain projection of the linked paper (``mentions.py``), so a
paper that a later stage dead-letters leaves no mention rows behind.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Optional

from sciga.schemas.ids import FIGURE_ID_RE
from sciga.schemas.records import Paper, RefSpan
from sciga.transforms.link.sentences import MAX_SENTENCE, Sentencizer, cut_around
from sciga.transforms.link.spans import link_text
from sciga.transforms.link.subcaptions import add_split_subcaptions
from sciga.transforms.link.targets import FigureIndex

SENTENCE_CUT = "sentence_cut"  # key of Paper.rejected_mentions: mentions whose sentence was cut
UNRESOLVED_LABEL = "unresolved_label"  # key of Paper.rejected_mentions: LABEL: leftovers no TeX label resolves
MENTIONS_CAPPED = "mentions_capped"  # key of Paper.rejected_mentions: mentions beyond MAX_MENTIONS
MAX_MENTIONS = 20_000  # figure mentions kept per paper (real papers: tens, a few hundred at most)
STAGE = "link"
_KEYWORD_HINT = re.compile(r"fig", re.I)


def _texts(paper: Paper):
    """(owner, text attribute, spans attribute, self id, kind, citation spans) of every
    linkable text."""
    for sec in paper.sections:
        for para in sec.paragraphs:
            yield para, "text", "ref_spans", None, "paragraph", para.citation_spans
        if sec.title:
            yield sec, "title", "title_ref_spans", None, "title", ()
    for fig in paper.figures:
        if fig.caption:
            yield fig, "caption", "caption_ref_spans", fig.id, "caption", fig.caption_citation_spans
        for sub in fig.subfigures:
            if sub.caption and sub.caption_source == "html":
                yield sub, "caption", "caption_ref_spans", sub.id, "caption", sub.caption_citation_spans
            elif sub.caption_ref_spans:
                sub.caption_ref_spans = []  # split subcaptions repeat the parent's text
    for tab in paper.tables:
        if tab.caption:
            yield tab, "caption", "caption_ref_spans", tab.id, "caption", tab.caption_citation_spans


def link_paper(
    paper: Paper, figure_labels: Optional[Mapping[str, str]] = None, sentencizer: Optional[Sentencizer] = None
) -> Paper:
    """Link every figure reference of ``paper`` in place and return it. ``figure_labels``
    (TeX ``\\label`` -> printed number) defaults to ``paper.figure_labels``; without a
    ``sentencizer`` no sentence bounds are set. Nothing here is expected to fail on a real
    page; if it does, the Beam wrapper turns the exception into a dead letter (stage link)."""
    labels = paper.figure_labels if figure_labels is None else figure_labels
    for fig in paper.figures:
        add_split_subcaptions(fig)
    index = FigureIndex(paper)
    rejected: dict[str, int] = {}
    to_segment: list[tuple[str, list[RefSpan]]] = []
    kept = 0  # figure mentions kept so far (MAX_MENTIONS)
    for owner, text_attr, spans_attr, self_id, kind, citations in _texts(paper):
        text = getattr(owner, text_attr)
        old = getattr(owner, spans_attr)
        if not old and not _KEYWORD_HINT.search(text) and "LABEL:" not in text:
            continue  # no anchor and no keyword: nothing to find (most paragraphs)
        spans = link_text(text, old, index, labels, self_id, stats=rejected, citations=citations)
        fig_spans = [s for s in spans if FIGURE_ID_RE.match(s.ref_id)]
        if kept + len(fig_spans) > MAX_MENTIONS:
            room = max(0, MAX_MENTIONS - kept)
            dropped = {id(s) for s in fig_spans[room:]}
            rejected[MENTIONS_CAPPED] = rejected.get(MENTIONS_CAPPED, 0) + len(dropped)
            spans = [s for s in spans if id(s) not in dropped]
            fig_spans = fig_spans[:room]
        kept += len(fig_spans)
        setattr(owner, spans_attr, spans)
        if not fig_spans:
            continue
        if kind == "title" or sentencizer is None:
            for s in fig_spans:
                s.sentence_start, s.sentence_end = (0, len(text)) if kind == "title" else (None, None)
                if kind == "title" and len(text) > MAX_SENTENCE:  # a title is one sentence; a giant one is cut
                    s.sentence_start, s.sentence_end = cut_around(text, 0, len(text), s.start, s.end)
                    rejected[SENTENCE_CUT] = rejected.get(SENTENCE_CUT, 0) + 1
            continue
        to_segment.append((text, fig_spans))
    paper.rejected_mentions = rejected  # recomputed on every run: linking twice counts once
    if sentencizer is not None and to_segment:
        bounds = sentencizer.sentences(
            [t for t, _ in to_segment], [[(s.start, s.end) for s in fs] for _, fs in to_segment]
        )
        if sentencizer.cut:  # sentences cut to a bounded window (no boundary for thousands of characters)
            rejected[SENTENCE_CUT] = rejected.get(SENTENCE_CUT, 0) + sentencizer.cut
        for (_, fig_spans), sents in zip(to_segment, bounds):
            for s, (a, b) in zip(fig_spans, sents):
                s.sentence_start, s.sentence_end = a, b
    return paper
