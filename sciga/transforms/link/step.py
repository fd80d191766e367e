"""The linking step of a build: a thin per-paper step around ``link_paper.link_paper``."""

from __future__ import annotations

from typing import Optional

from sciga.schemas.build import PaperWork
from sciga.transforms.common.steps import PaperStep
from sciga.transforms.link.link_paper import MENTIONS_CAPPED, SENTENCE_CUT, STAGE, UNRESOLVED_LABEL, link_paper
from sciga.transforms.link.mentions import mention_rows
from sciga.transforms.link.options import LinkOptions
from sciga.transforms.link.sentences import NONE, Sentencizer


class LinkStep(PaperStep):
    """PaperWork -> the same work with the paper's ref spans, sentences and split
    subcaptions, and its mention rows; or dead-lettered (stage ``link``). The TeX label
    map travels on ``paper.figure_labels``."""

    STAGE = STAGE

    def __init__(self, options: LinkOptions = LinkOptions()):
        super().__init__()
        self.options = options
        self.sentencizer: Optional[Sentencizer] = None

    def run(self, work: PaperWork):
        if self.sentencizer is None and self.options.sentencizer != NONE:
            # Made once per worker, on its first paper rather than in setup: a spaCy model
            # (--sentencizer en_core_sci_sm) is loaded when made, ~2 s a process, which an
            # incremental build that reuses every paper (and so links none) would otherwise
            # pay for nothing. The default (pysbd) loads spaCy only if a text needs it.
            self.sentencizer = Sentencizer(self.options.sentencizer)
        paper = work.live_paper()
        link_paper(paper, sentencizer=self.sentencizer)
        work.mentions = mention_rows(paper)
        for why, n in sorted(paper.rejected_mentions.items()):
            if why == SENTENCE_CUT:
                work.count("sentences_cut", n)  # the manifest's stats say how many sentences were cut
                continue
            if why == UNRESOLVED_LABEL:
                work.count("unresolved_labels", n)  # "LABEL:fig1:direct": a \ref to a label that does not exist
                continue
            if why == MENTIONS_CAPPED:
                work.count(MENTIONS_CAPPED, n)  # beyond the per-paper cap (link_paper.MAX_MENTIONS)
                continue
            work.count(f"mentions_rejected_{why}", n)  # e.g. "Figure 1 of [12]": another work's figure
        return [work]
