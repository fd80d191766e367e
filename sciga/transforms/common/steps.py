"""Steps: what a build does to one element, without Apache Beam.

A step is a plain object with ``setup()``, ``process(element)`` (an iterable of outputs) and
``finish()``. An output for the main output is the value itself; one for another output is
``Tagged(tag, value)``. Beam runs a step through one adapter, ``stage_fn.StepDoFn``; the
in-process executor of small rebuilds (``executors/in_process.py``) calls the same methods
directly, so both give the same results, and a rebuild of a few pages does not pay for
importing Beam and starting its runner.

Every per-paper step (parse, TeX recovery, link, vision) is a ``PaperStep``: it implements
``run(work)`` on one ``PaperWork`` and returns what to emit. This is the one place where a
per-paper step's failure becomes a dead letter: the base class catches whatever escapes,
turns it into a dead-letter row (``dead_letter_from``: a ``StageError`` keeps its message
for people, anything else is ``internal``), sends the work to the ``dead_letter`` output and
counts it. Outputs of a failed ``run`` are never emitted: a paper is either wholly through a
step or dead-lettered by it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Union

from sciga.schemas.build import PaperWork
from sciga.transforms.common.counters import Counter
from sciga.transforms.common.dead_letter import DEAD_LETTER_TAG, dead_letter_from

# Failures that may not happen again on a rerun: their dead letters are not remembered
# in the result store, so the next build tries the input again.
TRANSIENT_ERRORS = frozenset({"missing", "unreadable", "internal"})


@dataclass(frozen=True)
class Tagged:
    """An output of a step to its output named ``tag`` (Beam: a ``TaggedOutput``)."""

    tag: str
    value: Any


Emitted = Union[PaperWork, Tagged]


class Step:
    """Base of the steps: ``setup`` once where the step runs, ``process`` per element,
    ``finish`` after a batch of elements (Beam: a bundle)."""

    def setup(self) -> None:
        pass

    def process(self, element) -> Iterable[Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def finish(self) -> None:
        pass


def mark_dead(work: PaperWork, exc: BaseException, stage: str) -> PaperWork:
    """``work`` dead-lettered by ``exc`` in ``stage`` (the paper is dropped)."""
    dl = dead_letter_from(exc, stage, work.uri, work.paper_id)
    work.paper = None
    work.figure_rows, work.mentions, work.made_images = [], [], {}
    work.dead = [dl]
    work.cacheable = work.cacheable and not is_transient(exc, dl.error_type)
    return work


def is_transient(exc: BaseException, error_type: str) -> bool:
    """A failure that may pass on a rerun: its result is not remembered as final."""
    return error_type in TRANSIENT_ERRORS or bool(getattr(exc, "transient", False))


class PaperStep(Step):
    """Base of the per-paper steps. Subclasses set ``STAGE`` and implement ``run``."""

    def __init__(self):
        self.ok = Counter(f"papers_{self.STAGE}")
        self.failed = Counter(f"papers_dead_lettered_{self.STAGE}")

    STAGE: str

    def run(self, work: PaperWork) -> Iterable[Emitted]:  # pragma: no cover - abstract
        raise NotImplementedError

    def start(self, element) -> PaperWork:
        """The work item for an input element (a step that begins the chain overrides it)."""
        return element

    def process(self, element):
        work = self.start(element)
        try:
            out = list(self.run(work))
        except Exception as e:  # noqa: BLE001 - every failure becomes a dead letter
            self.failed.inc()
            yield Tagged(DEAD_LETTER_TAG, mark_dead(work, e, self.STAGE))
            return
        self.ok.inc()
        yield from out
