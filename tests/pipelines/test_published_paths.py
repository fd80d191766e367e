"""No machine path in the published data (issue 41, item 8): a build from a folder under
tmp_path publishes no column that names that folder, and the same pages copied into two
different folders give byte-identical shards."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from conftest import CORPUS

ROOT = Path(__file__).resolve().parents[2]


def _build(inp: Path, out: Path) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run(
        [sys.executable, "-m", "sciga", "build", "--input", str(inp / "html"), str(inp / "latexml")]
        + ["--output", str(out), "--workers", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=str(inp.parent),
    )
    assert r.returncode == 0, r.stderr[-3000:]


def _copy_pages(dest: Path) -> Path:
    for sub in ("html", "latexml"):
        shutil.copytree(CORPUS / sub, dest / sub)
    # a page that is not LaTeXML: a dead-letter row naming its input
    (dest / "html" / "not_a_paper.html").write_text("<html><body>hello</body></html>")
    return dest


def _strings(value, where: str):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, f"{where}.{k}")
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v, f"{where}[]")
    elif isinstance(value, str):
        yield where, value


def _shards(out: Path) -> dict[str, str]:
    return {
        str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.glob("data/*/*.parquet"))
    }


@pytest.fixture(scope="module")
def two_builds(tmp_path_factory):
    if not (CORPUS / "html").is_dir():
        pytest.skip("needs the shared corpus")
    base = tmp_path_factory.mktemp("published_paths")
    outs = []
    for name in ("a", "b"):
        inp = _copy_pages(base / name / "machine_user_folder" / "in")
        out = base / name / "out"
        _build(inp, out)
        outs.append((inp, out))
    return outs


def test_no_published_value_names_the_input_folder(two_builds):
    (inp, out), _ = two_builds
    found = []
    for config in ("papers", "figures", "mentions", "dead_letter"):
        for shard in sorted(out.glob(f"data/{config}/*.parquet")):
            table = pq.read_table(shard)
            if "image" in table.column_names:
                table = table.drop_columns(["image"])  # bytes, not text
            for row in table.to_pylist():
                for where, text in _strings(row, config):
                    if str(inp.parent) in text or "machine_user_folder" in text or "/home/" in text:
                        found.append((where, text))
    assert not found, found[:5]
    # the columns that said where the input was still say it, relative to --input
    papers = pq.read_table(out / "data" / "papers").to_pylist()
    assert "2303.17564.html" in {p["provenance"]["input_uri"] for p in papers}
    dead = pq.read_table(out / "data" / "dead_letter").to_pylist()
    assert [(d["input_uri"], d["message"].split(" ")[0]) for d in dead] == [("not_a_paper.html", "not_a_paper.html")]
    uris = [u for u in pq.read_table(out / "data" / "figures", columns=["image_uri"]).column(0).to_pylist() if u]
    assert uris and not any(u.startswith("/") for u in uris)
    # nor does the manifest or the card name it
    for name in ("manifest.json", "README.md"):
        assert str(inp.parent) not in (out / name).read_text()


def test_the_same_pages_in_two_folders_give_byte_identical_shards(two_builds):
    (_, out_a), (_, out_b) = two_builds
    a, b = _shards(out_a), _shards(out_b)
    assert a and set(a) == {p for p in a if p.startswith("data/")}
    assert a == b
