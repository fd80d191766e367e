"""The sources stage inside `sciga build` (real Beam DirectRunner, real Parquet):
bad e-prints become dead letters, figure-level problems stay on the figure row, ar5iv
dumps are read in place, --tex-input recovers figures, and `sciga build --ids` fetches
inside the pipeline from a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import glob
import io
import zipfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from sources_fixtures import (
    CORPUS,
    FAILED_CONVERSION_PAGE,
    FaultServer,
    tar_gz_of,
    tar_gz_of_dir,
    traversal_tarball,
    zero_bomb,
)

from sciga.pipelines.cli import main

pytestmark = pytest.mark.corpus

BAD_EPS = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 100 50\n/foo bar baz undefinedop\n"


def rows(out: Path, config: str) -> list[dict]:
    files = glob.glob(str(out / "data" / config / "*.parquet"))
    return [r for f in files for r in pq.read_table(f).to_pylist()]


def _eps_paper(tmp: Path) -> None:
    """A LaTeXML-like page whose one figure image is missing, and a source whose figure is
    an EPS that ghostscript rejects."""
    html = b"""<!DOCTYPE html><html><head><title>Broken EPS</title></head><body>
<article class="ltx_document"><h1 class="ltx_title ltx_title_document">Broken EPS</h1>
<section id="S1" class="ltx_section"><h2 class="ltx_title ltx_title_section">1 Intro</h2>
<div id="S1.p1" class="ltx_para"><p class="ltx_p">See the plot.</p></div>
<figure id="S1.F1" class="ltx_figure"><img src="" class="ltx_graphics ltx_missing ltx_missing_image" alt="">
<figcaption class="ltx_caption"><span class="ltx_tag ltx_tag_figure">Figure 1: </span>A plot drawn in PostScript by hand.</figcaption>
</figure></section></article></body></html>"""
    (tmp / "2401.00005.html").write_bytes(html)
    tex = (
        b"\\documentclass{article}\\begin{document}\\begin{figure}\\includegraphics{plot.eps}"
        b"\\caption{A plot drawn in PostScript by hand.}\\end{figure}\\end{document}"
    )
    (tmp / "2401.00005.src.tar.gz").write_bytes(tar_gz_of({"main.tex": tex, "plot.eps": BAD_EPS}))


@pytest.fixture(scope="module")
def local_build(tmp_path_factory):
    base = tmp_path_factory.mktemp("srcbuild")
    pages = base / "pages"
    pages.mkdir()
    a1709 = (CORPUS / "latexml" / "a1709.html").read_bytes()
    eml = (CORPUS / "latexml" / "eml.html").read_bytes()
    # Pages with hostile or broken e-prints beside them.
    (pages / "2401.00002.html").write_bytes(a1709)
    (pages / "2401.00002.src.tar.gz").write_bytes(traversal_tarball())
    (pages / "2401.00003.html").write_bytes(eml)
    (pages / "2401.00003.src.tar.gz").write_bytes(zero_bomb(10))
    (pages / "2401.00004.html").write_bytes(a1709)
    (pages / "2401.00004.src.gz").write_bytes(b"\x1f\x8b\x08\x00" + b"\x00garbage" * 20)
    # A figure referenced by the TeX but absent from the e-print, and one that gs rejects.
    (pages / "2401.00006.html").write_bytes(eml)
    (pages / "2401.00006.src.tar.gz").write_bytes(
        tar_gz_of(
            {
                "EML.tex": (CORPUS / "tex" / "2603.21852" / "EML.tex").read_bytes(),
                "Fig2_trees.pdf": (CORPUS / "tex" / "2603.21852" / "Fig2_trees.pdf").read_bytes(),
            }
        )
    )
    _eps_paper(pages)
    # An ar5iv dump with a real page (figures from --tex-input) and a failed conversion.
    dump = base / "ar5iv-2017-09.zip"
    with zipfile.ZipFile(dump, "w") as zf:
        zf.writestr("1709/1709.07020.html", a1709)
        zf.writestr("1709/1709.99999.html", FAILED_CONVERSION_PAGE)
        zf.writestr("1709/notes.txt", b"not a page")
    out = base / "out"
    rc = main(["build", "--input", str(pages), str(dump), "--tex-input", str(CORPUS / "tex"), "--output", str(out)])
    return {"rc": rc, "out": out}


def test_counts_reconcile(local_build):
    assert local_build["rc"] == 0
    papers = {p["id"] for p in rows(local_build["out"], "papers")}
    dead = rows(local_build["out"], "dead_letter")
    inputs_dead = [d for d in dead if d["scope"] == "input"]
    assert len(papers) + len(inputs_dead) == 7
    # An unsafe or broken e-print costs only the TeX recovery: its paper is kept (from the
    # page) and the e-print gets a dead-letter row of its own (scope "part").
    assert papers == {"2401.00002", "2401.00003", "2401.00004", "2401.00005", "2401.00006", "1709.07020"}
    assert sorted(d["paper_id"] for d in dead if d["scope"] == "part") == ["2401.00002", "2401.00003", "2401.00004"]


def test_bad_eprints_are_dead_letters_with_clear_reasons(local_build):
    dead = {d["paper_id"]: d for d in rows(local_build["out"], "dead_letter")}
    d2 = dead["2401.00002"]
    assert (d2["stage"], d2["error_type"], d2["scope"]) == ("tex_source", "unsafe_archive", "part")
    assert "'../../etc/evil.tex'" in d2["message"] and "nothing was extracted" in d2["message"]
    d3 = dead["2401.00003"]
    assert (d3["stage"], d3["error_type"]) == ("tex_source", "size_bomb") and "10240 MiB" in d3["message"]
    d4 = dead["2401.00004"]
    assert (d4["stage"], d4["error_type"]) == ("tex_source", "corrupt_source") and "refetch" in d4["message"]
    assert d4["input_uri"].endswith("2401.00004.html")
    d9 = dead["1709.99999"]
    assert (d9["stage"], d9["error_type"], d9["scope"]) == ("read", "conversion_failed", "input"), (
        "a failed conversion is not a paper"
    )
    assert "conversion failed" in d9["message"]


def test_figure_level_problems_stay_on_the_row(local_build):
    figs = {r["id"]: r for r in rows(local_build["out"], "figures")}
    # EML.tex names two PDFs; the e-print holds only the second: the first figure keeps
    # its (absent) HTML image and its error, the second comes from the source.
    f1, f2 = figs["2401.00006_F1"], figs["2401.00006_F2"]
    assert f1["image_source"] == "html" and f1["image"] is None and "not found" in f1["image_error"]
    assert f1["image_status"] == "not_found"
    assert f2["image_source"] == "tex" and f2["image"]["bytes"].startswith(b"\x89PNG")
    eps = figs["2401.00005_F1"]
    assert eps["image_source"] == "tex" and eps["image"] is None and eps["image_status"] == "undecodable"
    assert eps["image_error"].startswith("plot.eps: ghostscript rejected the file")


def test_dump_pages_are_read_in_place_and_recovered_from_tex_input(local_build):
    papers = {p["id"]: p for p in rows(local_build["out"], "papers")}
    p = papers["1709.07020"]
    assert p["provenance"]["source"] == "ar5iv_dump"
    assert p["provenance"]["input_uri"].startswith("zip://1709/1709.07020.html::")
    fig = {r["id"]: r for r in rows(local_build["out"], "figures")}["1709.07020_F1"]
    assert fig["image_source"] == "tex" and fig["image"]["path"] == "preprint_inset.pdf"
    from PIL import Image

    with Image.open(io.BytesIO(fig["image"]["bytes"])) as im:
        assert im.format == "PNG" and im.size[0] > 500


def test_no_tex_switches_the_stage_off(tmp_path):
    pages = tmp_path / "p"
    pages.mkdir()
    (pages / "2401.00002.html").write_bytes((CORPUS / "latexml" / "a1709.html").read_bytes())
    (pages / "2401.00002.src.tar.gz").write_bytes(traversal_tarball())
    out = tmp_path / "o"
    assert main(["build", "--input", str(pages), "--output", str(out), "--no-tex", "--no-images"]) == 0
    assert [p["id"] for p in rows(out, "papers")] == ["2401.00002"]


# -- sciga build --ids: fetch inside the pipeline ------------------------------------------
def test_build_ids_fetches_inside_the_pipeline(tmp_path, monkeypatch):
    with FaultServer() as s:
        s.add("/html/1605.08386", (CORPUS / "latexml" / "a1709.html").read_bytes())
        s.add("/e-print/1605.08386", (CORPUS / "tex" / "1709.07020" / "1709.07020v1.tar.gz").read_bytes())
        s.add("/html/1707.08567", (CORPUS / "latexml" / "dd3d.html").read_bytes())
        s.add("/e-print/1707.08567", tar_gz_of_dir(CORPUS / "tex" / "dd3d"))
        s.add("/html/astro-ph/0601001", FAILED_CONVERSION_PAGE)
        s.script("/html/1605.08386", ["503", "reset"])
        for k, v in s.env().items():
            monkeypatch.setenv(k, v)
        out = tmp_path / "out"
        rc = main(
            [
                "build",
                "--ids",
                "1605.08386",
                "1707.08567",
                "astro-ph/0601001",
                "0000.0000",
                "abc",
                "--output",
                str(out),
                "--rate-limit",
                "0.01",
                "--retry-backoff",
                "0.01",
                "--timeout",
                "2",
            ]
        )
        assert rc == 0
        n_requests = len(s.log)
        # A rerun finds everything in the fetch store: no request at all.
        assert (
            main(
                [
                    "build",
                    "--ids",
                    "1605.08386",
                    "1707.08567",
                    "astro-ph/0601001",
                    "0000.0000",
                    "abc",
                    "--output",
                    str(out),
                    "--rate-limit",
                    "0.01",
                    "--retry-backoff",
                    "0.01",
                ]
            )
            == 0
        )
        fresh = s.log[n_requests:]
    papers = {p["id"]: p for p in rows(out, "papers")}
    assert set(papers) == {"1605.08386", "1707.08567"}
    assert papers["1605.08386"]["title"] == "Heat-bath random walks with Markov bases"
    dead = {d["paper_id"]: d for d in rows(out, "dead_letter")}
    assert set(dead) == {"astro-ph/0601001", "0000.0000", "abc"}
    assert (dead["astro-ph/0601001"]["stage"], dead["astro-ph/0601001"]["error_type"]) == (
        "fetch_html",
        "conversion_failed",
    )
    assert (dead["0000.0000"]["stage"], dead["0000.0000"]["error_type"]) == ("metadata", "unknown_id")
    assert dead["abc"]["error_type"] == "bad_id"
    fig = {r["id"]: r for r in rows(out, "figures")}["1605.08386_F1"]
    assert fig["image_source"] == "tex" and fig["image"]["bytes"].startswith(b"\x89PNG")
    assert (out / "fetch_cache" / "papers" / "1605.08386" / "1605.08386.meta.json").exists()
    assert [e["path"] for e in fresh if e["path"].startswith(("/html/", "/e-print/"))] == []
    assert not any(e["path"] == "/api/query" and "1605.08386" in e["query"] for e in fresh)
