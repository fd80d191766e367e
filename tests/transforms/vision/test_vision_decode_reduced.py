"""One decode per figure, at the scale the build needs (issue 26): ``decode_reduced`` gives
the stored size and one small RGB picture from which the pHash and the classifier input
are made; JPEGs are scaled inside libjpeg, PNGs decoded by libspng when installed, and
colours converted after the reduction. Against the former full decode: the hashes that
moved and by how much, and the classifier's labels, on the sample and the corpus."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image
from vision_fixtures import ROOT, animated_gif, bomb_png, cmyk_jpeg, figure_files, figure_row, png_bytes

import sciga  # noqa: F401 - puts the checkout on sciga's path
from sciga.transforms.vision import decode as decode_mod
from sciga.transforms.vision.decode import (
    REDUCED_SIDE,
    ImageDecodeError,
    decode_image,
    decode_reduced,
    model_input,
    png_pixels,
)
from sciga.transforms.vision.figure_images import annotate_image, measure_image
from sciga.transforms.vision.models import resize_for_model
from sciga.transforms.vision.phash import hamming, phash_hex

SAMPLE_FIGS = sorted((ROOT / "samples" / "html").glob("*/figs/*.png"))


def row(data):
    return figure_row(data)


def _jpeg(im: Image.Image, **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=90, **kw)
    return buf.getvalue()


def _photo(w: int, h: int, mode: str = "RGB") -> Image.Image:
    """A smooth picture with detail at every scale (no flat areas that hide errors)."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    a = np.stack([127 + 120 * np.sin(x / 37 + c) * np.cos(y / 23 - c) for c in (0.0, 1.0, 2.0)], -1)
    return Image.fromarray(a.astype(np.uint8), "RGB").convert(mode)


def test_a_large_jpeg_is_decoded_at_reduced_scale_inside_libjpeg(monkeypatch):
    data = _jpeg(_photo(3000, 2000))
    loaded = []
    real_load = decode_mod._load_pixels
    monkeypatch.setattr(decode_mod, "_load_pixels", lambda im, *a: loaded.append(im.size) or real_load(im, *a))
    d = decode_reduced(data)
    assert (d.width, d.height, d.format) == (3000, 2000, "JPEG")
    assert loaded == [(750, 500)], "libjpeg decoded 1/4 of each side (DCT scaling), not 3000x2000"
    assert d.image.size == (750, 500) and d.image.mode == "RGB"
    assert min(d.image.size) >= REDUCED_SIDE


def test_a_large_png_is_reduced_before_its_colours_are_converted():
    rgba = _photo(2400, 1500, "RGBA")
    a = np.asarray(rgba).copy()
    a[:, :800, 3] = 0  # a transparent left third
    a[:, 800:900, 3] = np.linspace(0, 255, 100, dtype=np.uint8)  # an alpha ramp
    data = png_bytes(Image.fromarray(a, "RGBA"))
    d = decode_reduced(data)
    assert (d.width, d.height) == (2400, 1500)
    assert d.image.size == (2400 // 5, 1500 // 3) and d.extent == (480.0, 500.0)
    full = decode_image(data)  # composited on white at full size
    px = np.asarray(d.image)
    assert (px[:, :150] == 255).all(), "transparent is white"
    # the classifier input is the former one (full decode, resize_for_model) to rounding
    old = resize_for_model(full.image, 224).astype(int)
    assert np.abs(model_input(d, 224).astype(int) - old).max() <= 1


@pytest.mark.parametrize("size", [(60, 40), (2000, 1400)])
def test_every_colour_rule_holds_after_the_reduction(size):
    w, h = size
    p = Image.new("P", (w, h), 0)
    p.putpalette([0, 0, 0] + [255, 0, 0] * 255)
    cases = {
        "palette transparency": (png_bytes(p, transparency=0), (255, 255, 255)),
        "RGBA transparent": (png_bytes(Image.new("RGBA", (w, h), (0, 0, 0, 0))), (255, 255, 255)),
        "LA opaque black": (png_bytes(Image.new("LA", (w, h), (0, 255))), (0, 0, 0)),
        "1-bit": (png_bytes(Image.new("1", (w, h), 1)), (255, 255, 255)),
        "grey": (png_bytes(Image.new("L", (w, h), 77)), (77, 77, 77)),
    }
    for name, (data, colour) in cases.items():
        d = decode_reduced(data)
        assert (d.width, d.height) == (w, h), name
        assert d.image.mode == "RGB" and d.image.getpixel((2, 2)) == colour, name
    a = np.tile(np.linspace(1000, 60000, w, dtype=np.uint16), (h, 1))
    px = np.asarray(decode_reduced(png_bytes(Image.fromarray(a, "I;16"))).image)
    assert px[..., 0].min() == 0 and px[..., 0].max() >= 250, "16-bit rescaled from its own range"
    cmyk = decode_reduced(cmyk_jpeg())
    assert cmyk.mode == "CMYK" and cmyk.image.mode == "RGB"
    gif = decode_reduced(animated_gif())
    r, g, b = gif.image.getpixel((5, 5))
    assert gif.frames > 1 and b > 200 and r < 50 and g < 50, "the first frame"


def test_exif_orientation_is_applied_to_the_reduced_picture():
    im = _photo(2400, 1200)
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees on display
    data = _jpeg(im, exif=exif.tobytes())
    d = decode_reduced(data)
    assert (d.width, d.height) == (2400, 1200), "the stored size"
    upright = resize_for_model(decode_image(data, draft_size=(448, 448)).image, 224)
    assert np.array_equal(model_input(d, 224), upright), "shown upright, as the former decode showed it"


def test_bombs_and_damaged_files_are_refused_before_any_pixel_is_decoded(monkeypatch):
    monkeypatch.setattr(decode_mod, "_load_pixels", lambda *a: pytest.fail("decoded a bomb"))
    for data in (bomb_png(10_000, 10_000), bomb_png(20_000, 20_000)):
        with pytest.raises(ImageDecodeError) as e:
            decode_reduced(data)
        assert e.value.kind == "decompression_bomb"
    with pytest.raises(ImageDecodeError) as e:
        decode_reduced(png_bytes(Image.new("RGB", (100, 100))), max_pixels=5_000)
    assert e.value.kind == "decompression_bomb"
    monkeypatch.undo()
    with pytest.raises(ImageDecodeError) as e:
        decode_reduced(SAMPLE_FIGS[0].read_bytes()[:300])
    assert e.value.kind == "corrupt"
    r = annotate_image(row(bomb_png()))
    assert r.image_error.startswith("decompression_bomb") and r.image_bytes is None and r.phash is None


def _made_pngs() -> list[bytes]:
    p4 = Image.new("P", (33, 17), 3)
    p4.putpalette([i * 15 % 256 for i in range(48)])
    half_clear = _photo(50, 30, "RGBA")
    half_clear.putalpha(Image.linear_gradient("L").resize((50, 30)))
    return [
        png_bytes(Image.open(SAMPLE_FIGS[0]).convert("P"), transparency=2),
        png_bytes(p4, bits=4),
        png_bytes(_photo(50, 30, "L")),
        png_bytes(_photo(50, 30, "LA")),
        png_bytes(_photo(50, 30, "RGBA")),  # RGBA, every pixel opaque
        png_bytes(half_clear),  # RGBA with transparent pixels
        png_bytes(_photo(50, 30), interlace=1),
    ]


@pytest.mark.parametrize("decoder", ["wuffs", "libspng"])
def test_fast_png_decoders_give_pillows_pixels(decoder, monkeypatch):
    """Wuffs and libspng are used only because they decode the same pixels faster: every
    real figure and each kind of PNG they are given (palette, 4-bit palette, grey, opaque
    and transparent RGBA, interlaced). An opaque picture comes back as RGBX (its RGB,
    mapped without a copy), a transparent one as RGBA."""
    assert decode_mod._spng is not None, "pyspng is a dependency (setup.py)"
    if decoder == "wuffs":
        assert decode_mod._wuffs is not None, (
            "pywuffs is not installed: pip install -e '.[fast]' (needs a C++ compiler)"
        )
        calls = []
        real = decode_mod._wuffs_png
        monkeypatch.setattr(decode_mod, "_wuffs_png", lambda *a: calls.append(1) or real(*a))
        monkeypatch.setattr(decode_mod, "_spng", None)  # no fallback: every picture is Wuffs'
    else:
        monkeypatch.setattr(decode_mod, "_wuffs", None)
    files = [d for n, d in figure_files(large=False) if not n.endswith(".jpg")] + _made_pngs()
    used = 0
    for data in files:
        opened = Image.open(io.BytesIO(data))
        fast = png_pixels(data, opened)
        if fast is None:
            continue
        used += 1
        ref = Image.open(io.BytesIO(data))
        ref.load()
        if ref.mode == "RGBA" and ref.getchannel("A").getextrema()[0] == 255 or ref.mode == "P":
            ref = ref.convert("RGB")
        expected = {"RGB": "RGBX", "L": "L", "RGBA": "RGBA"}[ref.mode]
        assert fast.mode == expected, (fast.mode, ref.mode)
        got = fast.convert("RGB") if fast.mode == "RGBX" else fast
        assert np.array_equal(np.asarray(got), np.asarray(ref))
    assert used == len(files) - 2  # a palette with a tRNS chunk and grey+alpha are Pillow's
    if decoder == "wuffs":
        assert len(calls) == used


def test_a_png_the_fast_decoders_refuse_is_pillows(monkeypatch):
    """A truncated PNG (its header readable) is refused by Wuffs and libspng: Pillow then
    decides, and the figure's row says the data is damaged instead of the build failing."""
    data = png_bytes(_photo(700, 500))
    cut = data[: len(data) // 2]
    assert png_pixels(cut, Image.open(io.BytesIO(cut))) is None
    with pytest.raises(ImageDecodeError) as e:
        decode_reduced(cut)
    assert e.value.kind == "corrupt"
    assert png_pixels(data.decode("latin-1"), Image.open(io.BytesIO(data))) is None, (
        "only bytes (Wuffs reads a str as a path)"
    )


def test_same_bytes_same_hash_and_model_input():
    data = png_bytes(_photo(1900, 1300, "RGBA"))
    a, b = row(data), row(data)
    xa, xb = measure_image(a, model_input_size=224), measure_image(b, model_input_size=224)
    assert a.phash == b.phash and np.array_equal(xa, xb)
    assert xa.dtype == np.uint8 and xa.shape == (224, 224, 3)
    assert measure_image(row(data)) is None, "no classifier: no model input"
    assert measure_image(row(data), model_input_size=REDUCED_SIDE) is None, "too large for the one decode"


@pytest.mark.corpus
def test_hashes_moved_few_and_little_and_labels_kept_on_the_sample_and_the_corpus(tmp_path):
    """The former build hashed the full decode (``decode_image``) and gave the classifier a
    second decode (JPEG draft at twice its input size). Now both come from one reduced
    decode: how many pHashes moved, by how many bits, and whether a confident classifier's
    top-1 labels changed, on the sample's and the corpus's figures (PNG, the corpus PDF
    figures rasterised as the build does, JPEG re-encodings, arXiv-size versions)."""
    from vision_fixtures import figure_variants, save_trained_head_classifier

    from sciga.transforms.vision.handlers import FigureModelHandler

    files = figure_files()
    names = [n for n, _ in files]
    assert sum(n.endswith(".2400.png") for n in names) >= 8 and any(n.endswith(".pdf.png") for n in names)
    size = 64
    weights = save_trained_head_classifier(tmp_path / "confident.pt", figure_variants(size), input_size=size)
    old_hash, new_hash, old_x, new_x = [], [], [], []
    for _, data in files:
        full = decode_image(data)
        old_hash.append(phash_hex(full.image))
        old_x.append(resize_for_model(decode_image(data, draft_size=(2 * size, 2 * size)).image, size))
        r = row(data)
        new_x.append(measure_image(r, model_input_size=size))
        new_hash.append(r.phash)
        assert (r.width, r.height) == (full.width, full.height)
    moved = [(n, hamming(a, b)) for n, a, b in zip(names, old_hash, new_hash) if a != b]
    print(f"\n{len(moved)} of {len(files)} pHashes moved; max {max((d for _, d in moved), default=0)} bits: {moved}")
    assert max((d for _, d in moved), default=0) <= 2
    assert len(moved) <= len(files) // 5
    h = FigureModelHandler(weights, "classify", "cpu", max_batch_size=len(files))
    model = h.load_model()
    old_top = np.stack([r.inference for r in h.run_inference(old_x, model)]).argmax(1)
    new_top = np.stack([r.inference for r in h.run_inference(new_x, model)]).argmax(1)
    changed = [n for n, a, b in zip(names, old_top, new_top) if a != b]
    assert len(set(old_top)) >= 3, "a classifier with varied labels"
    assert changed == [], f"top-1 labels changed: {changed}"


def test_a_ready_model_input_is_not_decoded_again(monkeypatch):
    from sciga.transforms.vision import inference, model_step

    decodes = []
    real = model_step.decode_reduced  # the classifier's decoding lives in model_step (Beam-free)
    monkeypatch.setattr(model_step, "decode_reduced", lambda *a, **k: decodes.append(1) or real(*a, **k))
    fn = inference.DecodeForModel(224)
    x = measure_image(row(_jpeg(_photo(2000, 1500))), model_input_size=224)
    out = list(fn.process(("k", x)))
    assert len(out) == 1 and out[0][1] is x and decodes == []
    data = _jpeg(_photo(900, 700))
    (key, y), *_ = fn.process(("b", data))  # bytes are still accepted, and decoded
    assert key == "b" and y.shape == (224, 224, 3) and decodes == [1]


def test_a_build_with_the_classifier_decodes_each_figure_once(tmp_path, monkeypatch):
    """The build measures each figure with one decode and hands the classifier the input made
    from it: no second read and decode in the classifier step; sizes and statuses as before."""
    from vision_fixtures import copy_sample, read_rows, run_build, save_tiny_classifier

    from sciga.transforms.vision import figure_images, model_step

    calls: dict[str, int] = {"measure": 0, "classifier": 0, "full": 0}

    def counting(name, fn):
        def wrapped(*a, **k):
            calls[name] += 1
            return fn(*a, **k)

        return wrapped

    monkeypatch.setattr(figure_images, "decode_reduced", counting("measure", figure_images.decode_reduced))
    monkeypatch.setattr(model_step, "decode_reduced", counting("classifier", model_step.decode_reduced))
    monkeypatch.setattr(decode_mod, "decode_image", counting("full", decode_mod.decode_image))
    src = tmp_path / "in"
    copy_sample(src, edit=("Overview of Glimpse.", "Overview of Glimpse on an MRI scan."))
    always = save_tiny_classifier(tmp_path / "always.pt", bias={"Medical image": 50.0})
    argv = [
        "--input",
        str(src),
        "--output",
        str(tmp_path / "med"),
        "--medical-weights",
        always,
        "--medical-classify",
        "all",
    ]
    assert run_build(argv) == 0
    rows = read_rows(tmp_path / "med", "figures")
    with_pixels = [r for r in rows if r["image_status"] == "embedded"]
    assert len(with_pixels) == 5 and all(r["medical"]["classifier_run"] for r in with_pixels)
    assert calls == {"measure": len(with_pixels), "classifier": 0, "full": 0}, calls
    for r in with_pixels:
        im = Image.open(io.BytesIO(r["image"]["bytes"]))
        assert (r["width"], r["height"]) == im.size and len(r["phash"]) == 16


def test_classify_images_takes_ready_inputs_and_bytes_together(tmp_path):
    """Ready inputs skip the decode (and the reshuffle); bytes are decoded as before; every
    key comes out once."""
    import apache_beam as beam
    from apache_beam.testing.util import assert_that, equal_to
    from vision_fixtures import save_tiny_classifier

    from sciga.transforms.vision.inference import ClassifyImages

    weights = save_tiny_classifier(tmp_path / "tiny.pt", input_size=32)
    data = SAMPLE_FIGS[0].read_bytes()
    ready = measure_image(row(data), model_input_size=32)
    items = [("ready", ready), ("bytes", data), ("broken", data[:100])]
    with beam.Pipeline("DirectRunner") as p:
        res = p | beam.Create(items) | ClassifyImages(weights)
        assert_that(res.probabilities | beam.Map(lambda kv: kv[0]), equal_to(["ready", "bytes"]), label="ok")
        assert_that(res.failed | beam.Map(lambda kv: kv[0]), equal_to(["broken"]), label="failed")
