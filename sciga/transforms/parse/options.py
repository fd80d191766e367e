"""The parse stage's options (no Apache Beam here: the CLI builds them before it knows
whether the pipeline will run)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from sciga.transforms.parse.decode import DEFAULT_MAX_BYTES


@dataclass(frozen=True)
class ParseOptions:
    max_page_bytes: int = DEFAULT_MAX_BYTES
    source: Optional[str] = None  # provenance source label (default: detected from the page)
    metadata_dir: Optional[str] = None  # folder of <stem>.meta.json sidecars (default: beside each page)
