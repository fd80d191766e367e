"""A build of arXiv's LaTeXML oxide pages as a user runs it (issue 44): pages saved from
arxiv.org with their images in ``<id>vN/`` beside them, a failed conversion among them, and an
SVG figure file. Pages: ``tests/pages/oxide/`` (provenance in tests/pages/SOURCES.md).
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hostile_fixtures import cli_env, sciga_cmd
from PIL import Image

from conftest import ROOT

OXIDE = ROOT / "tests" / "pages" / "oxide"
pytestmark = pytest.mark.e2e


def _png(size, colour) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, colour).save(out, "PNG")
    return out.getvalue()


def _rows(out: Path, config: str) -> list[dict]:
    return [r for f in sorted((out / "data" / config).glob("*.parquet")) for r in pq.read_table(f).to_pylist()]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    inp = tmp_path_factory.mktemp("in")
    shutil.copy(OXIDE / "2410.00260v2.html", inp / "2410.00260v2.html")  # as `wget -E -p` saves it
    shutil.copy(OXIDE / "2608.30667v1.html", inp / "2608.30667v1.html")
    latex = inp / "2410.00260v2" / "latex"
    latex.mkdir(parents=True)
    for name, size in (("fig1_new.png", (476, 200)), ("UMAP.png", (429, 239)), ("confusion_new.png", (476, 404))):
        (latex / name).write_bytes(_png(size, (30, 90, 200)))
    Image.new("RGB", (476, 381), (200, 90, 30)).save(latex / "judge_new.jpg", "JPEG")
    # an SVG figure file, as arXiv serves them: <object type="image/svg+xml" data="<id>vN/<name>.svg">
    # (the construct of 2609.03768v1's figures) around the real fig_closure.svg
    svg_page = (
        (OXIDE / "2410.00260v2.html")
        .read_bytes()
        .replace(
            b'<img src="2410.00260v2/latex/UMAP.png" id="S3.F3.g1" class="ltx_graphics ltx_centering ltx_img_landscape" '
            b'style="aspect-ratio:429/239;" width="429" height="239" alt="Refer to caption">',
            b'<object type="image/svg+xml" data="2609.03768v1/fig_closure.svg" id="S3.F3.g1" '
            b'class="ltx_graphics ltx_centering" width="326" height="250"></object>',
        )
    )
    assert b"fig_closure.svg" in svg_page
    svg_dir = inp / "svgfile"
    (svg_dir / "2609.03768v1").mkdir(parents=True)
    (svg_dir / "2609.03768v1.html").write_bytes(svg_page.replace(b"arXiv:2410.00260v2", b"arXiv:2609.03768v1"))
    shutil.copy(OXIDE / "2609.03768v1" / "fig_closure.svg", svg_dir / "2609.03768v1" / "fig_closure.svg")
    out = tmp_path_factory.mktemp("out") / "build"
    r = subprocess.run(
        sciga_cmd("build", "--input", str(inp), "--output", str(out), "--quiet"),
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    return out


def test_the_failed_conversion_is_a_dead_letter_and_the_counts_reconcile(built):
    (dead,) = _rows(built, "dead_letter")
    assert (dead["paper_id"], dead["stage"], dead["error_type"]) == ("2608.30667", "parse", "failed_conversion")
    assert "only 2 LaTeXML errors" in dead["message"]
    manifest = json.loads((built / "manifest.json").read_text())
    assert sorted(p["id"] for p in _rows(built, "papers")) == ["2410.00260", "2609.03768"]
    papers = {p["id"]: p for p in _rows(built, "papers")}
    assert papers["2410.00260"]["provenance"]["latexml_errors"] == 0
    assert papers["2410.00260"]["version"] == "v2"
    assert manifest["stats"]["svg_rasterized"] == 5  # two inline drawings a page, one .svg file


def test_images_the_oxide_way_and_svg_figures_rasterized(built):
    figs = {f["id"]: f for f in _rows(built, "figures")}
    f1 = figs["2410.00260_F1"]
    assert (f1["image_status"], f1["width"], f1["height"]) == ("embedded", 476, 200)
    # <id>vN/path against the page's folder, published relative to --input (issue 41 item 8)
    assert f1["image_uri"] == "2410.00260v2/latex/fig1_new.png"
    assert f1["image_url"] == "https://arxiv.org/html/2410.00260v2/latex/fig1_new.png"  # and against arXiv
    assert figs["2410.00260_F4"]["image_status"] == "in_subfigures"
    assert [figs[f"2410.00260_F4.{i}"]["image_status"] for i in (1, 2)] == ["embedded", "embedded"]
    for fid, svg_id in (("2410.00260_F2", "S2.F2"), ("2410.00260_F5", "A2.F5")):
        f = figs[fid]
        assert (f["image_status"], f["image_kind"]) == ("rasterized_svg", "inline_svg")
        assert f["image_uri"] == f"2410.00260v2.html#{svg_id}"  # the SVG is in the page, in that element
        assert Image.open(io.BytesIO(f["image"]["bytes"])).format == "PNG"
        assert max(f["width"], f["height"]) <= 2048 and f["phash"]
    closure = figs["2609.03768_F3"]
    assert (closure["image_status"], closure["image_kind"]) == ("rasterized_svg", "svg")
    assert closure["image_uri"] == "svgfile/2609.03768v1/fig_closure.svg"  # the SVG file, kept
    assert (closure["width"], closure["height"]) == (653, 501)
    assert Image.open(io.BytesIO(closure["image"]["bytes"])).format == "PNG"


def test_the_gate_accepts_rasterized_rows(built):
    subprocess.run(sciga_cmd("validate", str(built)), env=cli_env(), capture_output=True, text=True, timeout=600)
    checks = json.loads((built / "quality" / "report.json").read_text())["checks"]
    figure_checks = [c for c in checks if c["config"] == "figures"]
    matches = [c for c in figure_checks if c.get("column") == "image_matches_status"]
    assert matches and all(c["success"] for c in matches), matches  # bytes exactly for embedded / rasterized_svg
    assert all(c["success"] for c in figure_checks), [c["description"] for c in figure_checks if not c["success"]]
