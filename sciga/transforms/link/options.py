"""The linking stage's options (no Apache Beam here: the CLI builds them before it knows
whether the pipeline will run)."""

from __future__ import annotations

from dataclasses import dataclass

from sciga.transforms.link.sentences import PYSBD


@dataclass(frozen=True)
class LinkOptions:
    # pysbd (scispaCy's pysbd_sentencizer), an installed spaCy/scispaCy model such as
    # en_core_sci_sm or a pipeline folder, or "none" (mentions get no sentence).
    sentencizer: str = PYSBD
