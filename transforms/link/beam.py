"""Beam wrapper of the linking stage: a thin DoFn around ``stage.link_paper``."""
from __future__ import annotations

import apache_beam as beam
from apache_beam.metrics import Metrics

from sciga.transforms.dead_letter import DEAD_LETTER_TAG, dead_letter_from
from sciga.transforms.link.sentences import NONE, PYSBD, Sentencizer
from sciga.transforms.link.stage import STAGE, link_paper


class LinkPaper(beam.DoFn):
    """Paper -> the same Paper with ref spans, sentences and split subcaptions, or one
    dead-letter row (stage ``link``). The TeX label map travels on ``paper.figure_labels``."""

    def __init__(self, sentencizer: str = PYSBD):
        self.sentencizer_name = sentencizer
        self.sentencizer = None
        self.linked = Metrics.counter("sciga", "papers_linked")
        self.failed = Metrics.counter("sciga", "papers_dead_lettered_link")

    def setup(self):
        # Loaded once per worker: a spaCy pipeline (and a scispaCy model when asked for).
        # "none": mentions get no sentence (null), e.g. for a quick look at a corpus.
        self.sentencizer = None if self.sentencizer_name == NONE else Sentencizer(self.sentencizer_name)

    def process(self, paper):
        try:
            linked = link_paper(paper, sentencizer=self.sentencizer)
        except Exception as e:  # noqa: BLE001 - every failure becomes a dead letter
            self.failed.inc()
            yield beam.pvalue.TaggedOutput(DEAD_LETTER_TAG, dead_letter_from(e, STAGE, paper.provenance.input_uri, paper.id))
            return
        self.linked.inc()
        yield linked
