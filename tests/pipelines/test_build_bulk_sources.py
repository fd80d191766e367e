"""`sciga build --eprints-bulk DIR --html-from auto|latexml` end to end: e-prints come from
arXiv-format bulk tars (generated here, with the real e-prints of ../shared/corpus inside),
TeX figures are recovered from them, papers with metadata but no page get their page from
our own LaTeXML conversion, and every paper that cannot be built is a dead letter with
its reason. Real Beam, real LaTeXML, real Parquet."""

from __future__ import annotations

import glob
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from bulk_fixtures import write_bulk
from sources_fixtures import tar_gz_of

from sciga.pipelines.cli import main

from conftest import CORPUS

pytestmark = pytest.mark.tool("latexmlc")


def rows(out: Path, config: str) -> list[dict]:
    return [
        r for f in sorted(glob.glob(str(out / "data" / config / "*.parquet"))) for r in pq.read_table(f).to_pylist()
    ]


def _meta(folder: Path, pid: str, title: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{pid}.meta.json").write_text(
        json.dumps({"id": pid, "title": title, "categories": ["cs.LG"], "primary_category": "cs.LG"})
    )


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    base = tmp_path_factory.mktemp("bulkbuild")
    eml = CORPUS / "tex" / "2603.21852"
    bulk = write_bulk(
        base / "bulk",
        {
            "1709_001": [("1709/1709.07020.gz", (CORPUS / "tex" / "1709.07020" / "1709.07020v1.tar.gz").read_bytes())],
            "2603_001": [("2603/2603.21852.gz", tar_gz_of({p.name: p.read_bytes() for p in eml.iterdir()}))],
            "2101_001": [("2101/2101.00002.pdf", b"%PDF-1.5\n% a PDF-only submission\n%%EOF\n")],
        },
    )
    cache = base / "cache" / "papers"
    # A page without its e-print (as ar5iv serves it: its figure is a PDF it could not show).
    _meta(cache / "1709.07020", "1709.07020", "A page whose figure is in the bulk e-print")
    shutil.copy(CORPUS / "latexml" / "a1709.html", cache / "1709.07020" / "1709.07020.html")
    # Metadata only: the page must be made from the e-print.
    _meta(cache / "2603.21852", "2603.21852", "Converted from the bulk e-print")
    _meta(cache / "2101.00002", "2101.00002", "PDF only")
    _meta(cache / "2101.00099", "2101.00099", "Not in any tar")
    return base, bulk


def test_auto_converts_papers_without_a_page_and_recovers_figures_from_bulk(setup):
    base, bulk = setup
    out = base / "out"
    assert (
        main(
            [
                "build",
                "--input",
                str(base / "cache"),
                "--output",
                str(out),
                "--eprints-bulk",
                str(bulk),
                "--html-from",
                "auto",
                "--workers",
                "1",
                "--quiet",
            ]
        )
        == 0
    )
    papers = {p["id"]: p for p in rows(out, "papers")}
    assert set(papers) == {"1709.07020", "2603.21852"}
    conv = papers["2603.21852"]
    assert conv["provenance"]["generator"] == "LaTeXML" and conv["provenance"]["generator_version"]
    assert conv["title"] == "Converted from the bulk e-print" and len(conv["figures"]) == 2
    figs = {r["id"]: r for r in rows(out, "figures")}
    # Our conversion rasterized the PDF figures itself: images beside the converted page.
    assert all(figs[f"2603.21852_F{i}"]["image"]["bytes"][:4] == b"\x89PNG" for i in (1, 2))
    # The page's lost PDF figure is recovered from the e-print read out of the bulk tar.
    f1 = figs["1709.07020_F1"]
    assert f1["image_source"] == "tex" and f1["image"]["bytes"][:4] == b"\x89PNG"
    dead = {d["paper_id"]: d for d in rows(out, "dead_letter")}
    assert (dead["2101.00002"]["error_type"], dead["2101.00002"]["scope"]) == ("pdf_only", "input")
    assert dead["2101.00099"]["error_type"] == "not_in_bulk" and "2101.00099" in dead["2101.00099"]["message"]
    m = json.loads((out / "manifest.json").read_text())
    assert m["reconciled"] and m["inputs"]["count"] == 4

    # A rerun converts nothing again and reuses every paper.
    stamp = out / ".sciga" / "latexml" / "2603.21852" / "stamp.json"
    mtime = stamp.stat().st_mtime_ns
    assert (
        main(
            [
                "build",
                "--input",
                str(base / "cache"),
                "--output",
                str(out),
                "--eprints-bulk",
                str(bulk),
                "--html-from",
                "auto",
                "--workers",
                "1",
                "--quiet",
            ]
        )
        == 0
    )
    assert stamp.stat().st_mtime_ns == mtime
    m = json.loads((out / "manifest.json").read_text())
    assert m["incremental"]["reused"] == 2


def test_pages_only_by_default_and_papers_without_a_page_are_named(setup, caplog):
    import logging

    base, _ = setup
    out = base / "plain"
    with caplog.at_level(logging.WARNING):
        assert main(["build", "--input", str(base / "cache"), "--output", str(out), "--workers", "1", "--quiet"]) == 0
    assert [p["id"] for p in rows(out, "papers")] == ["1709.07020"]
    assert "3 papers have metadata but no page" in caplog.text and "--html-from auto" in caplog.text
