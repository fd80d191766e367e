"""Unresolved labels are not mentions (issue 44, item 2).

A ``\\ref`` to a label that does not exist is printed raw by LaTeXML:
``<span class="ltx_ref ltx_missing_label ltx_ref_self">LABEL:fig1:direct</span>`` (oxide pages of
arXiv:2609.00245 and 2609.00246 have them, see tests/pages/SOURCES.md). "fig1" inside the label
read as "Fig. 1": each such label was a mention of Figure 1. The construct is put into the real
oxide page ``tests/pages/oxide/2410.00260v2.html`` in place of a reference.
"""

from __future__ import annotations

from pathlib import Path

from sciga.schemas.build import PaperWork
from sciga.transforms.link.link_paper import link_paper
from sciga.transforms.link.mentions import mention_rows
from sciga.transforms.link.step import LinkStep
from sciga.transforms.parse import parse_latexml_html

PAGE = Path(__file__).resolve().parents[2] / "pages" / "oxide" / "2410.00260v2.html"
MISSING = b'<span class="ltx_ref ltx_missing_label ltx_ref_self">LABEL:fig1:direct</span>'
# "The UMAP ... visualization in figure <a href="#S3.F3" ...>3</a> reveals ...": the reference to
# Figure 3 becomes three unresolved ones, written the ways papers write them.
ANCHOR_START = b'visualization in figure <a href="#S3.F3"'


def page_with_unresolved_labels() -> bytes:
    data = PAGE.read_bytes()
    i = data.index(ANCHOR_START) + len(b"visualization in ")
    j = data.index(b"</a>", i) + len(b"</a>")
    text = b"Figure " + MISSING + b" (see Fig. " + MISSING + b", and " + MISSING + b")"
    return data[:i] + text + data[j:]


def test_an_unresolved_label_is_no_mention_and_is_counted():
    paper = parse_latexml_html(page_with_unresolved_labels(), input_uri="in/2410.00260v2.html")
    link_paper(paper)
    sec = next(s for s in paper.sections if s.html_id == "S3.SS7")
    assert sec.body.count("LABEL:fig1:direct") == 3
    assert [r for r in mention_rows(paper) if r.section_id == sec.id] == []
    assert not any(r.figure_id == "2410.00260_F1" and r.section_id == sec.id for r in mention_rows(paper))
    assert paper.rejected_mentions == {"unresolved_label": 3}
    # the other references of the page are untouched
    assert sorted(r.figure_id for r in mention_rows(paper)) == [
        "2410.00260_F1",
        "2410.00260_F2",
        "2410.00260_F4.2",
        "2410.00260_F5",
    ]


def test_a_label_the_tex_map_resolves_is_still_a_mention():
    paper = parse_latexml_html(page_with_unresolved_labels(), input_uri="in/2410.00260v2.html")
    paper.figure_labels = {"fig1:direct": "1"}  # the TeX source has the label
    link_paper(paper)
    sec = next(s for s in paper.sections if s.html_id == "S3.SS7")
    got = [(r.figure_id, r.surface, r.resolution) for r in mention_rows(paper) if r.section_id == sec.id]
    assert got == [
        ("2410.00260_F1", "Figure LABEL:fig1:direct", "label"),
        ("2410.00260_F1", "Fig. LABEL:fig1:direct", "label"),
        ("2410.00260_F1", "LABEL:fig1:direct", "label"),
    ]
    assert "unresolved_label" not in paper.rejected_mentions


def test_the_build_stats_count_unresolved_labels():
    paper = parse_latexml_html(page_with_unresolved_labels(), input_uri="in/2410.00260v2.html")
    work = PaperWork(uri="in/2410.00260v2.html", key="k", paper=paper)
    (out,) = LinkStep().run(work)
    assert out.stats.get("unresolved_labels") == 3
    assert not any(k.startswith("mentions_rejected") for k in out.stats)
