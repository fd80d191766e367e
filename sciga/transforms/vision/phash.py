"""Perceptual hash of a figure: 64-bit DCT pHash (imagehash), as 16 hex digits.

Two images with a Hamming distance of a few bits look the same to a person (resized,
re-encoded, slightly recoloured copies); the GA stage uses it as its fast first test.
"""

from __future__ import annotations

from typing import Optional

import imagehash
from PIL import Image


def phash_hex(image: Image.Image, box: Optional[tuple[float, float, float, float]] = None) -> str:
    """``box``: the part of ``image`` that is the picture (``ReducedImage.extent``: a
    box-reduced picture's last row and column may stand for less than a whole box)."""
    # imagehash resizes the whole picture to 32x32 with a Lanczos filter, which costs as
    # much as decoding it. Pillow's reducing_gap first shrinks by an integer factor with a
    # box filter (exact averaging), then runs Lanczos on the small image: the same hash to
    # within a bit or two, at a third of the cost. imagehash then sees a 32x32 picture.
    gray = image if image.mode == "L" else image.convert("L")
    small = gray.resize((32, 32), Image.Resampling.LANCZOS, box=box, reducing_gap=3.0)
    return str(imagehash.phash(small, hash_size=8))


def hamming(a: str, b: str) -> int:
    return bin(int(a, 16) ^ int(b, 16)).count("1")
