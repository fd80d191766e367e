"""Whether a build runs without Apache Beam: the choice that the launcher makes before it
hashes the pages (``prepare.py``: a build without Beam leaves the hashing to its workers)
and that ``build.py`` makes again to pick the executor."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from sciga.executors.options import BuildOptions
    from sciga.transforms.vision.options import ResolvedVision

ENV = "SCIGA_IN_PROCESS"  # 0: the default executor is Beam's (its DirectRunner), never the in-process one

__all__ = ["ENV", "eligible", "without_beam"]


def eligible(opts: BuildOptions, vision: ResolvedVision, beam_args: Optional[Sequence[str]]) -> bool:
    """Whether this build runs in this process and processes forked from it
    (``in_process.py``): nothing in it needs Beam, unless the user
    said otherwise (``SCIGA_IN_PROCESS=0``, ``--executor beam``)."""
    from sciga.executors.chain import needs_beam

    return (
        os.environ.get(ENV, "1") != "0"
        and opts.executor in ("auto", "in-process")
        and needs_beam(opts, vision, beam_args) is None
    )


def without_beam(opts: BuildOptions, vision: ResolvedVision, beam_args: Optional[Sequence[str]]) -> bool:
    """Whether an executor without Beam runs this build (in-process, or Dask)."""
    return eligible(opts, vision, beam_args) or opts.executor == "dask"
