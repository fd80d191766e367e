"""The one adapter between a step (``steps.py``) and Apache Beam.

``StepDoFn`` runs a Beam-free step as a Beam ``DoFn``: ``setup`` and ``finish_bundle`` call
the step's ``setup`` and ``finish``, and each ``Tagged`` output of ``process`` becomes a
Beam ``TaggedOutput``. A stage's DoFn is this adapter around its step (``ParsePage`` runs
``ParseStep``), so Beam and the in-process executor run the same code.
"""

from __future__ import annotations

import apache_beam as beam

from sciga.transforms.common.steps import Step, Tagged


class StepDoFn(beam.DoFn):
    def __init__(self, step: Step):
        super().__init__()
        self.step = step

    def setup(self):
        self.step.setup()

    def process(self, element):
        for out in self.step.process(element):
            if isinstance(out, Tagged):
                yield beam.pvalue.TaggedOutput(out.tag, out.value)
            else:
                yield out

    def finish_bundle(self):
        self.step.finish()
