"""Property tests: mutated real pages never make an exception other than ParseError escape,
and whatever comes out keeps the contract (tokens balanced, ids well-formed)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sciga.schemas.ids import FIGURE_ID_RE
from sciga.transforms.parse import ParseError, parse_latexml_html
from sciga.transforms.vision.svg_raster import MAX_SIDE, SvgRefused, rasterize_svg

from conftest import CORPUS, ROOT, SAMPLES

PAGES = [
    (SAMPLES / "html" / "2511.99001" / "2511.99001.html").read_bytes(),
    (SAMPLES / "html" / "2511.99002" / "2511.99002.html").read_bytes(),
]
# arXiv's LaTeXML oxide pages (issue 44): inline SVG pictures, flex panels, a failed conversion
PAGES += [(ROOT / "tests" / "pages" / "oxide" / n).read_bytes() for n in ("2410.00260v2.html", "2608.30667v1.html")]
if (CORPUS / "latexml" / "dd3d.html").exists():
    PAGES.append((CORPUS / "latexml" / "dd3d.html").read_bytes())

TAGS = [
    b"<figure",
    b"</figure>",
    b"<figcaption",
    b"</figcaption>",
    b"<section",
    b"</section>",
    b"<math",
    b"</math>",
    b'<span class="ltx_note ltx_role_footnote">',
    b'<span class="ltx_tag">',
    b"</span>",
    b"<div",
    b"</div>",
    b'<img src="',
    b'class="ltx_figure"',
    b'class="ltx_table"',
    b"\x00",
    b"\xff\xfe",
    b"<!--",
    b"-->",
    b"&#x0;",
    b'<svg class="ltx_picture" viewBox="0 0 1e12 1e12">',
    b'<image xlink:href="file:///etc/passwd"/>',
    b"<foreignObject>",
    b"</svg>",
]


def check(data: bytes):
    try:
        p = parse_latexml_html(data, input_uri="fuzz.html", fallback_id="fuzz", fallback_id_source="stem")
    except ParseError as e:
        assert e.message and e.error_type
        return
    for f in p.figures:
        assert FIGURE_ID_RE.match(f.id)
        for img in f.images:  # an inline drawing travels as a standalone SVG the rasterizer takes or refuses
            if img.svg is not None:
                try:
                    assert rasterize_svg(img.svg).width <= MAX_SIDE
                except SvgRefused as e:
                    assert e.kind and e.message
        for s in f.subfigures:
            assert s.id.startswith(f.id + ".")
    for t in [p.title, p.abstract] + [s.body for s in p.sections] + [f.caption for f in p.figures]:
        for name in ("MATH", "NOTE", "TAG"):
            assert t.count(f"<{name}>") == t.count(f"</{name}>")
    ids = [f.id for f in p.figures]
    assert len(ids) == len(set(ids))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    page=st.sampled_from(PAGES),
    cuts=st.lists(st.tuples(st.floats(0, 1), st.floats(0, 0.02)), max_size=6),
    inserts=st.lists(st.tuples(st.floats(0, 1), st.sampled_from(TAGS)), max_size=8),
)
def test_mutated_pages(page, cuts, inserts):
    data = bytearray(page)
    for pos, length in cuts:  # delete random stretches (drops closing tags, halves elements)
        i = int(pos * len(data))
        del data[i : i + int(length * len(data))]
    for pos, frag in inserts:  # splice in structural fragments
        i = int(pos * len(data))
        data[i:i] = frag
    check(bytes(data))


@settings(max_examples=40, deadline=None)
@given(page=st.sampled_from(PAGES), seed=st.integers(0, 2**32 - 1))
def test_byte_flips(page, seed):
    import random

    rnd = random.Random(seed)
    data = bytearray(page)
    for _ in range(rnd.randint(1, 50)):
        data[rnd.randrange(len(data))] = rnd.randrange(256)
    check(bytes(data))


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=2000))
def test_arbitrary_bytes(data):
    check(data)


@settings(max_examples=40, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("<>/= \"'abcdefghijklmnopqrstuvwxyz_.0123456789")), max_size=400))
def test_tag_soup_with_latexml_classes(soup):
    check(('<html><body><article class="ltx_document">' + soup + "</article></body></html>").encode())
