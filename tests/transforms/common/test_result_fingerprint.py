"""The results fingerprint covers the code that makes results, found from the code, and
nothing else: editing a fetcher or a harvester keeps every stored result (an incremental
build reuses them), editing the parser, a lazily imported vision module or a schema makes
every paper be recomputed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sciga.transforms.common.result_store import RESULT_STAGES, code_fingerprint, hash_code_files, result_code_files

from conftest import ROOT


def package_copy(dest: Path) -> Path:
    """The fingerprinted folders of the package (schemas/, transforms/) as a tree of their own."""
    sciga_dir = dest / "sciga"
    for folder in ("schemas", "transforms"):
        shutil.copytree(ROOT / folder, sciga_dir / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return sciga_dir


def edit(path: Path, line: str = "# an edit") -> None:
    path.write_text(path.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")


def test_the_fingerprinted_code_is_the_stages_and_what_they_import():
    files = result_code_files()
    for made_results in (
        "transforms/parse/latexml_html.py",
        "transforms/parse/step.py",
        "transforms/link/link_paper.py",
        "transforms/tex_recovery/recover.py",
        "transforms/write/steps.py",
        "schemas/records.py",
        "transforms/common/conversion_check.py",
        "transforms/metadata/comment_venue.py",
        "transforms/vision/medical_keywords.txt",
        "transforms/vision/inference.py",
    ):  # imported inside a function of vision/stage.py
        assert made_results in files, made_results
    for makes_none in (
        "transforms/fetch/http_client.py",
        "transforms/fetch/html_pages.py",
        "transforms/fetch/job.py",
        "transforms/metadata/oai_pmh.py",
        "transforms/metadata/corpus_definition.py",
    ):
        assert makes_none not in files, makes_none
    assert not [f for f in files if not f.startswith(("schemas/", "transforms/"))]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> tuple[Path, str]:
    """A copy of the package's fingerprinted folders, and its fingerprint read from the files."""
    sciga_dir = package_copy(tmp_path_factory.mktemp("pristine"))
    return sciga_dir, hash_code_files(str(sciga_dir))


def edited_copy(pristine: tuple[Path, str], dest: Path, *files: str) -> Path:
    sciga_dir = dest / "sciga"
    shutil.copytree(pristine[0], sciga_dir)
    for f in files:
        edit(sciga_dir / f, "def added_by_the_test():\n    return 1")
    return sciga_dir


def test_a_copy_of_the_package_has_the_same_fingerprint(pristine):
    assert code_fingerprint(str(pristine[0])) == code_fingerprint() == pristine[1]


def test_editing_fetchers_and_harvesters_keeps_the_fingerprint(pristine, tmp_path):
    """An incremental build after such an edit reuses every stored result."""
    sciga_dir = edited_copy(
        pristine,
        tmp_path,
        "transforms/fetch/http_client.py",
        "transforms/fetch/html_pages.py",
        "transforms/fetch/job.py",
        "transforms/metadata/oai_pmh.py",
    )
    assert hash_code_files(str(sciga_dir)) == pristine[1]


@pytest.mark.parametrize(
    "edited",
    [
        "transforms/parse/latexml_html.py",
        "transforms/vision/inference.py",
        "schemas/records.py",
        "transforms/vision/medical_keywords.txt",
    ],
)
def test_editing_code_that_makes_results_changes_the_fingerprint(pristine, tmp_path, edited):
    assert hash_code_files(str(edited_copy(pristine, tmp_path, edited))) != pristine[1]


def test_a_module_a_stage_starts_to_import_joins_the_fingerprint(pristine, tmp_path):
    """Found from the code, not listed: a lazy import added to a stage brings its module in."""
    sciga_dir = edited_copy(pristine, tmp_path)
    assert "transforms/fetch/http_client.py" not in result_code_files(str(sciga_dir))
    edit(
        sciga_dir / "transforms/parse/step.py",
        "def _uses_http():\n    from ..fetch import http_client\n\n    return http_client",
    )
    assert "transforms/fetch/http_client.py" in result_code_files(str(sciga_dir))


def test_the_stages_are_modules_of_the_package():
    for stage in RESULT_STAGES:
        assert (ROOT / "sciga" / (stage.split(".", 1)[1].replace(".", "/") + ".py")).is_file(), stage


def _sciga_from(pkg: Path, *args: str) -> subprocess.CompletedProcess:
    """`python -m sciga ...` running the package copy in ``pkg`` (first on PYTHONPATH)."""
    env = dict(os.environ, PYTHONPATH=str(pkg))
    return subprocess.run(
        [sys.executable, "-m", "sciga", *args], cwd=str(pkg), env=env, capture_output=True, text=True, timeout=900
    )


def _manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text(encoding="utf-8"))


def _shards(out: Path) -> dict:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted((out / "data").rglob("*.parquet"))}


@pytest.mark.e2e
def test_a_rebuild_after_a_fetcher_edit_reuses_every_paper_and_after_a_parser_edit_recomputes(tmp_path):
    pkg = tmp_path / "checkout"
    shutil.copytree(ROOT / "sciga", pkg / "sciga", ignore=shutil.ignore_patterns("__pycache__"))  # links resolved
    out = tmp_path / "build"
    which = subprocess.run(
        [sys.executable, "-c", "import sciga; print(sciga.__file__)"],
        cwd=str(pkg),
        env=dict(os.environ, PYTHONPATH=str(pkg)),
        capture_output=True,
        text=True,
    )
    assert which.stdout.strip() == str(pkg / "sciga" / "__init__.py"), which

    first = _sciga_from(pkg, "build", "--sample", "--output", str(out), "--quiet")
    assert first.returncode == 0, first.stderr
    papers = _manifest(out)["incremental"]["recomputed"]
    assert papers >= 4 and _manifest(out)["incremental"]["reused"] == 0
    shards = _shards(out)

    edit(pkg / "sciga" / "transforms" / "fetch" / "http_client.py", "def added_by_the_test():\n    return 1")
    after_fetcher = _sciga_from(pkg, "build", "--sample", "--output", str(out), "--quiet")
    assert after_fetcher.returncode == 0, after_fetcher.stderr
    # every result still stands: the build finds nothing to do (and so rewrites no manifest)
    assert re.search(rf"reused +{papers}  \(unchanged since the last build; recomputed 0\)", after_fetcher.stdout)
    assert "up to date" in after_fetcher.stdout
    assert _shards(out) == shards

    edit(pkg / "sciga" / "transforms" / "parse" / "latexml_html.py")
    after_parser = _sciga_from(pkg, "build", "--sample", "--output", str(out), "--quiet")
    assert after_parser.returncode == 0, after_parser.stderr
    assert _manifest(out)["incremental"] == {"reused": 0, "recomputed": papers}
    assert _shards(out) == shards, "the same code output, recomputed: the same bytes"
