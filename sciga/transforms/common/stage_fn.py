"""The one adapter between a step (``steps.py``) and Apache Beam.

``StepDoFn`` runs a Beam-free step as a Beam ``DoFn``: ``setup`` and ``finish_bundle`` call
the step's ``setup`` and ``finish``, and each ``Tagged`` output of ``process`` becomes a
Beam ``TaggedOutput``. ``StepStage`` is a stage of a job: the step's DoFn with its main
output and tagged outputs named. The Beam executor (``executors/beam_executor.py``) runs
every step of the build's chain this way, so Beam and the executors without Beam run the
same step objects.
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


class StepStage(beam.PTransform):
    """PCollection -> {``main``: the step's main output, each of ``tags``: its output}.
    The ParDo is labelled with the step's class name (``ParseStep``)."""

    def __init__(self, step: Step, *tags: str, main: str = "main"):
        super().__init__()
        self.step, self.tags, self.main = step, tags, main

    def expand(self, pcoll):
        return pcoll | type(self.step).__name__ >> beam.ParDo(StepDoFn(self.step)).with_outputs(
            *self.tags, main=self.main
        )
