"""The typed-mention grammar: examples from real papers and Hypothesis properties."""

from __future__ import annotations

import os
import string

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sciga.schemas.records import Figure, Paper, Paragraph, RefSpan, Section, Subfigure
from sciga.transforms.link.grammar import (
    LABEL_RE,
    find_expressions,
    keyword_before,
    mask_tokens,
    parse_item,
    parse_panels,
)
from sciga.transforms.link.spans import link_text
from sciga.transforms.link.targets import FigureIndex


def items(text):
    return [[(i.number, i.panels, text[i.start : i.end]) for i in e.items] for e in find_expressions(text)]


@pytest.mark.parametrize(
    "text, want",
    [
        ("As shown in Figure 3, the", [[("3", (), "Figure 3")]]),
        ("see Fig. 3b for", [[("3", ("b",), "Fig. 3b")]]),
        ("(cf. Fig. 3(a))", [[("3", ("a",), "Fig. 3(a)")]]),
        ("Figs. 4a-c show", [[("4", ("a", "b", "c"), "Figs. 4a-c")]]),
        ("Figs. 4a–4c show", [[("4", ("a", "b", "c"), "Figs. 4a–4c")]]),
        ("Figures 1 and 2 show", [[("1", (), "Figures 1"), ("2", (), "2")]]),
        ("Figs. 2, 3, and 5", [[("2", (), "Figs. 2"), ("3", (), "3"), ("5", (), "5")]]),
        ("Figure 2(a) is", [[("2", ("a",), "Figure 2(a)")]]),
        ("Fig. S1 lists", [[("S1", (), "Fig. S1")]]),
        ("Figures 1-3 are", [[("1", (), "Figures 1-3"), ("2", (), "Figures 1-3"), ("3", (), "Figures 1-3")]]),
        ("Figs. 1 to 3 are", [[(n, (), "Figs. 1 to 3") for n in "123"]]),
        ("Fig. 3a, b and c", [[("3", ("a",), "Fig. 3a"), ("3", ("b",), "b"), ("3", ("c",), "c")]]),
        ("Fig. 3(a) and (b)", [[("3", ("a",), "Fig. 3(a)"), ("3", ("b",), "(b)")]]),
        ("Fig. 3(a)-(c)", [[("3", ("a", "b", "c"), "Fig. 3(a)-(c)")]]),
        ("Fig. 2(a,b)", [[("2", ("a", "b"), "Fig. 2(a,b)")]]),
        ("Figure 2-(left)", [[("2", ("left",), "Figure 2-(left)")]]),
        ("Fig. 3 (top right panel)", [[("3", ("top right",), "Fig. 3 (top right panel)")]]),
        ("FIG. 3 shows", [[("3", (), "FIG. 3")]]),
        ("in figure 3.2 and", [[("3.2", (), "figure 3.2")]]),
        ("see Figure 3.", [[("3", (), "Figure 3")]]),
        ("Figure 10a", [[("10", ("a",), "Figure 10a")]]),
        ("Figure 3 and Figure 4", [[("3", (), "Figure 3")], [("4", (), "Figure 4")]]),
        # guards
        ("Figure 3 and 10 other examples", [[("3", (), "Figure 3")]]),  # singular: no list
        ("in Figure 3 a model is", [[("3", (), "Figure 3")]]),  # "a" is an article
        ("Fig. 3b, a simple", [[("3", ("b",), "Fig. 3b")]]),  # letters must increase
        ("see Figure 4 in (Saharia et al., 2022)", []),  # another paper's figure
        ("as in Fig. 2 of [12]", []),
        ("Figure 3 of Smith et al. shows", []),
        ("the Figure does not show", []),
        ("Figure 3rd", []),
        ("Figure-8 knot", []),
        ("config.fig 3", []),
    ],
)
def test_examples(text, want):
    assert items(text) == want


def test_qualified_sequences():
    (e,) = find_expressions("Extended Data Fig. 2 shows")
    assert e.qualified
    (e,) = find_expressions("Supplementary Figure 3")
    assert e.qualified
    (e,) = find_expressions("in Fig. 3")
    assert not e.qualified


def test_tokens_are_masked():
    text = "<TAG> Figure 2: </TAG> as <MATH> \\text{Fig. 3} </MATH> and Fig. 4"
    masked = mask_tokens(text)
    assert len(masked) == len(text)
    assert items(masked) == [[("4", (), "Fig. 4")]]


def test_keyword_before_and_items():
    assert keyword_before("see Figure 3", 11) == 4
    assert keyword_before("see Fig. 3", 9) == 4
    assert keyword_before("see Fig, 3", 9) == 4
    assert keyword_before("see Table 3", 10) == 4
    assert keyword_before("and 3", 4) is None
    assert parse_item("3a") == parse_item("3a")
    assert (parse_item("2(b)").number, parse_item("2(b)").panels) == ("2", ("b",))
    assert parse_item("S1").number == "S1"
    assert parse_item("3 foo") is None
    assert parse_panels("6b,", 1) == (("b",), 2)
    assert [m.group("label") for m in LABEL_RE.finditer("in LABEL:fig:new-hero. and LABEL:fig:a.b c")] == [
        "fig:new-hero",
        "fig:a.b",
    ]


# -- Hypothesis ------------------------------------------------------------------------------

SINGULAR = ["Figure", "Fig.", "Fig", "FIG.", "figure", "fig."]
PLURAL = ["Figures", "Figs.", "Figs", "FIGS.", "figures", "figs."]
FILLER = st.lists(
    st.sampled_from(
        ["the", "model", "shows", "results", "as", "in", "we", "see", "and", "which", "(", ")", ",", ";", "data", "is"]
    ),
    max_size=8,
).map(" ".join)
# After a mention, "in (" / "of [" would make it a figure of another paper: not generated.
FILLER_AFTER = st.lists(
    st.sampled_from(
        ["the", "model", "shows", "results", "as", "we", "see", "and", "which", ")", ",", ";", "data", "is"]
    ),
    max_size=8,
).map(" ".join)
numbers = st.one_of(
    st.integers(1, 40).map(str),
    st.integers(1, 9).map(lambda n: f"S{n}"),
    st.tuples(st.integers(1, 9), st.integers(1, 9)).map(lambda t: f"{t[0]}.{t[1]}"),
)


@st.composite
def panel_spec(draw):
    """(written text, panels)"""
    kind = draw(st.sampled_from(["none", "bare", "paren", "range", "paren_list", "pos"]))
    a = draw(st.integers(0, 5))
    la = string.ascii_lowercase[a]
    if kind == "none":
        return "", ()
    if kind == "bare":
        return la, (la,)
    if kind == "paren":
        return f"({la})", (la,)
    if kind == "range":
        b = draw(st.integers(a + 1, a + 4))
        dash = draw(st.sampled_from(["-", "\u2013"]))
        return f"{la}{dash}{string.ascii_lowercase[b]}", tuple(string.ascii_lowercase[a : b + 1])
    if kind == "paren_list":
        b = draw(st.integers(a + 1, a + 3))
        return f"({la},{string.ascii_lowercase[b]})", (la, string.ascii_lowercase[b])
    pos = draw(st.sampled_from(["left", "right", "top", "bottom", "top left", "bottom right"]))
    return f" ({pos})", (pos,)


@st.composite
def expression(draw):
    """A written mention expression and the items it names: [(number, panels)]."""
    n = draw(st.integers(1, 3))
    if n == 1:
        kw = draw(st.sampled_from(SINGULAR + PLURAL))
        num = draw(numbers)
        ptext, panels = draw(panel_spec())
        return f"{kw} {num}{ptext}", [(num, panels)]
    kw = draw(st.sampled_from(PLURAL))
    nums = draw(st.lists(numbers, min_size=n, max_size=n, unique=True))
    sep = draw(st.sampled_from([" and ", ", ", " & "]))
    if n == 3:
        text = f"{kw} {nums[0]}, {nums[1]}{sep}{nums[2]}"
    else:
        text = f"{kw} {nums[0]}{sep}{nums[1]}"
    return text, [(x, ()) for x in nums]


@settings(
    max_examples=int(os.environ.get("SCIGA_HYPOTHESIS_EXAMPLES", 300)),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(before=FILLER, expr=expression(), after=FILLER_AFTER)
@example(before="as", expr=("Figs. 4a-c", [("4", ("a", "b", "c"))]), after="show")
def test_generated_mentions_are_found(before, expr, after):
    surface, want = expr
    text = f"{before} {surface} {after}".strip() + "."
    found = list(find_expressions(text))
    assert len(found) == 1
    (e,) = found
    assert [(i.number, i.panels) for i in e.items] == want
    start = text.index(surface)
    assert e.start == start and e.end == start + len(surface)
    # items never overlap, stay inside the expression, and the first starts at the keyword
    assert e.items[0].start == start
    spans = sorted({(i.start, i.end) for i in e.items})
    assert all(a < b for a, b in spans)
    assert all(spans[k][1] <= spans[k + 1][0] for k in range(len(spans) - 1))


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_arbitrary_text_never_breaks_the_grammar(text):
    for e in find_expressions(text):
        assert 0 <= e.start < e.end <= len(text)
        assert text[e.start : e.start + len(e.keyword)] == e.keyword
        for i in e.items:
            assert e.start <= i.start < i.end <= e.end


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet=string.ascii_letters + string.digits + " .,;()-", max_size=200).filter(
        lambda t: "fig" not in t.lower()
    )
)
def test_no_keyword_no_mention(text):
    assert list(find_expressions(text)) == []


def _paper_with_panels():
    subs = [
        Subfigure(id=f"p_F3.{k}", html_id=None, label=f"({c})", caption=f"<TAG> ({c}) </TAG> x")
        for k, c in enumerate("abc", 1)
    ]
    figs = [
        Figure(id=f"p_F{k}", html_id=f"S1.F{k}", index=k, number=str(k), label=f"Figure {k}:", caption="")
        for k in (1, 2)
    ]
    figs.append(Figure(id="p_F3", html_id="S1.F3", index=3, number="3", label="Figure 3:", caption="", subfigures=subs))
    return Paper(
        id="p",
        title="t",
        abstract="",
        figures=figs,
        sections=[
            Section(id="p_S1", parent_id=None, level=1, number="1", title="", body="", paragraphs=[Paragraph(text="")])
        ],
    )


@settings(max_examples=200, deadline=None)
@given(before=FILLER, expr=expression(), after=FILLER)
def test_link_text_spans_cut_their_surface_and_are_stable(before, expr, after):
    surface, _ = expr
    text = f"{before} {surface} {after}".strip()
    index = FigureIndex(_paper_with_panels())
    spans = link_text(text, [], index)
    for s in spans:
        assert text[s.start : s.end] == s.text
        assert s.resolution == "text"
        assert s.ref_id.startswith("p_F")
    assert link_text(text, spans, index) == spans  # relinking keeps what it found


def test_anchor_is_widened_and_refined_by_typed_panels():
    index = FigureIndex(_paper_with_panels())
    text = "as Figure 3b shows, and Figures 1 and 2."
    anchors = [
        RefSpan(start=10, end=11, text="3", ref_id="p_F3", resolution="anchor"),
        RefSpan(start=32, end=33, text="1", ref_id="p_F1", resolution="anchor"),
    ]
    spans = link_text(text, anchors, index)
    assert [(s.text, s.ref_id, s.resolution) for s in spans] == [
        ("Figure 3b", "p_F3.2", "anchor"),
        ("Figures 1", "p_F1", "anchor"),
        ("2", "p_F2", "text"),
    ]


def test_self_references_in_captions_are_dropped():
    index = FigureIndex(_paper_with_panels())
    cap = "<TAG> Figure 3: </TAG> Panels of Figure 3 compared with Fig. 1; (c) zooms into (a) of Fig. 3a."
    spans = link_text(cap, [], index, self_id="p_F3")
    assert [(s.text, s.ref_id) for s in spans] == [("Fig. 1", "p_F1")]
    assert link_text(cap, [], index, self_id="p_F3.2") == spans  # a panel's caption: its own figure too
