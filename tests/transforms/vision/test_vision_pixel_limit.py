"""``--max-image-pixels`` is the only pixel limit: above Pillow's own refusal (twice its
global ``MAX_IMAGE_PIXELS``, about 179 MP) in the vision stage, and the gate (``sciga
validate`` / ``publish``) checks against the limit the build was made with (manifest.json).

The large image is real: a 13,400 x 13,400 one-bit PNG (179.6 MP, just above Pillow's
178.96 MP refusal) written with zlib row by row: 22 KB on disk, about 1 GB to decode.
"""

from __future__ import annotations

import struct
import zlib

import pytest
from hub_fixtures import FakeHub
from PIL import Image
from quality_fixtures import edit_manifest, rewrite_shard
from vision_fixtures import figure_row

from sciga.pipelines.cli import main
from sciga.quality.gate import run_gate
from sciga.quality.images import check_image
from sciga.transforms.vision.decode import ImageDecodeError, decode_image, read_size
from sciga.transforms.vision.defaults import DEFAULT_MAX_PIXELS
from sciga.transforms.vision.figure_images import annotate_image

SIDE = 13_400  # 179,560,000 pixels
ABOVE_PILLOW = 200_000_000


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def large_png(width: int = SIDE, height: int = SIDE) -> bytes:
    """A valid one-bit greyscale PNG of width x height black pixels, every row
    present (it decodes completely), compressed to a few KB."""
    row = b"\x00" + b"\x00" * ((width + 7) // 8)
    z = zlib.compressobj(9)
    idat = b"".join(z.compress(row) for _ in range(height)) + z.flush()
    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")


@pytest.fixture(scope="module")
def big() -> bytes:
    data = large_png()
    assert len(data) < 64_000 and SIDE * SIDE > 2 * Image.MAX_IMAGE_PIXELS  # Pillow alone refuses it
    return data


def test_pillow_alone_refuses_the_image(big):
    import io

    with pytest.raises(Image.DecompressionBombError):
        Image.open(io.BytesIO(big))


@pytest.mark.e2e  # decodes and hashes an image above Pillow's pixel limit
def test_the_flag_is_the_only_limit_in_the_vision_stage(big):
    assert read_size(big) == (SIDE, SIDE, "PNG")
    with pytest.raises(ImageDecodeError) as e:
        decode_image(big)  # the default limit still refuses it, with our message
    assert e.value.kind == "decompression_bomb" and "raise --max-image-pixels" in e.value.message
    row = figure_row(big, path="big.png")
    row = annotate_image(row, max_pixels=ABOVE_PILLOW)
    assert (row.width, row.height, row.image_error) == (SIDE, SIDE, None)
    assert row.image_bytes is big and len(row.phash) == 16
    assert Image.MAX_IMAGE_PIXELS == DEFAULT_MAX_PIXELS  # Pillow's global is untouched


def test_the_gate_image_check_takes_the_same_limit(big):
    assert check_image(big, "raster", "header", ABOVE_PILLOW) == (SIDE, SIDE, None)
    w, h, err = check_image(big, "raster", "header", DEFAULT_MAX_PIXELS)
    assert (w, h) == (SIDE, SIDE) and "exceeds the limit of 89478485" in err


def _embed_big_image(out, big, limit):
    """A build made with --max-image-pixels LIMIT holding one 179.6 MP figure image."""

    def put(rows):
        r = next(r for r in rows if r["image"] and r["image"]["bytes"] and r["kind"] == "figure")
        r["image"] = {"bytes": big, "path": r["image"]["path"]}
        r["width"], r["height"] = SIDE, SIDE
        return rows

    rewrite_shard(out, "figures", put)
    edit_manifest(out, lambda m: m["options"].__setitem__("max_image_pixels", limit))


def test_validate_checks_images_against_the_builds_limit(build_copy, big, capsys):
    _embed_big_image(build_copy, big, ABOVE_PILLOW)
    result = run_gate(str(build_copy), image_check="header")
    assert result.success, [(c.table, c.examples) for c in result.failed]
    assert (result.options["max_pixels"], result.options["max_pixels_source"]) == (ABOVE_PILLOW, "manifest")
    assert main(["validate", str(build_copy), "--image-check", "header", "--image-workers", "1"]) == 0
    assert (
        "pixel limit 200,000,000 (the build's --max-image-pixels" in (build_copy / "quality" / "report.md").read_text()
    )
    # An explicit flag still wins over the manifest.
    assert main(["validate", str(build_copy), "--image-check", "header", "--max-image-pixels", "100000000"]) == 1
    assert "exceeds the limit of 100000000 pixels" in capsys.readouterr().out  # the verdict is a result: stdout


def test_a_build_made_with_the_default_limit_still_fails_the_large_image(build_copy, big):
    _embed_big_image(build_copy, big, DEFAULT_MAX_PIXELS)
    result = run_gate(str(build_copy), image_check="header")
    (bad,) = [c for c in result.failed if c.table == "images"]
    assert "exceeds the limit of 89478485 pixels" in bad.examples[0]


def test_publish_gate_uses_the_builds_limit(build_copy, big, monkeypatch, tmp_path, capsys):
    import huggingface_hub.constants as hf_constants

    _embed_big_image(build_copy, big, ABOVE_PILLOW)
    server = FakeHub("hf_test_token").start()
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    monkeypatch.setattr(hf_constants, "HF_HUB_DISABLE_XET", True)
    try:
        rc = main(
            [
                "publish",
                str(build_copy),
                "--repo-id",
                "sciga-org/big",
                "--version",
                "v1.1.0",
                "--endpoint",
                server.url,
                "--allow-any-licence",
                "--dry-run",
                "--image-check",
                "header",
            ]
        )
    finally:
        server.stop()
    assert rc == 0, capsys.readouterr().err
    assert "dry run" in capsys.readouterr().out
