"""Subcaptions split from the parent caption and aligned to panels (MedICaT heuristic)."""

from __future__ import annotations

import pytest
from link_fixtures import linked, needs_corpus

from sciga.schemas.records import Figure, Subfigure
from sciga.transforms.link.subcaptions import add_split_subcaptions, split_caption


def texts(caption, n):
    got = split_caption(caption, n)
    return None if got is None else [(sc.label, sc.text) if sc else None for sc in got]


@pytest.mark.parametrize(
    "caption, n, want",
    [
        (
            "<TAG> Figure 2: </TAG> (a) T1-weighted MRI; (b) T2-weighted MRI of the same patient. The lesion is dark.",
            2,
            [("(a)", "T1-weighted MRI"), ("(b)", "T2-weighted MRI of the same patient.")],
        ),
        ("Comparison of (a) our method and (b) the baseline.", 2, [("(a)", "our method"), ("(b)", "the baseline.")]),
        (
            "a, Input image. b, Predicted mask. c, Ground truth.",
            3,
            [("a", "Input image."), ("b", "Predicted mask."), ("c", "Ground truth.")],
        ),
        ("A: the encoder; B: the decoder.", 2, [("A", "the encoder"), ("B", "the decoder.")]),
        ("a) Before training b) after training", 2, [("a)", "Before training"), ("b)", "after training")]),
        # a group label serves several panels
        (
            "(a,b) Two views of the scene. (c) The map.",
            3,
            [("(a,b)", "Two views of the scene."), ("(a,b)", "Two views of the scene."), ("(c)", "The map.")],
        ),
        # positions leading a clause
        (
            "Depth quality. Left: abs_rel per object. Right: 3D AP.",
            2,
            [("Left", "abs_rel per object."), ("Right", "3D AP.")],
        ),
        (
            "Top: the raw signal. Bottom: the filtered signal.",
            2,
            [("Top", "the raw signal."), ("Bottom", "the filtered signal.")],
        ),
        (
            "Top left: cardinality; top right: composition; bottom left: style; bottom right: text.",
            4,
            [
                ("Top left", "cardinality"),
                ("top right", "composition"),
                ("bottom left", "style"),
                ("bottom right", "text."),
            ],
        ),
        # positions are put in reading order (right-to-left caption, MedICaT's Figure 2 case)
        ("Right: after. Left: before.", 2, [("Left", "before."), ("Right", "after.")]),
        # trailing positions
        (
            "The four shapes: relief (top left), bowl (top right), face (bottom left) and column (bottom right).",
            4,
            [("top left", "relief"), ("top right", "bowl"), ("bottom left", "face"), ("bottom right", "column")],
        ),
        # MedICaT fill: a trailing extra panel takes the last subcaption
        ("(a) Input. (b) Output.", 3, [("(a)", "Input."), ("(b)", "Output."), ("(b)", "Output.")]),
        # <MATH> content is never read as a label
        (
            "(a) the loss <MATH> f(b) </MATH> over time; (b) accuracy.",
            2,
            [("(a)", "the loss <MATH> f(b) </MATH> over time"), ("(b)", "accuracy.")],
        ),
    ],
)
def test_split(caption, n, want):
    assert texts(caption, n) == want


@pytest.mark.parametrize(
    "caption, n",
    [
        ("Examples of text-guided inpainting. The mask is shown in the second column of each row.", 10),  # no labels
        (
            "Top left: a; top right: b; middle left: c; middle right: d; and bottom left: e.",
            18,
        ),  # muse: regions of a grid
        ("(a) Input. (b) Output. (c) Error. (d) Mask.", 2),  # more labels than panels
        ("details such as the house number (bottom left), the sign (middle) and the bars (right)", 3),  # mixed kinds
        ("(a) Only one label here.", 2),
        ("Nothing to split (a)", 1),  # one panel
    ],
)
def test_no_split(caption, n):
    assert split_caption(caption, n) is None


def _fig(caption, n, source="none"):
    subs = [
        Subfigure(id=f"p_F1.{k}", html_id=None, label=None, caption="", caption_source=source) for k in range(1, n + 1)
    ]
    return Figure(id="p_F1", html_id="S1.F1", index=1, number="1", label="Figure 1:", caption=caption, subfigures=subs)


def test_add_split_subcaptions_marks_source_and_keeps_html_ones():
    fig = _fig("<TAG> Figure 1: </TAG> (a) Input; (b) output.", 2)
    assert add_split_subcaptions(fig) == 2
    assert [(s.label, s.caption, s.caption_source) for s in fig.subfigures] == [
        ("(a)", "<TAG> (a) </TAG> Input", "split_parent"),
        ("(b)", "<TAG> (b) </TAG> output.", "split_parent"),
    ]
    assert add_split_subcaptions(fig) == 2  # idempotent
    fig = _fig("<TAG> Figure 1: </TAG> Nothing to split.", 2)
    assert add_split_subcaptions(fig) == 0 and {s.caption_source for s in fig.subfigures} == {"none"}
    fig = _fig("<TAG> Figure 1: </TAG> (a) x; (b) y.", 2, source="html")
    assert add_split_subcaptions(fig) == 0 and fig.subfigures[0].caption == ""


def test_sample_subcaptions():
    f2 = linked("2511.99003").figures[1]  # two images, no subfigure elements
    assert [(s.label, s.caption, s.caption_source) for s in f2.subfigures] == [
        ("(a)", "<TAG> (a) </TAG> T1-weighted MRI", "split_parent"),
        ("(b)", "<TAG> (b) </TAG> T2-weighted MRI of the same synthetic patient.", "split_parent"),
    ]
    grid = linked("2511.99002").figures[3]  # 2x2 grid in a tabular
    assert [(s.label, s.caption) for s in grid.subfigures] == [
        ("top left", "<TAG> top left </TAG> relief"),
        ("top right", "<TAG> top right </TAG> bowl"),
        ("bottom left", "<TAG> bottom left </TAG> face"),
        ("bottom right", "<TAG> bottom right </TAG> twisted column"),
    ]
    f3 = linked("2511.99001").figures[2]  # HTML subcaptions stay
    assert [s.caption_source for s in f3.subfigures] == ["html"] * 3


@needs_corpus
def test_corpus_compound_figures_are_left_alone_when_labels_do_not_fit():
    muse = linked("muse")
    for fig in muse.figures:  # region labels of image grids, "on the left" prose: nothing fits
        assert {s.caption_source for s in fig.subfigures} <= {"none"}
