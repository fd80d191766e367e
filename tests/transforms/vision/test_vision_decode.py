"""Image decoding with limits: bombs, corrupt files, odd colour modes, SVG-only figures."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from vision_fixtures import ROOT, SVG, animated_gif, bomb_png, cmyk_jpeg, figure_row, png_bytes

import sciga  # noqa: F401 - puts the checkout on sciga's path
from sciga.transforms.vision.decode import ImageDecodeError, decode_image
from sciga.transforms.vision.defaults import DEFAULT_MAX_PIXELS
from sciga.transforms.vision.figure_images import annotate_image
from sciga.transforms.vision.phash import hamming


def row(data=None, kind="raster", path="x.png"):
    return figure_row(data, kind, path)


def test_100_megapixel_bomb_is_a_row_error_not_a_crash():
    data = bomb_png(10_000, 10_000)
    assert len(data) < 200  # cheap to make, 300 MB to decode
    with pytest.raises(ImageDecodeError) as e:
        decode_image(data)
    assert e.value.kind == "decompression_bomb" and "100.0 megapixels" in e.value.message
    r = annotate_image(row(data))
    assert r.image_error.startswith("decompression_bomb") and r.image_bytes is None and r.width is None
    # Pillow's global limit is untouched
    assert Image.MAX_IMAGE_PIXELS == DEFAULT_MAX_PIXELS


def test_bomb_beyond_pillows_hard_limit_and_a_configurable_limit():
    with pytest.raises(ImageDecodeError) as e:
        decode_image(bomb_png(20_000, 20_000))  # 400 MP: Pillow itself refuses at open
    assert e.value.kind == "decompression_bomb"
    with pytest.raises(ImageDecodeError):
        decode_image(png_bytes(Image.new("RGB", (100, 100))), max_pixels=5_000)


@pytest.mark.parametrize("data", [b"", b"not an image at all", png_bytes(Image.new("RGB", (64, 64), "red"))[:60]])
def test_corrupt_and_truncated_images(data):
    r = annotate_image(row(data))
    assert r.image_error.split(":")[0] in ("corrupt", "empty")
    assert r.image_bytes is None and r.phash is None


def test_one_pixel_image():
    r = annotate_image(row(png_bytes(Image.new("RGB", (1, 1), (10, 20, 30)))))
    assert (r.width, r.height, r.image_error) == (1, 1, None)
    assert len(r.phash) == 16 and r.image_bytes is not None


def test_cmyk_jpeg_becomes_rgb():
    d = decode_image(cmyk_jpeg())
    assert d.mode == "CMYK" and d.image.mode == "RGB" and (d.width, d.height) == (40, 30)
    r, g, b = d.image.getpixel((20, 15))
    assert r > 200 and g < 60 and b < 60


def test_animated_gif_first_frame():
    d = decode_image(animated_gif())
    assert d.frames == 3 and d.image.mode == "RGB"
    r, g, b = d.image.getpixel((5, 5))
    assert b > 200 and r < 50 and g < 50  # frame 0 is blue


def test_palette_with_transparency_and_alpha_go_on_white():
    p = Image.new("P", (8, 8), 0)
    p.putpalette([0, 0, 0] + [255, 0, 0] * 255)
    p.info["transparency"] = 0
    assert decode_image(png_bytes(p, transparency=0)).image.getpixel((1, 1)) == (255, 255, 255)
    rgba = Image.new("RGBA", (8, 8), (0, 0, 0, 0))
    assert decode_image(png_bytes(rgba)).image.getpixel((3, 3)) == (255, 255, 255)
    la = Image.new("LA", (8, 8), (0, 255))
    assert decode_image(png_bytes(la)).image.getpixel((3, 3)) == (0, 0, 0)


def test_sixteen_bit_greyscale_is_rescaled():
    a = np.tile(np.linspace(1000, 60000, 32, dtype=np.uint16), (8, 1))
    d = decode_image(png_bytes(Image.fromarray(a, "I;16")))
    px = np.asarray(d.image)
    assert d.image.mode == "RGB" and px[..., 0].min() == 0 and px[..., 0].max() == 255


def test_svg_only_figures():
    r = annotate_image(row(SVG, kind="svg", path="fig.svg"))
    assert r.image_error.startswith("svg_only") and r.image_bytes is None
    r = annotate_image(row(None, kind="inline_svg", path=None))
    assert r.image_error.startswith("svg_only")
    with pytest.raises(ImageDecodeError) as e:
        decode_image(b"%PDF-1.5\n...")
    assert e.value.kind == "pdf_only"


def test_phash_sees_resized_copies_as_near():
    figs = ROOT / "samples" / "html" / "2511.99001" / "figs"
    a = Image.open(figs / "res_curve.png").convert("RGB")
    ra = annotate_image(row(png_bytes(a)))
    rb = annotate_image(row(png_bytes(a.resize((200, 140)))))
    rc = annotate_image(row((figs / "res_bars.png").read_bytes()))
    assert hamming(ra.phash, rb.phash) <= 4 < hamming(ra.phash, rc.phash)
