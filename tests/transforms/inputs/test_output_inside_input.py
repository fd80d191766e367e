"""A build whose output folder lies inside its input (issue 41, item 6): `--input . --output
out` from a folder of pages. Before, the second build read `out/browse/*.html` and
`out/quality/report.html` as pages (`not_latexml` dead letters) and the gate failed on the
dead-letter rate. The output folder is skipped, with one sentence saying so."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pyarrow.parquet as pq

from conftest import ROOT

SAMPLES = ROOT / "sciga" / "samples"


def _pages_here(work):
    for paper in (SAMPLES / "html").iterdir():
        shutil.copytree(paper, work / paper.name)
    for meta in (SAMPLES / "meta").iterdir():
        shutil.copyfile(meta, work / meta.name)


def test_a_build_into_its_own_input_folder_does_not_read_its_output(tmp_path):
    work = tmp_path / "pages"
    work.mkdir()
    _pages_here(work)
    env = dict(os.environ, PYTHONPATH=str(ROOT))

    def cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "sciga", *args], cwd=work, env=env, capture_output=True, text=True, timeout=600
        )

    build = ("build", "--input", ".", "--output", "out", "--workers", "1", "--quiet")
    r = cli(*build)
    assert r.returncode == 0, r.stderr[-3000:]
    assert cli("browse", "out").returncode == 0
    assert cli("validate", "out").returncode == 0
    assert list((work / "out" / "browse").rglob("*.html")) and (work / "out" / "quality" / "report.html").is_file()

    r = cli(*build)
    assert r.returncode == 0, r.stderr[-3000:]
    assert pq.read_table(work / "out" / "data" / "dead_letter").num_rows == 0
    assert pq.read_table(work / "out" / "data" / "papers").num_rows == 4
    said = [line for line in r.stderr.splitlines() if "lies inside the input" in line]
    assert len(said) == 1 and "out" in said[0], r.stderr
    r = cli("validate", "out")
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_listing_leaves_out_the_output_folder_only(tmp_path):
    from sciga.transforms.inputs.build_inputs import is_inside, list_build_inputs

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "2511.00001.html").write_text("<html></html>")
    (tmp_path / "out" / "browse").mkdir(parents=True)
    (tmp_path / "out" / "browse" / "index.html").write_text("<html></html>")
    (tmp_path / "outside.html").write_text("<html></html>")
    listed = list_build_inputs([str(tmp_path)], exclude=str(tmp_path / "out"))
    assert sorted(os.path.basename(p) for p in listed) == ["2511.00001.html", "outside.html"]
    assert len(list_build_inputs([str(tmp_path)])) == 3
    assert is_inside(str(tmp_path / "out" / "x.html"), str(tmp_path / "out"))
    assert not is_inside(str(tmp_path / "outside.html"), str(tmp_path / "out"))
    assert is_inside("gs://b/in/out/p.html", "gs://b/in/out/") and not is_inside(
        "gs://b/in/outer.html", "gs://b/in/out"
    )
