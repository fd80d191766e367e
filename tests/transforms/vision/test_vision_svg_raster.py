"""SVG figures -> PNG (issue 44, item 3): real SVGs drawn, hostile ones refused before any
renderer sees them.

Real SVGs: ``tests/pages/oxide/2609.03768v1/fig_closure.svg`` (a matplotlib plot arXiv serves as
an ``<object>`` figure file of arXiv:2609.03768v1) and the inline TikZ pictures of
``tests/pages/oxide/2410.00260v2.html`` (provenance: tests/pages/SOURCES.md).
"""

from __future__ import annotations

import base64
import io
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree
from PIL import Image

from sciga.schemas.images import EMBEDDED, NO_IMAGES_FLAG, RASTERIZED_SVG, SVG_ONLY, counts_as_missing, settle_status
from sciga.transforms.parse.inline_svg import svg_markup
from sciga.transforms.vision.decode import decode_image
from sciga.transforms.vision.svg_raster import MAX_SIDE, SvgRefused, font_files, prepare_svg, rasterize_svg

OXIDE = Path(__file__).resolve().parents[2] / "pages" / "oxide"
SVG_FILE = OXIDE / "2609.03768v1" / "fig_closure.svg"
NS = 'xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink"'


def inline_svg(svg_id: str) -> str:
    page = etree.fromstring((OXIDE / "2410.00260v2.html").read_bytes(), etree.HTMLParser())
    return svg_markup(next(el for el in page.iter("svg") if el.get("id") == svg_id))


def dark_pixels(png: bytes) -> int:
    return int((np.asarray(Image.open(io.BytesIO(png)).convert("L")) < 128).sum())


def test_a_real_svg_file_is_drawn_at_twice_its_css_size_on_white():
    r = rasterize_svg(SVG_FILE.read_bytes())
    assert (r.width, r.height) == (653, 501)  # 244.8pt x 187.2pt = 326.4 x 249.6 CSS px, twice
    im = decode_image(r.png).image
    assert im.size == (653, 501)
    a = np.asarray(im)
    assert a[0, 0].tolist() == [255, 255, 255]  # on white, not transparent black
    assert (a[..., 0] > 200).mean() > 0.5 and dark_pixels(r.png) > 2000  # a white plot with axes and labels
    assert rasterize_svg(SVG_FILE.read_bytes()).png == r.png  # deterministic


def test_an_inline_tikz_picture_is_drawn_with_its_foreign_object_text():
    markup = inline_svg("S2.F2.pic1")
    r = rasterize_svg(markup)
    assert (r.width, r.height) == (1300, 414)
    assert r.width <= MAX_SIDE
    # the prompt's 25 lines of text (foreignObject > pre, which resvg does not draw) are there
    no_text = etree.fromstring(markup.encode())
    fo = no_text.find(".//{http://www.w3.org/2000/svg}foreignObject")
    fo.getparent().remove(fo)
    assert dark_pixels(r.png) > 5 * dark_pixels(rasterize_svg(etree.tostring(no_text)).png) + 1000
    assert "<text" in prepare_svg(markup).markup and "foreignObject" not in prepare_svg(markup).markup


def test_a_large_drawing_is_bounded():
    r = rasterize_svg(f'<svg {NS} width="5000" height="2500"><rect width="5000" height="2500" fill="red"/></svg>')
    assert (r.width, r.height) == (MAX_SIDE, MAX_SIDE // 2)


def test_the_only_files_the_renderer_reads_are_our_fonts():
    fonts = font_files()
    assert [Path(f).name for f in fonts] == ["DejaVuSans.ttf", "DejaVuSerif.ttf", "DejaVuSansMono.ttf"]
    assert all("mpl-data" in f for f in fonts)  # matplotlib's, never the machine's fonts


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _png_claiming(width: int, height: int) -> bytes:
    """A 60-byte PNG whose header claims ``width`` x ``height`` (a decompression bomb's shape)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(b"")) + _chunk(b"IEND", b"")


def _small_png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (10, 10), (0, 128, 255)).save(out, "PNG")
    return out.getvalue()


BOMB = base64.b64encode(_png_claiming(100_000, 100_000)).decode()
SMALL = base64.b64encode(_small_png()).decode()
LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">'
    '<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;">]>' + f'<svg {NS} width="10" height="10"><text>&c;</text></svg>'
)
USE_BOMB = (
    f'<svg {NS} width="10" height="10"><defs><g id="a0"><rect width="1" height="1"/></g>'
    + "".join(f'<g id="a{i}">' + f'<use href="#a{i - 1}"/>' * 10 + "</g>" for i in range(1, 8))
    + '</defs><use href="#a7"/></svg>'
)

HOSTILE = {
    "entities": [
        LAUGHS,
        f'<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY x SYSTEM "file:///etc/passwd">]><svg {NS}><text>&x;</text></svg>',
        f'<?xml version="1.0"?><!doctype svg [<!element svg ANY>]><svg {NS} width="1" height="1"/>',
    ],
    "external_reference": [
        f'<svg {NS} width="10" height="10"><image href="http://127.0.0.1:9/x.png" width="5" height="5"/></svg>',
        f'<svg {NS} width="10" height="10"><image xlink:href="/etc/passwd" width="5" height="5"/></svg>',
        f'<svg {NS} width="10" height="10"><image href="../figs/secret.png" width="5" height="5"/></svg>',
        f'<svg {NS} width="10" height="10"><image href="file:///dev/zero" width="5" height="5"/></svg>',
        f'<svg {NS} width="10" height="10"><use href="other.svg#a"/></svg>',
        f'<svg {NS} width="10" height="10"><rect width="5" height="5" fill="url(http://x/y.svg#g)"/></svg>',
        f'<svg {NS} width="10" height="10"><rect width="5" height="5" style="fill: url(\'/tmp/p.svg#g\')"/></svg>',
        f'<svg {NS} width="10" height="10"><style>@import url(\'https://x/y.css\');</style></svg>',
        f'<svg {NS} width="10" height="10"><style>rect {{ fill: url(http://x/p#g) }}</style></svg>',
        f'<svg {NS} width="10" height="10"><image href="data:text/html;base64,PGI+" width="5" height="5"/></svg>',
    ],
    "embedded_image": [
        f'<svg {NS} width="10" height="10"><image href="data:image/png;base64,{BOMB}" width="5" height="5"/></svg>',
        f'<svg {NS} width="10" height="10"><image href="data:image/png;base64,!!!" width="5" height="5"/></svg>',
    ],
    "huge_viewbox": [
        f'<svg {NS} viewBox="0 0 1e9 1e9"/>',
        f'<svg {NS} width="100" height="100" viewBox="0 0 1000000 10"/>',
        f'<svg {NS} width="100001" height="10"/>',
        f'<svg {NS} width="1000" height="1"/>',
        f'<svg {NS} viewBox="0 0 0 10"/>',
        f'<svg {NS} viewBox="0 0 nan 10"/>',
        f'<svg {NS} viewBox="0 0 10"/>',
        f'<svg {NS} width="-5" height="10"/>',
    ],
    "too_complex": [
        USE_BOMB,
        f'<svg {NS} width="10" height="10"><g id="a"><use href="#a"/></g></svg>',
        f'<svg {NS} width="10" height="10"><g id="a"><use href="#b"/></g><g id="b"><use href="#a"/></g></svg>',
    ],
    "malformed": [
        "<svg",
        '<html xmlns="http://www.w3.org/1999/xhtml"/>',
        '<svg width="10" height="10"/>',  # not in the SVG namespace
        f"<svg {NS}/>",  # no size at all
    ],
}


@pytest.mark.parametrize(
    "kind,svg", [(k, s) for k, svgs in HOSTILE.items() for s in svgs], ids=lambda v: v[:60] if isinstance(v, str) else v
)
def test_hostile_svgs_are_refused_before_drawing(kind, svg, monkeypatch):
    import sciga.transforms.vision.svg_raster as svg_raster

    def never(*a, **k):  # the renderer must not even be called
        raise AssertionError("the renderer was given a hostile SVG")

    monkeypatch.setattr(svg_raster, "_render", never)
    with pytest.raises(SvgRefused) as e:
        rasterize_svg(svg)
    assert e.value.kind == kind, str(e.value)
    assert str(e.value).startswith(f"svg_refused: {kind}: ")


def test_a_document_above_the_byte_limit_is_refused_unread(monkeypatch):
    import sciga.transforms.vision.svg_raster as svg_raster

    monkeypatch.setattr(svg_raster, "MAX_SVG_BYTES", 1000)
    with pytest.raises(SvgRefused) as e:
        rasterize_svg(f'<svg {NS} width="10" height="10">' + " " * 2000 + "</svg>")
    assert e.value.kind == "too_large"


def test_what_is_kept_inside_the_document():
    ok = (
        f'<svg {NS} width="20" height="10"><defs><linearGradient id="g"><stop offset="0" stop-color="red"/>'
        f'</linearGradient><clipPath id="c"><rect width="8" height="8"/></clipPath></defs>'
        f'<rect width="10" height="10" fill="url(#g)" clip-path="url(#c)"/><use xlink:href="#c"/>'
        f'<image href="data:image/png;base64,{SMALL}" width="5" height="5"/>'
        '<text x="1" y="9" data-text="&#x00d7;">&#x00d7;</text></svg>'
    )
    assert rasterize_svg(ok).width == 40  # fragment references, a small embedded raster, character references
    # SVG 1.1's public document type (matplotlib and Inkscape write it): dropped unread, the drawing kept
    public = '<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">'
    assert rasterize_svg(public + f'<svg {NS} width="10" height="5"/>').height == 10


def test_statuses_of_rasterized_rows():
    assert settle_status(RASTERIZED_SVG, has_bytes=True, image_kind="inline_svg", image_path=None) == RASTERIZED_SVG
    assert settle_status(RASTERIZED_SVG, has_bytes=True, image_kind="svg", image_path="a.svg", no_images=True) == (
        NO_IMAGES_FLAG
    )
    assert settle_status(SVG_ONLY, has_bytes=False, image_kind="inline_svg", image_path=None) == SVG_ONLY
    assert settle_status(None, has_bytes=True, image_kind="raster", image_path="a.png") == EMBEDDED
    assert not counts_as_missing(RASTERIZED_SVG) and counts_as_missing(SVG_ONLY)


# -- fuzz: mutated real SVGs never raise anything but SvgRefused, never exceed the bounds ------------

FRAGMENTS = [
    b'<!DOCTYPE svg [<!ENTITY a "aaaa">]>',
    b"&a;",
    b'<image href="file:///etc/passwd" width="5" height="5"/>',
    b'<image xlink:href="http://127.0.0.1:9/x.png"/>',
    b'<use xlink:href="#font_2_99"/>',
    b'<use href="#clip_0"/>',
    b'viewBox="0 0 1e30 1"',
    b'width="99999999"',
    b"<style>@import url(x.css);</style>",
    b'<foreignObject width="10" height="10"><pre>x\ny</pre></foreignObject>',
    b"</g>",
    b"<g>",
    b"\x00",
    b"\xff\xfe",
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    which=st.sampled_from(["file", "inline"]),
    cuts=st.lists(st.tuples(st.floats(0, 1), st.floats(0, 0.05)), max_size=4),
    inserts=st.lists(st.tuples(st.floats(0, 1), st.sampled_from(FRAGMENTS)), max_size=6),
)
def test_mutated_svgs_are_drawn_within_bounds_or_refused(which, cuts, inserts):
    data = bytearray(SVG_FILE.read_bytes() if which == "file" else inline_svg("A2.F5.pic1").encode())
    for pos, length in cuts:
        i = int(pos * len(data))
        del data[i : i + int(length * len(data))]
    for pos, frag in inserts:
        i = int(pos * len(data))
        data[i:i] = frag
    try:
        r = rasterize_svg(bytes(data))
    except SvgRefused as e:
        assert e.kind in {
            "entities",
            "external_reference",
            "embedded_image",
            "huge_viewbox",
            "too_large",
            "too_complex",
            "malformed",
            "render_failed",
        }
        return
    assert max(r.width, r.height) <= MAX_SIDE
    assert decode_image(r.png).image.size == (r.width, r.height)


def test_a_renderer_panic_refuses_that_svg_only(monkeypatch):
    import sciga.transforms.vision.svg_raster as svg_raster

    class PanicException(BaseException):  # what pyo3 raises for a Rust panic
        pass

    def panic(*a, **k):
        raise PanicException("called `Option::unwrap()` on a `None` value")

    monkeypatch.setattr(svg_raster, "_draw", panic)
    with pytest.raises(SvgRefused) as e:
        rasterize_svg(SVG_FILE.read_bytes())
    assert e.value.kind == "render_failed" and "PanicException" in e.value.message
