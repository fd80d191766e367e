"""Small builds and rebuilds run in the `sciga` process, without Apache Beam
(``pipelines/in_process.py``): the same steps, the same bytes as Beam's pipeline, dead
letters included; Beam runs whenever it is asked for or pays."""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from sciga.pipelines import in_process
from sciga.pipelines.build import add_arguments, build_options_from_args
from sciga.samples.scale_corpus import make_image_rich_corpus
from sciga.transforms.vision.options import VisionOptions, resolve_vision

from conftest import cli_in_fresh_process

SHARDS = ("--papers-per-shard", "3", "--figures-per-shard", "8")  # several groups and parts


def data_digests(out: Path) -> dict:
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.glob("data/*/*"))}


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text(encoding="utf-8"))


def sciga_build(pages: Path, out: Path, *extra: str, env: dict | None = None) -> tuple[str, bool]:
    """(stdout, whether Apache Beam was imported) of `sciga build` in a new interpreter."""
    import os

    old = dict(os.environ)
    os.environ.update(env or {})
    try:
        r, modules = cli_in_fresh_process(["build", "--input", str(pages), "--output", str(out), *SHARDS, *extra])
    finally:
        os.environ.clear()
        os.environ.update(old)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    return r.stdout, "apache_beam" in modules


@pytest.mark.e2e  # real builds in new interpreters, real Parquet
def test_a_rebuild_of_a_few_changed_pages_runs_without_beam_and_writes_what_beam_writes(tmp_path):
    pages = tmp_path / "pages"
    make_image_rich_corpus(pages, 40, n_figures=3, image_kb=4, distinct_images=2)
    here, beam = tmp_path / "here", tmp_path / "beam"
    _, imported = sciga_build(pages, here)
    assert imported and manifest(here)["run"]["runner"] == "DirectRunner"  # 40 to compute: Beam's workers
    shutil.copytree(here, beam)

    changed = sorted(pages.glob("*/*.html"))
    for page in changed[:2]:  # two pages edited
        page.write_text(page.read_text(encoding="utf-8").replace("</article>", "<p>Added.</p></article>", 1))
    changed[2].write_bytes(b"\x00\x01 not a page")  # one page broken: a dead letter

    out, imported = sciga_build(pages, here)
    assert not imported, "a rebuild of three changed pages imports no Apache Beam"
    assert re.search(r"reused +37 +\(unchanged since the last build; recomputed 3\)", out), out
    assert re.search(r"dead-lettered +1\b", out), out
    _, imported = sciga_build(pages, beam, env={in_process.ENV: "0"})
    assert imported

    ran_here, ran_on_beam = manifest(here), manifest(beam)
    assert ran_here["run"]["runner"] == in_process.RUNNER and ran_here["run"]["workers"] == 1
    assert ran_on_beam["run"]["runner"] == "DirectRunner"
    assert data_digests(here) == data_digests(beam), "the same shards, byte for byte"
    for key in ("files", "counts", "stats", "reconciled"):
        assert ran_here.get(key) == ran_on_beam.get(key), key
    assert ran_here["reconciled"] and ran_here["counts"]["dead_letter"] == 1
    assert ran_here["run"]["shard_parts_reused"] > 0, "parts of unchanged papers are taken over"

    # Nothing changed since: nothing to do, as after a Beam build.
    out, imported = sciga_build(pages, here)
    assert "up to date" in out and not imported


@pytest.mark.e2e  # a real clean build of the embedded sample, in this process
def test_the_sample_builds_in_process_like_on_beam(tmp_path):
    """The README's first command: the embedded sample (a few papers) builds without Beam,
    and gives the bytes Beam gives."""
    r, modules = cli_in_fresh_process(["build", "--sample", "--output", str(tmp_path / "here"), "--quiet"])
    assert r.returncode == 0, r.stderr[-3000:]
    assert "apache_beam" not in modules
    # Its mentions' sentences are found by pysbd alone: spaCy (1.3 s to import) stays out.
    assert "spacy" not in modules
    r, _ = cli_in_fresh_process(["build", "--sample", "--output", str(tmp_path / "beam"), "--quiet", "--workers", "2"])
    assert r.returncode == 0, r.stderr[-3000:]
    assert manifest(tmp_path / "beam")["run"]["runner"] == "DirectRunner"
    assert data_digests(tmp_path / "here") == data_digests(tmp_path / "beam")


def _options(tmp_path: Path, *argv: str):
    ap = argparse.ArgumentParser()
    add_arguments(ap)
    opts = build_options_from_args(ap.parse_args(["--input", str(tmp_path), "--output", str(tmp_path / "o"), *argv]))
    return opts, resolve_vision(VisionOptions(), str(tmp_path / "staging"))


def test_beam_runs_when_asked_for_or_when_many_pages_changed(tmp_path, monkeypatch):
    opts, vision = _options(tmp_path)
    most = in_process.MAX_INPUTS
    assert in_process.eligible(opts, vision, None, 1000, 0)
    assert in_process.eligible(opts, vision, [], most, in_process.MAX_TO_COMPUTE)
    assert not in_process.eligible(opts, vision, None, 1000, in_process.MAX_TO_COMPUTE + 1)  # workers pay
    assert not in_process.eligible(opts, vision, None, most + 1, 1)  # so many unchanged: workers share them
    assert not in_process.eligible(opts, vision, ["--runner", "DirectRunner"], 10, 1)  # Beam flags: Beam
    assert not in_process.eligible(_options(tmp_path, "--workers", "1")[0], vision, None, 10, 1)  # --workers: Beam
    assert not in_process.eligible(_options(tmp_path, "--finalize-in-job")[0], vision, None, 10, 1)
    assert not in_process.eligible(_options(tmp_path, "--html-from", "auto")[0], vision, None, 10, 1)
    monkeypatch.setenv(in_process.ENV, "0")
    assert not in_process.eligible(opts, vision, None, 10, 1)


def test_the_in_process_build_puts_the_callers_allocator_back(monkeypatch):
    """malloc while the build runs here; the caller's pool after (a notebook keeps its own),
    and an allocator the user chose is left alone."""
    import pyarrow as pa

    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    before = pa.default_memory_pool().backend_name
    with in_process.system_allocator():
        assert pa.default_memory_pool().backend_name == "system"
    assert pa.default_memory_pool().backend_name == before
    monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", before)
    with in_process.system_allocator():
        assert pa.default_memory_pool().backend_name == before
