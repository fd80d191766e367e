"""`sciga build` at scale: the same bytes whatever the workers, runner or rerun; incremental
rebuilds that recompute exactly the papers whose inputs changed; a killed build that
resumes; memory that does not grow with the corpus; a progress line. The default local
executor (no Beam, ``in_process.py``) with one and two worker processes, and real Beam
runners (DirectRunner in both modes, PortableRunner with an embedded job server), real
Parquet."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hostile_fixtures import run_watched, sciga_cmd

from sciga.executors import choice, in_process
from sciga.pipelines.build import add_arguments, run_build
from sciga.samples.scale_corpus import figure_png, make_image_rich_corpus

from conftest import ROOT, run_cli


def build(*argv: str, beam_args=None):
    ap = argparse.ArgumentParser()
    add_arguments(ap)
    return run_build(ap.parse_args(list(argv)), beam_args)


def digests(out: Path) -> dict:
    return {
        str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.glob("data/*/*.parquet"))
    }


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """24 image-rich papers (6 figures each) plus the embedded sample's pages."""
    base = tmp_path_factory.mktemp("scale")
    make_image_rich_corpus(base / "pages", 24, n_figures=6, image_kb=8, distinct_images=3)
    return base / "pages"


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ref") / "out"
    r = build("--input", str(corpus), "--output", str(out), "--workers", "1", "--quiet", "--figures-per-shard", "40")
    assert r.counts.papers == 24 and r.counts.reconciled
    return out


def test_layout_is_fixed_by_the_number_of_inputs(reference):
    m = manifest(reference)
    # 24 inputs x ~10 figure rows / 40 per shard -> 6 shard groups; papers and mentions: 1.
    figs = [f for f in m["files"]["figures"]]
    assert sum(f["rows"] for f in figs) == m["counts"]["figures"] + m["counts"]["subfigures"] == 24 * 6
    assert all(f["rows"] <= 40 for f in figs) and len(figs) >= 4
    assert [f["path"] for f in m["files"]["papers"]] == ["data/papers/train-00000-of-00001.parquet"]
    assert m["incremental"] == {"reused": 0, "recomputed": 24}


@pytest.mark.e2e
def test_same_bytes_with_two_worker_processes(corpus, reference, tmp_path):
    out = tmp_path / "w2"
    build("--input", str(corpus), "--output", str(out), "--workers", "2", "--quiet", "--figures-per-shard", "40")
    assert digests(out) == digests(reference)
    assert (manifest(out)["run"]["runner"], manifest(out)["run"]["workers"]) == (in_process.RUNNER, 2)


@pytest.mark.e2e
@pytest.mark.parametrize("workers", ["1", "2"])  # in memory, and worker processes
def test_same_bytes_on_beams_direct_runner(corpus, reference, tmp_path, monkeypatch, workers):
    monkeypatch.setenv(choice.ENV, "0")
    out = tmp_path / f"beam{workers}"
    build("--input", str(corpus), "--output", str(out), "--workers", workers, "--quiet", "--figures-per-shard", "40")
    assert digests(out) == digests(reference)
    assert manifest(out)["run"]["runner"] == "DirectRunner"


@pytest.mark.e2e
def test_same_bytes_on_the_portable_runner(corpus, reference, tmp_path):
    """The Fn API path Dataflow Runner v2 takes, with an embedded job server."""
    out = tmp_path / "portable"
    build(
        "--input",
        str(corpus),
        "--output",
        str(out),
        "--quiet",
        "--figures-per-shard",
        "40",
        beam_args=["--runner", "PortableRunner", "--job_endpoint", "embed"],
    )
    assert digests(out) == digests(reference)


def test_other_shard_sizes_keep_every_row_once(corpus, reference, tmp_path):
    out = tmp_path / "small"
    build(
        "--input",
        str(corpus),
        "--output",
        str(out),
        "--workers",
        "1",
        "--quiet",
        "--figures-per-shard",
        "7",
        "--papers-per-shard",
        "5",
    )
    import duckdb

    con = duckdb.connect()
    q = "select count(*), count(distinct id) from read_parquet('{}/data/{}/*.parquet')"
    assert con.execute(q.format(out, "figures")).fetchone() == (144, 144)
    assert con.execute(q.format(out, "papers")).fetchone() == (24, 24)
    # 24 inputs / 5 per shard -> 5 shard groups; a group that hashes more than 5 papers
    # writes a second part, so no papers shard holds more than 5 rows.
    papers_shards = sorted((out / "data" / "papers").glob("*.parquet"))
    assert len(papers_shards) >= 5 and all(pq.read_metadata(p).num_rows <= 5 for p in papers_shards)
    # Shards of a build with other sizes hold the same rows.
    same = "select id, image.bytes from read_parquet('{}/data/figures/*.parquet') order by id"
    assert con.execute(same.format(out)).fetchall() == con.execute(same.format(reference)).fetchall()


def _copy_tree(src: Path, dst: Path) -> None:
    import shutil

    shutil.copytree(src, dst, copy_function=shutil.copy2)


@pytest.mark.e2e
def test_incremental_rebuild_recomputes_exactly_what_changed(corpus, tmp_path):
    pages = tmp_path / "pages"
    _copy_tree(corpus, pages)
    ga_dir = tmp_path / "ga"
    ga_dir.mkdir()
    (ga_dir / "a.png").write_bytes(figure_png(901, 200, 100, 4))
    (ga_dir / "b.png").write_bytes(figure_png(902, 200, 100, 4))
    manifest_csv = tmp_path / "ga.csv"
    manifest_csv.write_text("arxiv_id,path\n2601.00003,ga/a.png\n2601.00004,ga/b.png\n")
    out = tmp_path / "out"
    common = ["--output", str(out), "--workers", "1", "--quiet", "--ga-manifest", str(manifest_csv)]
    build("--input", str(pages), *common)
    again = build("--input", str(pages), *common)
    assert (again.counts.reused, again.counts.recomputed) == (24, 0), "nothing changed: everything is reused"

    # One page, one image and one GA-manifest row change; one paper is new.
    page = pages / "2601.00001" / "2601.00001.html"
    page.write_text(page.read_text().replace("Synthetic image-rich paper", "A changed image-rich paper"))
    (pages / "2601.00002" / "figs" / "f3.png").unlink()  # hard link: replace, not edit in place
    (pages / "2601.00002" / "figs" / "f3.png").write_bytes(figure_png(777, 480, 320, 8))
    manifest_csv.write_text("arxiv_id,path,caption\n2601.00003,ga/a.png,A new caption\n2601.00004,ga/b.png\n")
    make_image_rich_corpus(tmp_path / "more", 1, n_figures=6, image_kb=8, prefix="2603")
    import shutil

    shutil.copytree(tmp_path / "more" / "2603.00001", pages / "2603.00001")
    inc = build("--input", str(pages), *common)
    assert (inc.counts.reused, inc.counts.recomputed) == (21, 4)
    fresh = tmp_path / "fresh"
    build(
        "--input", str(pages), "--output", str(fresh), "--workers", "1", "--quiet", "--ga-manifest", str(manifest_csv)
    )
    assert digests(out) == digests(fresh), "an incremental build equals a clean build of the same inputs"
    import duckdb

    caption = (
        duckdb.connect()
        .execute(f"select caption from read_parquet('{out}/data/figures/*.parquet') where id = '2601.00003_GA'")
        .fetchone()[0]
    )
    assert caption == "A new caption"
    # --rebuild recomputes everything, and still gives the same bytes.
    full = build("--input", str(pages), *common, "--rebuild")
    assert (full.counts.reused, full.counts.recomputed) == (0, 25)
    assert digests(out) == digests(fresh)


def test_unchanged_rebuild_reads_no_stored_table_and_loads_no_sentence_model(
    corpus, reference, tmp_path, monkeypatch, stored_reads
):
    """What an incremental build pays per reused paper is a few stats: part sizes come from
    the stored headers (no table is read back), the shards are taken over, and spaCy (~2 s
    per worker process) is loaded only by a worker that links a paper."""
    import shutil

    from sciga.transforms.link import sentences

    out = tmp_path / "out"
    shutil.copytree(reference, out)
    # Without the page record the launcher cannot tell that nothing changed (see
    # test_nothing_to_do_*): the pipeline plans every input and must reuse them all.
    (out / ".sciga" / "pages.json").unlink()

    def no_model(*a, **k):
        raise AssertionError("a sentence model was loaded by a build that links no paper")

    monkeypatch.setattr(sentences.Sentencizer, "__init__", no_model)
    r = build("--input", str(corpus), "--output", str(out), "--workers", "1", "--quiet", "--figures-per-shard", "40")
    assert (r.counts.reused, r.counts.recomputed) == (24, 0)
    assert stored_reads == [], f"{len(stored_reads)} stored results were read back"
    assert r.manifest.run["shard_parts_written"] == 0 and r.manifest.run["shard_parts_reused"] > 0
    assert digests(out) == digests(reference)


def test_a_rewritten_part_copies_unchanged_papers_rows_from_the_old_shard(corpus, tmp_path, monkeypatch, stored_reads):
    """One changed page lands in every config's shard group it is in, and those parts are
    written again; the other papers' rows come from the old shards: neither their stored
    results nor their image files are read again, and the bytes are a clean build's."""
    from sciga.transforms.inputs import page_images

    pages = tmp_path / "pages"
    _copy_tree(corpus, pages)
    out = tmp_path / "out"
    common = ["--input", str(pages), "--output", str(out), "--workers", "1", "--quiet", "--figures-per-shard", "40"]
    build(*common)
    assert (out / ".sciga" / "shard_members").is_dir()
    page = pages / "2601.00005" / "2601.00005.html"
    page.write_text(page.read_text().replace("Synthetic image-rich paper", "A changed image-rich paper"))

    images_read = []
    real_image = page_images.read_image_ref
    monkeypatch.setattr(
        page_images, "read_image_ref", lambda ref, *a: images_read.append(ref.uri) or real_image(ref, *a)
    )
    stored_reads.clear()
    inc = build(*common)
    assert (inc.counts.reused, inc.counts.recomputed) == (23, 1)
    assert inc.manifest.run["shard_parts_written"] >= 3  # papers, mentions and a figures part hold it
    assert len(set(stored_reads)) == 1, f"stored results read back: {sorted(set(stored_reads))}"
    assert images_read and all("/2601.00005/" in u for u in images_read)

    fresh = tmp_path / "fresh"
    build("--input", str(pages), "--output", str(fresh), "--workers", "1", "--quiet", "--figures-per-shard", "40")
    assert digests(out) == digests(fresh), "rows copied from the old shards make a clean build's bytes"
    assert manifest(out)["files"] == manifest(fresh)["files"] and manifest(out)["counts"] == manifest(fresh)["counts"]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_rewritten_part_takes_unchanged_row_groups_as_their_bytes(corpus, tmp_path, monkeypatch, workers):
    """With row groups of 4 rows, one changed page leaves most row groups of the parts it is
    in unchanged: they are copied from the old shards byte for byte (parquet_splice), not
    decoded and encoded again, and the shards, files and counts are a clean build's. A shard
    damaged since the last build (the same size) is not copied from."""
    import dataclasses

    from sciga.transforms.write import layout

    real = layout.layout_for
    monkeypatch.setattr(layout, "layout_for", lambda *a, **k: dataclasses.replace(real(*a, **k), row_group_rows=4))
    pages = tmp_path / "pages"
    _copy_tree(corpus, pages)
    out = tmp_path / "out"
    common = ["--input", str(pages), "--output", str(out), "--workers", workers, "--quiet", "--figures-per-shard", "40"]
    build(*common)
    assert pq.ParquetFile(next((out / "data" / "papers").glob("*.parquet"))).num_row_groups == 6
    page = pages / "2601.00005" / "2601.00005.html"
    page.write_text(page.read_text().replace("Synthetic image-rich paper", "A changed image-rich paper"))
    inc = build(*common)
    assert (inc.counts.reused, inc.counts.recomputed) == (23, 1)
    taken = inc.manifest.run["shard_row_groups_taken"]
    assert taken >= 5, taken  # papers alone: 5 of its 6 row groups hold no changed paper

    fresh = tmp_path / "fresh"
    build("--input", str(pages), "--output", str(fresh), "--workers", "1", "--quiet", "--figures-per-shard", "40")
    assert digests(out) == digests(fresh), "row groups taken as their bytes make a clean build's bytes"
    assert manifest(out)["files"] == manifest(fresh)["files"] and manifest(out)["counts"] == manifest(fresh)["counts"]

    # The papers shard damaged in place (same size, a row group's bytes zeroed): nothing
    # is taken from it, its papers' rows come from the store, the bytes are still right.
    shard = next((out / "data" / "papers").glob("*.parquet"))
    data = bytearray(shard.read_bytes())
    data[8:400] = bytes(392)
    shard.write_bytes(bytes(data))
    page.write_text(page.read_text().replace("A changed image-rich paper", "Synthetic image-rich paper"))
    again = build(*common)
    assert (again.counts.reused, again.counts.recomputed) == (23, 1)
    clean = tmp_path / "clean"
    build("--input", str(pages), "--output", str(clean), "--workers", "1", "--quiet", "--figures-per-shard", "40")
    assert digests(out) == digests(clean)


def test_shards_not_as_recorded_are_written_from_the_store(corpus, reference, tmp_path):
    """A build killed while moving its shards leaves a marker: the next build trusts no old
    shard (its manifest may not describe them). A shard that is not the size the manifest
    says is not copied either. Both end with a clean build's bytes."""
    import shutil

    out = tmp_path / "out"
    shutil.copytree(reference, out)
    (out / ".sciga" / "finalizing").write_text("killed while moving shards\n")
    r = build("--input", str(corpus), "--output", str(out), "--workers", "1", "--quiet", "--figures-per-shard", "40")
    assert not r.up_to_date and (r.counts.reused, r.counts.recomputed) == (24, 0)
    assert r.manifest.run["shard_parts_reused"] == 0
    assert not (out / ".sciga" / "finalizing").exists()
    assert digests(out) == digests(reference)

    shard = sorted((out / "data" / "figures").glob("*.parquet"))[0]
    shard.write_bytes(shard.read_bytes() + b"tampered")
    (out / ".sciga" / "pages.json").unlink()
    r = build("--input", str(corpus), "--output", str(out), "--workers", "1", "--quiet", "--figures-per-shard", "40")
    assert r.manifest.run["shard_parts_written"] == 1
    assert digests(out) == digests(reference)


@pytest.mark.e2e
def test_killed_build_resumes_where_it_stopped(tmp_path):
    pages = tmp_path / "pages"
    make_image_rich_corpus(pages, 60, n_figures=4, image_kb=8, distinct_images=2)
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [
        sys.executable,
        "-m",
        "sciga",
        "build",
        "--input",
        str(pages),
        "--output",
        str(out),
        "--workers",
        "1",
        "--quiet",
    ]
    p = subprocess.Popen(
        cmd, cwd=str(ROOT), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    results = out / ".sciga" / "results"
    deadline = time.time() + 300
    while time.time() < deadline and p.poll() is None:
        if results.is_dir() and sum(1 for _ in results.rglob("*.zip")) >= 10:
            break
        time.sleep(0.2)
    killed = p.poll() is None
    if killed:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    done_before = sum(1 for _ in results.rglob("*.zip"))
    assert done_before >= 10
    resumed = build("--input", str(pages), "--output", str(out), "--workers", "1", "--quiet")
    assert resumed.counts.papers == 60 and resumed.counts.reconciled
    if killed:
        assert resumed.counts.reused >= 10 and resumed.counts.recomputed <= 60 - 10 + 1
    clean = tmp_path / "clean"
    build("--input", str(pages), "--output", str(clean), "--workers", "1", "--quiet")
    assert digests(out) == digests(clean)
    assert not any((out / ".staging").iterdir()) if (out / ".staging").exists() else True


def _peak_rss_of_build(argv: list[str]) -> float:
    """Peak resident memory (MB): the build and all its children summed, sampled every
    0.05 s, or the build process's own peak as the kernel counted it, whichever is larger (a
    sample can miss a short peak on a loaded machine; the kernel's count cannot)."""
    r = run_watched(sciga_cmd("build", *argv), timeout=300)
    assert r.returncode == 0 and not r.timed_out, r.stderr[-2000:]
    return max(r.peak_rss, r.own_peak_rss) / 2**20


@pytest.mark.e2e
def test_memory_does_not_grow_with_the_corpus(tmp_path):
    """N and 4N image-rich papers (distinct ids, 12 figures of ~100 KB each): the build
    that holds the corpus in memory grows by tens of MB per paper; this one stays flat.
    Shards are small here: a part being written holds up to a shard's rows, so at the default
    sizes (1,000 figures) the 10-paper build stayed under one part (~240 MB) while the
    40-paper one reached it (~320 MB, as 80 and 160 papers do), and the test measured the
    part, 20 MB under its bound (over it, with a missed sample, on a loaded machine)."""
    small, large = tmp_path / "small", tmp_path / "large"
    make_image_rich_corpus(small, 10, n_figures=12, image_kb=100, distinct_images=4)
    make_image_rich_corpus(large, 40, n_figures=12, image_kb=100, distinct_images=4)
    shards = ["--papers-per-shard", "3", "--figures-per-shard", "8"]
    rss_small = _peak_rss_of_build(
        ["--input", str(small), "--output", str(tmp_path / "o1"), "--workers", "1", "--quiet", *shards]
    )
    rss_large = _peak_rss_of_build(
        ["--input", str(large), "--output", str(tmp_path / "o2"), "--workers", "1", "--quiet", *shards]
    )
    print(f"peak RSS: {rss_small:.0f} MB for 10 papers, {rss_large:.0f} MB for 40 papers")
    assert rss_large <= rss_small * 1.25 + 40, (rss_small, rss_large)


def test_a_build_without_models_never_imports_torch(tmp_path):
    """torch maps several hundred MB into every process that imports it; a build that runs
    no model (no --medical-weights / GA weights) must not pay that in any of its processes."""
    code = (
        "import sys\nfrom sciga.pipelines.cli import main\n"
        f"rc = main(['build', '--sample', '--output', {str(tmp_path / 'o')!r}, '--workers', '1', '--quiet'])\n"
        "print('rc', rc, 'torch', 'torch' in sys.modules)"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), env=env, capture_output=True, text=True)
    assert r.stdout.strip().splitlines()[-1] == "rc 0 torch False", r.stdout + r.stderr[-2000:]


def test_progress_lines_without_a_terminal_and_quiet(tmp_path):
    r = run_cli("build", "--sample", "--output", str(tmp_path / "a"), "--progress-interval", "0.5", "--workers", "1")
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.startswith("sciga build: inputs")]
    assert lines and "inputs 4/4" in lines[-1] and "papers/s" in lines[-1] and "dead letters 0" in lines[-1]
    assert "\r" not in r.stderr
    q = run_cli("build", "--sample", "--output", str(tmp_path / "b"), "--quiet", "--workers", "1")
    assert q.returncode == 0 and "sciga build: inputs" not in q.stderr


def test_progress_line_on_a_terminal(tmp_path):
    import pty

    master, slave = pty.openpty()
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.Popen(
        [sys.executable, "-m", "sciga", "build", "--sample", "--output", str(tmp_path / "t"), "--workers", "1"],
        cwd=str(ROOT),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=slave,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    p.wait()
    text = b"".join(chunks).decode(errors="replace")
    assert p.returncode == 0
    assert "\r\x1b[2Ksciga build: inputs" in text and "inputs 4/4" in text


def test_reconciliation_counts_part_dead_letters_apart(reference):
    m = manifest(reference)
    assert m["reconciled"] and m["counts"]["dead_letter_parts"] == 0
