"""Perceptual hash of a figure: 64-bit DCT pHash (imagehash), as 16 hex digits.

Two images with a Hamming distance of a few bits look the same to a person (resized,
re-encoded, slightly recoloured copies); the GA stage uses it as its fast first test.
"""
from __future__ import annotations

import imagehash
from PIL import Image


def phash_hex(image: Image.Image) -> str:
    return str(imagehash.phash(image, hash_size=8))


def hamming(a: str, b: str) -> int:
    return bin(int(a, 16) ^ int(b, 16)).count("1")
