"""The TeX-recovery stage's options (no Apache Beam here: the CLI builds them before it
knows whether the pipeline will run)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from sciga.transforms.eprints.rasterize import DEFAULT_DPI, DEFAULT_MAX_SIDE, DEFAULT_TIMEOUT
from sciga.transforms.tex_recovery.figure_match import DEFAULT_NUMBER_MIN_JACCARD, DEFAULT_THRESHOLD

if TYPE_CHECKING:
    from sciga.transforms.eprints.bulk_reader import BulkEprints


@dataclass(frozen=True)
class TexOptions:
    enabled: bool = True
    tex_dirs: tuple[str, ...] = field(default_factory=tuple)  # --tex-input folders
    threshold: float = DEFAULT_THRESHOLD  # caption token Jaccard for a match without a number
    number_min_jaccard: float = DEFAULT_NUMBER_MIN_JACCARD  # overlap still needed when numbers agree
    dpi: int = DEFAULT_DPI
    max_side: int = DEFAULT_MAX_SIDE
    timeout: float = DEFAULT_TIMEOUT  # seconds per PDF / EPS figure
    check_blank: bool = True
    # arXiv's bulk tars (--eprints-bulk), for papers whose source is in none of the places above.
    bulk: Optional[BulkEprints] = None
