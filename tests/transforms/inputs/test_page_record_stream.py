"""The page record (``inputs/page_index.py``) is written as its vouches are made
(``write/up_to_date.VouchStream``): the same JSON as the record held whole, a record cut
short by an error leaves the old one, and writing it holds no more than a page's vouch at
a time beside what the build already holds."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator

import pytest

from sciga.transforms.inputs.listing_record import LISTING
from sciga.transforms.inputs.page_index import PAGE_INDEX, PageHashes, PageStat, save_page_index
from sciga.transforms.write.up_to_date import VouchStream


def hashes_of(n: int) -> PageHashes:
    h = PageHashes()
    for i in range(n):
        uri = f"/corpus/{i // 1000:04d}/2601.{i:05d}/2601.{i:05d}.html"
        h.stats[uri] = PageStat(40_000 + i, 1_795_000_000_000_000_000 + i)
        h.sha256[uri] = f"{i:064x}"
    h.listing = {"specs": ["/corpus"], "folders": [["/corpus", 1]], "inputs": [n, "ab"], "without_page": [0, ""]}
    return h


def vouch(uri: str) -> list:
    side = uri.replace(".html", ".meta.json")
    return ["0123456789abcdef", 51_798, 1_795_954_007_538_230_206, [[side, 812, "mtime=1795953380579169780"]], [0]]


def stream_of(uris, fail_after: int = -1) -> VouchStream:
    dirs: list = []

    def pages() -> Iterator[tuple[str, list]]:
        for i, uri in enumerate(sorted(uris)):
            if i == fail_after:
                raise OSError(28, "No space left on device")
            if not dirs:
                dirs.append(["/corpus/0000", 7])
            yield uri, vouch(uri)

    return VouchStream(pages(), dirs)


def test_a_streamed_record_is_the_record_held_whole(tmp_path):
    h = hashes_of(50)
    save_page_index(str(tmp_path / "a"), h, "sig", stream_of(h.sha256))
    whole = {"dirs": [["/corpus/0000", 7]], "pages": {u: vouch(u) for u in sorted(h.sha256)}}
    save_page_index(str(tmp_path / "b"), h, "sig", whole)
    got = json.loads((tmp_path / "a" / PAGE_INDEX).read_text())
    assert got == json.loads((tmp_path / "b" / PAGE_INDEX).read_text())
    assert got["build"] == "sig" and got[LISTING] == h.listing
    assert list(got["pages"]) == sorted(h.sha256) and got["pages"][sorted(h.sha256)[3]][2] == f"{3:064x}"
    # the same bytes as json.dumps of the same record, its results' members in the order written
    expected = {
        "version": got["version"],
        "build": "sig",
        "pages": got["pages"],
        "results": {"pages": whole["pages"], "dirs": whole["dirs"]},
        LISTING: h.listing,
    }
    assert (tmp_path / "a" / PAGE_INDEX).read_text() == json.dumps(expected, separators=(",", ":"))


def test_a_record_cut_short_leaves_the_old_one_and_no_temporary_file(tmp_path):
    h = hashes_of(20)
    save_page_index(str(tmp_path), h, "old", stream_of(h.sha256))
    before = (tmp_path / PAGE_INDEX).read_bytes()
    with pytest.raises(OSError, match="No space"):
        save_page_index(str(tmp_path), h, "new", stream_of(h.sha256, fail_after=7))
    assert (tmp_path / PAGE_INDEX).read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [PAGE_INDEX]


def _extra_peak(tmp_path, n: int, whole: bool) -> float:
    """Bytes per page allocated at the peak of saving a record of ``n`` pages, beyond the
    page hashes the build holds anyway."""
    h = hashes_of(n)
    results = {"dirs": [], "pages": {u: vouch(u) for u in h.sha256}} if whole else stream_of(h.sha256)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        save_page_index(str(tmp_path / f"{n}-{whole}"), h, "sig", results)
        return (tracemalloc.get_traced_memory()[1] - base) / n
    finally:
        tracemalloc.stop()


def test_writing_the_record_holds_a_vouch_at_a_time(tmp_path):
    streamed = _extra_peak(tmp_path, 20_000, whole=False)
    held = _extra_peak(tmp_path, 20_000, whole=True)
    # streamed: the sorted list of the pages' stats (~100 B a page) and one page's JSON at a time;
    # held whole, json.dumps builds the record's text (~400 B a page) besides.
    assert streamed < 150, streamed
    assert held > 2 * streamed, (held, streamed)
