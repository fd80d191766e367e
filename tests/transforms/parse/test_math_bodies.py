"""Cutting the bodies of formulas out before parsing (``parse/math_bodies.py``) never changes
what a page gives: every page here, real or hostile, parses to the same Paper (or the same
ParseError) with the cut as from the whole page."""

from __future__ import annotations

import random
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sciga.transforms.parse import ParseError, latexml_html, parse_latexml_html
from sciga.transforms.parse.math_bodies import kept_every_formula, without_math_bodies

from conftest import CORPUS, SAMPLES

SAMPLE_PAGES = sorted((SAMPLES / "html").glob("*/*.html"))
CORPUS_PAGES = ["html/2303.17564.html", "html/submission-5393936.html"] + [
    f"latexml/{n}.html" for n in ("muse", "dd3d", "distildoc", "honline", "eml", "a1709")
]


def parsed(page: bytes):
    try:
        return parse_latexml_html(page, input_uri="page.html", fallback_id="2511.99001", fallback_id_source="stem")
    except ParseError as e:
        return ("ParseError", e.error_type, e.message)


def parsed_whole(page: bytes):
    with mock.patch.object(latexml_html, "without_math_bodies", lambda b: b):
        return parsed(page)


def assert_same(page: bytes):
    assert parsed(page) == parsed_whole(page)


def page_of(body: str) -> bytes:
    return (
        '<html><head><title>T</title></head><body><article class="ltx_document">'
        '<section id="S1" class="ltx_section"><h2 class="ltx_title">1 Intro</h2>'
        f'<div id="S1.p1" class="ltx_para"><p class="ltx_p">{body}</p></div></section></article></body></html>'
    ).encode()


F = '<math alttext="x^{2}" class="ltx_Math" display="inline"><semantics><msup><mi>x</mi><mn>2</mn></msup><annotation encoding="application/x-tex">x^{2}</annotation></semantics></math>'


def test_a_latexml_formula_keeps_its_start_tag_and_loses_its_body():
    page = page_of(f"Let {F} be.")
    cut = without_math_bodies(page)
    assert b'<math alttext="x^{2}" class="ltx_Math" display="inline"></math>' in cut
    assert b"<semantics>" not in cut and b"<msup>" not in cut
    assert "Let <MATH> x^{2} </MATH> be." in parsed(page).sections[0].body
    assert_same(page)


@pytest.mark.parametrize("rel", CORPUS_PAGES)
@pytest.mark.corpus
def test_real_pages_give_the_same_paper(corpus, rel):
    page = (corpus / rel).read_bytes()
    cut = without_math_bodies(page)
    if b"<math" in page:  # each real page's formulas are cut (half of an ar5iv page's bytes)
        assert len(cut) < len(page) and cut.count(b"</math>") == page.count(b"</math>")
    assert_same(page)


@pytest.mark.parametrize("path", SAMPLE_PAGES, ids=lambda p: p.name)
def test_the_sample_gives_the_same_paper(path):
    assert_same(path.read_bytes())


HOSTILE = {
    "math in a comment": f'<!-- <math alttext="c"> --> text {F}',
    "math in an attribute": f"<img alt='<math alttext=\"q\">'> text {F}",
    "math in a script": f'<script>var s = "<math alttext=\\"z\\">";</script> {F}',
    "math in a title": f'<title><math alttext="t"><mi>t</mi></math></title>{F}',
    "math in a textarea": f'<textarea><math alttext="t"><mi>t</mi></math></textarea>{F}',
    "end tag inside an attribute of the body": '<math alttext="a"><mi title="</math>">a</mi></math> after',
    "end tag inside an unquoted attribute": '<math alttext="a"><mi title=a</math>>a</mi></math> after',
    "end tag inside a tag of the body": '<math alttext="a"><mo lspac</math>e="0">a</mo></math> after',
    "end tag inside the start tag": f'<math alttext="a" display=</math>"inline"><mi>a</mi></math> {F}',
    "html element inside": '<math alttext="a"><mtext><span class="ltx_tag">(3)</span></mtext></math> after',
    "div inside, which libxml2 will not close": f'<math alttext="a"><mtext><div>d</div></mtext></math> {F} {F}',
    "tag class inside": '<math alttext="a"><mtext class="ltx_tag">(9)</mtext></math>',
    "nested formula": f'<math alttext="n"><math alttext="m"><mi>m</mi></math></math> {F}',
    "a formula without alttext": f'<math class="ltx_Math"><mi>y</mi></math> {F}',
    "alttext in single quotes": f"<math alttext='s'><mi>s</mi></math> {F}",
    "unquoted alttext": f"<math alttext=w><mi>w</mi></math> {F}",
    "upper case": f'<MATH alttext="u"><mi>u</mi></MATH> {F} <Math alttext="v"><mi>v</mi></Math>',
    "> inside alttext": f'<math alttext="a>b" class="ltx_Math"><mi>a</mi></math> {F}',
    "self-closing start tag": f'<math class="x" alttext="y"/> y <mi>q</mi></math> {F}',
    "empty formula": f'<math alttext="e"></math> {F}',
    "no end tag": f'{F} <math alttext="o"><mi>o</mi>',
    "a comment inside": '<math alttext="a"><!-- </math> --><mi>a</mi></math> after',
    "cdata inside": '<math alttext="a"><![CDATA[</math>]]><mi>a</mi></math> after',
    "a figure reference inside": f'<math alttext="a"><mtext><a href="#S1.F1" class="ltx_ref">1</a></mtext></math> {F}',
    "not a math tag": f'<mathx alttext="a"><mi>a</mi></mathx> {F}',
    "control characters inside": f'<math alttext="a"><mi>\x01a\x0b\x0c</mi></math> {F}',
    "bad character references inside": f'<math alttext="a"><mi>&#0;&#x110000;&bogus</mi></math> {F}',
    "a NUL inside": f'<math alttext="a"><mi>\x00</mi></math> {F}',
}


@pytest.mark.parametrize("body", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_formulas_give_the_same_paper(body):
    assert_same(page_of(f"Before {body} and after."))


def test_a_fake_formula_fails_the_tree_check():
    """A "<math" inside a comment is no element: the tree check says so, and the page is
    then parsed whole (``latexml_html._tree``)."""
    from lxml import etree

    cut = without_math_bodies(page_of(f'<!-- <math alttext="c"> --> text {F}'))
    assert not kept_every_formula(etree.fromstring(cut, latexml_html._parser()), cut)
    cut = without_math_bodies(page_of(f"text {F}"))
    assert kept_every_formula(etree.fromstring(cut, latexml_html._parser()), cut)


def test_an_arrow_without_re2_parses_pages_whole(monkeypatch):
    """Arrow's regex functions need RE2; where a build of Arrow lacks it, pages are parsed
    whole (the same Paper), not dead-lettered."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def no_re2(*args, **kwargs):
        raise pa.ArrowNotImplementedError("Function 'match_substring_regex' needs RE2")

    monkeypatch.setattr(pc, "match_substring_regex", no_re2)
    monkeypatch.setattr(pc, "count_substring", no_re2)
    page = page_of(f"Let {F} be.")
    assert without_math_bodies(page) is page
    assert "Let <MATH> x^{2} </MATH> be." in parsed(page).sections[0].body
    from lxml import etree

    cut = page_of('Let <math alttext="x^{2}" class="ltx_Math" display="inline"></math> be.')
    assert kept_every_formula(etree.fromstring(cut, latexml_html._parser()), cut)


FRAGMENTS = [
    b"</math>",
    b'<math alttext="k"><mi>k</mi>',
    b"<math",
    b'<!-- <math alttext="x"> -->',
    b"<img alt='<math alttext=\"q\">'>",
    b'<script>var s="<math alttext=\\"z\\">";</script>',
    b'<mi title="</math>">',
    b"<mi title=a</math>>",
    b'<span class="ltx_tag">T</span>',
    b"<p>",
    b"</p>",
    b"<div>",
    b"</span>",
    b"<!--",
    b"-->",
    b"<![CDATA[",
    b'"',
    b"'",
    b">",
    b"<mi",
    b'<mo lspace="',
    b"<textarea>",
    b"<title>",
    b"<style>",
    b"<plaintext>",
    b'<MATH alttext="u"><mi>u</mi></MATH>',
    b'<math alttext="x" display=</math>',
    b'<math alttext="n"><math alttext="m"><mi>m</mi></math></math>',
    b'<mtext class="ltx_tag">(9)</mtext>',
    b'<a href="#S1.F1" class="ltx_ref">1</a>',
]
PAGES = [p.read_bytes() for p in SAMPLE_PAGES if b"<math" in p.read_bytes()]
if (CORPUS / "latexml" / "eml.html").exists():
    PAGES.append((CORPUS / "latexml" / "eml.html").read_bytes())


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(page=st.sampled_from(PAGES), seed=st.integers(0, 2**32 - 1))
def test_fragments_spliced_near_formulas_give_the_same_paper(page, seed):
    """Fragments that confuse a reading of the bytes (end tags in attributes, formulas in
    comments, scripts and attribute values, elements libxml2 will not close), spliced into
    real pages, mostly just inside or after a formula's start tag, where a cut goes wrong."""
    rnd = random.Random(seed)
    data = page
    for _ in range(rnd.randint(1, 4)):
        i = data.find(b"<math", rnd.randrange(len(data)))
        i = rnd.randrange(len(data)) if i < 0 or rnd.random() < 0.3 else i + rnd.randint(0, 300)
        data = data[:i] + rnd.choice(FRAGMENTS) + data[i:]
    assert_same(data)
