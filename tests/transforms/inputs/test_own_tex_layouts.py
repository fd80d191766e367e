"""The TeX layouts docs/how-to/own-pages.md documents, as a user follows it (issue 41, item 5):
`sciga build --input my_tex/ --html-from auto --output out/mine` with

- one folder per paper holding its e-print: ``my_tex/1709.07020/1709.07020v1.tar.gz``
  (was ``latexml/no_main_file``: the folder was read as an extracted tree);
- a folder of e-prints: ``my_tex2/1709.07020v1.tar.gz`` (was one paper named ``my-tex2``).

Each builds paper 1709.07020 from the real e-print (../shared/corpus) with LaTeXML.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from sciga.transforms.inputs.tex_inputs import source_paper_id, tex_sources

from conftest import CORPUS, ROOT

EPRINT = CORPUS / "tex" / "1709.07020" / "1709.07020v1.tar.gz"


def _build(work: Path, tex_folder: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "sciga", "build", "--input", f"{tex_folder}/", "--html-from", "auto"]
        + ["--output", "out/mine", "--workers", "1", "--quiet"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.mark.parametrize(
    "layout",
    ["my_tex/1709.07020/1709.07020v1.tar.gz", "my_tex2/1709.07020v1.tar.gz"],
    ids=["folder_per_paper", "folder_of_eprints"],
)
def test_documented_tex_layouts_build_the_paper(tmp_path, layout):
    work = tmp_path / "work"
    target = work / layout
    target.parent.mkdir(parents=True)
    shutil.copyfile(EPRINT, target)
    r = _build(work, layout.split("/")[0])
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    papers = pq.read_table(work / "out/mine/data/papers", columns=["id", "title"]).to_pylist()
    assert [p["id"] for p in papers] == ["1709.07020"], papers
    assert papers[0]["title"]
    assert pq.read_table(work / "out/mine/data/dead_letter").num_rows == 0


def test_a_folder_of_eprints_is_not_one_paper(tmp_path):
    """The listing alone (no LaTeXML): a folder holding one e-print named by its id is a folder
    of e-prints; a folder holding one e-print named otherwise is still that paper's source."""
    (tmp_path / "my_tex2").mkdir()
    (tmp_path / "my_tex2" / "1709.07020v1.tar.gz").write_bytes(b"\x1f\x8b")
    found = tex_sources([str(tmp_path / "my_tex2")])
    assert found == [str(tmp_path / "my_tex2" / "1709.07020v1.tar.gz")]
    assert source_paper_id(found[0]) == ("1709.07020", "filename")

    (tmp_path / "dd3d").mkdir()
    (tmp_path / "dd3d" / "source.tar.gz").write_bytes(b"\x1f\x8b")
    assert tex_sources([str(tmp_path / "dd3d")]) == [str(tmp_path / "dd3d")]
