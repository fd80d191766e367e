"""``manifest.json`` as a dataclass (``schemas/manifest.py``): read and written again it keeps
its bytes, those of a manifest an older builder wrote and of one with keys a later builder
added included."""

from __future__ import annotations

import json

from sciga.schemas.manifest import BuildManifest, ShardFile

OLD = {
    "builder_version": "0.1.3",
    "counts": {
        "dead_letter": 0,
        "dead_letter_parts": 0,
        "figures": 1,
        "images_embedded": 1,
        "mentions": 2,
        "papers": 1,
        "subfigures": 0,
        "teasers": 0,
    },
    "dead_letter_by_type": {},
    "files": {
        "dead_letter": [
            {"bytes": 10, "path": "data/dead_letter/train-00000-of-00001.parquet", "rows": 0, "sha256": "ab"}
        ],
        "papers": [
            {
                "bytes": 20,
                "counts": {"papers": 1},
                "fingerprint": "f1",
                "group": 0,
                "path": "data/papers/train-00000-of-00001.parquet",
                "rows": 1,
                "sha256": "cd",
            }
        ],
    },
    "image_status": {"embedded": 1},
    "incremental": {"recomputed": 1, "reused": 0},
    "inputs": {"count": 1, "sha256": "ef"},
    "options": {"sample": True, "tex_input": []},
    "reconciled": True,
    "run": {"runner": "in_process", "workers": 1},
    "schema_version": "1.2.0",
    "stats": {"images_read": 1},
}


def test_a_manifest_read_and_written_again_keeps_its_bytes():
    text = json.dumps(OLD, indent=2, sort_keys=True) + "\n"
    m = BuildManifest.loads(text)
    assert m.dumps() == text
    assert m.count("papers") == 1 and m.inputs_sha256 == "ef" and m.reused == 0 and m.run["runner"] == "in_process"
    part, empty = m.shard_files("papers")[0], m.shard_files("dead_letter")[0]
    assert part.from_part and part.group == 0 and part.fingerprint == "f1"
    assert not empty.from_part and "group" not in empty.to_json()
    later = dict(OLD, licence_policy="open")  # a fact a later builder adds
    later["files"] = {"papers": [dict(OLD["files"]["papers"][0], row_groups=3)]}
    text = json.dumps(later, indent=2, sort_keys=True) + "\n"
    assert BuildManifest.loads(text).dumps() == text


def test_a_shard_file_written_from_a_part_keeps_a_null_fingerprint():
    f = ShardFile(path="data/x.parquet", rows=1, bytes=2, sha256=None, from_part=True, group=0)
    assert f.to_json() == {
        "path": "data/x.parquet",
        "rows": 1,
        "bytes": 2,
        "sha256": None,
        "group": 0,
        "fingerprint": None,
        "counts": None,
    }
    assert ShardFile.from_json(f.to_json()) == f
