"""Errors of the parse stage."""

from __future__ import annotations

from sciga.transforms.common.errors import StageError


class ParseError(StageError):
    def __init__(self, error_type: str, message: str, paper_id: str | None = None, stage: str = "parse"):
        super().__init__(stage, error_type, message, paper_id)

    def __reduce__(self):
        return (type(self), (self.error_type, self.message, self.paper_id, self.stage))
