"""The records the build writes to disk and reads back (``schemas/build.py``): the result
header in the result store and the part sidecars. Their JSON is part of the contract: an
older build's folder is read back, and a rerun writes the same bytes."""

from __future__ import annotations

import json
import zipfile

import pyarrow as pa
import pytest

from sciga.schemas.build import FileDep, PartInfo, ResultHeader
from sciga.schemas.records import DeadLetter
from sciga.transforms.common.result_store import ResultStore

# As the writer wrote them before they were dataclasses (keys and values, sort_keys=True).
HEADER = {
    "key": "k" * 64,
    "uri": "/in/2511.99001.html",
    "paper_id": "2511.99001",
    "is_paper": True,
    "version": "v2",
    "n_figures": 3,
    "n_paragraphs": 12,
    "content_sha256": "c" * 64,
    "dead": [
        {
            "paper_id": "2511.99001",
            "stage": "tex",
            "error_type": "unsafe_archive",
            "message": "m",
            "input_uri": "/in/2511.99001.html",
            "scope": "part",
        }
    ],
    "deps": [
        {"uri": "/in/2511.99001.meta.json", "kind": "file", "size": 10, "token": "t"},
        {"uri": "/in/src", "kind": "file"},
    ],
    "pending": ["ga"],
    "complete": False,
    "stats": {"b": 1, "a": 2},
    "final": True,
    "sizes": {"papers": [1, 100, 0], "figures": [3, 300, 5000]},
}
SIDECARS = [
    {
        "config": "dead_letter",
        "group": 0,
        "part": 0,
        "path": "/p/dead_letter/g0.parquet",
        "rows": 2,
        "bytes": 9,
        "sha256": "s",
        "counts": {"dead_input": 2},
        "keys": ["a"],
    },
    {
        "config": "papers",
        "group": 3,
        "part": 1,
        "fingerprint": None,
        "keys": ["a", "b"],
        "path": None,
        "rows": 0,
        "bytes": 0,
        "sha256": None,
        "counts": {},
    },
    {
        "config": "figures",
        "group": 3,
        "part": 1,
        "fingerprint": "f" * 64,
        "keys": ["a"],
        "path": "/p/x.parquet",
        "rows": 6,
        "bytes": 123,
        "sha256": "s" * 64,
        "counts": {"figures": 6},
        "reused": True,
    },
]


def test_result_header_writes_the_bytes_an_older_build_wrote():
    h = ResultHeader.from_json(HEADER)
    assert h.dead == [DeadLetter(**HEADER["dead"][0])] and h.deps[1] == FileDep(uri="/in/src")
    assert json.dumps(h.to_json(), sort_keys=True) == json.dumps(HEADER, sort_keys=True)


def test_a_header_without_the_newer_keys_reads_with_their_defaults():
    h = ResultHeader.from_json({"key": "k", "uri": "u", "complete": True})
    assert h.final and h.sizes == {} and h.deps == [] and not h.is_paper


@pytest.mark.parametrize("sidecar", SIDECARS, ids=lambda s: s["config"])
def test_part_sidecar_round_trips_byte_for_byte(sidecar):
    assert json.dumps(PartInfo.from_json(sidecar).to_json(), sort_keys=True) == json.dumps(sidecar, sort_keys=True)


def test_the_store_keeps_the_header_and_adds_the_table_sizes(tmp_path):
    store = ResultStore(str(tmp_path))
    header = ResultHeader.from_json({**HEADER, "sizes": {}})
    assert store.write(header.key, header, {}) == header  # no tables: no sizes, no digests
    back = store.header(header.key)
    assert back == ResultHeader.from_json({**HEADER, "sizes": {}})
    assert store.read(header.key).header == back


def test_the_store_adds_each_tables_digest_which_changes_with_its_rows_alone(tmp_path):
    """The key of a result does not change with its metadata sidecar; the digest of the
    table that holds the sidecar's facts does, and only that table's."""
    store = ResultStore(str(tmp_path))
    header = ResultHeader.from_json({**HEADER, "sizes": {}})
    papers = pa.table({"id": pa.array(["2511.99001"]), "journal_ref": pa.array([None], pa.string())})
    figures = pa.table({"id": ["f1", "f2"]})
    first = store.write(header.key, header, {"papers": papers, "figures": figures})
    assert set(first.digests) == {"papers", "figures"} and store.header(header.key).digests == first.digests
    assert store.write(header.key, header, {"papers": papers, "figures": figures}).digests == first.digests
    revised = papers.set_column(1, "journal_ref", pa.array(["J. Ex. 7 (2026)"]))
    again = store.write(header.key, header, {"papers": revised, "figures": figures})
    assert again.digests["papers"] != first.digests["papers"] and again.digests["figures"] == first.digests["figures"]
    with zipfile.ZipFile(store.path(header.key)) as zf:
        assert json.loads(zf.read("header.json"))["digests"] == again.digests
