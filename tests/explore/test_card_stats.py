"""explore/card_stats.py: the card's per-paper statistics kept per papers shard give the same
statistics as counting the shards, and a rebuild counts only the shards it rewrote."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from sciga.explore.card_stats import CARD_STATS, kept_paper_rows
from sciga.explore.stats import compute_stats, markdown_tables
from sciga.explore.views import connect
from sciga.pipelines.build import add_arguments, run_build
from sciga.samples.scale_corpus import make_image_rich_corpus
from sciga.transforms.write.manifest import read_manifest


def _build(pages: Path, out: Path):
    ap = argparse.ArgumentParser()
    add_arguments(ap)
    argv = ["--input", str(pages), "--output", str(out), "--workers", "1", "--quiet", "--papers-per-shard", "4"]
    return run_build(ap.parse_args(argv))


def _both(out: Path, level: str):
    con = connect(str(out))
    counted = compute_stats(con, level)
    con.close()
    con = connect(str(out))
    kept = compute_stats(con, level, kept_paper_rows(con, str(out), read_manifest(str(out))))
    con.close()
    return counted, kept


def test_kept_rows_give_the_same_statistics_and_only_rewritten_shards_are_counted(tmp_path, caplog):
    """A clean build's kept rows are counted by the processes that write the shards
    (``transforms/write/card_rows.py``): the card counts none of them."""
    import logging

    pages = tmp_path / "pages"
    make_image_rich_corpus(pages, 12, n_figures=2, image_kb=4, distinct_images=2)
    out = tmp_path / "out"
    with caplog.at_level(logging.INFO, logger="sciga.card"):
        _build(pages, out)
    assert not [r for r in caplog.records if r.name == "sciga.card"], "the card counted a clean build's shard"
    folder = out / ".sciga" / CARD_STATS
    kept = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    assert len(kept) == len(read_manifest(str(out)).files["papers"]) >= 3  # the card kept one per shard
    for level in ("group", "archive"):
        counted, from_kept = _both(out, level)
        assert markdown_tables(counted) == markdown_tables(from_kept)
        assert counted.distributions.equals(from_kept.distributions)

    page = pages / "2601.00005" / "2601.00005.html"
    page.write_text(page.read_text().replace("Synthetic image-rich paper", "A changed image-rich paper, longer"))
    _build(pages, out)
    now = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    assert len(now) == len(kept) and len(set(now) & set(kept)) == len(kept) - 1, "only the rewritten shard is counted"
    assert all(now[n] == kept[n] for n in set(now) & set(kept))
    counted, from_kept = _both(out, "group")
    assert markdown_tables(counted) == markdown_tables(from_kept)
    assert not [n for n in os.listdir(folder) if n.endswith(".tmp")]


def test_a_rewritten_shard_counts_only_its_changed_papers(tmp_path, caplog, monkeypatch):
    """One papers shard of 6 papers; one page changes (and one sidecar: the paper keeps its
    key, its row changes): the shard is written again, its unchanged papers' rows come from
    the kept file by digest, the two changed ones are counted, and the statistics, the kept
    rows and the card are what a clean build of the same pages has. The writer of the shard
    does this (``transforms/write/card_rows.py``, two papers counted there); where it did not
    (its file removed here), the card does, the same way."""
    import json
    import logging
    import shutil

    import pyarrow.parquet as pq

    from sciga.explore.dataset_card import write_dataset_card
    from sciga.transforms.write import card_rows

    pages = tmp_path / "pages"
    make_image_rich_corpus(pages, 6, n_figures=2, image_kb=4, distinct_images=2)
    sidecar = pages / "2601.00002" / "2601.00002.meta.json"
    sidecar.write_text(json.dumps({"id": "2601.00002", "title": None}))
    out = tmp_path / "out"
    ap = argparse.ArgumentParser()
    add_arguments(ap)

    def build(target: Path):
        argv = ["--input", str(pages), "--output", str(target), "--workers", "1", "--quiet"]
        return run_build(ap.parse_args(argv))

    build(out)
    assert len(read_manifest(str(out)).files["papers"]) == 1
    folder = out / ".sciga" / CARD_STATS
    (first,) = folder.iterdir()
    before = tmp_path / first.name
    shutil.copy(first, before)
    page = pages / "2601.00005" / "2601.00005.html"
    page.write_text(page.read_text().replace("Synthetic image-rich paper", "A changed image-rich paper, longer"))
    sidecar.write_text(json.dumps({"id": "2601.00002", "title": "A title from the metadata, four tokens longer"}))
    counted_by_writer = []
    real_paper_rows = card_rows.paper_rows
    monkeypatch.setattr(card_rows, "paper_rows", lambda t: counted_by_writer.append(t.num_rows) or real_paper_rows(t))
    with caplog.at_level(logging.INFO, logger="sciga.card"):
        build(out)
    assert sum(counted_by_writer) == 2, counted_by_writer  # the writer counted the changed papers alone
    assert not [r for r in caplog.records if r.name == "sciga.card"], "the writer kept the rewritten shard's rows"
    clean = tmp_path / "clean"
    build(clean)
    assert (out / "README.md").read_bytes() == (clean / "README.md").read_bytes()
    (by_writer,) = folder.iterdir()
    fresh = pq.read_table(next((clean / ".sciga" / CARD_STATS).iterdir()))
    assert pq.read_table(by_writer).to_pylist() == fresh.to_pylist()

    # The card's own path: the old shard's kept rows back, the writer's gone.
    by_writer.unlink()
    shutil.copy(before, folder / first.name)
    (out / "README.md").unlink()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="sciga.card"):
        write_dataset_card(str(out))
    counted = [r.getMessage() for r in caplog.records if r.name == "sciga.card"]
    assert len(counted) == 1 and counted[0].startswith("card statistics: counted 2 of 6 papers"), counted
    assert (out / "README.md").read_bytes() == (clean / "README.md").read_bytes()
    (kept_path,) = folder.iterdir()
    kept = pq.read_table(kept_path)
    assert kept.to_pylist() == fresh.to_pylist() and kept.column("digest").null_count == 0
    assert kept.column("title_tokens").to_pylist()[1] == 8  # the new title was counted
    counted, from_kept = _both(out, "group")
    assert markdown_tables(counted) == markdown_tables(from_kept)
