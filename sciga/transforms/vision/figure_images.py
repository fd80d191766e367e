"""FigureRow -> FigureRow with decoded size, perceptual hash and any image error.

A row whose image cannot be decoded keeps its path and gets ``image_error`` (a short kind
and a sentence, e.g. ``decompression_bomb: 10000x10000 = 100.0 megapixels ...``); its
bytes are not embedded, so nobody downstream trips over a bomb or a broken file. The paper
is never failed for an image.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from sciga.schemas.images import DECODE_KIND_STATUS, EMBEDDED, UNDECODABLE, settle_status
from sciga.schemas.records import FigureRow
from sciga.transforms.vision.decode import (
    DEFAULT_MAX_PIXELS,
    REDUCED_SIDE,
    ImageDecodeError,
    decode_image,
    decode_reduced,
    model_input,
)
from sciga.transforms.vision.phash import phash_hex

# image_kind values that never carry raster pixels (see schemas.records.IMAGE_KINDS).
_NO_RASTER = {
    "inline_svg": "svg_only: the figure is an SVG drawing inside the page; no raster image",
    "unrendered": "unrendered: LaTeXML could not render this picture; no image",
}


def annotate_image(row: FigureRow, max_pixels: int = DEFAULT_MAX_PIXELS) -> FigureRow:
    measure_image(row, max_pixels)
    return row


def measure_image(
    row: FigureRow, max_pixels: int = DEFAULT_MAX_PIXELS, model_input_size: Optional[int] = None
) -> Optional[np.ndarray]:
    """Set the row's size, pHash, status or image error from ONE decode of its bytes, at
    ``REDUCED_SIDE`` (JPEGs scaled down inside libjpeg, the rest box-reduced before any
    colour conversion). With ``model_input_size``, also returns the classifier's uint8
    input (``model_input_size`` squared x 3) made from that decode (None: no pixels), so
    the classifier need not read and decode the file again. The pixels are never stored
    on the row."""
    if row.image_bytes is None:
        if row.image_error is None and row.image_kind in _NO_RASTER:
            row.image_error = _NO_RASTER[row.image_kind]
        row.image_status = settle_status(
            row.image_status, has_bytes=False, image_kind=row.image_kind, image_path=row.image_path
        )
        return None
    try:
        dec = decode_reduced(row.image_bytes, max_pixels, REDUCED_SIDE)
    except ImageDecodeError as e:
        row.image_error = str(e)
        row.image_status = DECODE_KIND_STATUS.get(e.kind, UNDECODABLE)
        row.image_bytes = None
        return None
    row.width, row.height = dec.width, dec.height
    row.phash = phash_hex(dec.image, (0.0, 0.0, *dec.extent))
    row.image_status = EMBEDDED
    if model_input_size is None or 2 * model_input_size > REDUCED_SIDE:
        return None  # a model wanting more detail than REDUCED_SIDE decodes the file itself
    return model_input(dec, model_input_size)


def decode_row(row: FigureRow, max_pixels: int = DEFAULT_MAX_PIXELS, draft_size: Optional[tuple[int, int]] = None):
    """The row's picture as RGB, or None when it has none / it does not decode."""
    if row.image_bytes is None:
        return None
    try:
        return decode_image(row.image_bytes, max_pixels, draft_size).image
    except ImageDecodeError:
        return None
