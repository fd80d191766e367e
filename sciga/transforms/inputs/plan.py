"""Beam's side of planning a build's inputs (the step itself: ``plan_step.py``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Optional

import apache_beam as beam

from sciga.schemas.build import FileDep
from sciga.transforms.common.stage_fn import StepDoFn
from sciga.transforms.inputs.plan_step import REUSED, PlanOptions, PlanStep

__all__ = ["REUSED", "PlanInput", "PlanInputs", "PlanOptions"]


class PlanInput(StepDoFn):
    """``PlanStep`` as a DoFn."""

    def __init__(self, options: PlanOptions, checkers: Optional[Mapping[str, Callable[[FileDep], bool]]] = None):
        super().__init__(PlanStep(options, checkers))


class PlanInputs(beam.PTransform):
    """PCollection[input URI] -> {``planned``: PlannedInput, ``reused``: ResultRef}."""

    def __init__(self, options: PlanOptions, checkers: Optional[Mapping[str, Callable[[FileDep], bool]]] = None):
        super().__init__()
        self.options = options
        self.checkers = checkers

    def expand(self, uris):
        return uris | "PlanInput" >> beam.ParDo(PlanInput(self.options, self.checkers)).with_outputs(
            REUSED, main="planned"
        )
