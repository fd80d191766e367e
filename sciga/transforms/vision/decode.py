"""Figure image bytes -> an RGB picture, safely.

Every image is opened with a pixel limit checked from the header *before* any pixel is
decoded, so a 40-byte PNG that claims 100 megapixels costs nothing and becomes an error
on its row (``decompression bomb``), never a crash or an out-of-memory kill. Our limit
(``--max-image-pixels``) is the only one: ``Image.open`` refuses anything above twice
Pillow's global ``Image.MAX_IMAGE_PIXELS`` (about 179 MP) before a caller can say
otherwise, so ``open_image`` identifies the file with the same plugin table ``Image.open``
uses, without that global check. Pillow's global itself is left alone: other code in the
same process relies on it. (Two plugins repeat Pillow's check inside ``load()``: TIFF for
its tile buffer and GIF for frames that grow the canvas. Those few files above 179 MP are
reported as such.)

Colour handling, so that every consumer sees 8-bit RGB:

- CMYK / YCbCr / LAB JPEG and TIFF -> RGB through Pillow's converters (Adobe's inverted
  CMYK JPEGs are handled by Pillow's JPEG plugin);
- palette, greyscale-alpha and RGBA images -> composited on white (figures are printed on
  white paper; a transparent background must not turn black);
- 16-bit / 32-bit integer and float greyscale (``I;16``, ``I``, ``F``) -> rescaled to 8 bit
  from the image's own value range;
- 1-bit -> greyscale -> RGB;
- animated GIF / APNG / multi-page TIFF -> the first frame.

SVG and PDF are vector formats: they are recognised by their first bytes and reported as
not decodable here (a figure that only has an SVG is recorded as such, not guessed).

``decode_image`` gives the full-size picture. A build needs less: ``decode_reduced``
decodes a figure once at the smallest scale its size, pHash and classifier input need
(JPEG DCT scaling; PNG by libspng; box reduction before the colour rules above, which it
keeps), and ``model_input`` makes the classifier's input from that picture.
"""

from __future__ import annotations

import io
import struct
import threading
import warnings
from dataclasses import dataclass
from typing import Optional

import numpy as np
from PIL import Image, ImageChops, ImageOps, UnidentifiedImageError

from sciga.transforms.vision.defaults import DEFAULT_MAX_PIXELS


class ImageDecodeError(Exception):
    """An image that cannot be turned into pixels; ``kind`` is a short machine label."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


@dataclass
class DecodedImage:
    image: Image.Image  # 8-bit RGB
    width: int  # size of the stored image (first frame), before any conversion
    height: int
    format: Optional[str]
    mode: str  # the stored mode ("CMYK", "P", "I;16" ...)
    frames: int = 1


def sniff_vector(data: bytes) -> Optional[str]:
    """'svg' or 'pdf' when the bytes are a vector graphic, else None."""
    head = data[:1024].lstrip()
    if head.startswith(b"%PDF"):
        return "pdf"
    if head.startswith(b"\x1f\x8b"):  # gzip: .svgz is the only figure format that is gzip
        return "svg"
    low = head.lower()
    if (
        low.startswith(b"<svg")
        or (low.startswith(b"<?xml") or low.startswith(b"<!doctype svg"))
        and b"<svg" in data[:4096].lower()
    ):
        return "svg"
    return None


def read_size(data: bytes) -> tuple[int, int, Optional[str]]:
    """(width, height, format) from the header only; raises ImageDecodeError."""
    im = _open(data)
    return im.size[0], im.size[1], im.format


def open_image(data: bytes) -> Image.Image:
    """Identify ``data`` and open it lazily (header only), as ``Image.open`` does but without
    its global decompression-bomb check: the caller checks the size against its own limit.
    Raises ``UnidentifiedImageError`` when no plugin accepts the bytes."""
    prefix = data[:16]
    fp = io.BytesIO(data)
    Image.preinit()  # the common plugins (PNG, JPEG, GIF, BMP, ...); all of them below if needed
    tried: set = set()
    for load_all in (False, True):
        if load_all:
            Image.init()
        for fmt in list(Image.ID):
            if fmt in tried or fmt not in Image.OPEN:
                continue
            tried.add(fmt)
            factory, accept = Image.OPEN[fmt]
            try:
                ok = not accept or accept(prefix)
                if not ok or isinstance(ok, str):  # a str is Pillow's "looks like X, but..." note
                    continue
                fp.seek(0)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", Image.DecompressionBombWarning)
                    return factory(fp, "")
            except (SyntaxError, IndexError, TypeError, struct.error):
                continue  # not this format (Image.open's rule)
    raise UnidentifiedImageError("cannot identify image file")


def _open(data: bytes) -> Image.Image:
    if not data:
        raise ImageDecodeError("empty", "the image file is empty")
    vec = sniff_vector(data)
    if vec:
        raise ImageDecodeError(f"{vec}_only", f"{vec.upper()} is a vector format; no raster image to decode")
    try:
        return open_image(data)
    except Image.DecompressionBombError as e:  # a plugin that checks Pillow's limit itself
        raise ImageDecodeError(
            "decompression_bomb",
            f"the header claims more pixels than Pillow's {_plugin_limit()} allows for this format ({e})",
        ) from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as e:
        raise ImageDecodeError("corrupt", f"not a readable image ({type(e).__name__}: {e})") from None


def _plugin_limit() -> str:
    return f"{2 * (Image.MAX_IMAGE_PIXELS or 0) / 1e6:.0f} MP"


def check_pixels(width: int, height: int, max_pixels: int) -> None:
    if width <= 0 or height <= 0:
        raise ImageDecodeError("corrupt", f"the header claims an empty size {width}x{height}")
    if width * height > max_pixels:
        raise ImageDecodeError(
            "decompression_bomb",
            f"{width}x{height} = {width * height / 1e6:.1f} megapixels is above the limit of "
            f"{max_pixels / 1e6:.1f} (raise --max-image-pixels if the image is genuine)",
        )


_EXIF_FORMATS = ("JPEG", "TIFF", "MPO", "WEBP")  # formats that carry an EXIF orientation
_ALPHA_MODES = ("RGBA", "LA", "PA", "RGBa", "La")
# What Pillow raises on damaged image data, while seeking or decoding.
_DAMAGED = (OSError, ValueError, SyntaxError, EOFError, IndexError, TypeError, MemoryError)


def _opened(data: bytes, max_pixels: int) -> tuple[Image.Image, int, int, Optional[str], str, int]:
    """The image opened lazily at its first frame, its size checked against our limit from the
    header, before any pixel is decoded: (image, width, height, format, stored mode, frames)."""
    im = _open(data)
    width, height = im.size
    check_pixels(width, height, max_pixels)
    frames = int(getattr(im, "n_frames", 1) or 1)
    if frames > 1:
        try:
            im.seek(0)
        except _DAMAGED as e:
            raise ImageDecodeError("corrupt", f"the image data is damaged ({type(e).__name__}: {e})") from None
    return im, width, height, im.format, im.mode, frames


def decode_image(
    data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS, draft_size: Optional[tuple[int, int]] = None
) -> DecodedImage:
    """Bytes -> DecodedImage (8-bit RGB, first frame). Raises ImageDecodeError.

    ``draft_size`` lets JPEG decoding skip detail the caller will throw away (a
    classifier that wants 224x224 does not need a 4000x3000 decode): Pillow's draft mode
    decodes at 1/2, 1/4 or 1/8 scale directly in libjpeg. Width and height reported are
    always the stored size.
    """
    im, width, height, fmt, mode, frames = _opened(data, max_pixels)
    try:
        if draft_size and fmt == "JPEG":
            im.draft("RGB", draft_size)
        _load_checked(im, fmt, width, height)
        if fmt in _EXIF_FORMATS:
            try:
                im = ImageOps.exif_transpose(im)
            except Exception:  # noqa: BLE001 - a broken EXIF block must not lose the picture
                pass
        rgb = to_rgb(im)
    except ImageDecodeError:
        raise
    except _DAMAGED as e:
        raise ImageDecodeError("corrupt", f"the image data is damaged ({type(e).__name__}: {e})") from None
    return DecodedImage(image=rgb, width=width, height=height, format=fmt, mode=mode, frames=frames)


# The side a figure is decoded at for everything a build derives from its pixels: the
# pHash needs >= 96 px (32 x 32 through ``reducing_gap=3``) and a 224-px classifier input
# >= 448 px (``resize_for_model``'s ``reducing_gap=2``). One fixed value, so a figure's
# pHash never depends on which models a build runs.
REDUCED_SIDE = 448


@dataclass
class ReducedImage:
    """One decode of a figure, at the smallest scale its consumers need.

    ``image`` is the whole picture (first frame, EXIF orientation applied) as 8-bit RGB,
    shrunk by whole factors so that each side keeps at least ``min_side`` pixels (or all it
    has). ``extent`` is the full picture's width and height in ``image``'s pixels: a
    reduction whose last box is partial leaves a fraction, which a resize with
    ``box=(0, 0, *extent)`` honours exactly as Pillow's own ``reducing_gap`` does."""

    image: Image.Image
    width: int  # size of the stored image (first frame), from its header
    height: int
    format: Optional[str]
    mode: str  # the stored mode ("CMYK", "P", "I;16" ...)
    extent: tuple[float, float]
    frames: int = 1


def decode_reduced(data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS, min_side: int = REDUCED_SIDE) -> ReducedImage:
    """Bytes -> ReducedImage, decoding the pixels once. Raises ImageDecodeError.

    JPEGs are decoded at 1/2, 1/4 or 1/8 scale inside libjpeg (DCT scaling) when both sides
    stay >= ``min_side``; other formats are decoded whole and then box-reduced (exact
    averages) by ``w // min_side`` x ``h // min_side``, the factors Pillow's
    ``resize(..., reducing_gap=2)`` to ``min_side / 2`` would use. The colour rules of
    ``decode_image`` apply, but the costly ones (transparency on white, palette, 1-bit) run
    on the reduced picture: transparent pixels are averaged premultiplied, so compositing
    on white after the reduction gives what compositing before it gives (to rounding).
    """
    im, width, height, fmt, mode, frames = _opened(data, max_pixels)
    try:
        if fmt == "JPEG":
            im.draft("RGB", (min_side, min_side))
        im = _load_pixels(im, data, fmt, width, height, frames)
        if fmt in _EXIF_FORMATS:
            try:
                ImageOps.exif_transpose(im, in_place=True)
            except Exception:  # noqa: BLE001 - a broken EXIF block must not lose the picture
                pass
        w, h = im.size
        factor = (max(1, w // min_side), max(1, h // min_side))
        rgb = reduce_to_rgb(im, factor)
    except ImageDecodeError:
        raise
    except _DAMAGED as e:
        raise ImageDecodeError("corrupt", f"the image data is damaged ({type(e).__name__}: {e})") from None
    return ReducedImage(
        image=rgb,
        width=width,
        height=height,
        format=fmt,
        mode=mode,
        extent=(w / factor[0], h / factor[1]),
        frames=frames,
    )


def _load_pixels(im: Image.Image, data: bytes, fmt: Optional[str], width: int, height: int, frames: int):
    """The opened image with its pixels loaded (first frame, draft scale applied)."""
    if fmt == "PNG" and frames == 1 and width * height >= _SPNG_FROM_PIXELS:
        fast = png_pixels(data, im)
        if fast is not None:
            return fast
    _load_checked(im, fmt, width, height)
    return im


def _load_checked(im: Image.Image, fmt: Optional[str], width: int, height: int) -> None:
    """``im.load()`` with our limit already checked: Pillow's own warning is silenced, and its
    error (TIFF and GIF repeat Pillow's check inside ``load()``) becomes ours."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            im.load()
        except Image.DecompressionBombError as e:
            raise ImageDecodeError(
                "decompression_bomb",
                f"{width}x{height}: Pillow's {fmt} decoder refuses images above {_plugin_limit()} itself ({e})",
            ) from None


# Below about a quarter megapixel Pillow's PNG decoder is as fast (bench/decode.py: "sample").
_SPNG_FROM_PIXELS = 250_000
# Stored PNG mode -> the pixel format libspng is asked for (the same pixels Pillow gives:
# tests/transforms/vision/test_vision_decode_reduced.py compares them on real figures).
# RGBA even without alpha: Pillow maps a 4-byte buffer as it is; 3 bytes a pixel are copied.
_SPNG_FORMATS = {"RGB": "RGBA", "RGBA": "RGBA", "L": "L", "P": "RGBA"}


def png_pixels(data: bytes, opened: Image.Image) -> Optional[Image.Image]:
    """A single-frame 8-bit PNG decoded by the fastest decoder installed: Wuffs
    (``pywuffs``, the ``fast`` extra: ~2.2x libspng on arXiv-size figures) or libspng
    (``pyspng``, a dependency: ~1.6x Pillow). Both give Pillow's pixels. None when neither
    is installed or the image is one Pillow should decode (16-bit, 1-bit, a tRNS chunk ...).

    The picture comes back in the mode the box reduction wants, not the stored one: an
    RGB or palette PNG, and an RGBA PNG with no transparent pixel, come back as "RGBX"
    (its RGB, reduced before any conversion; a full-size RGBA -> RGB conversion costs
    as much as the decode); grey as "L"; RGBA with transparency as "RGBA"."""
    mode = opened.mode
    if "transparency" in opened.info:  # tRNS: libspng leaves it out (palette alpha stays 255)
        return None
    if mode not in ("RGB", "RGBA", "L", "P") or not isinstance(data, bytes):
        return None
    depth = _png_bit_depth(data)
    if depth != 8 and not (mode == "P" and depth in (1, 2, 4)):  # 16-bit and 1/2/4-bit grey: Pillow's rules
        return None
    size = opened.size
    pixels = _wuffs_png(data, mode == "L", size) if _wuffs is not None else None
    if pixels is None and _spng is not None:
        pixels = _spng_png(data, mode, size)
    if pixels is None:
        return None
    if pixels.shape[2] == 1:
        return Image.frombuffer("L", size, pixels, "raw", "L", 0, 1)
    # 4 channels: zero-copy views of the array (Pillow maps RGBA and RGBX buffers).
    opaque = mode != "RGBA" or int(pixels[..., 3].min()) == 255
    pixel_mode = "RGBX" if opaque else "RGBA"
    return Image.frombuffer(pixel_mode, size, pixels, "raw", pixel_mode, 0, 1)


def _spng_png(data: bytes, mode: str, size: tuple[int, int]) -> Optional[np.ndarray]:
    try:
        a = _spng.load(data, _SPNG_FORMATS[mode])
    except Exception:  # noqa: BLE001 - libspng is stricter on damaged files: Pillow decides
        return None
    if a.dtype != np.uint8 or a.shape[:2] != (size[1], size[0]):
        return None
    return a if a.ndim == 3 else a[:, :, None]


_wuffs_decoders = threading.local()  # a Wuffs ImageDecoder is not thread-safe: one per thread


def _wuffs_png(data: bytes, grey: bool, size: tuple[int, int]) -> Optional[np.ndarray]:
    """(height, width, 1 or 4) uint8 from Wuffs' PNG decoder (only PNG enabled), or None
    when it refuses the file (Pillow then decides). Grey as Y; everything else as
    non-premultiplied RGBA (alpha 255 where the PNG has none)."""
    key = "grey" if grey else "rgba"
    decoder = getattr(_wuffs_decoders, key, None)
    if decoder is None:
        config = _wuffs_aux.ImageDecoderConfig()
        config.enabled_decoders = [_wuffs.ImageDecoderType.PNG]
        config.pixel_format = _wuffs.PixelFormat.Y if grey else _wuffs.PixelFormat.RGBA_NONPREMUL
        decoder = _wuffs_aux.ImageDecoder(config)
        setattr(_wuffs_decoders, key, decoder)
    try:
        result = decoder.decode(data)  # bytes only: a str would be read as a file path
    except Exception:  # noqa: BLE001 - a refusal of any kind: Pillow decides
        return None
    a = result.pixbuf
    if result.error_message or a is None or a.dtype != np.uint8 or a.shape[:2] != (size[1], size[0]):
        return None
    if a.ndim == 2:
        a = a[:, :, None]
    return a if a.shape[2] == (1 if grey else 4) and a.flags.c_contiguous else None


def _png_bit_depth(data: bytes) -> int:
    return data[24] if len(data) > 24 and data[12:16] == b"IHDR" else 0


try:  # a dependency (setup.py); an install without it decodes PNGs with Pillow (the same pixels)
    import pyspng as _spng
except ImportError:  # pragma: no cover - depends on the install
    _spng = None
try:  # the `fast` extra (setup.py; built from source: needs a C++ compiler); else libspng
    import pywuffs as _wuffs
    import pywuffs.aux as _wuffs_aux
except ImportError:  # pragma: no cover - depends on the install
    _wuffs = None
    _wuffs_aux = None


def reduce_to_rgb(im: Image.Image, factor: tuple[int, int]) -> Image.Image:
    """A loaded image -> 8-bit RGB box-reduced by ``factor``, converting colours after the
    reduction where that gives the same picture (so the conversion costs 1/(fx*fy))."""
    mode = im.mode
    if mode == "RGBA" and im.getchannel("A").getextrema()[0] == 255:  # opaque: on white it is its RGB
        im, mode = im.convert("RGB"), "RGB"
    if mode in _ALPHA_MODES or (mode in ("P", "L") and "transparency" in im.info):
        # Premultiplied (Pillow's own rule when it reduces RGBA), then over white:
        # C*alpha + 255*(1 - alpha). Cheaper than alpha_composite even unreduced.
        rgba = im if mode in ("RGBA", "RGBa") else im.convert("RGBA")
        premultiplied = rgba if mode == "RGBa" else rgba.convert("RGBa")
        if factor != (1, 1):
            premultiplied = premultiplied.reduce(factor)
        *colour, alpha = premultiplied.split()
        transparent = ImageChops.invert(alpha)  # 255 * (1 - alpha), to add to each channel
        return Image.merge("RGB", [ImageChops.add(c, transparent) for c in colour])
    if factor == (1, 1):
        return to_rgb(im)
    if mode in ("RGB", "L", "RGBX"):
        return im.reduce(factor).convert("RGB")
    if mode == "P":
        return im.convert("RGB").reduce(factor)
    if mode == "1":
        return im.convert("L").reduce(factor).convert("RGB")
    if mode in WIDE_GREY_MODES:  # 8-bit grey first (a band at a time), reduced, then RGB: the same pixels
        return wide_grey_to_l(im).reduce(factor).convert("RGB")
    return to_rgb(im).reduce(factor)  # CMYK, YCbCr, ...: rare; converted whole, as before


def model_input(reduced: ReducedImage, input_size: int) -> np.ndarray:
    """ReducedImage -> uint8 ``input_size`` squared x 3, the whole figure squeezed to a
    square: ``models.resize_for_model`` of the full picture, computed from the reduced one
    (the same pixels when the reduction is the one ``resize_for_model`` makes itself, i.e.
    ``min_side = 2 * input_size``)."""
    im, (ew, eh) = reduced.image, reduced.extent
    if im.size != (input_size, input_size) or (ew, eh) != (input_size, input_size):
        im = im.resize((input_size, input_size), Image.Resampling.BILINEAR, box=(0.0, 0.0, ew, eh), reducing_gap=2.0)
    return np.asarray(im, dtype=np.uint8)


def _on_white(im: Image.Image) -> Image.Image:
    rgba = im.convert("RGBA")
    bg = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
    return Image.alpha_composite(bg, rgba).convert("RGB")


def to_rgb(im: Image.Image) -> Image.Image:
    mode = im.mode
    if mode == "RGB":
        return im
    if mode in _ALPHA_MODES:
        return _on_white(im)
    if mode == "P":
        return _on_white(im) if "transparency" in im.info else im.convert("RGB")
    if mode == "L" and "transparency" in im.info:
        return _on_white(im)
    if mode in WIDE_GREY_MODES:
        return wide_grey_to_l(im).convert("RGB")
    if mode == "1":
        return im.convert("L").convert("RGB")
    # CMYK, YCbCr, LAB, HSV, L ...: Pillow knows the conversion.
    return im.convert("RGB")


# ------------------------------------------------------------------ 16/32-bit and float greyscale

WIDE_GREY_MODES = ("I;16", "I;16B", "I;16L", "I;16N", "I", "F")
# Rows converted at a time: a band of a 9,400-pixel-wide picture costs ~20 MB as float64.
_BAND_BYTES = 24 * 1024 * 1024


def wide_grey_to_l(im: Image.Image) -> Image.Image:
    """A 16-bit, 32-bit or float greyscale picture as 8-bit "L", rescaled from its own value
    range (``(v - min) * 255 / (max - min)``, truncated; NaN as 0), a band of rows at a time.

    The whole picture as float64 (8 bytes a pixel) and the two more such arrays the scaling
    made took 2.7 GB for a 9400 x 9400 16-bit PNG of 1.3 MB under the pixel limit; by bands,
    the memory beyond the decoded picture (2 bytes a pixel) is its 8-bit result (1 byte a
    pixel) and one band. The pixels are the ones the whole-picture computation gives."""
    w, h = im.size
    rows = max(1, _BAND_BYTES // (8 * max(1, w)))
    bands = [(top, min(h, top + rows)) for top in range(0, h, rows)]
    lo = hi = None
    for top, bottom in bands:
        a = np.asarray(im.crop((0, top, w, bottom)), dtype=np.float64)
        finite = a[~np.isnan(a)] if im.mode == "F" else a
        if finite.size:
            b_lo, b_hi = float(finite.min()), float(finite.max())
            lo = b_lo if lo is None else min(lo, b_lo)
            hi = b_hi if hi is None else max(hi, b_hi)
    out = Image.new("L", (w, h), 0)
    if lo is None or hi is None or hi <= lo:
        return out  # flat, or nothing but NaN: black, as the whole-picture rule gives
    scale = 255.0 / (hi - lo)
    for top, bottom in bands:
        a = np.asarray(im.crop((0, top, w, bottom)), dtype=np.float64)
        scaled = np.nan_to_num((a - lo) * scale).astype(np.uint8)
        out.paste(Image.fromarray(scaled, "L"), (0, top))
    return out
