"""TeX figures: main file, \\input trees, \\graphicspath, missing extensions, numbering,
captions; rasterization with poppler / ghostscript; TeX <-> HTML figure matching and the
recovery of lost / absent / blank images."""

from __future__ import annotations

import gzip
import io

import pytest
from PIL import Image as PILImage
from sources_fixtures import CORPUS, ROOT

from sciga.schemas.records import Figure, Image, Paper, Subfigure
from sciga.transforms.common.errors import StageError
from sciga.transforms.eprints.eprint import SourceTree, read_eprint, read_source_dir
from sciga.transforms.eprints.rasterize import to_png
from sciga.transforms.eprints.tex_graphics import find_main, parse_document, tex_to_plain
from sciga.transforms.tex_recovery.figure_match import html_caption_tokens, jaccard, match_figures, tokens
from sciga.transforms.tex_recovery.recover import is_blank, recover_figures

EPS = b"""%!PS-Adobe-3.0 EPSF-3.0
%%BoundingBox: 0 0 100 50
newpath 10 10 moveto 90 40 lineto 5 setlinewidth stroke
showpage
"""
BAD_EPS = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 100 50\n/foo bar baz undefinedop\n"


def tree(files: dict) -> SourceTree:
    return SourceTree(kind="tar", files={k: (v.encode() if isinstance(v, str) else v) for k, v in files.items()})


def test_sample_sources_figures_numbers_and_subcaptions():
    doc = parse_document(read_source_dir(str(ROOT / "samples" / "tex" / "2511.99003")))
    assert doc.main == "main.tex"
    assert [f.number for f in doc.figures] == ["1", "2", "3", "4", "5"]
    f1 = doc.figures[0]
    assert f1.caption.startswith("Examples of the three imaging modalities")
    assert [g.path for g in f1.graphics] == ["figs/mri_axial.png", "figs/ct_slice.png", "figs/xray_chest.png"]
    assert [g.subcaption for g in f1.graphics][2] == "Chest radiograph with a pulmonary nodule."
    assert doc.figures[2].graphics[0].path == "figs/dice_scores.pdf"
    # The deliberately missing file is reported, not invented.
    assert doc.figures[4].graphics[0].path is None
    assert "not in the e-print" in doc.figures[4].graphics[0].error
    assert doc.missing_graphics == ["figs/attention_maps.png"]


def test_cvpr_teaser_captionof_and_multi_caption_float():
    d1 = parse_document(read_source_dir(str(ROOT / "samples" / "tex" / "2511.99001")))
    assert (d1.figures[0].env, d1.figures[0].number) == ("captionof", "1")
    assert d1.figures[0].graphics[0].path == "figs/teaser.png"
    assert [g.subcaption for g in d1.figures[2].graphics] == [
        "Accuracy against compute.",
        "Accuracy per video attribute.",
        "A routed frame with its mask.",
    ]
    d2 = parse_document(read_source_dir(str(ROOT / "samples" / "tex" / "2511.99002")))
    # Two \caption in one float are Figures 2 and 3, each with its own graphic.
    assert [(f.number, [g.path for g in f.graphics]) for f in d2.figures[1:3]] == [
        ("2", ["figs/study_setup.png"]),
        ("3", ["figs/task_times.png"]),
    ]
    assert d2.figures[4].graphics == []  # picture environment: nothing to rasterize


@pytest.mark.corpus
def test_input_tree_of_a_real_source():
    doc = parse_document(read_source_dir(str(CORPUS / "tex" / "dd3d")))
    assert doc.main == "main.tex"
    assert len(doc.figures) == 3, "the commented-out figures do not count"
    assert doc.figures[0].graphics[0].path == "figures/fcos3d_arch.png"  # from sections/method_fcos.tex
    assert doc.missing_graphics == ["figures/scaling_law.pdf"]
    assert doc.figures[2].caption.startswith("Depth quality vs 3D AP")


def test_graphicspath_missing_extension_import_and_numbering():
    t = tree(
        {
            "paper.tex": r"""\documentclass{article}
\usepackage{graphicx,import}
\graphicspath{{img/}{plots/}}
\DeclareGraphicsExtensions{.png,.pdf}
\begin{document}
\begin{figure}\includegraphics[width=\linewidth, trim={1 2 3 4}]{scheme}\caption{The scheme of the method.}\end{figure}
\setcounter{figure}{4}
\begin{figure*}\includegraphics{curve}\caption[short]{A loss curve over \textbf{training} steps, see Fig.~\ref{x}.}\end{figure*}
\import{sec/}{appendix}
%\begin{figure}\includegraphics{ghost}\caption{Commented out}\end{figure}
\begin{table}\caption{A table caption does not count}\end{table}
\begin{figure}\includegraphics{"file name".png}\caption*{Unnumbered figure}\end{figure}
\end{document}""",
            "sec/appendix.tex": r"""\subimport{../chapters/}{extra}""",
            "chapters/extra.tex": r"""\begin{figure}\includegraphics{local}\caption{Imported figure.}\end{figure}""",
            "chapters/local.PDF": b"%PDF-1.4",
            "img/scheme.png": b"\x89PNG",
            "plots/curve.pdf": b"%PDF-1.4",
            "img/curve.png": b"\x89PNG",
            "file name.png": b"\x89PNG",
        }
    )
    assert find_main(t) == "paper.tex"
    doc = parse_document(t)
    got = [(f.number, f.caption, [g.path for g in f.graphics]) for f in doc.figures]
    assert got == [
        ("1", "The scheme of the method.", ["img/scheme.png"]),
        ("5", "A loss curve over training steps, see Fig.", ["img/curve.png"]),  # .png declared first
        ("6", "Imported figure.", ["chapters/local.PDF"]),  # import folder + case-insensitive
        (None, "Unnumbered figure", ["file name.png"]),
    ]


def test_input_cycles_and_missing_inputs_are_problems_not_crashes():
    t = tree(
        {
            "main.tex": r"\documentclass{article}\begin{document}\input{a}\input{nothere}\end{document}",
            "a.tex": r"\input{main}",
        }
    )
    doc = parse_document(t)
    assert any("cycle" in p for p in doc.problems)
    assert any("nothere" in p for p in doc.problems)


def test_pdf_only_source_has_no_figures():
    doc = parse_document(read_eprint(b"%PDF-1.4 ..."))
    assert doc.main is None and doc.figures == [] and "PDF-only" in doc.problems[0]


def test_tex_to_plain():
    assert tex_to_plain(r"\textbf{Depth} vs \'{e}t\'e, $x^2$ 10\% see~\cite{a}\label{b}") == "Depth vs ete, 10% see"


# -- rasterization ----------------------------------------------------------------------------
@pytest.mark.tool("pdftoppm")
def test_pdf_figure_rasterized_with_poppler():
    pdf = (CORPUS / "tex" / "2603.21852" / "Fig2_trees.pdf").read_bytes()
    png, how = to_png(pdf, "Fig2_trees.pdf", dpi=100, max_side=800)
    assert how == "pdftoppm" and png.startswith(b"\x89PNG")
    with PILImage.open(io.BytesIO(png)) as im:
        assert max(im.size) == 800


@pytest.mark.tool("gs")
def test_eps_rasterized_and_rejected_eps_is_a_clear_error():
    png, how = to_png(EPS, "figs/line.eps", dpi=150)
    assert how == "ghostscript"
    with PILImage.open(io.BytesIO(png)) as im:
        assert im.size == (208, 104)
    with pytest.raises(StageError) as ei:
        to_png(BAD_EPS, "figs/broken.eps")
    e = ei.value
    assert e.stage == "rasterize" and e.error_type == "rejected"
    assert e.message.startswith("figs/broken.eps: ghostscript rejected the file") and "undefined" in e.message
    png, _ = to_png(gzip.compress(EPS), "figs/line.eps.gz")
    assert png.startswith(b"\x89PNG")


@pytest.mark.tool("gs")
def test_endless_postscript_times_out():
    loop = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n{ 1 pop } loop\n"
    with pytest.raises(StageError) as ei:
        to_png(loop, "figs/loop.eps", timeout=1.0)
    assert ei.value.error_type == "timeout" and "1 s" in ei.value.message


def test_broken_raster_and_unsupported_files():
    with pytest.raises(StageError) as ei:
        to_png(b"\x89PNG\r\n\x1a\nbroken", "a.png")
    assert ei.value.error_type == "bad_image"
    with pytest.raises(StageError):
        to_png(b"<svg xmlns='http://www.w3.org/2000/svg'/>", "a.svg")


# -- matching and recovery --------------------------------------------------------------------
def test_caption_tokens_and_jaccard():
    h = html_caption_tokens("<TAG> Figure 3: </TAG> Dice score with <MATH> 10 </MATH> labels, été")
    t = tokens(tex_to_plain(r"Dice score with $10$ labels, \'et\'e"))
    assert h == t == frozenset({"dice", "score", "with", "labels", "ete"})
    assert jaccard(h, t) == 1.0


def test_match_by_number_and_by_caption_with_threshold():
    cap = lambda s: tokens(s)
    html = [
        ("1", cap("Overview of the method and its parts")),
        ("2", cap("Qualitative results on the test set")),
        (None, cap("An uncaptioned grid of samples from the model")),
    ]
    tex = [
        ("1", cap("Overview of the method and its main parts")),
        ("3", cap("Qualitative results on the test set")),  # counter drift
        (None, cap("An uncaptioned grid of samples from the model")),
    ]
    ms = match_figures(html, tex)
    assert [(m.html_index, m.tex_index, m.by) for m in ms] == [(0, 0, "number"), (1, 1, "caption"), (2, 2, "caption")]
    # Numbers agree but the captions have nothing in common: refused (drifted counter).
    assert match_figures([("1", cap("alpha beta"))], [("1", cap("gamma delta"))]) == []
    # Threshold is configurable.
    near = [("9", cap("a b c d e"))], [("8", cap("a b c d x"))]
    assert match_figures(*near) == [] and len(match_figures(*near, threshold=0.6)) == 1


def _png(color=(255, 255, 255), size=(8, 8), dot=False) -> bytes:
    im = PILImage.new("RGB", size, color)
    if dot:
        im.putpixel((1, 1), (0, 0, 0))
    out = io.BytesIO()
    im.save(out, format="PNG")
    return out.getvalue()


def test_blank_detection():
    assert is_blank(_png()) and is_blank(_png((0, 0, 0)))
    assert not is_blank(_png(dot=True))
    assert not is_blank(b"not an image")


def _paper(figs) -> Paper:
    return Paper(id="2401.00001", title="t", abstract="", figures=figs)


def test_recovery_repoints_lost_absent_and_blank_images_only():
    t = tree(
        {
            "main.tex": r"""\documentclass{article}\begin{document}
\begin{figure}\includegraphics{a.pdf}\caption{First figure shows the pipeline.}\end{figure}
\begin{figure}\includegraphics{b.png}\caption{Second figure shows results.}\end{figure}
\begin{figure}\includegraphics{c.eps}\caption{Third figure shows a blank plot.}\end{figure}
\begin{figure}\includegraphics{d.png}\caption{Fourth figure is fine in the HTML.}\end{figure}
\begin{figure}\includegraphics{gone.png}\caption{Fifth figure lost everywhere.}\end{figure}
\begin{figure}\includegraphics{s1.png}\includegraphics{s2.png}\caption{Sixth figure with two panels.}\end{figure}
\end{document}""",
            "a.pdf": b"%PDF",
            "b.png": b"\x89PNG",
            "c.eps": b"%!PS",
            "d.png": b"\x89PNG",
            "s1.png": b"1",
            "s2.png": b"2",
        }
    )
    doc = parse_document(t)
    lost = Image(path=None, kind="missing", html_id="S1.F1.g1")
    absent = Image(path="x2.png", url="https://ar5iv.org/html/2401.00001/assets/x2.png", kind="raster")
    blank = Image(path="x3.png", kind="raster")
    fine = Image(path="x4.png", kind="raster")
    lost5 = Image(path=None, kind="missing")
    figs = [
        Figure(
            "2401.00001_F1",
            "S1.F1",
            1,
            "1",
            "Figure 1:",
            "<TAG> Figure 1: </TAG> First figure shows the pipeline.",
            [lost],
        ),
        Figure(
            "2401.00001_F2",
            "S1.F2",
            2,
            "2",
            "Figure 2:",
            "<TAG> Figure 2: </TAG> Second figure shows results.",
            [absent],
        ),
        Figure(
            "2401.00001_F3",
            "S1.F3",
            3,
            "3",
            "Figure 3:",
            "<TAG> Figure 3: </TAG> Third figure shows a blank plot.",
            [blank],
        ),
        Figure(
            "2401.00001_F4",
            "S1.F4",
            4,
            "4",
            "Figure 4:",
            "<TAG> Figure 4: </TAG> Fourth figure is fine in the HTML.",
            [fine],
        ),
        Figure(
            "2401.00001_F5",
            "S1.F5",
            5,
            "5",
            "Figure 5:",
            "<TAG> Figure 5: </TAG> Fifth figure lost everywhere.",
            [lost5],
        ),
        Figure(
            "2401.00001_F6", "S1.F6", 6, "6", "Figure 6:", "<TAG> Figure 6: </TAG> Sixth figure with two panels.", []
        ),
    ]
    paper = _paper(figs)
    state = {id(lost): "lost", id(absent): "absent", id(blank): "blank", id(lost5): "lost"}
    rep = recover_figures(paper, doc, lambda img: state.get(id(img)))
    assert rep.matched == 6 and rep.matched_by_number == 6
    assert (lost.source, lost.path, lost.kind, lost.html_id) == ("tex", "a.pdf", "raster", "S1.F1.g1")
    assert (absent.source, absent.path, absent.url) == ("tex", "b.png", None)
    assert (blank.source, blank.path) == ("tex", "c.eps")
    assert (fine.source, fine.path) == ("html", "x4.png"), "good HTML images are never replaced"
    assert (lost5.source, lost5.kind, lost5.path) == ("html", "missing", None), "nothing to take: left as it was"
    assert rep.missing_in_source == ["gone.png"]
    f6 = paper.figures[5]
    assert [i.path for i in f6.images] == ["s1.png", "s2.png"] and len(f6.subfigures) == 2
    assert all(i.source == "tex" for i in f6.images)
    assert rep.recovered == 5


def test_recovery_leaves_ambiguous_figures_alone():
    t = tree(
        {
            "main.tex": r"""\documentclass{article}\begin{document}
\begin{figure}\includegraphics{a.png}\includegraphics{b.png}\includegraphics{c.png}\caption{Three panels here.}\end{figure}
\end{document}""",
            "a.png": b"1",
            "b.png": b"2",
            "c.png": b"3",
        }
    )
    imgs = [Image(path=None, kind="missing"), Image(path=None, kind="missing")]
    fig = Figure(
        "p_F1",
        None,
        1,
        "1",
        "Figure 1:",
        "<TAG> Figure 1: </TAG> Three panels here.",
        imgs,
        [Subfigure("p_F1.1", None, None, "", [imgs[0]]), Subfigure("p_F1.2", None, None, "", [imgs[1]])],
    )
    rep = recover_figures(_paper([fig]), parse_document(t), lambda img: "lost")
    assert rep.ambiguous == ["p_F1"] and rep.recovered == 0
    assert all(i.source == "html" for i in imgs)
