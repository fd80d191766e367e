"""Beam's side of recovering figures from the TeX source (the step itself: ``step.py``)."""

from __future__ import annotations

import apache_beam as beam

from sciga.transforms.common.dead_letter import DEAD_LETTER_TAG
from sciga.transforms.common.stage_fn import StepDoFn
from sciga.transforms.tex_recovery.options import TexOptions
from sciga.transforms.tex_recovery.step import RecoverStep


class RecoverFromTex(StepDoFn):
    """``RecoverStep`` as a DoFn."""

    def __init__(self, options: TexOptions = TexOptions()):
        super().__init__(RecoverStep(options))


class RecoverFiguresFromTex(beam.PTransform):
    """PCollection[PaperWork] -> {``papers``, ``dead_letter``}; a no-op when switched off."""

    def __init__(self, options: TexOptions = TexOptions()):
        super().__init__()
        self.options = options

    def expand(self, works):
        if not self.options.enabled:
            return {"papers": works, DEAD_LETTER_TAG: works | "NoDead" >> beam.Filter(lambda _: False)}
        return works | "RecoverFromTex" >> beam.ParDo(RecoverFromTex(self.options)).with_outputs(
            DEAD_LETTER_TAG, main="papers"
        )
