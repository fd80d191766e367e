"""Do the embedded image bytes decode, and to the size the row records?

Images are opened with a pixel limit checked *before* any pixel is decoded, so a
decompression bomb costs a header read, not gigabytes of memory. Three levels:

- ``decode`` (default): the header is read and every pixel decoded (``Image.load``): truncated
  or corrupt files fail here.
- ``header``: the header is read and the file's structure checked (``Image.verify``: chunk
  CRCs for PNG) without decoding pixels; several times faster.
- ``none``: image bytes are not looked at.

SVG files (``image_kind='svg'``) are XML: they must parse (no entities, no network) with an
``<svg>`` root element; their size is not compared. An SVG the build rasterized
(``image_status='rasterized_svg'``) holds a PNG and is checked as one.
"""

from __future__ import annotations

import warnings
from typing import Optional

from PIL import Image

from sciga.transforms.vision.decode import open_image
from sciga.transforms.vision.defaults import DEFAULT_MAX_PIXELS


def check_image(
    data: bytes, kind: Optional[str] = None, level: str = "decode", max_pixels: int = DEFAULT_MAX_PIXELS
) -> tuple[Optional[int], Optional[int], Optional[str]]:
    """Bytes -> (width, height, error). ``error`` is one short phrase or None."""
    if not data:
        return None, None, "empty image bytes"
    # An SVG row rasterized by the build (image_status rasterized_svg) holds PNG bytes: checked as a raster.
    if (kind == "svg" and data.lstrip()[:1] == b"<") or (
        kind is None and data.lstrip()[:5] in (b"<?xml", b"<svg ", b"<svg>")
    ):
        return None, None, _check_svg(data)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # DecompressionBombWarning: we enforce our own limit
            # open_image: no Pillow global limit (about 179 MP) before ours, as the vision stage decodes
            with open_image(data) as im:
                w, h = im.size
                if w <= 0 or h <= 0:
                    return w, h, f"image has an empty size {w}x{h}"
                if w * h > max_pixels:
                    return w, h, f"image of {w}x{h} pixels exceeds the limit of {max_pixels} pixels"
                if level == "decode":
                    im.load()
                else:
                    im.verify()
                return w, h, None
    except Image.DecompressionBombError as e:
        return None, None, f"decompression bomb refused ({e})"
    except Exception as e:  # noqa: BLE001 - any decoder failure is a finding, not a crash
        return None, None, f"bytes do not decode as an image ({type(e).__name__}: {str(e)[:120]})"


def _check_svg(data: bytes) -> Optional[str]:
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False, load_dtd=False)
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as e:
        return f"SVG bytes are not well-formed XML ({str(e)[:120]})"
    tag = root.tag if isinstance(root.tag, str) else ""
    if not (tag == "svg" or tag.endswith("}svg")):
        return f"SVG file has root element <{tag}>, not <svg>"
    return None
