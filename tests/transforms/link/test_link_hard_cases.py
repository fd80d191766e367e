"""The hard cases of linking, on real pages: panels without their own caption, another
work's figure mentioned next to ours, and spans that name several figures or panels.

Pages: ``dd3d`` (shared corpus: real TeX of Park et al., ICCV 2021, converted by LaTeXML;
``../shared/corpus/SOURCES.md``), ``muse`` (shared corpus, arXiv:2301.00704) and the pages of
``tests/pages/`` (LaTeXML 0.8.7 output of TeX written for these tests, reproducing constructs
of public papers; each construct and the public source it comes from is listed in
``tests/pages/SOURCES.md``).
"""

from __future__ import annotations

from collections import Counter

import pytest
from link_fixtures import linked, mentions, needs_corpus, page_path, paragraph_html_id, parse

from sciga.schemas.arrow import MENTIONS, REF_SPAN, mention_row, to_table
from sciga.schemas.version import SCHEMA_VERSION
from sciga.transforms.link.link_paper import link_paper
from sciga.transforms.vision.figure_rows import figure_rows


def subs(paper, number):
    fig = next(f for f in paper.figures if f.number == number)
    return [(s.label, s.caption, s.caption_source, len(s.images)) for s in fig.subfigures]


def rows_of(key):
    """(where, surface, figure id, panels) per mention row; where = paragraph html id."""
    paper = linked(key)
    return [
        (paragraph_html_id(paper, r) or f"{r.context}:{r.context_id}", r.surface, r.figure_id, tuple(r.panels))
        for r in mentions(key)
    ]


# -- 1. panels without their own caption ---------------------------------------------------


@needs_corpus
def test_dd3d_one_subfloat_with_three_plots_is_three_panels_named_by_the_parent_caption():
    """dd3d Figure 3: one \\subfloat, three images, "Left: ... Middle: ... Right: ..."."""
    got = subs(linked("dd3d"), "3")
    assert [(label, source, n) for label, _, source, n in got] == [
        ("Left", "split_parent", 1),
        ("Middle", "split_parent", 1),
        ("Right", "split_parent", 1),
    ]
    assert got[0][1].startswith("<TAG> Left </TAG> we report the proposed abs_rel per-object depth metric")
    assert got[1][1].startswith("<TAG> Middle </TAG> for each depth network, a PL 3D detector")
    assert got[2][1].startswith("<TAG> Right </TAG> we plot the proposed abs_rel metric")
    rows = [r for r in figure_rows(linked("dd3d")) if r.parent_id == "dd3d_F3"]
    assert [r.image_path.rsplit("/", 1)[1] for r in rows] == [
        "PacknetFT_depth_metrics_k3d_val_abs_rel.png",
        "Packnet_3d_det.png",
        "depth_vs_3d_det_AP_3d_metrics_Mod.png",
    ]
    assert all(r.subcaption and r.subcaption.split("</TAG>", 1)[1].strip() for r in rows)


def test_panels_page_positional_labels_and_empty_subcaptions():
    paper = linked("panels")
    assert [label for label, *_ in subs(paper, "1")] == ["Left", "Middle", "Right"]
    assert subs(paper, "2") == [
        ("Top row", "<TAG> Top row </TAG> input frames of the sequence.", "split_parent", 1),
        ("Bottom row", "<TAG> Bottom row </TAG> the predicted masks.", "split_parent", 1),
    ]
    # Nothing names the panels: two panels, both without a subcaption (not the tag "(a)").
    assert subs(paper, "3") == [(None, "", "none", 1), (None, "", "none", 1)]
    # Four captionless \subfloat's: the tags (a)-(d) stay labels, no caption is only a tag;
    # "(top)" / "(bottom, left to right)" do not name four panels, so nothing is split.
    assert subs(paper, "4") == [(f"({c})", "", "none", 1) for c in "abcd"]
    # Captionless \subfloat's whose parent caption names them by letter.
    assert subs(paper, "5") == [
        ("(a)", "<TAG> (a) </TAG> The encoder.", "split_parent", 1),
        ("(b)", "<TAG> (b) </TAG> The decoder.", "split_parent", 1),
    ]
    assert [(label, caption.split("</TAG> ")[1]) for label, caption, *_ in subs(paper, "6")] == [
        ("left", "the loss"),
        ("middle", "the accuracy"),
        ("right", "the time per step."),
    ]


def test_no_subcaption_is_only_a_tag_on_any_page():
    for key in ("panels", "multi", "foreign", "2511.99001", "2511.99002", "2511.99003"):
        for row in figure_rows(linked(key)):
            if row.subcaption is not None:
                assert row.subcaption.split("</TAG>", 1)[-1].strip(), (key, row.id, row.subcaption)


def test_a_panel_named_by_position_in_a_mention_resolves_to_its_split_subfigure():
    from sciga.transforms.link.spans import link_text
    from sciga.transforms.link.targets import FigureIndex

    paper = linked("panels")
    spans = link_text("as Figure 2 (bottom row) shows", [], FigureIndex(paper))
    assert [s.ref_id for s in spans] == ["panels_F2.2"]


# -- 2. another work's figure -------------------------------------------------------------


def test_other_works_figures_are_not_linked_and_are_counted():
    """Numeric citations ([1]), an unresolved key ([nokey2020]), their / its."""
    got = rows_of("foreign")
    assert got == [
        ("S1.p1", "Figure 1", "foreign_F1", ()),  # Figure~\ref{fig:pipe}
        ("S2.p1", "Figure 2", "foreign_F2", ()),  # "Figure 2 in Section 2" is ours
        ("S2.p1", "Figure 3", "foreign_F3", ()),  # "Figure 3 of this paper"
        ("S2.p1", "Figures 3", "foreign_F3", ()),
        ("S2.p1", "4", "foreign_F4", ()),
    ]
    # Figure 1 of [1]; figure 3 of [nokey2020]; Fig. 4 in [1, 2]; Their Figure 4; its Fig. 2
    assert linked("foreign").rejected_mentions == {"other_work": 5}


def test_other_works_figures_author_year():
    """natbib: "Fig. 3 in Smith et al. (2019)", "of Smith et al.'s paper", a bare key."""
    assert rows_of("foreign_natbib") == [
        ("S1.p1", "Figure 1", "foreign_natbib_F1", ()),
        ("S1.p1", "Figure 2", "foreign_natbib_F2", ()),
    ]
    assert linked("foreign_natbib").rejected_mentions == {"other_work": 5}


@needs_corpus
def test_muse_saharia_figure_is_a_counted_rejection():
    """muse: "(see Figure 4 in (Saharia et al., 2022))" names Imagen's Figure 4."""
    paper = linked("muse")
    assert paper.rejected_mentions == {"other_work": 1}
    assert not [r for r in mentions("muse") if r.resolution == "text"]


@pytest.mark.parametrize(
    "text, foreign",
    [
        ("a complete overview is given in Figure 1 of [12].", True),
        ("see figure 1 of smith2018 for details", True),  # a \cite key LaTeXML printed bare
        ("as in Fig. 3 in Smith et al. (2019), we crop", True),
        ("Their Figure 4 shows", True),
        ("and its Fig. 2 repeats it", True),
        ("Figure 2 of Smith's paper", True),
        ("Figure 3 of Zhu2022CVPR", True),
        ("Figure 1 of LABEL:smith18", True),  # an unresolved citation-like reference
        ("Figure 4 in Section 3", False),
        ("Figure 2 of our paper", False),
        ("In Figure 2 of the main text", False),
        ("Figure 5 in LABEL:sec:appendix", False),  # this paper's own (unresolved) appendix
        ("bits Figure 3", False),
    ],
)
def test_other_work_grammar(text, foreign):
    from sciga.transforms.link.grammar import find_expressions

    (expr,) = find_expressions(text, foreign=True)
    assert expr.foreign is foreign
    assert [e.foreign for e in find_expressions(text)] == ([] if foreign else [False])


def test_rejections_are_counted_once_when_linking_again():
    paper = link_paper(parse("foreign"))
    link_paper(paper)
    assert paper.rejected_mentions == {"other_work": 5}


# -- 3. spans that name several figures ----------------------------------------------------


def test_panel_lists_and_ranges_on_the_multi_page():
    got = rows_of("multi")
    p1 = [r[1:] for r in got if r[0] == "S1.p1"]
    # "Figures <a>1</a>–<a>3</a>": the range names 2 too; "<a>4</a>-<a>6</a>" names 5.
    assert p1[:6] == [
        ("Figures 1", "multi_F1", ()),
        ("Figures 1–3", "multi_F2", ()),
        ("3", "multi_F3", ()),
        ("Figures 4", "multi_F4", ()),
        ("Figures 4-6", "multi_F5", ()),
        ("6", "multi_F6", ()),
    ]
    assert p1[6:] == [("Figs. 1-3", f"multi_F{k}", ()) for k in (1, 2, 3)]  # a range typed as text
    # Figures 3 and 5 have no panel elements: ONE mention each, the letters kept.
    assert [r[1:] for r in got if r[0] == "S1.p2"] == [
        ("Figures 3b and c", "multi_F3", ("b", "c")),
        ("Figure 5a,b,c", "multi_F5", ("a", "b", "c")),
        ("Figure 3b and c", "multi_F3", ("b", "c")),  # a link with typed panels after it
        ("Figure 3", "multi_F3", ()),
    ]
    # Figure 4 has three subfigure elements: each letter links its own subfigure; a range
    # of two subfigure links (LaTeXML prints them "3(a)"-"3(c)") names the middle one.
    assert [r[1:] for r in got if r[0] == "S1.p3"] == [
        ("Figures 4b", "multi_F4.2", ()),
        ("c", "multi_F4.3", ()),
        ("Figure 4a", "multi_F4.1", ()),
        ("b", "multi_F4.2", ()),
        ("Figures 3(a)", "multi_F4.1", ()),
        ("Figures 3(a)–3(c)", "multi_F4.2", ()),
        ("3(c)", "multi_F4.3", ()),
    ]
    assert {r.resolution for r in mentions("multi") if r.surface in ("Figures 1–3", "Figures 4-6")} == {"range"}


def test_one_mention_per_figure_without_panel_elements():
    """The old behaviour gave one row per letter for the same figure."""
    c = Counter(paragraph_html_id(linked("multi"), r) for r in mentions("multi") if r.figure_id == "multi_F5")
    assert c == {"S1.p1": 1, "S1.p2": 1}  # "Figures 4-6" (range) and "Figure 5a,b,c"


def test_sample_panel_mentions_are_unchanged():
    """2511.99003 "Fig. 4a-c" has subfigure elements: one row per panel, as before."""
    rows = [(r.surface, r.figure_id, r.panels) for r in mentions("2511.99003") if r.surface == "Fig. 4a-c"]
    assert rows == [("Fig. 4a-c", f"2511.99003_F4.{k}", []) for k in (1, 2, 3)]


def test_linking_the_multi_page_twice_gives_the_same_spans():
    once = link_paper(parse("multi"))
    before = [
        (s.start, s.end, s.ref_id, s.resolution, s.panels)
        for sec in once.sections
        for p in sec.paragraphs
        for s in p.ref_spans
    ]
    again = link_paper(once)
    assert [
        (s.start, s.end, s.ref_id, s.resolution, s.panels)
        for sec in again.sections
        for p in sec.paragraphs
        for s in p.ref_spans
    ] == before


def test_panels_are_a_column_of_the_mentions_config_and_ref_spans():
    assert SCHEMA_VERSION >= "1.1.0"  # panels came with 1.1.0 (1.2.0: figures.image_status, image_uri)
    assert "panels" in MENTIONS.names and "panels" in [f.name for f in REF_SPAN]
    table = to_table("mentions", [mention_row(r) for r in mentions("multi")])
    got = [p for p in table.column("panels").to_pylist() if p]
    assert got == [["b", "c"], ["a", "b", "c"], ["b", "c"]]


@pytest.mark.parametrize(
    "key", ["panels", "foreign", "foreign_natbib", "multi", "layout_rows", "foreign_keys", "foreign_raw"]
)
def test_test_pages_are_latexml_output(key):
    head = page_path(key).read_text(encoding="utf-8")[:2000]
    assert "LaTeXML" in page_path(key).read_text(encoding="utf-8")[-2000:] and "<html" in head
