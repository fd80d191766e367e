"""The embedded sample corpus parses to the facts listed in samples/EXPECTED.md."""

from __future__ import annotations

import json

import pytest

from sciga.schemas.records import PaperMeta
from sciga.transforms.parse import parse_latexml_html


def load(samples, stem):
    html = samples / "html" / stem / f"{stem}.html"
    meta = PaperMeta.from_dict(json.loads((samples / "meta" / f"{stem}.meta.json").read_text()))
    return parse_latexml_html(html.read_bytes(), meta, input_uri=str(html))


def test_cvpr_teaser_strip_subfigures_and_refs(samples):
    p = load(samples, "2511.99001")
    assert p.title == "Glimpse: Keyframe-Sparse Token Routing for Efficient Video Object Segmentation"
    assert [f.html_id for f in p.figures] == ["S0.F1", "S3.F2", "S4.F3"]
    teaser = p.figures[0]
    assert p.teaser == ["2511.99001_F1"] and teaser.is_teaser
    assert [i.path for i in teaser.images] == ["figs/teaser.png"]  # adopted from div#p2
    assert teaser.caption.startswith("<TAG> Figure 1: </TAG> Glimpse processes only a few keyframes densely")
    f3 = p.figures[2]
    assert [(s.html_id, s.label) for s in f3.subfigures] == [
        ("S4.F2.sf1", "(a)"),
        ("S4.F2.sf2", "(b)"),
        ("S4.F2.sf3", "(c)"),
    ]
    assert f3.subfigures[1].caption == "<TAG> (b) </TAG> Accuracy per video attribute."
    assert [i.path for i in f3.images] == ["figs/res_curve.png", "figs/res_bars.png", "figs/res_qual.png"]
    refs = {(r.text, r.ref_id) for s in p.sections for para in s.paragraphs for r in para.ref_spans}
    assert {
        ("1", "2511.99001_F1"),
        ("2", "2511.99001_F2"),
        ("3", "2511.99001_F3"),
        ("2(a)", "2511.99001_F3.1"),
        ("2(b)", "2511.99001_F3.2"),
        ("2(c)", "2511.99001_F3.3"),
        ("1", "2511.99001_T1"),
    } <= refs
    text = " ".join(s.body for s in p.sections)
    assert text.count("<NOTE>") == 2 and "<TAG> (1) </TAG>" in text
    assert "Figs. 2 and 3" in text and "Fig. 3b" in text
    assert len(p.tables) == 1 and p.tables[0].caption.startswith("<TAG> Table 1: </TAG> Main results")


def test_acm_teaserfigure_duplicated_caption_grid_and_picture(samples):
    p = load(samples, "2511.99002")
    assert [(f.number, f.html_id) for f in p.figures] == [
        ("1", "S0.F1"),
        ("2", "S3.F3"),
        ("3", "S3.F3"),
        ("4", "S3.F4"),
        ("5", "S3.F5"),
        ("6", "A1.F6"),
    ]
    assert p.teaser == ["2511.99002_F1"]
    f2, f3 = p.figures[1], p.figures[2]
    assert [i.path for i in f2.images] == ["figs/study_setup.png"] and [i.path for i in f3.images] == [
        "figs/task_times.png"
    ]
    grid = p.figures[3]
    assert [i.path for i in grid.images] == ["figs/grid_a.png", "figs/grid_b.png", "figs/grid_c.png", "figs/grid_d.png"]
    assert len(grid.subfigures) == 4
    assert [i.kind for i in p.figures[4].images] == ["inline_svg"]
    assert p.figures[5].section_id == "2511.99002_A1"
    assert p.subjects.acm == ["H.5.2", "I.3.5"]


def test_medical_subfloat_side_by_side_pdf_and_missing_image(samples):
    p = load(samples, "2511.99003")
    assert [f.html_id for f in p.figures] == ["S1.F1", "S2.F2", "S3.F3", "S3.F4", "S3.F5"]
    f1 = p.figures[0]
    assert [s.caption for s in f1.subfigures][2] == "<TAG> (c) </TAG> Chest radiograph with a pulmonary nodule."
    f2 = p.figures[1]
    assert [s.caption_source for s in f2.subfigures] == ["none", "none"]
    assert f2.caption.startswith("<TAG> Figure 2: </TAG> (a) T1-weighted MRI; (b) T2-weighted MRI")
    assert p.figures[2].images[0].path == "x1.png"  # the PDF LaTeXML converted
    assert p.figures[4].images[0].path == "figs/attention_maps.png"  # file absent on disk
    refs = [(r.text, r.ref_id) for s in p.sections for para in s.paragraphs for r in para.ref_spans]
    assert ("1c", "2511.99003_F1.3") in refs and ("4c", "2511.99003_F4.3") in refs


def test_old_style_id_paper_without_figures(samples):
    p = load(samples, "q-bio0601999")
    assert p.id == "q-bio/0601999" and p.figures == [] and len(p.tables) == 1
    assert [s.title for s in p.sections] == ["<TAG> 1 </TAG> Model", "<TAG> 2 </TAG> Comparison with Data"]
    assert " ".join(s.body for s in p.sections).count("<NOTE>") == 1


@pytest.mark.parametrize("stem", ["2511.99001", "2511.99002", "2511.99003", "q-bio0601999"])
def test_sample_pages_are_genuine_latexml(samples, stem):
    p = load(samples, stem)
    assert (p.provenance.generator, p.provenance.generator_version) == ("LaTeXML", "0.8.7")
