"""Dead letters: every paper that fails a stage becomes one row, never a crash or a drop."""

from __future__ import annotations

import logging
import traceback
from typing import Optional

from sciga.schemas.records import DeadLetter
from sciga.transforms.common.errors import StageError

DEAD_LETTER_TAG = "dead_letter"
log = logging.getLogger(__name__)


def dead_letter_from(
    exc: BaseException, stage: str, input_uri: Optional[str], paper_id: Optional[str] = None
) -> DeadLetter:
    """One row for one failure. StageErrors carry a message written for people; anything
    else is a bug in a step and is recorded as ``internal`` with the exception text."""
    if isinstance(exc, StageError):
        return DeadLetter(
            paper_id=exc.paper_id or paper_id,
            stage=exc.stage or stage,
            error_type=exc.error_type,
            message=exc.message,
            input_uri=input_uri,
        )
    where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    loc = f" at {where.filename.rsplit('/', 1)[-1]}:{where.lineno}" if where else ""
    log.warning("internal error in stage %s for %s: %r%s", stage, input_uri, exc, loc)
    return DeadLetter(
        paper_id=paper_id,
        stage=stage,
        error_type="internal",
        message=f"{input_uri}: unexpected {type(exc).__name__} in {stage} ({exc}){loc}; please report this input.",
        input_uri=input_uri,
    )
