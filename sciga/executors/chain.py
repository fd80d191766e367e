"""The build's chain of steps, declared once: every executor runs the object ``build_chain``
makes, and nothing else says which steps a build has or in which order.

    input -> plan -> reused: a reference read from the store ------------------------+
                  -> changed: parse -> [recover figures from TeX] -> link             |
                              -> measure images -> store (dead letters too) -> a reference
    references by paper id -> collect -> by (config, shard group) -> cut -> write parts

Each step is a Beam-free object (``transforms/common/steps.py``). The in-process and Dask
executors call the steps' methods directly (``BuildChain.items`` per input,
``BuildChain.part_jobs_on_disk`` to group and cut, ``BuildChain.write`` per part); the Beam executor
runs each step through the one adapter (``transforms/common/stage_fn.py``), with Beam's
shuffles between them, and the measure step inside the vision stage's transform, which
adds the models (RunInference) when the build has one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from sciga.executors.options import BuildOptions
    from sciga.executors.spill import JobRef, SortedRuns
    from sciga.schemas.build import FileDep, PartInfo
    from sciga.transforms.common.steps import PaperStep, Step
    from sciga.transforms.inputs.plan_step import PlanStep
    from sciga.transforms.tex_recovery.options import TexOptions
    from sciga.transforms.vision.measure import MeasureStep
    from sciga.transforms.vision.options import ResolvedVision
    from sciga.transforms.write.layout import ShardLayout
    from sciga.transforms.write.steps import CollectStep, CutStep, PartJob, StoreStep, WritePartStep

# The name of each per-paper step in a Beam job graph (by the step's STAGE): Dataflow shows
# these, and tests/executors/test_dataflow_job.py finds them.
BEAM_LABELS = {"parse": "Parse", "tex_source": "RecoverFromTex", "link": "Link", "vision": "Vision"}


@dataclass
class BuildChain:
    """The steps of one build, in order."""

    plan: PlanStep
    per_paper: tuple[PaperStep, ...]  # parse, recover figures from TeX (when enabled), link, measure images
    store: StoreStep
    collect: CollectStep
    cut: CutStep
    write_part: WritePartStep
    # CPU-seconds (user + system, this process) spent in each step by ``items`` and ``write``,
    # by the step's stage ("plan", "parse", "tex_source", "link", "vision": measuring images,
    # "store", "write"); ``take_cpu_seconds`` hands them over and starts again.
    cpu_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def measure(self) -> MeasureStep:
        """The last per-paper step: the vision stage's (Beam runs it inside ``Vision``)."""
        return self.per_paper[-1]  # type: ignore[return-value]

    @property
    def steps(self) -> list[Step]:
        return [self.plan, *self.per_paper, self.store, self.collect, self.cut, self.write_part]

    def labelled_per_paper(self) -> list[tuple[str, PaperStep]]:
        """(Beam label, step) of each per-paper step."""
        return [(BEAM_LABELS[step.STAGE], step) for step in self.per_paper]

    def setup(self) -> None:
        for step in self.steps:
            step.setup()

    def finish(self) -> None:
        for step in self.steps:
            step.finish()

    # ------------------------------------------------------------------ without Beam

    def items(self, line: str) -> list:
        """One input line -> what the write stage groups by paper: its stored result's
        reference (a reused one, read from the store; or the one just computed and stored,
        dead letters included)."""
        from sciga.transforms.common.interrupts import raise_if_received
        from sciga.transforms.common.steps import Tagged
        from sciga.transforms.inputs.build_inputs import planned_input_from_line

        raise_if_received()  # a Ctrl-C that a finalizer swallowed during the last input
        out: list = []
        for planned in self._timed("plan", self.plan.process, planned_input_from_line(line)):
            if isinstance(planned, Tagged):  # reused
                out.append(planned.value)
            else:
                self._through(planned, list(self.per_paper), out)
        return out

    def _through(self, work, rest: list, out: list) -> None:
        """One work item through the remaining per-paper steps, then into the store."""
        from sciga.transforms.common.dead_letter import DEAD_LETTER_TAG
        from sciga.transforms.common.steps import Tagged

        if not rest:
            out.extend(self._timed("store", self.store.process, work))
            return
        for got in self._timed(rest[0].STAGE, rest[0].process, work):
            if not isinstance(got, Tagged):
                self._through(got, rest[1:], out)
            elif got.tag == DEAD_LETTER_TAG:
                out.extend(self._timed("store", self.store.process, got.value))
            else:  # needs_beam() let no model step in: nothing may ask for one
                raise RuntimeError(f"a build without Beam got a {got.tag!r} request, which needs Beam's RunInference")

    def _timed(self, stage: str, process, element) -> list:
        """``process(element)``'s outputs, its CPU time added to ``cpu_seconds[stage]`` (the
        outputs are collected first: what the next steps cost is theirs)."""
        t = time.process_time()
        got = list(process(element))
        self.cpu_seconds[stage] = self.cpu_seconds.get(stage, 0.0) + time.process_time() - t
        return got

    def take_cpu_seconds(self) -> dict[str, float]:
        """The CPU-seconds per stage counted since the last call (and the count restarted)."""
        got, self.cpu_seconds = self.cpu_seconds, {}
        return got

    def finish_items(self) -> None:
        """After a batch of inputs (Beam: a bundle): progress flushed."""
        for step in (self.plan, *self.per_paper, self.store):
            step.finish()

    def cut_jobs(self, by_paper: Iterable[tuple[str, list]], by_group: SortedRuns) -> Iterator[PartJob]:
        """Each paper's items (``paper_key`` order) -> the part jobs, group after group: each
        paper collected (Beam's GroupByPaper), its write items grouped by (config, shard
        group) in ``by_group`` (Beam's GroupByShardGroup), then each group cut. The order of
        the jobs changes no byte of a part."""
        for key, items in by_paper:
            for group, item in self.collect.process((key, items)):
                by_group.add(group, item)
        for group, members in by_group.grouped():
            yield from self.cut.process((group, members))

    def part_jobs_on_disk(self, by_paper: SortedRuns, folder: str, mark_taken_over: bool = False) -> list[JobRef]:
        """Every input's items (in ``by_paper``, under their ``paper_key``) -> the part files
        to write (``cut_jobs``), each job written to a file in ``folder`` as it is cut; returns
        where each lies, largest first: the one big part (every paper's full text) must not
        be what one worker writes alone at the end. ``spill.load_job`` reads a job back.
        ``mark_taken_over``: each reference says whether its part is the previous build's
        file as it is (``WritePartStep.takes_over``), asked while the job is at hand."""
        from sciga.executors.spill import JobFile, SortedRuns

        jobs = JobFile(folder)
        for job in self.cut_jobs(by_paper.grouped(), SortedRuns(folder, "write-items")):
            jobs.add(job, job_bytes(job), self.write_part.takes_over(job) if mark_taken_over else None)
        return jobs.refs()

    def write(self, jobs: Iterable[PartJob]) -> list[PartInfo]:
        """Each part file and its sidecar (a batch of part jobs; progress flushed after)."""
        t = time.process_time()
        infos = [info for job in jobs for info in self.write_part.process(job)]
        self.write_part.finish()
        self.cpu_seconds["write"] = self.cpu_seconds.get("write", 0.0) + time.process_time() - t
        return infos


def add_cpu_seconds(total: dict[str, float], more: Mapping[str, float]) -> None:
    """``more`` (a process's ``BuildChain.take_cpu_seconds``) added into ``total``."""
    for stage, seconds in more.items():
        total[stage] = total.get(stage, 0.0) + seconds


def job_bytes(job: PartJob) -> int:
    """What a part job will write, as the cut measured it (a dead-letter part: its rows)."""
    return sum(b for _, b in job.sizes) if job.sizes else len(job.members)


def build_chain(
    opts: BuildOptions,
    vision: ResolvedVision,
    *,
    fingerprint: str,
    store_root: str,
    parts_root: str,
    layout: ShardLayout,
    progress_dir: Optional[str],
    previous_parts: Optional[str],
    hash_pages: bool = True,
    tex: Optional[TexOptions] = None,
) -> BuildChain:
    """The one declaration of a build's steps. ``tex``: the TeX options with the bulk
    e-prints opened (``--eprints-bulk``), else the build's; ``hash_pages``: False when the
    store holds nothing to reuse (``PlanOptions.hash_pages``)."""
    from sciga.transforms.common.progress import Progress
    from sciga.transforms.inputs.plan_step import PlanStep
    from sciga.transforms.link.step import LinkStep
    from sciga.transforms.parse.step import ParseStep
    from sciga.transforms.vision.measure import MeasureStep
    from sciga.transforms.write.steps import CollectStep, CutStep, StoreStep, WritePartStep

    tex = tex or opts.tex
    write = opts.write_options(
        store_root=store_root,
        parts_root=parts_root,
        layout=layout,
        progress_dir=progress_dir,
        previous_parts=previous_parts,
    )
    plan = PlanStep(
        opts.plan_options(
            store_root=store_root, fingerprint=fingerprint, progress_dir=progress_dir, hash_pages=hash_pages
        ),
        _dependency_checkers(vision),
    )
    per_paper: list[PaperStep] = [ParseStep(opts.parse, fingerprint)]
    if tex.enabled:
        from sciga.transforms.tex_recovery.step import RecoverStep

        per_paper.append(RecoverStep(tex))
    per_paper += [LinkStep(opts.link), MeasureStep(vision, Progress(progress_dir))]
    return BuildChain(
        plan=plan,
        per_paper=tuple(per_paper),
        store=StoreStep(write),
        collect=CollectStep(write),
        cut=CutStep(write),
        write_part=WritePartStep(write),
    )


def _dependency_checkers(vision: ResolvedVision) -> Mapping[str, Callable[[FileDep], bool]]:
    """What the planner asks, beside the files a result was made from, before reusing it:
    whether its GA-manifest row is unchanged."""
    from sciga.transforms.vision.options import GAIndex

    checkers: dict[str, Any] = {"ga": GAIndex(vision.ga_entries_uri)} if vision.ga_entries_uri else {}
    return checkers


def needs_beam(opts: BuildOptions, vision: ResolvedVision, beam_args: Optional[Iterable[str]] = None) -> Optional[str]:
    """What in this build only the Beam executor runs (a sentence's subject), or None: Beam
    flags, a model (the medical classifier, GA typing: RunInference), pages made from
    e-prints, ``--ids``, bulk tars, finalizing in the job."""
    if beam_args:
        return "Apache Beam flags"
    if opts.fetch_ids:
        return "--ids"
    if opts.html_from != "ar5iv":
        return f"--html-from {opts.html_from}"
    if opts.eprints_bulk:
        return "--eprints-bulk"
    if opts.finalize_in_job:
        return "--finalize-in-job"
    if vision.medical_meta is not None:
        return "the medical classifier (--medical-weights)"
    if vision.embed_meta is not None or vision.ga_entries_uri:
        return "graphical-abstract typing (--ga-manifest)"
    return None
