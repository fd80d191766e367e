"""Pictures for the notebooks: a build's figure images as small PIL images.

Images are decoded with the vision stage's decoder and pixel limit (never Pillow's global
switch), shrunk to thumbnails, and a compound figure (whose panels carry the images) is shown
as its panels side by side. A figure without a decodable image gives ``None`` and the
notebooks say so instead of failing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Optional, Union

from PIL import Image, ImageDraw

from sciga.transforms.vision.decode import ImageDecodeError, decode_image
from sciga.transforms.vision.defaults import DEFAULT_MAX_PIXELS

ImageLike = Union[None, bytes, dict]


def thumbnail(
    image: ImageLike, size: tuple[int, int] = (320, 240), max_pixels: int = DEFAULT_MAX_PIXELS
) -> Optional[Image.Image]:
    """An image struct ``{bytes, path}`` (or raw bytes) -> an RGB thumbnail, None when there
    are no bytes or they do not decode."""
    data = image.get("bytes") if isinstance(image, dict) else image
    if not data:
        return None
    try:
        im = decode_image(data, max_pixels=max_pixels, draft_size=size).image
    except ImageDecodeError:
        return None
    im.thumbnail(size)
    return im


def side_by_side(
    images: Iterable[Optional[Image.Image]],
    height: int = 160,
    gap: int = 6,
    frame: Optional[Iterable[bool]] = None,
    frame_color: str = "#d28b00",
) -> Optional[Image.Image]:
    """Images scaled to one height, left to right on white; ``frame`` marks some with a border."""
    ims = list(images)
    marks = list(frame) if frame is not None else [False] * len(ims)
    scaled = []
    for im, mark in zip(ims, marks):
        if im is None:
            im = Image.new("RGB", (height, height), "#eeeeee")
            ImageDraw.Draw(im).text((8, height // 2 - 6), "no image", fill="#888888")
        w = max(1, round(im.width * height / max(1, im.height)))
        im = im.resize((w, height))
        if mark:
            im = im.copy()
            ImageDraw.Draw(im).rectangle([0, 0, w - 1, height - 1], outline=frame_color, width=6)
        scaled.append(im)
    if not scaled:
        return None
    out = Image.new("RGB", (sum(i.width for i in scaled) + gap * (len(scaled) - 1), height), "white")
    x = 0
    for im in scaled:
        out.paste(im, (x, 0))
        x += im.width + gap
    return out


def figure_picture(con, figure_id: str, size: tuple[int, int] = (480, 240)) -> Optional[Image.Image]:
    """The figure's own image, else its panels side by side (a compound figure), else None.
    ``con`` is a connection from sciga.explore.views.connect."""
    rows = con.execute(
        "SELECT id, image FROM figures WHERE id = ? OR parent_id = ? ORDER BY index, id", [figure_id, figure_id]
    ).fetchall()
    own = next((thumbnail(img, size) for fid, img in rows if fid == figure_id and img), None)
    if own is not None:
        return own
    panels = [thumbnail(img, size) for fid, img in rows if fid != figure_id]
    if not any(p is not None for p in panels):
        return None
    return side_by_side(panels, height=min(size[1], 200))
