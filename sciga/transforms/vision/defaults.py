"""The vision stage's defaults and thresholds, apart from the code that decodes and matches
images: the launcher reads them (flags, options, the build's signature) before it knows
whether any image is to be looked at, and a rebuild with nothing to do then never imports
numpy and Pillow."""

from __future__ import annotations

from dataclasses import dataclass

# Pillow's default limit (about 89.5 megapixels: a 9459 x 9459 image), as an explicit value.
DEFAULT_MAX_PIXELS = 89_478_485
# Figures per paper the medical filter's stage 2 classifies at most (MedICaT's top-K).
DEFAULT_TOP_K = 4


@dataclass(frozen=True)
class GAThresholds:
    """When a graphical abstract reuses a figure, or has one as a component (``ga_match``)."""

    reused_ncc: float = 0.90  # whole-image NCC at which the GA is a copy of a figure
    reused_phash_bits: int = 4  # pHash distance that alone (with the aspect) says "copy"
    aspect_tolerance: float = 0.12  # |log(aspect_ga / aspect_fig)| allowed for a whole copy
    part_ncc: float = 0.80  # tile NCC at which a figure is a component
    crop_reused_area: float = 0.90  # a crop keeping this much of a figure's area is a copy
    min_tile_fraction: float = 0.30  # smallest tile searched, as a fraction of the larger side
    min_tile_area: float = 0.12  # ... and as a fraction of the searched image's area
    embed_reused: float = 0.97  # cosine of whole-GA and figure embeddings for a copy
    embed_part: float = 0.92  # cosine of a GA tile and a figure embedding for a component
    soft_ncc: float = 0.65  # pixel evidence an embedding match needs beside it
