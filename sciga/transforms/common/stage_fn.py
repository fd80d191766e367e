"""The one place where a per-paper step's failure becomes a dead letter.

Every per-paper stage (parse, TeX recovery, link, vision) is a ``PaperStageFn``: it
implements ``run(work)`` on one ``PaperWork`` and returns what to emit. The base class
catches whatever escapes, turns it into a dead-letter row (``dead_letter_from``: a
``StageError`` keeps its message for people, anything else is ``internal``), sends the
work to the ``dead_letter`` output and counts it. Outputs of a failed ``run`` are never
emitted: a paper is either wholly through a stage or dead-lettered by it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Union

import apache_beam as beam
from apache_beam.metrics import Metrics

from sciga.schemas.build import PaperWork
from sciga.transforms.common.dead_letter import DEAD_LETTER_TAG, dead_letter_from

# Failures that may not happen again on a rerun: their dead letters are not remembered
# in the result store, so the next build tries the input again.
TRANSIENT_ERRORS = frozenset({"missing", "unreadable", "internal"})

Emitted = Union[PaperWork, beam.pvalue.TaggedOutput]


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


class PaperStageFn(beam.DoFn):
    """Base of the per-paper stages. Subclasses set ``STAGE`` and implement ``run``."""

    STAGE = "stage"

    def __init__(self):
        self.ok = Metrics.counter("sciga", f"papers_{self.STAGE}")
        self.failed = Metrics.counter("sciga", f"papers_dead_lettered_{self.STAGE}")

    def run(self, work: PaperWork) -> Iterable[Emitted]:  # pragma: no cover - abstract
        raise NotImplementedError

    def start(self, element) -> PaperWork:
        """The work item for an input element (a stage that begins the chain overrides it)."""
        return element

    def process(self, element):
        work = self.start(element)
        try:
            out = list(self.run(work))
        except Exception as e:  # noqa: BLE001 - every failure becomes a dead letter
            self.failed.inc()
            yield beam.pvalue.TaggedOutput(DEAD_LETTER_TAG, mark_dead(work, e, self.STAGE))
            return
        self.ok.inc()
        yield from out
