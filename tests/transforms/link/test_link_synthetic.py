"""Constructs the corpus does not hold, on a small LaTeXML-shaped page written here:
absolute arxiv.org/html anchors, links into another paper, panel hrefs (0.8.8 flex panels
without captions, split from "Left: ... Right: ..."), an anchor
followed by a typed panel, a LABEL leftover after a keyword, caption and title mentions."""

from __future__ import annotations

from sciga.transforms.link.link_paper import link_paper
from sciga.transforms.link.mentions import mention_rows
from sciga.transforms.parse import parse_latexml_html

PAGE = """<!DOCTYPE html><html><head><title>A test paper</title></head><body>
<div class="ltx_page_main"><article class="ltx_document">
<h1 class="ltx_title ltx_title_document">A test paper</h1>
<section id="S1" class="ltx_section"><h2 class="ltx_title ltx_title_section"><span class="ltx_tag ltx_tag_section">1 </span>Intro</h2>
<div id="S1.p1" class="ltx_para"><p class="ltx_p">We show
<a href="https://arxiv.org/html/2401.13641v1#S1.F1" class="ltx_ref" title="Figure 1 ‣ 1 Intro"><span class="ltx_text ltx_ref_tag">Figure 1</span></a>
and, for contrast, <a href="https://arxiv.org/html/2301.00001v2#S1.F1" class="ltx_ref">Figure 1</a> of another paper.
Panel Figure&#160;<a href="#S1.F2" class="ltx_ref" title="Figure 2 ‣ 1 Intro"><span class="ltx_text ltx_ref_tag">2</span></a>b is the output,
and Figure&#160;LABEL:fig:three <span class="ltx_ref ltx_missing_label ltx_ref_self">LABEL:fig:three</span> is gone.</p></div>
<figure id="S1.F1" class="ltx_figure"><img src="x1.png" class="ltx_graphics" width="400" height="200" alt="">
<figcaption class="ltx_caption"><span class="ltx_tag ltx_tag_figure">Figure 1: </span>An overview, unlike
<a href="#S1.F2.1" class="ltx_ref"><span class="ltx_text ltx_ref_tag">2(a)</span></a> or this very
<a href="#S1.F1" class="ltx_ref"><span class="ltx_text ltx_ref_tag">Figure 1</span></a>.</figcaption></figure>
<figure id="S1.F2" class="ltx_figure">
<div class="ltx_flex_figure"><div class="ltx_flex_cell"><figure id="S1.F2.1" class="ltx_figure ltx_figure_panel">
<img src="x2.png" id="S1.F2.1.g1" class="ltx_graphics" width="100" height="100" alt=""></figure></div>
<div class="ltx_flex_cell"><figure id="S1.F2.2" class="ltx_figure ltx_figure_panel">
<img src="x3.png" id="S1.F2.2.g1" class="ltx_graphics" width="100" height="100" alt=""></figure></div></div>
<figcaption class="ltx_caption"><span class="ltx_tag ltx_tag_figure">Figure 2: </span>Left: the input. Right: the output.</figcaption></figure>
<figure id="S1.F3" class="ltx_figure"><img src="x4.png" class="ltx_graphics" width="100" height="50" alt="">
<figcaption class="ltx_caption"><span class="ltx_tag ltx_tag_figure">Figure 3: </span>Three.</figcaption></figure>
</section>
<section id="S2" class="ltx_section"><h2 class="ltx_title ltx_title_section"><span class="ltx_tag ltx_tag_section">2 </span>Results
&#8211; Fig.&#160;<a href="#S1.F3" class="ltx_ref"><span class="ltx_text ltx_ref_tag">3</span></a></h2>
<div id="S2.p1" class="ltx_para"><p class="ltx_p">Figures 1 and 3 summarise it; Figure 2 (right) too.</p></div>
</section>
</article></div></body></html>"""


def linked(labels=None):
    paper = parse_latexml_html(PAGE.encode(), input_uri="synthetic.html", fallback_id="2401.13641")
    return link_paper(paper, figure_labels=labels)


def test_constructs():
    paper = linked({"fig:three": "3"})
    got = [(r.context, r.context_id, r.surface, r.figure_id, r.resolution) for r in mention_rows(paper)]
    p = "2401.13641"
    assert got == [
        ("paragraph", None, "Figure 1", f"{p}_F1", "anchor"),  # absolute URL into this paper
        ("paragraph", None, "Figure 2b", f"{p}_F2.2", "anchor"),  # href + typed panel
        ("paragraph", None, "Figure LABEL:fig:three", f"{p}_F3", "label"),  # keyword typed before the leftover
        ("paragraph", None, "LABEL:fig:three", f"{p}_F3", "label"),
        ("title", None, "Fig. 3", f"{p}_F3", "anchor"),
        ("paragraph", None, "Figures 1", f"{p}_F1", "text"),
        ("paragraph", None, "3", f"{p}_F3", "text"),
        ("paragraph", None, "Figure 2 (right)", f"{p}_F2.2", "text"),  # two panels: right = 2nd
        ("caption", f"{p}_F1", "2(a)", f"{p}_F2.1", "anchor"),  # the caption's self reference is dropped
    ]


def test_other_paper_and_unmapped_labels_are_not_mentions():
    paper = linked()
    surfaces = [r.surface for r in mention_rows(paper)]
    assert surfaces.count("Figure 1") == 1  # "Figure 1 of another paper" links elsewhere
    assert not any("LABEL" in s for s in surfaces)


def test_split_positions_label_the_panels():
    fig2 = linked().figures[1]
    assert [(s.label, s.caption, s.caption_source) for s in fig2.subfigures] == [
        ("Left", "<TAG> Left </TAG> the input.", "split_parent"),
        ("Right", "<TAG> Right </TAG> the output.", "split_parent"),
    ]
