"""Environment variables set for a while and put back: the build's TMPDIR, a model load's
offline mode."""

from __future__ import annotations

import os
from typing import Optional


def restore_environ(saved: dict[str, Optional[str]]) -> None:
    """Put environment variables back as they were (None: it was not set)."""
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
