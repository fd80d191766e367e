"""The exception types of the project, and what each means for a person.

``StageError``: a pipeline step raises it for a bad input, with a short machine-readable
``error_type`` and a one-sentence ``message`` that names the input, what was wrong and what
to do; the Beam wrapper turns it into a dead-letter row. Anything else escaping a pure
function is a bug: it is dead-lettered with error_type ``internal`` so that a run never dies
on one paper.

``UserError``: a mistake a person can fix before or around a run (a bad flag value, an
output path that is a file, a folder another build holds). Its message is one sentence that
names the input and what to do; the `sciga` command line prints it as
``sciga <command>: <message>`` and exits 2, never with a traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional


class StageError(Exception):
    """``transient``: the failure may not happen again (a tool killed by a signal, a
    timeout, an I/O error), so a result made with it is never kept as final.
    ``permanent`` (fetching): asking again will not help (a 404, a failed conversion), so
    the fetch cache does not retry it unless asked (``--retry-failed``)."""

    def __init__(
        self,
        stage: str,
        error_type: str,
        message: str,
        paper_id: str | None = None,
        transient: bool = False,
        permanent: bool = False,
    ):
        super().__init__(message)
        self.stage = stage
        self.error_type = error_type
        self.message = message
        self.paper_id = paper_id
        self.transient = transient
        self.permanent = permanent

    def __reduce__(self):  # picklable across Beam's and Dask's workers, every field kept
        return (type(self), (self.stage, self.error_type, self.message, self.paper_id, self.transient, self.permanent))


class UserError(Exception):
    """One sentence for a person: what input was wrong and what to do about it."""


def exception_chain(exc: Optional[BaseException]) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling, each once."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__
