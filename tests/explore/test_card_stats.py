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


def test_kept_rows_give_the_same_statistics_and_only_rewritten_shards_are_counted(tmp_path):
    pages = tmp_path / "pages"
    make_image_rich_corpus(pages, 12, n_figures=2, image_kb=4, distinct_images=2)
    out = tmp_path / "out"
    _build(pages, out)
    folder = out / ".sciga" / CARD_STATS
    kept = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    assert len(kept) == len(read_manifest(str(out))["files"]["papers"]) >= 3  # the card kept one per shard
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


def test_a_rewritten_shard_counts_only_its_changed_papers(tmp_path, caplog):
    """One papers shard of 6 papers; one page changes (and one sidecar: the paper keeps its
    key, its row changes): the shard is written again, its unchanged papers' rows come from
    the kept file by digest, the two changed ones are counted, and the statistics, the kept
    rows and the card are what a clean build of the same pages has."""
    import json
    import logging

    import pyarrow.parquet as pq

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
    assert len(read_manifest(str(out))["files"]["papers"]) == 1
    page = pages / "2601.00005" / "2601.00005.html"
    page.write_text(page.read_text().replace("Synthetic image-rich paper", "A changed image-rich paper, longer"))
    sidecar.write_text(json.dumps({"id": "2601.00002", "title": "A title from the metadata, four tokens longer"}))
    with caplog.at_level(logging.INFO, logger="sciga.card"):
        build(out)
    counted = [r.getMessage() for r in caplog.records if r.name == "sciga.card"]
    assert len(counted) == 1 and counted[0].startswith("card statistics: counted 2 of 6 papers"), counted
    clean = tmp_path / "clean"
    build(clean)
    assert (out / "README.md").read_bytes() == (clean / "README.md").read_bytes()
    kept, fresh = (pq.read_table(next((d / ".sciga" / CARD_STATS).iterdir())) for d in (out, clean))
    assert kept.to_pylist() == fresh.to_pylist() and kept.column("digest").null_count == 0
    assert kept.column("title_tokens").to_pylist()[1] == 8  # the new title was counted
    counted, from_kept = _both(out, "group")
    assert markdown_tables(counted) == markdown_tables(from_kept)
