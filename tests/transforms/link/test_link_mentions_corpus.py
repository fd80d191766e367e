"""Mentions on the embedded sample and the real corpus pages: every mention verified by
reading the HTML is found with the right figure/subfigure id and span, and the count per
paper is the non-self ltx_ref anchors to figures plus the verified typed mentions."""

from __future__ import annotations

from collections import Counter

import pytest
from link_fixtures import (
    CORPUS_PAGES,
    SAMPLE_STEMS,
    VERIFIED_SAMPLE_ANCHORS,
    VERIFIED_TEXT_MENTIONS,
    html_figure_anchors,
    linked,
    mentions,
    needs_corpus,
    page_path,
    paragraph_html_id,
)

ALL_PAGES = list(SAMPLE_STEMS) + [pytest.param(k, marks=needs_corpus) for k in CORPUS_PAGES]


def _check_span(paper, row):
    """The offsets index the text the row names and cut out its surface."""
    if row.context == "paragraph":
        sec = next(s for s in paper.sections if s.id == row.section_id)
        text = sec.paragraphs[row.paragraph_index].text
    elif row.context == "title":
        text = next(s for s in paper.sections if s.id == row.section_id).title
    else:
        owners = {f.id: f for f in paper.figures}
        owners.update({s.id: s for f in paper.figures for s in f.subfigures})
        owners.update({t.id: t for t in paper.tables})
        text = owners[row.context_id].caption
    assert text[row.char_start : row.char_end] == row.surface
    if row.sentence is not None:
        assert text[row.sentence_start : row.sentence_start + len(row.sentence)] == row.sentence
        assert row.sentence_start <= row.char_start and row.char_end <= row.sentence_start + len(row.sentence)
    return text


@pytest.mark.parametrize("key", ALL_PAGES)
def test_mention_count_is_anchors_plus_verified_typed_mentions(key):
    assert page_path(key).exists(), f"{page_path(key)} is missing from the shared corpus (or the embedded sample)"
    rows = mentions(key)
    anchors = html_figure_anchors(key)
    assert len(rows) == len(anchors) + len(VERIFIED_TEXT_MENTIONS[key])
    assert Counter(r.resolution for r in rows) == Counter(
        {k: v for k, v in {"anchor": len(anchors), "text": len(VERIFIED_TEXT_MENTIONS[key])}.items() if v}
    )
    paper = linked(key)
    for r in rows:
        _check_span(paper, r)


@pytest.mark.parametrize("key", ALL_PAGES)
def test_anchored_mentions_point_where_the_href_points(key):
    assert page_path(key).exists(), f"{page_path(key)} is missing from the shared corpus (or the embedded sample)"
    paper = linked(key)
    html_of = {f.id: f.html_id for f in paper.figures}
    html_of.update({s.id: s.html_id for f in paper.figures for s in f.subfigures})
    got = Counter((html_of[r.figure_id], r.context) for r in mentions(key) if r.resolution == "anchor")
    want = Counter((t, {"text": "paragraph"}.get(w, w)) for t, _, w in html_figure_anchors(key))
    assert got == want


@pytest.mark.parametrize("stem", SAMPLE_STEMS)
def test_sample_mentions_match_the_html(stem):
    paper = linked(stem)
    got = sorted((paragraph_html_id(paper, r), r.surface, r.figure_id, r.resolution) for r in mentions(stem))
    want = sorted(
        [(p, s, f, "anchor") for p, s, f in VERIFIED_SAMPLE_ANCHORS[stem]]
        + [(p, s, f, "text") for p, s, f in VERIFIED_TEXT_MENTIONS[stem]]
    )
    assert got == want


def test_sample_sentences_survive_fig_cf_and_lists():
    rows = {(r.surface, r.figure_id): r for r in mentions("2511.99001")}
    assert rows[("Fig. 3(a)", "2511.99001_F3.1")].sentence == (
        "Qualitatively (cf. Fig. 3(a) for the corresponding budget), masks on routed frames are "
        "indistinguishable from keyframe masks, as in Figure 2(c)."
    )
    assert rows[("Fig. 3", "2511.99001_F3")].sentence == "Fig. 3 summarises the trade-off."
    assert rows[("Figure 2(a)", "2511.99001_F3.1")].sentence.startswith("The curve in Figure 2(a) shows")
    # an inline enumeration "(i) ..., (ii) ..., and (iii) ..." is one sentence
    s = rows[("3", "2511.99001_F3")].sentence
    assert s.startswith("Our contributions are: (i)") and s.endswith("summarised in Figs. 2 and 3.")
    assert rows[("Figs. 2", "2511.99001_F2")].sentence == s


def test_sample_sentences_with_math_and_ranges():
    rows = {(r.surface, r.figure_id): r for r in mentions("2511.99003")}
    r = rows[("Fig. 4a-c", "2511.99003_F4.2")]
    assert r.sentence.startswith("Fig. 4a-c shows example tiles;")
    assert rows[("Fig. 4a-c", "2511.99003_F4.1")].char_start == r.char_start  # one span, three panels


@needs_corpus
def test_corpus_surfaces_cover_the_typed_keyword():
    surf = Counter(r.surface for r in mentions("a1709"))
    assert surf == Counter({"Fig 1": 1, "Figure 1": 1, "Fig. 1": 1})
    # ar5iv \autoref anchors already hold the keyword: unchanged
    assert all(r.surface.startswith("Figure ") for r in mentions("2303.17564"))
    muse = [r for r in mentions("muse") if r.context == "paragraph"]
    assert "Fig, 6" in {r.surface for r in muse}  # typo kept as typed
    assert "6" in {r.surface for r in muse}  # "The top left of 6": the author typed no keyword


@needs_corpus
def test_corpus_anchor_followed_by_panel_and_position():
    rows = {r.surface: r for r in mentions("honline")}
    assert rows["Figure 2-(left)"].figure_id == "honline_F2"  # Figure 2 has one image
    assert rows["Figure 6b"].figure_id == "honline_F6"


@needs_corpus
def test_corpus_title_and_caption_mentions():
    titles = [r for r in mentions("honline") if r.context == "title"]
    assert sorted((r.surface, r.figure_id) for r in titles) == [
        ("Fig. 5", "honline_F5"),
        ("Fig. 6", "honline_F6"),
        ("Fig. 7", "honline_F7"),
        ("Fig. 8", "honline_F8"),
        ("Fig. 9", "honline_F9"),
    ]
    assert all(r.paragraph_index is None and r.sentence.endswith(r.surface) for r in titles)
    caps = [(r.context_id, r.surface, r.figure_id) for r in mentions("muse") if r.context == "caption"]
    assert caps == [("muse_F12", "11", "muse_F11")]
    caps = [(r.context_id, r.surface, r.figure_id) for r in mentions("eml") if r.context == "caption"]
    assert caps == [("eml_T3", "Fig. 2", "eml_F2")]


@needs_corpus
def test_corpus_lookalikes_are_not_mentions():
    muse = linked("muse")
    para = next(p for s in muse.sections for p in s.paragraphs if "Figure 4 in (Saharia" in p.text)
    assert not [s for s in para.ref_spans if "Figure 4" in s.text]
    eml = linked("eml")
    assert "Fig. S1" in eml.figures[0].caption and eml.figures[0].caption_ref_spans == []


@needs_corpus
def test_label_leftover_resolved_through_tex_label_map():
    from link_fixtures import parse, sentencizer

    from sciga.schemas.records import PaperMeta
    from sciga.transforms.link.link_paper import link_paper
    from sciga.transforms.link.mentions import mention_rows

    assert not [r for r in mentions("distildoc") if r.resolution == "label"]  # no map: left alone
    meta = PaperMeta.from_dict({"figure_labels": {"fig:new-hero": "1"}})  # sidecar / TeX stage
    paper = link_paper(parse("distildoc", meta), sentencizer=sentencizer())
    rows = [r for r in mention_rows(paper) if r.resolution == "label"]
    assert [(r.surface, r.figure_id) for r in rows] == [("LABEL:fig:new-hero", "distildoc_F1")]
    assert rows[0].sentence.endswith("as demonstrated in LABEL:fig:new-hero.")
    # a function argument wins over the paper's own map
    paper = link_paper(parse("distildoc"), figure_labels={"fig:new-hero": "1"})
    assert [r.figure_id for r in mention_rows(paper) if r.resolution == "label"] == ["distildoc_F1"]


@needs_corpus
def test_linking_twice_changes_nothing():
    from link_fixtures import parse, sentencizer

    from sciga.transforms.link.link_paper import link_paper
    from sciga.transforms.link.mentions import mention_rows

    once = link_paper(parse("muse"), sentencizer=sentencizer())
    first = mention_rows(once)
    assert mention_rows(link_paper(once, sentencizer=sentencizer())) == first
