"""The input listing, reused while no input folder changed (``inputs/listing_record.py``): a
rebuild with nothing to do no longer walks the inputs, and a page added, removed or renamed
anywhere below them is still listed (never a vanished input), as are trees the record may
not stand for (links, globs, folders changed a moment ago)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from sciga.pipelines.build import add_arguments, run_build
from sciga.samples.scale_corpus import make_image_rich_corpus
from sciga.transforms.inputs import build_inputs, listing_record
from sciga.transforms.inputs.listing_record import LISTING, RACY_SECONDS, folder_stamps, recorded_listing
from sciga.transforms.inputs.page_index import PAGE_INDEX

COMMON = ("--workers", "1", "--quiet", "--figures-per-shard", "8")


def build(pages: Path, out: Path, *extra: str):
    ap = argparse.ArgumentParser()
    add_arguments(ap)
    return run_build(ap.parse_args(["--input", str(pages), "--output", str(out), *COMMON, *extra]))


def age(tree: Path, seconds: float = 3600) -> None:
    """Every folder of ``tree`` last changed ``seconds`` ago (a corpus made earlier)."""
    then = time.time_ns() - int(seconds * 1e9)
    for d in [tree, *(p for p in tree.rglob("*") if p.is_dir() and not p.is_symlink())]:
        os.utime(d, ns=(then, then))


def paper_ids(out: Path) -> list[str]:
    return sorted(pq.read_table(out / "data" / "papers", columns=["id"]).column("id").to_pylist())


def record(out: Path) -> dict:
    return json.loads((out / ".sciga" / PAGE_INDEX).read_text())


@pytest.fixture
def corpus(tmp_path) -> Path:
    pages = tmp_path / "pages"
    make_image_rich_corpus(pages, 5, n_figures=2, image_kb=4, distinct_images=1)
    age(pages)
    return pages


@pytest.fixture
def walks(monkeypatch) -> list:
    """The input walks made (``pages.list_inputs`` as the build's listing calls it)."""
    calls: list = []
    real = build_inputs.list_inputs
    monkeypatch.setattr(build_inputs, "list_inputs", lambda specs: calls.append(list(specs)) or real(specs))
    return calls


def test_a_rebuild_with_nothing_to_do_does_not_walk_the_inputs(corpus, tmp_path, walks):
    out = tmp_path / "out"
    first = build(corpus, out)
    assert first.counts.papers == 5 and len(walks) == 1
    listing = record(out)[LISTING]
    assert listing["specs"] == [str(corpus)] and listing["inputs"][0] == 5
    assert {f for f, _ in listing["folders"]} >= {str(corpus), str(corpus / "2601.00001" / "figs")}
    index = out / ".sciga" / PAGE_INDEX
    written = index.stat().st_mtime_ns
    again = build(corpus, out)
    assert again.up_to_date and again.counts.papers == 5
    assert len(walks) == 1, "a rebuild with nothing to do walked the input folders"
    assert index.stat().st_mtime_ns == written, "a rebuild with nothing to do rewrote a record that has its listing"
    # --rebuild lists the inputs as they are, and records what it listed
    assert build(corpus, out, "--rebuild").counts.papers == 5 and len(walks) == 2
    assert record(out)[LISTING]["inputs"] == listing["inputs"]


def _add_top(corpus: Path) -> str:
    shutil.copy(corpus / "2601.00001" / "2601.00001.html", corpus / "2601.00901.html")
    return "2601.00901"


def _add_in_new_folder(corpus: Path) -> str:
    (corpus / "more" / "deep").mkdir(parents=True)
    shutil.copy(corpus / "2601.00001" / "2601.00001.html", corpus / "more" / "deep" / "2601.00902.html")
    return "2601.00902"


def _add_beside_images(corpus: Path) -> str:
    shutil.copy(corpus / "2601.00001" / "2601.00001.html", corpus / "2601.00002" / "figs" / "2601.00903.html")
    return "2601.00903"


def _remove_a_page(corpus: Path) -> str:
    (corpus / "2601.00003" / "2601.00003.html").unlink()
    return "-2601.00003"


def _remove_a_paper_folder(corpus: Path) -> str:
    shutil.rmtree(corpus / "2601.00004")
    return "-2601.00004"


def _rename_a_page(corpus: Path) -> str:
    (corpus / "2601.00005" / "2601.00005.html").rename(corpus / "2601.00005" / "2601.00905.html")
    return "2601.00905 -2601.00005"


@pytest.mark.parametrize(
    "change",
    [_add_top, _add_in_new_folder, _add_beside_images, _remove_a_page, _remove_a_paper_folder, _rename_a_page],
)
def test_a_page_added_removed_or_renamed_anywhere_is_listed(corpus, tmp_path, change, walks):
    out = tmp_path / "out"
    build(corpus, out)
    assert build(corpus, out).up_to_date and len(walks) == 1
    expected = set(paper_ids(out))
    for word in change(corpus).split():
        if word.startswith("-"):
            expected.discard(word[1:])
        else:
            expected.add(word)
    got = build(corpus, out)
    assert not got.up_to_date and len(walks) == 2
    assert paper_ids(out) == sorted(expected)
    assert got.counts.papers == len(expected)


def test_a_page_added_after_the_stamps_within_one_clock_tick_is_still_listed(corpus, tmp_path, monkeypatch):
    """The stamps are taken before the listing walks: a page that appears in between (its
    folder's mtime put back, as a coarse clock would leave it) is in the listing, and so in
    the record the next build reuses. No page the next build would see vanishes."""
    out = tmp_path / "out"
    real = listing_record.folder_stamps

    def stamps_then_a_page(specs, now_ns=None):
        got = real(specs, now_ns)
        st = os.stat(corpus)
        shutil.copy(corpus / "2601.00001" / "2601.00001.html", corpus / "2601.00907.html")
        os.utime(corpus, ns=(st.st_atime_ns, st.st_mtime_ns))
        return got

    monkeypatch.setattr(listing_record, "folder_stamps", stamps_then_a_page)  # prepare imports it when it lists
    assert build(corpus, out).counts.papers == 6
    monkeypatch.setattr(listing_record, "folder_stamps", real)
    again = build(corpus, out)
    assert again.up_to_date and again.counts.papers == 6 and "2601.00907" in paper_ids(out)


def test_folders_changed_a_moment_ago_are_not_trusted(corpus):
    assert folder_stamps([str(corpus)]) is not None
    (corpus / "2601.00001" / "note.txt").write_text("x")  # its folder changed just now
    assert folder_stamps([str(corpus)]) is None
    later = time.time_ns() + int((RACY_SECONDS + 1) * 1e9)
    assert folder_stamps([str(corpus)], now_ns=later) is not None
    # a folder whose mtime is ahead of this machine's clock (another machine's, on NFS) neither
    ahead = time.time_ns() + 10**12
    os.utime(corpus / "2601.00002", ns=(ahead, ahead))
    assert folder_stamps([str(corpus)], now_ns=later) is None


def test_trees_the_record_cannot_stand_for_are_listed_every_time(corpus, tmp_path):
    assert folder_stamps([str(corpus / "*")]) is None  # a glob
    assert folder_stamps([str(corpus / "2601.00001" / "2601.00001.html")]) is None  # a file
    assert folder_stamps(["gs://bucket/pages"]) is None
    assert folder_stamps([str(tmp_path / "dump.zip")]) is None
    assert folder_stamps([str(tmp_path / "missing")]) is None
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (corpus / "linked").symlink_to(outside)  # a link below: followed or refused by the listing
    age(corpus)
    assert folder_stamps([str(corpus)]) is None
    (corpus / "linked").unlink()
    age(corpus)
    linked_corpus = tmp_path / "via-link"
    linked_corpus.symlink_to(corpus)
    assert folder_stamps([str(linked_corpus)]) is None  # the input folder itself a link
    assert folder_stamps([str(corpus)]) is not None


def test_a_tree_with_a_link_is_walked_by_every_build(corpus, tmp_path, walks):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    shutil.copy(corpus / "2601.00001" / "2601.00001.html", outside / "2601.00908.html")
    (corpus / "linked").symlink_to(outside)
    age(corpus)
    out = tmp_path / "out"
    first = build(corpus, out)
    assert LISTING not in record(out)
    assert first.counts.inputs == 6  # the page behind the link out is refused, and counted
    assert build(corpus, out).counts.inputs == 6 and len(walks) == 2


def test_a_recorded_listing_holds_only_while_every_stamp_does(corpus, tmp_path):
    out = tmp_path / "out"
    build(corpus, out)
    raw = record(out)
    pages = list(raw["pages"])
    assert recorded_listing(raw[LISTING], [str(corpus)], pages).inputs == pages
    assert recorded_listing(raw[LISTING], [str(corpus), str(tmp_path)], pages) is None  # other specs
    assert recorded_listing(raw[LISTING], [str(corpus)], pages[:-1]) is None  # a page the record lost
    assert recorded_listing(raw[LISTING], [str(corpus)], list(reversed(pages))) is None
    damaged = {**raw[LISTING], "folders": [[f, m + 1] for f, m in raw[LISTING]["folders"]]}
    assert recorded_listing(damaged, [str(corpus)], pages) is None
    for broken in (None, [], {"specs": [str(corpus)]}, {**raw[LISTING], "inputs": "x"}):
        assert recorded_listing(broken, [str(corpus)], pages) is None


def test_a_record_made_before_listings_gets_one_from_a_build_with_nothing_to_do(corpus, tmp_path, walks):
    out = tmp_path / "out"
    build(corpus, out)
    path = out / ".sciga" / PAGE_INDEX
    old = record(out)
    del old[LISTING]
    path.write_text(json.dumps(old))
    assert build(corpus, out).up_to_date and len(walks) == 2
    assert record(out)[LISTING]["inputs"][0] == 5
    assert build(corpus, out).up_to_date and len(walks) == 2


def test_the_listings_warning_is_given_when_the_listing_is_reused(corpus, tmp_path, walks, caplog):
    (corpus / "2601.00950.meta.json").write_text(json.dumps({"id": "2601.00950", "title": "No page"}))
    age(corpus)
    out = tmp_path / "out"
    with caplog.at_level(logging.WARNING, logger="sciga.build"):
        build(corpus, out)
        assert build(corpus, out).up_to_date and len(walks) == 1
    said = [r.getMessage() for r in caplog.records if "metadata but no page" in r.getMessage()]
    assert len(said) == 2 and all("2601.00950.meta.json" in s for s in said), said


def test_an_output_folder_inside_the_input_is_walked_by_every_build(corpus, walks):
    out = corpus / "out"
    build(corpus, out)
    assert LISTING not in record(out)
    assert build(corpus, out).up_to_date and len(walks) == 2


def test_a_corpus_built_the_moment_it_was_made_gets_its_listing_from_a_later_build(tmp_path, walks):
    pages = tmp_path / "fresh"
    make_image_rich_corpus(pages, 3, n_figures=1, image_kb=4, distinct_images=1)
    out = tmp_path / "out"
    build(pages, out)
    assert LISTING not in record(out), "folders changed a moment ago were trusted"
    age(pages)
    assert build(pages, out).up_to_date and LISTING in record(out)
    assert build(pages, out).up_to_date and len(walks) == 2


def _mountinfo(tmp_path: Path, folder: Path, fs_type: str) -> str:
    """A Linux mountinfo where ``folder``'s device is mounted with ``fs_type``, beside others."""
    dev = os.stat(folder).st_dev
    path = tmp_path / f"mountinfo-{fs_type}"
    path.write_text(
        "22 1 0:21 / /proc rw,nosuid shared:5 - proc proc rw\n"
        f"97 29 {os.major(dev)}:{os.minor(dev)} /export/pages {folder} rw,relatime shared:50 - {fs_type} "
        "server:/export rw,vers=4.2\n"
    )
    return str(path)


@pytest.mark.parametrize("fs_type, trusted", [("nfs4", False), ("cifs", False), ("fuse.sshfs", False), ("ext4", True)])
def test_folders_on_a_network_file_system_are_not_trusted(corpus, tmp_path, monkeypatch, fs_type, trusted):
    """An NFS client caches a folder's attributes for up to a minute: a page another machine
    just added can leave the mtime this one sees as it was. Such trees are walked every time."""
    monkeypatch.setattr(listing_record, "MOUNTINFO", _mountinfo(tmp_path, corpus, fs_type))
    assert (folder_stamps([str(corpus)]) is not None) is trusted


def test_a_tree_on_nfs_is_walked_by_every_build_and_a_page_behind_a_stale_mtime_is_listed(
    corpus, tmp_path, monkeypatch, walks
):
    out = tmp_path / "out"
    assert build(corpus, out).counts.papers == 5
    monkeypatch.setattr(listing_record, "MOUNTINFO", _mountinfo(tmp_path, corpus, "nfs4"))
    st = os.stat(corpus)
    _add_top(corpus)
    os.utime(corpus, ns=(st.st_atime_ns, st.st_mtime_ns))  # what a client's stale attribute cache shows
    got = build(corpus, out)
    assert len(walks) == 2 and got.counts.papers == 6 and "2601.00901" in paper_ids(out)
    # and a record made on a local disk is not trusted once the tree is on a share
    monkeypatch.setattr(listing_record, "MOUNTINFO", _mountinfo(tmp_path, corpus, "ext4"))
    assert build(corpus, out).up_to_date and len(walks) == 3
    assert build(corpus, out).up_to_date and len(walks) == 3
    monkeypatch.setattr(listing_record, "MOUNTINFO", _mountinfo(tmp_path, corpus, "nfs"))
    assert build(corpus, out).up_to_date and len(walks) == 4


def test_an_unknown_device_or_no_mountinfo_is_trusted(corpus, tmp_path, monkeypatch):
    """Another system (no /proc), or a device mountinfo does not list (btrfs subvolumes)."""
    monkeypatch.setattr(listing_record, "MOUNTINFO", str(tmp_path / "none"))
    assert folder_stamps([str(corpus)]) is not None
    other = tmp_path / "mountinfo"
    other.write_text("97 29 254:99 / /mnt rw - nfs4 server:/x rw\nnot a mountinfo line\n")
    monkeypatch.setattr(listing_record, "MOUNTINFO", str(other))
    assert folder_stamps([str(corpus)]) is not None


def test_relist_inputs_finds_a_page_hidden_by_a_folder_mtime_put_back_and_recomputes_nothing(corpus, tmp_path, walks):
    out = tmp_path / "out"
    build(corpus, out)
    st = os.stat(corpus)
    _add_top(corpus)
    os.utime(corpus, ns=(st.st_atime_ns, st.st_mtime_ns))  # `touch -d` after adding a page
    assert build(corpus, out).up_to_date and len(walks) == 1  # the documented blind spot
    got = build(corpus, out, "--relist-inputs")
    assert len(walks) == 2 and got.counts.papers == 6 and "2601.00901" in paper_ids(out)
    assert got.counts.reused == 5 and got.counts.recomputed == 1  # only the new page was computed
    assert build(corpus, out).up_to_date and len(walks) == 2  # its listing recorded for the next build
