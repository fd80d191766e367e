"""Every command on a build that lies on gs:// (fake-gcs-server on 127.0.0.1), read where it
lies: nothing is copied to local disk, DuckDB reads through the registered fsspec
filesystem (no extension download), the user's credentials are used and never printed.

validate, sql, stats, browse and publish run on the gs:// sample build; train and evaluate
on a tiny training build uploaded to gs://. Results equal those of the same build on disk.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gcs_fixtures import FAKE_ACCESS_TOKEN, gcs, upload_tree

from sciga.pipelines.cli import main

from conftest import ROOT


def gs_files(prefix: str) -> list[str]:
    root = prefix.removeprefix("gs://").rstrip("/")
    return sorted(p.removeprefix(root + "/") for p in gcs().find(root))


def test_validate_reads_the_build_where_it_lies(gs_sample_build, tmp_path):
    """In a fresh process with an empty HOME: DuckDB finds no extension and may install none."""
    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ, HOME=str(home), PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run(
        [sys.executable, "-m", "sciga", "validate", gs_sample_build, "--image-workers", "2"],
        cwd=str(tmp_path),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "Quality gate PASSED" in res.stdout and "expectations met on gs://sciga-sample/build" in res.stdout
    assert not (home / ".duckdb").exists(), "no DuckDB extension was downloaded or installed"
    assert FAKE_ACCESS_TOKEN not in res.stdout + res.stderr and "private_key" not in res.stdout + res.stderr
    assert "Task was destroyed" not in res.stderr
    # Checking never writes where it reads from a remote (issue 41): the report is local, ./quality-report.
    report = json.loads((tmp_path / "quality-report" / "report.json").read_text())
    assert report["success"] is True
    assert not gcs().exists("sciga-sample/build/quality")
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert written == ["quality-report/report.html", "quality-report/report.json", "quality-report/report.md"]


def test_sql_on_gs_and_export_to_gs(gs_sample_build, local_sample_twin, capsys):
    q = "SELECT id, title, len(figures) AS n FROM papers ORDER BY id"
    assert main(["sql", gs_sample_build, q, "--format", "csv"]) == 0
    on_gs = capsys.readouterr().out
    assert main(["sql", str(local_sample_twin), q, "--format", "csv"]) == 0
    assert on_gs == capsys.readouterr().out and on_gs.count("\n") == 5
    # Task views work the same, and results can go to gs:// too.
    export = f"{gs_sample_build}/exports/caption_context.parquet"
    assert main(["sql", gs_sample_build, "--view", "caption_context", "--format", "parquet", "--output", export]) == 0
    import pyarrow.parquet as pq

    with gcs().open(export.removeprefix("gs://"), "rb") as f:
        exported = pq.read_table(f)
    assert exported.num_rows > 0 and "caption" in exported.column_names
    gcs().rm(export.removeprefix("gs://"))


def test_stats_written_beside_the_build(gs_sample_build, local_sample_twin, tmp_path, capsys, monkeypatch):
    # By default a remote build's stats go to ./stats (checking never writes to a remote, issue 41) ...
    monkeypatch.chdir(tmp_path)
    assert main(["stats", gs_sample_build, "--no-plots"]) == 0
    assert (tmp_path / "stats" / "stats.md").is_file() and not gcs().exists("sciga-sample/build/stats")
    capsys.readouterr()
    # ... and beside the build when --output says so.
    assert main(["stats", gs_sample_build, "--output", f"{gs_sample_build}/stats"]) == 0
    printed = capsys.readouterr().out
    files = gs_files(f"{gs_sample_build}/stats")
    assert files == [
        "by_category.png",
        "distributions.csv",
        "ga_types.csv",
        "ga_types.png",
        "ga_types_by_category.csv",
        "per_category.csv",
        "stats.md",
    ]
    assert gcs().cat_file("sciga-sample/build/stats/ga_types.png")[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["stats", str(local_sample_twin), "--output", str(tmp_path / "s"), "--no-plots"]) == 0
    assert capsys.readouterr().out.split("written:")[0] == printed.split("written:")[0]
    assert (
        gcs().cat_file("sciga-sample/build/stats/per_category.csv")
        == (tmp_path / "s" / "per_category.csv").read_bytes()
    )


def test_browse_writes_the_site_on_gs(gs_sample_build, capsys):
    assert main(["browse", gs_sample_build]) == 0
    files = gs_files(f"{gs_sample_build}/browse")
    assert "index.html" in files and "style.css" in files
    assert sum(f.startswith("papers/") for f in files) == 4 and any(f.startswith("images/") for f in files)
    index = gcs().cat_file("sciga-sample/build/browse/index.html").decode()
    assert "2511.99001" in index


def test_publish_from_gs(gs_sample_build, monkeypatch, tmp_path, capsys, caplog):
    import logging

    import huggingface_hub.constants as hf_constants
    from hub_fixtures import FakeHub

    caplog.set_level(logging.DEBUG)
    token = "hf_sciga_TEST_token_gcs_7d1e"
    hub = FakeHub(token).start()
    monkeypatch.setenv("HF_TOKEN", token)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.setattr(hf_constants, "HF_HUB_DISABLE_XET", True)
    try:
        rc = main(
            [
                "publish",
                gs_sample_build,
                "--repo-id",
                "sciga-org/from-gcs",
                "--version",
                "v1.0.0",
                "--endpoint",
                hub.url,
                "--image-workers",
                "1",
                "--allow-any-licence",
            ]
        )
        out = capsys.readouterr()
        assert rc == 0, out.err[-3000:]
        assert "sciga publish sciga-org/from-gcs v1.0.0: published" in out.out
        published = hub.files_at("sciga-org/from-gcs", "v1.0.0")
        fs = gcs()
        for path in fs.glob("sciga-sample/build/data/*/*.parquet"):
            rel = path.split("/build/", 1)[1]
            assert published[rel] == fs.cat_file(path), rel
        assert published["README.md"] == fs.cat_file("sciga-sample/build/README.md")
        text = out.out + out.err + caplog.text
        assert token not in text and FAKE_ACCESS_TOKEN not in text
    finally:
        hub.stop()


@pytest.fixture(scope="module")
def gs_training_build(gcs_server, tmp_path_factory):
    from training_fixtures import tiny_build

    local = tiny_build(tmp_path_factory.mktemp("train") / "build", {"train": 12, "val": 1, "test": 3})
    gcs().mkdir("sciga-train")
    upload_tree(Path(local), "gs://sciga-train/build")
    return {"local": local, "gs": "gs://sciga-train/build"}


def test_evaluate_on_gs_equals_evaluate_on_disk(gs_training_build, tmp_path):
    for where in ("local", "gs"):
        assert (
            main(
                [
                    "evaluate",
                    "abs2cap",
                    "--data",
                    gs_training_build[where],
                    "--results",
                    str(tmp_path / where),
                    "--seed",
                    "3",
                ]
            )
            == 0
        )
    on_disk = json.loads((tmp_path / "local" / "results.json").read_text())
    on_gs = json.loads((tmp_path / "gs" / "results.json").read_text())
    (row,) = on_gs["intra"]
    assert row["metrics"]["queries"] > 0 and row["data_version"]["schema_version"]
    assert on_gs == on_disk, "the same numbers and data version, read from gs:// or from disk"


@pytest.mark.e2e
def test_train_then_evaluate_on_gs(gs_training_build, tmp_path):
    tiny = [
        "--image-size",
        "32",
        "--epochs",
        "1",
        "--batch-size",
        "6",
        "--figures-per-paper",
        "3",
        "--check-batches",
        "1",
        "--seed",
        "3",
    ]
    model = tmp_path / "model"
    assert main(["train", "abs2fig-cap", "--data", gs_training_build["gs"], "--output", str(model), *tiny]) == 0
    card = json.loads(next(model.glob("*.json")).read_text())
    assert card["data"] == "gs://sciga-train/build"
    assert (
        main(
            [
                "evaluate",
                "abs2fig-cap",
                "--model",
                str(model),
                "--data",
                gs_training_build["gs"],
                "--results",
                str(tmp_path / "res"),
                "--seed",
                "3",
            ]
        )
        == 0
    )
