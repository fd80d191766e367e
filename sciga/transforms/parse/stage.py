"""Beam's side of the parse stage (the step itself: ``step.py``)."""

from __future__ import annotations

import apache_beam as beam

from sciga.transforms.common.dead_letter import DEAD_LETTER_TAG
from sciga.transforms.common.stage_fn import StepDoFn
from sciga.transforms.parse.options import ParseOptions
from sciga.transforms.parse.step import ParseStep


class ParsePage(StepDoFn):
    """``ParseStep`` as a DoFn."""

    def __init__(self, options: ParseOptions = ParseOptions(), fingerprint: str = ""):
        super().__init__(ParseStep(options, fingerprint))


class ParsePapers(beam.PTransform):
    """PCollection[PlannedInput] -> {``papers``: PaperWork, ``dead_letter``: PaperWork}."""

    def __init__(self, options: ParseOptions = ParseOptions(), fingerprint: str = ""):
        super().__init__()
        self.options = options
        self.fingerprint = fingerprint

    def expand(self, planned):
        return planned | "ParsePage" >> beam.ParDo(ParsePage(self.options, self.fingerprint)).with_outputs(
            DEAD_LETTER_TAG, main="papers"
        )
