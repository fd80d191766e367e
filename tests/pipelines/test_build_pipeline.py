"""`sciga build` end to end on a real Beam DirectRunner, real Parquet, real DuckDB."""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from sciga.explore.views import connect
from sciga.pipelines.build import add_arguments, run_build
from sciga.schemas.version import SCHEMA_VERSION

from conftest import CORPUS, run_cli


def build(*argv: str):
    ap = argparse.ArgumentParser()
    add_arguments(ap)
    return run_build(ap.parse_args(list(argv)))


def shard_digests(out: Path) -> dict:
    return {
        str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.glob("data/*/*.parquet"))
    }


@pytest.fixture(scope="module")
def sample_build(tmp_path_factory):
    out = tmp_path_factory.mktemp("sample")
    return build("--sample", "--output", str(out)), out


def test_sample_build_counts_and_layout(sample_build):
    result, out = sample_build
    c = result.counts
    # Read off samples/EXPECTED.md: 3 + 6 + 5 + 0 figures (2511.99002's one element
    # holds Figures 2 and 3); 3 + 4 + 3+2+3 subfigures/panels; teasers in 99001 and 99002.
    assert (c.inputs, c.papers, c.figures, c.subfigures, c.teasers, c.dead_letter) == (4, 4, 14, 15, 2, 0)
    assert c.reconciled
    for config in ("papers", "figures", "mentions", "dead_letter"):
        files = sorted((out / "data" / config).glob("*.parquet"))
        assert [f.name for f in files] == ["train-00000-of-00001.parquet"]
        md = pq.ParquetFile(files[0]).metadata
        assert md.row_group(0).column(0).compression == "ZSTD" if md.num_rows else True
        assert pq.read_schema(files[0]).metadata[b"sciga.schema_version"] == SCHEMA_VERSION.encode()
    m = json.loads((out / "manifest.json").read_text())
    assert m["counts"]["papers"] == 4 and m["schema_version"] == SCHEMA_VERSION and m["reconciled"]
    assert not (out / ".staging").exists() or not any((out / ".staging").iterdir())
    card = (out / "README.md").read_text()
    assert "configs:" in card and "data/figures/train-*" in card, "the build folder is a Hugging Face dataset"
    # 22 image files and 2511.99002's SVG drawing, rasterized (issue 44)
    assert m["stats"]["images_read"] == 23 and m["stats"]["svg_rasterized"] == 1
    assert "mentions_rejected_other_work" not in m["stats"]


def test_sample_build_rows_in_duckdb(sample_build):
    _, out = sample_build
    con = connect(str(out))
    rows = con.execute(
        "select id, kind, image.path, octet_length(image.bytes) > 0, image_error from figures "
        "where paper_id = '2511.99001' order by id"
    ).fetchall()
    assert rows[0] == ("2511.99001_F1", "figure", "figs/teaser.png", True, None)
    assert [r[0] for r in rows] == [
        "2511.99001_F1",
        "2511.99001_F2",
        "2511.99001_F3",
        "2511.99001_F3.1",
        "2511.99001_F3.2",
        "2511.99001_F3.3",
    ]
    missing = con.execute("select image_error from figures where id = '2511.99003_F5'").fetchone()[0]
    assert "not found" in missing
    assert con.execute("select teaser from papers where id = '2511.99002'").fetchone()[0] == ["2511.99002_F1"]
    assert con.execute("select count(*) from papers where id = 'q-bio/0601999' and len(figures) = 0").fetchone()[0] == 1
    mentions = con.execute(
        "select figure_id, surface from mentions where paper_id = '2511.99003' order by figure_id"
    ).fetchall()
    # The surface of an anchored mention is the human one: "Figure <a>1c</a>" -> "Figure 1c".
    assert ("2511.99003_F1.3", "Figure 1c") in mentions and ("2511.99003_F4.3", "Figure 4c") in mentions


def test_same_input_same_bytes(tmp_path, sample_build):
    _, first = sample_build
    build("--sample", "--output", str(tmp_path / "again"))
    assert shard_digests(first) == shard_digests(tmp_path / "again")


def test_rerun_replaces_and_never_duplicates(tmp_path):
    out = tmp_path / "out"
    build("--sample", "--output", str(out), "--figures-per-shard", "10")
    assert len(list((out / "data" / "figures").glob("*.parquet"))) == 3
    build("--sample", "--output", str(out))  # fewer shards now: stale ones must go
    assert [p.name for p in (out / "data" / "figures").glob("*.parquet")] == ["train-00000-of-00001.parquet"]
    con = connect(str(out))
    assert con.execute("select count(*), count(distinct id) from figures").fetchone() == (29, 29)


def test_bad_inputs_become_dead_letters_and_counts_reconcile(tmp_path, samples):
    inp = tmp_path / "in"
    inp.mkdir()
    good = samples / "html" / "2511.99001" / "2511.99001.html"
    shutil.copy(good, inp / "2511.99001.html")
    (inp / "2511.99001v1.html.gz").write_bytes(gzip.compress(good.read_bytes()))  # same paper again
    (inp / "empty.html").write_bytes(b"")
    (inp / "notes.html").write_bytes(b"<html><body><p>Not LaTeXML</p></body></html>")
    (inp / "cut.html").write_bytes(good.read_bytes()[:5000])
    (inp / "paper.html").write_bytes(b"%PDF-1.4 binary")
    (inp / "bad.meta.json").write_text("{not json")
    (inp / "bad.html").write_bytes(good.read_bytes())
    out = tmp_path / "out"
    result = build("--input", str(inp), "--output", str(out))
    c = result.counts
    assert c.inputs == 7 and c.papers == 1 and c.dead_letter == 6 and c.reconciled
    con = connect(str(out))
    dead = dict(con.execute("select error_type, count(*) from dead_letter group by 1").fetchall())
    assert dead == {"duplicate": 1, "empty": 1, "not_latexml": 1, "truncated": 1, "not_html": 1, "bad_metadata": 1}
    for uri, msg in con.execute("select input_uri, message from dead_letter").fetchall():
        assert Path(uri).name in msg or Path(uri).stem + ".meta.json" in msg  # names the input or its sidecar
    kept = con.execute("select provenance.input_uri from papers").fetchone()[0]
    assert kept.endswith("2511.99001v1.html.gz") or kept.endswith("2511.99001.html")


def test_corpus_build(tmp_path):
    out = tmp_path / "corpus"
    result = build("--input", str(CORPUS / "html"), str(CORPUS / "latexml"), "--output", str(out))
    c = result.counts
    assert (c.inputs, c.papers, c.dead_letter) == (8, 8, 0)
    # 12 + 0 + 1 + 3 + 2 + 2 + 10 + 13 figures, counted by reading each page.
    assert c.figures == 43 and c.teasers == 1
    # Figure anchors in paragraphs, counted in the HTML: 18 + 3 + 0 + 1 + 7 + 14 + 22 = 65;
    # honline has 5 more in section titles, muse and eml one each in another figure's caption.
    con = connect(str(out))
    by_context = dict(
        con.execute("select context, count(*) from mentions where resolution = 'anchor' group by 1").fetchall()
    )
    assert by_context == {"paragraph": 65, "title": 5, "caption": 2}


def test_cli_build_prints_summary(tmp_path):
    r = run_cli("build", "--sample", "--output", str(tmp_path / "cli"))
    assert r.returncode == 0, r.stderr
    for word in ("papers", "figures", "subfigures", "teasers", "mentions", "dead-lettered", "reconciled"):
        assert word in r.stdout
    r = run_cli("build", "--input", str(tmp_path / "nope"), "--output", str(tmp_path / "x"))
    assert r.returncode == 2 and "does not exist" in r.stderr
