"""A build with nothing to do says so without starting Apache Beam and writes nothing; any
change a build would act on (a page, an image, an option that shapes the shards, a lost
shard, --rebuild) still runs the pipeline, and what it writes is what a clean build writes.
Pages are hashed again only when their size or mtime moved (``inputs/page_index.py``)."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from sciga.executors import warm_workers
from sciga.pipelines.build import add_arguments, run_build
from sciga.samples.scale_corpus import figure_png, make_image_rich_corpus
from sciga.transforms.inputs.listing_record import LISTING
from sciga.transforms.inputs.page_index import PAGE_INDEX, page_hashes, save_page_index

from conftest import cli_in_fresh_process

COMMON = ("--workers", "1", "--quiet", "--figures-per-shard", "8")


def build(pages: Path, out: Path, *extra: str):
    ap = argparse.ArgumentParser()
    add_arguments(ap)
    return run_build(ap.parse_args(["--input", str(pages), "--output", str(out), *COMMON, *extra]))


def snapshot(out: Path) -> dict:
    """Every file of the build folder with its bytes' hash and mtime: "nothing written" means
    this does not move. The page record is compared without its listing: a build with nothing
    to do adds the listing to a record that has none (its first build's folders had changed
    a moment before, ``inputs/listing_record.py``), and a record that has one is not written."""
    record = out / ".sciga" / PAGE_INDEX
    snap: dict = {
        str(p.relative_to(out)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(out.rglob("*"))
        if p.is_file() and p != record
    }
    if record.is_file():
        snap[PAGE_INDEX] = {k: v for k, v in json.loads(record.read_text()).items() if k != LISTING}
    return snap


def digests(out: Path) -> dict:
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.glob("data/*/*"))}


def build_in_fresh_process(*argv: str) -> tuple[str, bool]:
    """(stdout, whether Apache Beam was imported) of `sciga ARGV` in a new interpreter."""
    r, modules = cli_in_fresh_process(list(argv))
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    return r.stdout, "apache_beam" in modules


@pytest.fixture
def corpus(tmp_path) -> Path:
    pages = tmp_path / "pages"
    make_image_rich_corpus(pages, 6, n_figures=3, image_kb=4, distinct_images=2)
    return pages


def test_nothing_to_do_answers_without_beam_and_writes_nothing(corpus, tmp_path):
    out = tmp_path / "out"
    first = build(corpus, out)
    assert first.counts.papers == 6 and not first.up_to_date
    assert (out / ".sciga" / PAGE_INDEX).is_file()
    before = snapshot(out)
    stdout, beam = build_in_fresh_process("build", "--input", str(corpus), "--output", str(out), *COMMON)
    assert "up to date" in stdout and "reused                 6" in stdout
    assert "papers                 6" in stdout  # the summary is the build's, read from its manifest
    assert beam is False, "a build with nothing to do imported Apache Beam"
    assert snapshot(out) == before
    # --workers does not change a byte of the shards: still nothing to do
    again = build(corpus, out, "--workers", "2")
    assert again.up_to_date and snapshot(out) == before


def test_every_change_a_build_acts_on_runs_the_pipeline(corpus, tmp_path):
    out = tmp_path / "out"
    build(corpus, out)
    page = sorted(corpus.glob("*/*.html"))[0]
    image = sorted(page.parent.glob("figs/*.png"))[0]

    # a page touched but not changed: hashed again, same key, still nothing to do
    os.utime(page, ns=(page.stat().st_atime_ns, page.stat().st_mtime_ns + 10**9))
    assert build(corpus, out).up_to_date

    # a page's text
    text = page.read_text(encoding="utf-8")
    page.unlink()  # hard-linked corpus files: write a new file
    page.write_text(text.replace("</article>", "<p>An added paragraph.</p></article>", 1), encoding="utf-8")
    r = build(corpus, out)
    assert not r.up_to_date and (r.counts.reused, r.counts.recomputed) == (5, 1)
    assert build(corpus, out).up_to_date

    # an image (not a page): the result's dependency moved
    image.unlink()
    image.write_bytes(figure_png(seed=99, target_kb=4))
    r = build(corpus, out)
    assert not r.up_to_date and (r.counts.reused, r.counts.recomputed) == (5, 1)

    # an option that shapes the shards
    r = build(corpus, out, "--papers-per-shard", "3")
    assert not r.up_to_date and r.counts.recomputed == 0

    # a shard lost from the folder
    shard = sorted((out / "data" / "figures").glob("*.parquet"))[0]
    shard.unlink()
    r = build(corpus, out, "--papers-per-shard", "3")
    assert not r.up_to_date and shard.is_file()

    # --rebuild always rebuilds
    r = build(corpus, out, "--papers-per-shard", "3", "--rebuild")
    assert not r.up_to_date and r.counts.recomputed == 6

    # and what the incremental builds left is what a clean build writes
    clean = tmp_path / "clean"
    build(corpus, clean, "--papers-per-shard", "3")
    assert digests(out) == digests(clean)


class Killed(BaseException):
    """Stands for SIGKILL between storing the results and moving the shards into place."""


@pytest.mark.parametrize("executor", ["in_process", "beam"])
def test_a_build_killed_after_storing_a_changed_sidecars_result_is_finished_by_the_next(
    corpus, tmp_path, monkeypatch, executor
):
    """A metadata sidecar changes (arXiv added a journal reference); the paper is recomputed
    under the same key (the key hashes the page, not the sidecar) and stored, and the build
    dies before its shards are moved into place. The next build reuses that result: it must
    not answer "up to date" from the last finished build's record, nor take the paper's old
    rows from the old shard, but write what a clean build writes."""
    from sciga.executors import finalize as build_module

    if executor == "beam":
        monkeypatch.setenv("SCIGA_IN_PROCESS", "0")
    page = sorted(corpus.glob("*/*.html"))[0]
    meta = {"id": page.stem, "title": None}
    sidecar = page.with_name(f"{page.stem}.meta.json")
    sidecar.write_text(json.dumps(meta), encoding="utf-8")
    out = tmp_path / "out"
    build(corpus, out)
    sidecar.write_text(json.dumps({**meta, "journal_ref": "Journal of Examples 7 (2026)"}), encoding="utf-8")

    def killed(fin):
        raise Killed()

    with monkeypatch.context() as m:
        m.setattr(build_module, "finalize_build", killed)
        with pytest.raises(Killed):
            build(corpus, out)

    stdout, _ = build_in_fresh_process("build", "--input", str(corpus), "--output", str(out), *COMMON)
    assert "up to date" not in stdout and "reused                 6" in stdout, stdout
    papers = pq.read_table(sorted((out / "data" / "papers").glob("*.parquet"))[0], columns=["id", "journal_ref"])
    refs = dict(zip(papers.column("id").to_pylist(), papers.column("journal_ref").to_pylist()))
    assert refs[meta["id"]] == "Journal of Examples 7 (2026)", refs
    clean = tmp_path / "clean"
    build(corpus, clean)
    assert digests(out) == digests(clean)
    assert build(corpus, out).up_to_date  # finished: the record vouches for OUT again


def test_pages_are_hashed_again_only_when_their_size_or_mtime_moved(corpus, tmp_path):
    store = tmp_path / "store"
    pages = [str(p) for p in sorted(corpus.glob("*/*.html"))]
    first = page_hashes(pages, str(store), max_page_bytes=1 << 30)
    assert first is not None and (first.hashed, first.recorded, first.same_as_record) == (6, 0, False)
    save_page_index(str(store), first, signature="s")

    again = page_hashes(pages, str(store), max_page_bytes=1 << 30)
    assert (again.hashed, again.recorded, again.same_as_record) == (0, 6, True)
    assert again.sha256 == first.sha256

    # one page rewritten with other content: only it is read, and the record no longer holds
    Path(pages[2]).unlink()
    Path(pages[2]).write_text("<html><body><p>other</p></body></html>", encoding="utf-8")
    changed = page_hashes(pages, str(store), max_page_bytes=1 << 30)
    assert (changed.hashed, changed.recorded, changed.same_as_record) == (1, 5, False)
    assert changed.sha256[pages[2]] == hashlib.sha256(Path(pages[2]).read_bytes()).hexdigest()

    # a damaged record costs a round of hashing, never a wrong hash
    (store / PAGE_INDEX).write_text("{not json", encoding="utf-8")
    damaged = page_hashes(pages, str(store), max_page_bytes=1 << 30)
    assert (damaged.hashed, damaged.recorded) == (6, 0) and damaged.sha256 == changed.sha256

    # --rebuild ignores the record; a convert request or a remote page leaves planning to the pipeline
    assert page_hashes(pages, str(store), 1 << 30, use_record=False).recorded == 0
    assert page_hashes([*pages, "latexml:/x/a.meta.json"], str(store), 1 << 30) is None
    assert page_hashes([*pages, "gs://bucket/a.html"], str(store), 1 << 30) is None


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_new_output_hashes_each_page_once_in_its_worker_and_records_them_all(corpus, tmp_path, monkeypatch, workers):
    """A build into a new output has no result to reuse: the launcher reads no page before
    the workers start (each is hashed once, by the worker that parses it), yet the record it
    leaves has every page's true SHA-256 (a page dead-lettered by the parser too), so the
    next build is up to date at once."""
    from sciga.transforms.common import result_store
    from sciga.transforms.inputs import page_index

    broken = corpus / "broken"
    broken.mkdir()
    (broken / "2601.99999.html").write_bytes(b"<html><body><p>no LaTeXML here</p></body></html>")
    hashed: list = []
    real_hash = page_index._hash

    def counting_hash(uri, max_page_bytes):
        hashed.append(uri)
        return real_hash(uri, max_page_bytes)

    monkeypatch.setattr(page_index, "_hash", counting_hash)
    plan_hash = result_store.hash_file
    planned = tmp_path / "planned.txt"  # a file: the plan runs in forked workers too

    def plan_hash_file(uri, *a, **k):
        with open(planned, "a", encoding="utf-8") as f:
            f.write(uri + "\n")
        return plan_hash(uri, *a, **k)

    monkeypatch.setattr("sciga.transforms.inputs.plan_step.hash_file", plan_hash_file)
    out = tmp_path / "out"
    first = build(corpus, out, "--workers", workers)
    assert first.counts.inputs == 7 and first.counts.papers == 6
    assert not planned.exists()  # no worker hashed a page to plan it
    assert hashed == [str(broken / "2601.99999.html")]  # only the page no paper came from
    record = json.loads((out / ".sciga" / PAGE_INDEX).read_text(encoding="utf-8"))["pages"]
    pages = sorted(str(p) for p in corpus.glob("*/*.html"))
    assert sorted(record) == pages
    for uri, (size, _mtime, sha) in record.items():
        data = Path(uri).read_bytes()
        assert (size, sha) == (len(data), hashlib.sha256(data).hexdigest())
    hashed.clear()
    assert build(corpus, out, "--workers", workers).up_to_date and hashed == []


def test_the_convert_prefix_is_the_converters():
    from sciga.transforms.inputs import page_index
    from sciga.transforms.latexml.pages_from_eprints import CONVERT_PREFIX

    assert page_index.CONVERT_PREFIX == CONVERT_PREFIX


def test_a_build_with_pages_from_eprints_keeps_no_stale_record(corpus, tmp_path):
    """A build the record cannot describe removes it, so an older record never says
    "up to date" for a folder another kind of build wrote."""
    out = tmp_path / "out"
    build(corpus, out)
    assert (out / ".sciga" / PAGE_INDEX).is_file()
    shutil.copytree(corpus, tmp_path / "more")
    r = build(tmp_path / "more", out, "--html-from", "auto")
    assert not r.up_to_date and not (out / ".sciga" / PAGE_INDEX).exists()


def test_a_rebuild_of_a_few_changed_pages_runs_in_this_process_by_default(tmp_path):
    """--workers unset: one worker process per input *to compute* where workers start warm
    (Linux; elsewhere one per 16), so a rebuild of one changed page does not start worker
    processes."""
    pages = tmp_path / "pages"
    make_image_rich_corpus(pages, 34, n_figures=1, image_kb=2, distinct_images=1)
    out = tmp_path / "out"
    ap = argparse.ArgumentParser()
    add_arguments(ap)

    def default_build():
        return run_build(ap.parse_args(["--input", str(pages), "--output", str(out), "--quiet"]))

    first = default_build()
    per_worker = 1 if warm_workers.available(None) else 16
    assert first.manifest.run["workers"] == min(os.cpu_count() or 1, 34 // per_worker)
    page = sorted(pages.glob("*/*.html"))[0]
    text = page.read_text(encoding="utf-8")
    page.write_text(text.replace("</article>", "<p>An added paragraph.</p></article>", 1), encoding="utf-8")
    again = default_build()
    assert (again.counts.reused, again.counts.recomputed) == (33, 1)
    assert again.manifest.run["workers"] == 1


def test_a_no_op_rebuild_reads_no_stored_result_and_still_sees_a_file_appear(corpus, tmp_path, monkeypatch):
    """The record vouches for each page's result (``write/up_to_date.result_vouches``): a
    rebuild with nothing to do stats files and reads no stored result, yet a file that a
    result depended on the absence of (an e-print beside the page, a missing image's folder)
    appearing, or a present one rewritten, still runs the pipeline."""
    from sciga.transforms.common import result_store

    out = tmp_path / "out"
    build(corpus, out)
    record = json.loads((out / ".sciga" / PAGE_INDEX).read_text())
    assert set(record["results"]["pages"]) == set(record["pages"]), "every page's result is vouched for"
    reads: list = []
    header = result_store.ResultStore.header
    monkeypatch.setattr(result_store.ResultStore, "header", lambda self, key: reads.append(key) or header(self, key))
    assert build(corpus, out).up_to_date
    assert reads == [], "a no-op rebuild read stored results"

    # a name the results depended on being absent appears beside the pages
    page = sorted(corpus.rglob("*.html"))[0]
    header_deps = [d for h in _headers(out) for d in h["deps"] if "size" not in d or d["size"] is None]
    assert header_deps, "the corpus' results depend on an absent file"
    appeared = Path(header_deps[0]["uri"])
    appeared.parent.mkdir(parents=True, exist_ok=True)
    appeared.write_bytes(b"")
    assert not build(corpus, out).up_to_date
    appeared.unlink()
    build(corpus, out)
    assert build(corpus, out).up_to_date

    # a present dependency (an image) rewritten
    image = sorted(page.parent.rglob("*.png"))[0]
    image.unlink()  # a hard link to the corpus' pool of images
    image.write_bytes(figure_png(seed=99, target_kb=4))
    assert build(corpus, out).up_to_date is False
    build(corpus, out)
    assert build(corpus, out).up_to_date

    # a vouch that no longer matches its result file is no vouch: the header is read, as before
    build(corpus, out)
    record = json.loads((out / ".sciga" / PAGE_INDEX).read_text())
    for v in record["results"]["pages"].values():
        v[1] += 1  # another result file size
    (out / ".sciga" / PAGE_INDEX).write_text(json.dumps(record))
    reads.clear()
    assert build(corpus, out).up_to_date
    assert len(reads) == len(record["pages"])


def _headers(out: Path) -> list[dict]:
    from sciga.transforms.common.result_store import HEADER, stored_member

    return [json.loads(stored_member(str(p), HEADER)) for p in sorted((out / ".sciga" / "results").rglob("*.zip"))]


def test_a_build_with_nothing_to_do_prints_no_warning(corpus, tmp_path):
    """As a user runs it (`sciga build` in a subprocess, not --quiet): the first build says once
    that the medical filter runs its keyword stage only; the rebuild that is up to date runs
    no stage and prints no warning at all."""
    from conftest import run_cli

    out = tmp_path / "out"
    argv = ("build", "--input", str(corpus), "--output", str(out), "--workers", "1")
    first = run_cli(*argv)
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stderr.count("no --medical-weights given") == 1, first.stderr
    again = run_cli(*argv)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "up to date" in again.stdout
    assert "WARNING" not in again.stderr and "medical" not in again.stderr, again.stderr


def test_a_build_carries_the_records_vouches_over_without_holding_them_while_it_runs(corpus, tmp_path, monkeypatch):
    """The record's vouches (~1 KB a page) are set aside once the build knows it must run,
    and read from the record again when it records its own: a result that did not change
    keeps its vouch without its header being read."""
    from sciga.transforms.inputs import page_index
    from sciga.transforms.write import up_to_date

    out = tmp_path / "out"
    build(corpus, out)
    held_while_running: list = []
    set_aside = page_index.PageHashes.set_aside_record_results

    def spy(self):
        set_aside(self)
        held_while_running.append(self.record_results)

    monkeypatch.setattr(page_index.PageHashes, "set_aside_record_results", spy)
    deps_read: list = []
    deps_of = up_to_date._deps_of
    monkeypatch.setattr(up_to_date, "_deps_of", lambda store, key: deps_read.append(key) or deps_of(store, key))
    page = sorted(corpus.rglob("*.html"))[0]
    page.write_bytes(page.read_bytes() + b"<!-- changed -->")
    assert not build(corpus, out).up_to_date
    assert held_while_running == [None]
    assert len(deps_read) == 1, "only the changed page's result was read; the others' vouches were carried over"
    record = json.loads((out / ".sciga" / PAGE_INDEX).read_text())
    assert set(record["results"]["pages"]) == set(record["pages"])
    assert build(corpus, out).up_to_date
