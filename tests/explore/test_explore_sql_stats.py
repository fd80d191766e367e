"""`sciga sql` (queries, exports, the shell, task views) and `sciga stats` (Appendix B tables
and plots) on the real sample build."""

from __future__ import annotations

import csv
import io
import json

import duckdb
import pyarrow.parquet as pq
from PIL import Image
from quality_fixtures import read_rows

from sciga.explore import views
from sciga.pipelines.cli import main
from sciga.pipelines.sql_shell import open_build, repl


def test_sql_query_prints_csv_and_json(sample_build, capsys):
    assert main(["sql", str(sample_build), "SELECT id, title FROM papers ORDER BY id", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    papers = sorted(read_rows(sample_build, "papers"), key=lambda r: r["id"])
    assert [(r["id"], r["title"]) for r in rows] == [(p["id"], p["title"]) for p in papers]

    assert main(["sql", str(sample_build), "--view", "mentions", "--format", "json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(lines) == len(read_rows(sample_build, "mentions"))
    assert {"paper_id", "figure_id", "char_start", "char_end", "surface"} <= set(lines[0])


def test_sql_exports_parquet_with_image_bytes_intact(sample_build, tmp_path, capsys):
    out = tmp_path / "figs.parquet"
    assert (
        main(
            [
                "sql",
                str(sample_build),
                "SELECT id, image FROM figures WHERE image.bytes IS NOT NULL ORDER BY id",
                "--output",
                str(out),
            ]
        )
        == 0
    )
    table = pq.read_table(out).to_pylist()
    original = {
        r["id"]: r["image"]["bytes"] for r in read_rows(sample_build, "figures") if r["image"] and r["image"]["bytes"]
    }
    assert len(table) == len(original) > 0
    for r in table:
        assert r["image"]["bytes"] == original[r["id"]]
    Image.open(io.BytesIO(table[0]["image"]["bytes"])).load()
    assert f"{len(table)} rows -> {out}" in capsys.readouterr().err


def test_sql_table_format_and_errors(sample_build, capsys):
    assert (
        main(["sql", str(sample_build), "SELECT id FROM figures ORDER BY id", "--max-rows", "3", "--format", "table"])
        == 0
    )
    out = capsys.readouterr().out
    n = len(read_rows(sample_build, "figures"))
    assert "2511.99001_F1" in out and f"({n} rows, 3 shown" in out
    assert main(["sql", str(sample_build), "SELECT nope FROM papers"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("sciga sql: the query failed:") and "nope" in err and err.count("\n") == 0


def test_task_views_are_registered(sample_build, tmp_path, monkeypatch):
    sql_dir = tmp_path / "sql"
    sql_dir.mkdir()
    (sql_dir / "figures_per_paper.sql").write_text("SELECT paper_id, count(*) AS n FROM figures GROUP BY paper_id;\n")
    monkeypatch.setattr(views, "SQL_DIR", str(sql_dir))
    con = open_build(str(sample_build))
    got = dict(con.execute("SELECT paper_id, n FROM figures_per_paper").fetchall())
    rows = read_rows(sample_build, "figures")
    assert got == {p: sum(1 for r in rows if r["paper_id"] == p) for p in {r["paper_id"] for r in rows}}


def test_sql_shell_runs_statements_and_survives_errors(sample_build):
    con = open_build(str(sample_build))
    stdin = io.StringIO(
        ".views\nSELECT count(*) AS n\n  FROM papers;\nSELECT nope;\n.mode csv\n"
        "SELECT id FROM papers ORDER BY id;\n.schema mentions\n.quit\nSELECT 'never';\n"
    )
    stdout = io.StringIO()
    assert repl(con, stdin, stdout) == 0
    out = stdout.getvalue()
    n = len(read_rows(sample_build, "papers"))
    listed = out.split("┌", 1)[0].splitlines()  # .views output comes first
    assert {"dead_letter", "figures", "mentions", "papers"} <= set(listed)
    assert f"│ {n} │" in out.replace(" ", " ") or f"{n} │" in out
    assert "error: Binder Error" in out
    assert "id\n2511.99001\n" in out  # .mode csv took effect
    assert "char_start" in out  # .schema
    assert "never" not in out


def test_stats_tables_and_plots(sample_build, tmp_path, capsys):
    out = tmp_path / "stats"
    assert main(["stats", str(sample_build), "--output", str(out)]) == 0
    for name in (
        "stats.md",
        "per_category.csv",
        "ga_types.csv",
        "ga_types_by_category.csv",
        "by_category.png",
        "ga_types.png",
    ):
        assert (out / name).stat().st_size > 0, name
    for png in ("by_category.png", "ga_types.png"):
        with Image.open(out / png) as im:
            assert im.format == "PNG" and im.size[0] > 300

    papers = read_rows(sample_build, "papers")
    per = {(r["metric"], r["category"]): r for r in csv.DictReader(open(out / "per_category.csv"))}
    overall = "all (micro)"
    # Figures per paper: the mean over papers of len(figures), i.e. manifest figures / papers.
    manifest = json.loads((sample_build / "manifest.json").read_text())
    assert float(per[("figures", overall)]["mean"]) == round(manifest["counts"]["figures"] / len(papers), 4)
    assert float(per[("figures_incl_subfigures", overall)]["mean"]) == round(
        (manifest["counts"]["figures"] + manifest["counts"]["subfigures"]) / len(papers), 4
    )
    # Tokens are whitespace tokens of the stored text, special tokens verbatim.
    titles = [len(p["title"].split()) for p in papers]
    assert float(per[("title_tokens", overall)]["mean"]) == round(sum(titles) / len(titles), 4)
    full = [sum(len(s["body"].split()) for s in p["sections"]) for p in papers]
    assert float(per[("fulltext_tokens", overall)]["max"]) == max(full)
    captions = [len(f["caption"].split()) for p in papers for f in p["figures"]]
    assert int(per[("caption_tokens", overall)]["n"]) == len(captions)
    assert float(per[("caption_tokens", overall)]["mean"]) == round(sum(captions) / len(captions), 4)
    # q-bio/0601999 is an old-style id: its category comes from the archive.
    assert ("title_tokens", "q-bio") in per
    ga = list(csv.DictReader(open(out / "ga_types.csv")))
    assert sum(int(r["papers"]) for r in ga) == len(papers)
    md = (out / "stats.md").read_text()
    assert "Token counting: whitespace-separated tokens" in md and "#### tokens per figure caption" in md


def test_token_macro_counts_like_str_split():
    from sciga.explore.stats import _setup_sql

    con = duckdb.connect()
    for sql in _setup_sql("group")[:3]:  # the three token macros
        con.execute(sql)
    texts = [
        "<TAG> Figure 2: </TAG> A cat",
        "  spaced\tout\n words ",
        "",
        None,
        "<MATH> x^{2} + 1 </MATH>",
        "one",
        " ",
        "\n\n",
        "para one.\n\npara two",  # a section body: paragraphs joined by a blank line
        "para one.\n\n\n\npara three",  # an empty paragraph between
        "ends with a space ",
        " starts with one",
        "two  spaces",
        "a\rb\fc\td",
        "caf\u00e9 na\u00efve x",
    ]
    for text in texts:
        want = len((text or "").split())
        assert con.execute("SELECT sciga_ntok(?)", [text]).fetchall()[0][0] == want, repr(text)
        assert con.execute("SELECT sciga_ntok_any(?)", [text]).fetchall()[0][0] == want, repr(text)
