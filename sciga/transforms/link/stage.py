"""Beam's side of the linking stage (the step itself: ``step.py``)."""

from __future__ import annotations

import apache_beam as beam

from sciga.transforms.common.dead_letter import DEAD_LETTER_TAG
from sciga.transforms.common.stage_fn import StepDoFn
from sciga.transforms.link.options import LinkOptions
from sciga.transforms.link.step import LinkStep


class LinkPaper(StepDoFn):
    """``LinkStep`` as a DoFn."""

    def __init__(self, options: LinkOptions = LinkOptions()):
        super().__init__(LinkStep(options))


class LinkPapers(beam.PTransform):
    """PCollection[PaperWork] -> {``papers``, ``dead_letter``}."""

    def __init__(self, options: LinkOptions = LinkOptions()):
        super().__init__()
        self.options = options

    def expand(self, works):
        return works | "LinkPaper" >> beam.ParDo(LinkPaper(self.options)).with_outputs(DEAD_LETTER_TAG, main="papers")
