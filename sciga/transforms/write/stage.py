"""Beam's side of the write stage (the steps themselves: ``steps.py``).

Between the steps, Beam groups by paper id and by (config, shard group), and spreads the
parts over the workers; only references travel through those shuffles.
"""

from __future__ import annotations

import apache_beam as beam

from sciga.transforms.common.stage_fn import StepDoFn
from sciga.transforms.write.steps import (
    CollectStep,
    CutStep,
    ShardRows,
    StoreStep,
    WriteOptions,
    WritePartStep,
    merge_annotations,
    paper_key,
    result_header,
    result_tables,
)

__all__ = [
    "CollectPaper",
    "CutParts",
    "ShardRows",
    "StoreResults",
    "WriteBuild",
    "WriteOptions",
    "WritePart",
    "merge_annotations",
    "result_header",
    "result_tables",
]


class StoreResults(StepDoFn):
    """``StoreStep`` as a DoFn."""

    def __init__(self, options: WriteOptions):
        super().__init__(StoreStep(options))


class CollectPaper(StepDoFn):
    """``CollectStep`` as a DoFn."""

    def __init__(self, options: WriteOptions):
        super().__init__(CollectStep(options))


class CutParts(StepDoFn):
    """``CutStep`` as a DoFn."""

    def __init__(self, options: WriteOptions):
        super().__init__(CutStep(options))


class WritePart(StepDoFn):
    """``WritePartStep`` as a DoFn."""

    def __init__(self, options: WriteOptions):
        super().__init__(WritePartStep(options))


# ------------------------------------------------------------------ the stage


class WriteBuild(beam.PTransform):
    """{works, failed (optional), reused, annotations} -> part infos (PCollection of PartInfo).

    ``works`` and ``failed`` are both PaperWork; they are stored (-> ResultRef) each on its
    own before anything is flattened. A PaperWork carries the whole paper, and a runner may
    materialise a Flatten's input (Beam's Fn API runner does); storing first means only
    references of a few hundred bytes are ever buffered, whatever the corpus size."""

    def __init__(self, options: WriteOptions):
        super().__init__()
        self.options = options

    def expand(self, inputs):
        works, reused, annotations = inputs["works"], inputs["reused"], inputs["annotations"]
        o = self.options
        stored = [works | "StoreResults" >> beam.ParDo(StoreResults(o))]
        if inputs.get("failed") is not None:
            stored.append(inputs["failed"] | "StoreFailed" >> beam.ParDo(StoreResults(o)))
        keyed = (
            (*stored, reused, annotations)
            | "RefsAndAnnotations" >> beam.Flatten()
            | "ByPaper" >> beam.Map(lambda x: (paper_key(x), x))
            | "GroupByPaper" >> beam.GroupByKey()
            | "CollectPaper" >> beam.ParDo(CollectPaper(o))
        )
        return (
            keyed
            | "GroupByShardGroup" >> beam.GroupByKey()
            | "CutParts" >> beam.ParDo(CutParts(o))
            | "SpreadParts" >> beam.Reshuffle()
            | "WritePart" >> beam.ParDo(WritePart(o))
        )
