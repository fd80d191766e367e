"""One test per LaTeXML construct the parser must handle (pages written in html_fixtures)."""

from __future__ import annotations

import pytest
from html_fixtures import figure, img, oxide_page, para, perl_page, section

from sciga.transforms.parse import parse_latexml_html


def parse(page: bytes, **kw):
    return parse_latexml_html(page, input_uri="test.html", **kw)


def test_perl_page_identity_generator_and_image_urls():
    body = section("S1", "1", "Intro", figure("S1.F1", 1, "A cat.", img("/html/2401.00001/assets/x1.png", "S1.F1.g1")))
    p = parse(perl_page(body))
    assert p.id == "2401.00001" and p.provenance.id_source == "page"
    assert (p.provenance.generator, p.provenance.generator_version) == ("LaTeXML", "0.8.8")
    assert p.provenance.source == "ar5iv"
    im = p.figures[0].images[0]
    assert im.path == "assets/x1.png"
    assert im.url == "https://ar5iv.labs.arxiv.org/html/2401.00001/assets/x1.png"
    assert (im.width, im.height) == (400, 300)


def test_oxide_bare_article_base_href_and_path_forms():
    body = section(
        "S1",
        "1",
        "Intro",
        figure("S1.F1", 1, "Rel.", img("x1.png", "S1.F1.g1"))
        + figure("S1.F2", 2, "Versioned.", img("2401.00001v2/fig%20one.png", "S1.F2.g1"))
        + figure("S1.F3", 3, "Extracted.", img("extracted/5301/plot.jpg", "S1.F3.g1")),
    )
    p = parse(oxide_page(body))
    assert p.id == "2401.00001" and p.version == "v2"
    assert (p.provenance.generator, p.provenance.generator_version) == ("LaTeXML oxide", "0.7.5")
    assert p.provenance.source == "arxiv_html"
    paths = [f.images[0].path for f in p.figures]
    assert paths == ["x1.png", "fig one.png", "extracted/5301/plot.jpg"]
    assert p.figures[0].images[0].url == "https://arxiv.org/html/2401.00001v2/x1.png"


def test_svg_object_inline_svg_and_missing_image():
    body = section(
        "S1",
        "1",
        "Intro",
        figure("S1.F1", 1, "Svg file.", '<object type="image/svg+xml" data="x1.svg" width="200" height="100"></object>')
        + figure("S1.F2", 2, "Inline.", '<svg class="ltx_picture" width="50" height="40"><g></g></svg>')
        + figure("S1.F3", 3, "Missing.", '<img src="" class="ltx_graphics ltx_missing ltx_missing_image" alt="">'),
    )
    p = parse(perl_page(body))
    kinds = [(f.images[0].kind, f.images[0].path) for f in p.figures]
    assert kinds == [("svg", "x1.svg"), ("inline_svg", None), ("missing", None)]
    assert [f.caption for f in p.figures][2] == "<TAG> Figure 3: </TAG> Missing."


def test_images_inside_a_tabular_become_panels():
    grid = (
        '<table class="ltx_tabular"><tr class="ltx_tr"><td class="ltx_td">'
        + img("a.png", "S1.F1.g1")
        + '</td><td class="ltx_td">'
        + img("b.png", "S1.F1.g2")
        + "</td></tr></table>"
    )
    p = parse(perl_page(section("S1", "1", "Intro", figure("S1.F1", 1, "Two panels.", grid))))
    (f,) = p.figures
    assert [i.path for i in f.images] == ["a.png", "b.png"]
    assert [s.id for s in f.subfigures] == ["2401.00001_F1.1", "2401.00001_F1.2"]
    assert all(s.caption_source == "none" and s.caption == "" for s in f.subfigures)


def test_flex_figure_panels_088():
    inner = (
        '<div class="ltx_flex_figure">'
        '<div class="ltx_flex_cell"><figure id="S3.F6.1" class="ltx_figure ltx_figure_panel">'
        + img("p1.png")
        + "</figure></div>"
        '<div class="ltx_flex_cell"><figure id="S3.F6.2" class="ltx_figure ltx_figure_panel">'
        + img("p2.png")
        + "</figure></div>"
        "</div>"
    )
    p = parse(perl_page(section("S3", "3", "Results", figure("S3.F6", 6, "Panels.", inner))))
    (f,) = p.figures
    assert f.number == "6"
    assert [(s.id, s.html_id, s.images[0].path) for s in f.subfigures] == [
        ("2401.00001_F1.1", "S3.F6.1", "p1.png"),
        ("2401.00001_F1.2", "S3.F6.2", "p2.png"),
    ]


def test_087_sf_subfigures_with_own_captions_attach_by_nesting():
    sub = lambda sid, tag, cap, src: (
        f'<figure id="{sid}" class="ltx_figure ltx_align_center">{img(src)}<figcaption class="ltx_caption">'
        f'<span class="ltx_tag ltx_tag_figure">{tag} </span>{cap}</figcaption></figure>'
    )
    # LaTeXML 0.8.7 may number children after the previous figure (S4.F2.sf1 inside S4.F3).
    inner = sub("S4.F2.sf1", "(a)", "Left.", "l.png") + sub("S4.F2.sf2", "(b)", "Right.", "r.png")
    body = section(
        "S4",
        "4",
        "Exp",
        para("S4.p1", 'See <a href="#S4.F2.sf2" class="ltx_ref">2(b)</a>.') + figure("S4.F3", 3, "Parent.", inner),
    )
    p = parse(perl_page(body))
    (f,) = p.figures
    assert [(s.label, s.caption) for s in f.subfigures] == [
        ("(a)", "<TAG> (a) </TAG> Left."),
        ("(b)", "<TAG> (b) </TAG> Right."),
    ]
    spans = p.sections[0].paragraphs[0].ref_spans
    assert [(s.text, s.ref_id) for s in spans] == [("2(b)", "2401.00001_F1.2")]


def test_multi_caption_minipage_figure_is_split_by_container():
    mini = lambda src, n, cap: (
        f'<div class="ltx_inline-block ltx_minipage">{img(src)}<figcaption class="ltx_caption">'
        f'<span class="ltx_tag ltx_tag_figure">Figure {n}: </span>{cap}</figcaption></div>'
    )
    body = section(
        "S3",
        "3",
        "Res",
        '<figure id="S3.F9" class="ltx_figure">'
        + mini("a.png", 8, "Left one.")
        + mini("b.png", 9, "Right one.")
        + "</figure>"
        + para("S3.p1", 'As <a href="#S3.F9" title="Figure 9 ‣ 3 Res" class="ltx_ref">9</a> shows.'),
    )
    p = parse(perl_page(body))
    assert [(f.number, f.images[0].path, f.html_id) for f in p.figures] == [
        ("8", "a.png", "S3.F9"),
        ("9", "b.png", "S3.F9"),
    ]
    spans = p.sections[0].paragraphs[0].ref_spans
    assert [s.ref_id for s in spans] == ["2401.00001_F2"]  # the title names Figure 9


def test_multi_caption_with_images_first_pairs_in_order():
    # muse.html's S3.F9: images in a tabular, then both captions at the end.
    inner = (
        '<table class="ltx_tabular"><tr><td>' + img("x7.png") + "</td><td>" + img("rater.jpg") + "</td></tr></table>"
    )
    el = (
        '<figure id="S3.F9" class="ltx_figure">'
        + inner
        + '<figcaption class="ltx_caption"><span class="ltx_tag ltx_tag_figure">Figure 8: </span>CLIP.</figcaption>'
        + '<figcaption class="ltx_caption"><span class="ltx_tag ltx_tag_figure">Figure 9: </span>Raters.</figcaption></figure>'
    )
    p = parse(perl_page(section("S3", "3", "R", el)))
    assert [(f.number, [i.path for i in f.images]) for f in p.figures] == [("8", ["x7.png"]), ("9", ["rater.jpg"])]


def test_caption_only_teaser_adopts_image_of_preceding_paragraph():
    body = (
        '<div id="p1" class="ltx_para ltx_align_center">'
        + img("teaser.png", "p1.g1")
        + "</div>"
        + '<figure id="S0.F1" class="ltx_figure"><figcaption class="ltx_caption"><span class="ltx_tag ltx_tag_figure">'
        + "Figure 1: </span>Teaser.</figcaption></figure>"
        + section("S1", "1", "Intro", para("S1.p1", "Body."))
    )
    p = parse(perl_page(body))
    (f,) = p.figures
    assert f.is_teaser and p.teaser == ["2401.00001_F1"]
    assert [i.path for i in f.images] == ["teaser.png"]
    # The adopted paragraph is not body text.
    assert [s.id for s in p.sections] == ["2401.00001_S1"]


def test_teaser_rules_teaserfigure_s0_and_before_first_section():
    body = figure(
        "S0.F1", 1, "Oxide-style before abstract.", img("t.png"), cls="ltx_figure ltx_teaserfigure"
    ) + section("S1", "1", "Intro", figure("S1.F2", 2, "Not a teaser.", img("n.png")))
    p = parse(perl_page(body))
    assert p.teaser == ["2401.00001_F1"]
    assert [f.is_teaser for f in p.figures] == [True, False]


def test_tables_and_algorithms_are_not_figures():
    table = (
        '<figure id="S2.T1" class="ltx_table"><figcaption class="ltx_caption"><span class="ltx_tag ltx_tag_table">'
        "Table 1: </span>Numbers.</figcaption>" + img("t.png") + "</figure>"
    )
    algo = (
        '<figure id="algorithm1" class="ltx_float ltx_float_algorithm"><figcaption class="ltx_caption">'
        '<span class="ltx_tag ltx_tag_float">Algorithm 1 </span>Steps.</figcaption></figure>'
    )
    body = section(
        "S2",
        "2",
        "Data",
        table
        + algo
        + figure("S2.F1", 1, "Real figure.", img("f.png"))
        + para("S2.p1", 'See <a href="#S2.T1" class="ltx_ref">Table 1</a>.'),
    )
    p = parse(perl_page(body))
    assert [f.caption for f in p.figures] == ["<TAG> Figure 1: </TAG> Real figure."]
    assert [(t.id, t.number, t.caption) for t in p.tables] == [("2401.00001_T1", "1", "<TAG> Table 1: </TAG> Numbers.")]
    assert [s.ref_id for s in p.sections[0].paragraphs[0].ref_spans] == ["2401.00001_T1"]
    assert "Steps" not in p.sections[0].body and "Numbers" not in p.sections[0].body


def test_section_tree_ids_levels_numbers_and_figure_ids():
    sub = section(
        "S2.SS1",
        "2.1",
        "Sub",
        para("S2.SS1.p1", "Deep.") + figure("S2.F1", 1, "In sub.", img("a.png")),
        cls="ltx_subsection",
        h="h3",
    )
    parag = (
        '<section id="S2.SS1.SSS0.Px1" class="ltx_paragraph"><h4 class="ltx_title ltx_title_paragraph">Details.</h4>'
        + para("S2.SS1.SSS0.Px1.p1", "Para text.")
        + "</section>"
    )
    body = section("S1", "1", "Intro", para("S1.p1", "One.")) + section(
        "S2", "2", "Method", para("S2.p1", "Two.") + sub + parag
    )
    body += section("A1", "Appendix A", "Extra", para("A1.p1", "App."), cls="ltx_appendix")
    body += '<section id="bib" class="ltx_bibliography"><h2 class="ltx_title">References</h2><ul><li>Ref.</li></ul></section>'
    p = parse(perl_page(body))
    rows = [
        (s.id.split("_", 1)[1], s.parent_id and s.parent_id.split("_", 1)[1], s.level, s.number, s.title)
        for s in p.sections
    ]
    assert (
        rows
        == [
            ("S1", None, 1, "1", "<TAG> 1 </TAG> Intro"),
            ("S2", None, 1, "2", "<TAG> 2 </TAG> Method"),
            ("S2.1", "S2", 2, "2.1", "<TAG> 2.1 </TAG> Sub"),
            ("S2.P1", "S2", 2, None, "Details."),
            ("A1", None, 1, "Appendix A", "<TAG> Appendix A </TAG> Extra"),
        ]
        or rows[3][0] == "S2.1.0.P1"
    )
    sub_sec = p.sections[2]
    assert sub_sec.figure_ids == ["2401.00001_F1"] and p.figures[0].section_id == sub_sec.id
    assert all("Ref." not in s.body for s in p.sections)


def test_text_outside_sections_goes_to_front_section():
    p = parse(perl_page(para("p1", "An essay without sections.")))
    assert [(s.id, s.title, s.body) for s in p.sections] == [("2401.00001_S0", "", "An essay without sections.")]


def test_uncaptioned_figure_has_no_number():
    p = parse(
        perl_page(section("S1", "1", "I", '<figure id="S1.fig1" class="ltx_figure">' + img("u.png") + "</figure>"))
    )
    (f,) = p.figures
    assert (f.number, f.label, f.caption, f.id) == (None, None, "", "2401.00001_F1")


def test_metadata_wins_for_identity_and_bibliographic_fields():
    from sciga.schemas.records import Author, PaperMeta

    meta = PaperMeta(
        id="2401.00001v3",
        title="Clean Title",
        authors=[Author("A. B.", ["Uni"])],
        categories=["cs.CV", "cs.LG"],
        comment="CVPR 2024",
        license="http://creativecommons.org/licenses/by/4.0/",
    )
    p = parse(perl_page(section("S1", "1", "I", para("S1.p1", "x"))), meta=meta)
    assert (p.id, p.version, p.title, p.primary_category, p.subjects.arxiv) == (
        "2401.00001",
        "v3",
        "Clean Title",
        "cs.CV",
        ["cs.CV", "cs.LG"],
    )
    assert p.provenance.id_source == "metadata" and p.authors[0].affiliations == ["Uni"]


def test_fallback_id_when_page_names_no_paper():
    page = (
        b'<html><body><article class="ltx_document"><h1 class="ltx_title ltx_title_document">T</h1>'
        b'<section id="S1" class="ltx_section"><div class="ltx_para"><p class="ltx_p">x</p></div></section></article></body></html>'
    )
    p = parse_latexml_html(page, input_uri="muse.html", fallback_id="muse", fallback_id_source="stem")
    assert p.id == "muse" and p.provenance.id_source == "stem" and p.provenance.generator is None


@pytest.mark.parametrize(
    "stamp,expected",
    [
        (
            "<!--Generated on Tue Feb  6 19:39:27 2024 by LaTeXML (version 0.8.7) http://dlmf.nist.gov/LaTeXML/.-->",
            ("LaTeXML", "0.8.7"),
        ),
        (
            "<!--Generated by LaTeXML oxide (version 0.7.6) http://dlmf.nist.gov/LaTeXML/.-->",
            ("LaTeXML oxide", "0.7.6"),
        ),
        ("<!--Generated by LaTeXML oxide 0.7.6-->", ("LaTeXML oxide", "0.7.6")),
    ],
)
def test_generator_stamps(stamp, expected):
    from sciga.transforms.parse.front_matter import generator_of

    assert generator_of("<html><head>" + stamp + "</head>") == expected


def test_the_pages_title_is_the_first_title_element_wherever_it_is():
    """``first_descendant`` finds what ``find('.//title')`` finds (the first in document
    order, in <head>, in the body, in an SVG, or none) without lxml's look-ahead walking the
    rest of the page."""
    from lxml import etree

    from sciga.transforms.parse.latexml_html import _parser, first_descendant

    pages = [
        b"<html><head><title>head</title></head><body><svg><title>svg</title></svg></body></html>",
        b"<html><body><p>x</p><div><title>in body</title></div></body></html>",
        b"<html><head><meta charset='utf-8'></head><body><svg><title>svg</title></svg></body></html>",
        b"<title>t</title><p>x<!-- a comment --></p>",
        b"<html><body><p>no title</p></body></html>",
    ]
    for page in pages:
        root = etree.fromstring(page, _parser())
        assert first_descendant(root, "title") is root.find(".//title"), page
