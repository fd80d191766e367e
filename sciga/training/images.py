"""Image bytes -> tensors for the baselines, with a pixel limit (a decompression bomb is a
skipped image, never a crash or a machine out of memory)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Optional

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError

from sciga.transforms.vision.decode import open_image
from sciga.transforms.vision.defaults import DEFAULT_MAX_PIXELS

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def decode_image(data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS) -> Optional[Image.Image]:
    """RGB PIL image, or None when the bytes are not a readable image or exceed the limit
    (checked from the header, before any pixel is decoded)."""
    if not data:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            im = open_image(data)  # no Pillow global limit before ours (see transforms/vision/decode.py)
            w, h = im.size
            if w <= 0 or h <= 0 or w * h > max_pixels:
                return None
            im.load()
        return im.convert("RGB")
    except (OSError, ValueError, Image.DecompressionBombError, SyntaxError, UnidentifiedImageError):
        return None


def square_transform(
    size: int, mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD
) -> Callable[[Image.Image], torch.Tensor]:
    """Resize to size x size (figures are diagrams: aspect is part of the signal, but
    batches need one shape) and normalize."""
    m = torch.tensor(mean).view(3, 1, 1)
    s = torch.tensor(std).view(3, 1, 1)

    def apply(im: Image.Image) -> torch.Tensor:
        arr = np.asarray(im.resize((size, size), Image.Resampling.BILINEAR), dtype=np.float32) / 255.0
        return (torch.from_numpy(arr).permute(2, 0, 1) - m) / s

    return apply
