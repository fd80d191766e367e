"""Small rebuilds in this process, without Apache Beam.

A rebuild where a few pages changed spends most of its time not on those pages but on
Beam: importing it (about 1.2 s), building the job, warming worker processes, shuffling a
thousand references between them and stopping them again. This executor runs the same
steps (each stage's Beam-free ``step.py``, ``steps.py`` in ``write``) one after another in
this process:

    every input -> PlanStep -> reused: a reference read from the store
                            -> changed: ParseStep -> RecoverStep -> LinkStep -> MeasureStep
                                        -> StoreStep (dead letters too) -> a reference
    references by paper id -> CollectStep -> by (config, shard group) -> CutStep
                           -> WritePartStep: each part written, or taken over from the last build

The part files and their sidecars are what the Beam pipeline writes, byte for byte
(``tests/pipelines/test_in_process.py``), and the launcher finalizes them the same way.

It runs a build only when Beam's local runner would have run it with nothing that needs
Beam: no Beam flags, ``--workers`` not given, no model to run (the medical classifier, GA
typing), no pages made from e-prints, no ``--ids``, no bulk tars, no finalizing in the job;
and only when at most ``MAX_TO_COMPUTE`` inputs changed and the build has at most
``MAX_INPUTS`` (above those, worker processes on every core pay for their start).
``SCIGA_IN_PROCESS=0`` turns it off.
"""

from __future__ import annotations

import contextlib
import os
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from sciga.pipelines.build import BuildOptions
    from sciga.transforms.vision.options import ResolvedVision
    from sciga.transforms.write.layout import ShardLayout

ENV = "SCIGA_IN_PROCESS"
# Inputs to compute at most. 10 changed text pages take ~0.4 s of steps here, against ~2.5 s
# of Beam's start, shuffles and stop; a changed image-rich page costs ~0.15 s, so at this
# many the second core would save about what Beam costs.
MAX_TO_COMPUTE = 32
# Inputs at most. Each unchanged input still costs about 1 ms here (its stored header read,
# its part taken over), on one core; at this many, Beam's workers would share ~5 s of that
# work, about what starting them costs.
MAX_INPUTS = 5000
RUNNER = "in_process"  # the manifest's run.runner


def eligible(
    opts: BuildOptions, vision: ResolvedVision, beam_args: Optional[Sequence[str]], n_inputs: int, to_compute: int
) -> bool:
    """Whether this build runs here, without Beam (see the module's docstring)."""
    return (
        os.environ.get(ENV, "1") != "0"
        and not beam_args
        and opts.workers is None
        and to_compute <= MAX_TO_COMPUTE
        and n_inputs <= MAX_INPUTS
        and not opts.fetch_ids
        and opts.html_from == "ar5iv"
        and not opts.eprints_bulk
        and not opts.finalize_in_job
        and vision.medical_meta is None
        and vision.embed_meta is None
        and not vision.ga_entries_uri
    )


@contextlib.contextmanager
def system_allocator():
    """Arrow allocates from the C library's malloc while the build runs here, unless the
    user chose an allocator (``ARROW_DEFAULT_MEMORY_POOL``); the previous pool is put back
    after (a notebook that calls the build keeps its own). A rebuild here rewrites the
    parts of the changed papers from the previous shards, tens of MB of full text per row
    group; with Arrow's default (mimalloc) this machine spent 0.4 s more in the kernel on
    a 1% rebuild of 1,000 papers (3.8 s against 3.4 s), and reading the same row groups
    took 60 to 620 ms from run to run. The bytes written do not depend on the allocator."""
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        yield
        return
    import pyarrow as pa

    previous = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        yield
    finally:
        pa.set_memory_pool(previous)  # buffers still alive return to the pool they came from


def run_in_process(
    opts: BuildOptions,
    inputs: Sequence[str],
    hashes,
    *,
    vision: ResolvedVision,
    layout: ShardLayout,
    fingerprint: str,
    store_root: str,
    parts_root: str,
    progress_dir: Optional[str],
    previous_parts: Optional[str],
) -> None:
    """Compute what changed and write every part file (with its sidecar) into ``parts_root``."""
    from sciga.transforms.common.dead_letter import DEAD_LETTER_TAG
    from sciga.transforms.common.progress import Progress
    from sciga.transforms.common.steps import Step, Tagged
    from sciga.transforms.inputs.build_inputs import input_list_lines, largest_first, planned_input_from_line
    from sciga.transforms.inputs.plan_step import PlanStep
    from sciga.transforms.link.step import LinkStep
    from sciga.transforms.parse.step import ParseStep
    from sciga.transforms.vision.measure import MeasureStep
    from sciga.transforms.write.steps import (
        CollectStep,
        CutStep,
        StoreStep,
        WritePartStep,
        paper_key,
    )

    plan = PlanStep(opts.plan_options(store_root=store_root, fingerprint=fingerprint, progress_dir=progress_dir))
    per_paper: list[Step] = [ParseStep(opts.parse, fingerprint)]
    if opts.tex.enabled:
        from sciga.transforms.tex_recovery.step import RecoverStep

        per_paper.append(RecoverStep(opts.tex))
    per_paper += [LinkStep(opts.link), MeasureStep(vision, Progress(progress_dir))]
    write = opts.write_options(
        store_root=store_root,
        parts_root=parts_root,
        layout=layout,
        progress_dir=progress_dir,
        previous_parts=previous_parts,
    )
    store, collect, cut, write_part = StoreStep(write), CollectStep(write), CutStep(write), WritePartStep(write)
    steps = [plan, *per_paper, store, collect, cut, write_part]
    for step in steps:
        step.setup()

    by_paper: dict[str, list] = defaultdict(list)  # what Beam's GroupByPaper gathers

    def keep(item) -> None:
        by_paper[paper_key(item)].append(item)

    def through(work, rest: list[Step]) -> None:
        """One work item through the remaining per-paper steps, then into the store."""
        if not rest:
            keep(*store.process(work))
            return
        for out in rest[0].process(work):
            if not isinstance(out, Tagged):
                through(out, rest[1:])
            elif out.tag == DEAD_LETTER_TAG:
                keep(*store.process(out.value))
            else:  # eligible() let no model step in: nothing may ask for one
                raise RuntimeError(f"the in-process build got a {out.tag!r} request, which needs Beam")

    sizes = {u: st.size for u, st in hashes.stats.items()} if hashes is not None else {}
    lines = input_list_lines(largest_first(inputs, sizes), hashes.sha256 if hashes is not None else None)
    for line in lines:
        for out in plan.process(planned_input_from_line(line)):
            if isinstance(out, Tagged):  # reused: its reference, read from the store
                keep(out.value)
            else:
                through(out, per_paper)

    by_group: dict[tuple, list] = defaultdict(list)  # what Beam's GroupByShardGroup gathers
    for key in sorted(by_paper):
        for group, item in collect.process((key, by_paper[key])):
            by_group[group].append(item)
    for group in sorted(by_group):
        for job in cut.process((group, by_group[group])):
            for _ in write_part.process(job):  # the part file and its sidecar are written here
                pass
    for step in steps:
        step.finish()
