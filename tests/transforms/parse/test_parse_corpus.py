"""Facts about real pages in ../shared/corpus, each checked by reading the HTML."""

from __future__ import annotations

import re

import pytest

from sciga.transforms.parse import parse_latexml_html


def load(corpus, rel, fid=None):
    path = corpus / rel
    return parse_latexml_html(
        path.read_bytes(), input_uri=str(path), fallback_id=fid or path.stem, fallback_id_source="stem"
    )


def all_text(p):
    return (
        [p.title, p.abstract]
        + [s.title for s in p.sections]
        + [s.body for s in p.sections]
        + [f.caption for f in p.figures]
    )


def test_bloomberggpt_ar5iv_088(corpus):
    p = load(corpus, "html/2303.17564.html")
    assert p.id == "2303.17564" and p.provenance.source == "ar5iv"
    assert (p.provenance.generator, p.provenance.generator_version) == ("LaTeXML", "0.8.8")
    assert p.title == "BloombergGPT: A Large Language Model for Finance"
    assert [a.name for a in p.authors][:3] == ["Shijie Wu", "Ozan İrsoy", "Steven Lu"]
    assert len(p.figures) == 12 and len(p.tables) == 20
    assert [f.html_id for f in p.figures][:3] == ["S3.F1", "S4.F2", "S5.F3"]
    f1 = p.figures[0]
    assert f1.caption.startswith("<TAG> Figure 1: </TAG> Kaplan et al. (2020) and Chinchilla scaling laws")
    assert f1.images[0].url == "https://ar5iv.labs.arxiv.org/html/2303.17564/assets/x1.png"
    # Figures 4-6 are drawn as inline SVG pictures (the prompt boxes), not files.
    assert [p.figures[i].images[0].kind for i in (3, 4, 5)] == ["inline_svg"] * 3
    text = " ".join(all_text(p))
    assert text.count("<NOTE>") == 4 == text.count("</NOTE>")
    assert "<MATH> \\gamma </MATH>" in text
    # 18 anchors point at figures in the body text, all resolved.
    spans = [r for s in p.sections for para in s.paragraphs for r in para.ref_spans if "_F" in r.ref_id]
    assert len(spans) == 18
    assert not p.teaser


def test_submission_preview_without_figures(corpus):
    p = load(corpus, "html/submission-5393936.html")
    assert p.figures == [] and len(p.tables) == 4
    assert p.title.startswith("Integrating Random Regret Minimization-Based Discrete Choice Models")
    assert p.abstract.startswith("This paper explores the critical domain of Revenue Management")
    assert [s.title for s in p.sections][:2] == ["<TAG> 1 </TAG> Introduction", "<TAG> 2 </TAG> Related Work"]
    assert p.provenance.generator_version == "0.8.7"


def test_muse_multi_caption_and_grid_figures(corpus):
    p = load(corpus, "latexml/muse.html")
    assert len(p.figures) == 13
    assert [f.number for f in p.figures] == [str(i) for i in range(1, 14)]
    f8, f9 = p.figures[7], p.figures[8]
    assert f8.html_id == f9.html_id == "S3.F9"  # one LaTeXML element, two numbered figures
    assert [i.path for i in f8.images] == ["x7.png"]
    assert [i.path for i in f9.images] == ["figs/rater_percentages_w_all_labels.jpg"]
    assert f9.caption.startswith("<TAG> Figure 9: </TAG> Percentage of prompts")
    assert len(p.figures[5].images) == 18 and len(p.figures[5].subfigures) == 18
    assert not p.teaser  # figure* in section 1 is a de-facto GA candidate, not a teaser by structure
    spans = [r for s in p.sections for para in s.paragraphs for r in para.ref_spans if "_F" in r.ref_id]
    # 25 body anchors to figures, 3 of them in the bibliography's back-references.
    assert len(spans) == 22
    assert sum(1 for r in spans if r.ref_id == "muse_F9") == 2


def test_dd3d_subfloat(corpus):
    p = load(corpus, "latexml/dd3d.html")
    assert [f.html_id for f in p.figures] == ["S3.F1", "S5.F2", "S5.F3"]
    f3 = p.figures[2]
    # One \subfloat holding three plots, no subcaption text (only the tag "(a)"): three
    # panels, one per image, captionless until the linking stage reads Left/Middle/Right.
    assert [(s.html_id, s.label, s.caption, s.caption_source) for s in f3.subfigures] == [
        (f"S5.F3.sf1.g{k}", None, "", "none") for k in (1, 2, 3)
    ]
    assert [len(s.images) for s in f3.subfigures] == [1, 1, 1]
    assert f3.subfigures[0].images[0].path == "figures/scaling_laws/PacknetFT_depth_metrics_k3d_val_abs_rel.png"
    assert len(p.tables) == 7


def test_honline_acmart_teaserfigure_and_unrendered_pictures(corpus):
    p = load(corpus, "latexml/honline.html")
    assert p.teaser == ["honline_F1"] and p.figures[0].html_id == "S0.F1"
    assert p.figures[0].caption.startswith("<TAG> Figure 1. </TAG> Our adaptive hand tracking algorithm")
    assert len(p.figures) == 10  # the 7 algorithm floats are not figures
    assert p.figures[0].images[0].kind == "unrendered"  # overpic left as raw TeX by LaTeXML
    assert [a.name for a in p.authors][:2] == ["Anastasia Tkach", "Andrea Tagliasacchi"]
    assert p.authors[0].affiliations == ["École Polytechnique Fédérale de Lausanne"]


def test_distildoc_uncaptioned_figure_and_images_in_tables(corpus):
    p = load(corpus, "latexml/distildoc.html")
    assert [f.html_id for f in p.figures] == ["S3.F1", "Pt0.A4.SS4.fig1"]
    assert p.figures[1].number is None and p.figures[1].caption == ""
    assert p.figures[1].images[0].path == "images/ANLS_DLAplot.png"
    assert len(p.tables) == 19  # tables holding images (S4.T5) stay tables


def test_eml_and_a1709(corpus):
    eml = load(corpus, "latexml/eml.html")
    assert [f.number for f in eml.figures] == ["1", "2"] and len(eml.tables) == 4
    assert eml.authors[0].name == "Andrzej Odrzywołek"
    a = load(corpus, "latexml/a1709.html")
    assert len(a.figures) == 1 and a.figures[0].caption.startswith("<TAG> Figure 1: </TAG> Volume of preprints")
    assert [x.name for x in a.authors] == ["Alberto Pepe", "Matteo Cantiello", "Josh Nicholson"]


@pytest.mark.parametrize(
    "rel",
    [
        "html/2303.17564.html",
        "html/submission-5393936.html",
        "latexml/muse.html",
        "latexml/dd3d.html",
        "latexml/distildoc.html",
        "latexml/honline.html",
        "latexml/eml.html",
        "latexml/a1709.html",
    ],
)
def test_tokens_balanced_and_whitespace_normalized(corpus, rel):
    p = load(corpus, rel)
    for t in all_text(p):
        for name in ("MATH", "NOTE", "TAG"):
            assert t.count(f"<{name}>") == t.count(f"</{name}>"), (rel, name)
        assert "  " not in t and t == t.strip()
        # One space inside each tag.
        assert not re.search(r"<(MATH|NOTE|TAG)>\S|\S</(MATH|NOTE|TAG)>", t)
        # Nothing nests except MATH inside NOTE.
        depth = []
        for m in re.finditer(r"<(/?)(MATH|NOTE|TAG)>", t):
            if m.group(1):
                assert depth and depth.pop() == m.group(2)
            else:
                assert not depth or (depth == ["NOTE"] and m.group(2) == "MATH"), (
                    rel,
                    t[max(0, m.start() - 80) : m.end()],
                )
                depth.append(m.group(2))
