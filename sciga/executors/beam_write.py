"""The write steps of the chain as Beam transforms, with Beam's shuffles between them (the
Beam executor's; ``beam_executor.py`` imports this only once Beam is to run)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import apache_beam as beam

from sciga.transforms.common.stage_fn import StepDoFn
from sciga.transforms.write.steps import paper_key

if TYPE_CHECKING:
    from sciga.executors.chain import BuildChain


class WriteBuild(beam.PTransform):
    """{works, failed, reused, annotations} -> part infos: the chain's store, collect, cut and
    write-part steps; between them Beam groups by paper id and by (config, shard group) and
    spreads the parts over the workers.

    ``works`` and ``failed`` are both PaperWork; they are stored (-> ResultRef) each on its
    own before anything is flattened. A PaperWork carries the whole paper, and a runner may
    materialise a Flatten's input (Beam's Fn API runner does); storing first means only
    references of a few hundred bytes are ever buffered, whatever the corpus size."""

    def __init__(self, chain: BuildChain):
        super().__init__()
        self.chain = chain

    def expand(self, inputs):
        c = self.chain
        stored = [inputs["works"] | "StoreResults" >> beam.ParDo(StepDoFn(c.store))]
        if inputs.get("failed") is not None:
            stored.append(inputs["failed"] | "StoreFailed" >> beam.ParDo(StepDoFn(c.store)))
        keyed = (
            (*stored, inputs["reused"], inputs["annotations"])
            | "RefsAndAnnotations" >> beam.Flatten()
            | "ByPaper" >> beam.Map(lambda x: (paper_key(x), x))
            | "GroupByPaper" >> beam.GroupByKey()
            | "CollectPaper" >> beam.ParDo(StepDoFn(c.collect))
        )
        return (
            keyed
            | "GroupByShardGroup" >> beam.GroupByKey()
            | "CutParts" >> beam.ParDo(StepDoFn(c.cut))
            | "SpreadParts" >> beam.Reshuffle()
            | "WritePart" >> beam.ParDo(StepDoFn(c.write_part))
        )
