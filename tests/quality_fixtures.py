"""Shared helpers for the quality-gate, publish, sql and stats tests: a real sample build
(built once per session by the real Beam pipeline) and surgical corruptions of its shards."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sciga.schemas.arrow import SCHEMAS

ROOT = Path(__file__).resolve().parents[1]


def build_sample(out: Path) -> Path:
    from sciga.pipelines.cli import main

    rc = main(["build", "--sample", "--output", str(out)])
    assert rc == 0, "sample build failed"
    return out


@pytest.fixture(scope="session")
def sample_build(tmp_path_factory) -> Path:
    """The embedded sample, built once; tests copy it before changing anything."""
    return build_sample(tmp_path_factory.mktemp("sample") / "build")


@pytest.fixture
def build_copy(sample_build, tmp_path) -> Path:
    dest = tmp_path / "build"
    shutil.copytree(sample_build, dest, ignore=shutil.ignore_patterns("quality"))
    return dest


def shard(out: Path, config: str) -> Path:
    files = sorted((out / "data" / config).glob("*.parquet"))
    assert files, f"no {config} shard in {out}"
    return files[0]


def read_rows(out: Path, config: str) -> list[dict]:
    return pq.read_table(shard(out, config)).to_pylist()


def rewrite_shard(
    out: Path,
    config: str,
    change: Callable[[list[dict]], list[dict]],
    *,
    metadata: dict | None = None,
    update_manifest: bool = True,
) -> Path:
    """Apply ``change`` to a config's rows and write the shard back (same schema unless
    ``metadata`` replaces its Arrow metadata). The manifest's file entry (sha256, rows,
    bytes) is updated so only the intended corruption trips the gate."""
    path = shard(out, config)
    rows = change(pq.read_table(path).to_pylist())
    schema = SCHEMAS[config]
    if metadata is not None:
        schema = schema.with_metadata(metadata)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path, compression="zstd")
    if update_manifest:
        refresh_manifest_entry(out, path)
    return path


def refresh_manifest_entry(out: Path, path: Path) -> None:
    mpath = out / "manifest.json"
    manifest = json.loads(mpath.read_text())
    rel = path.relative_to(out).as_posix()
    data = path.read_bytes()
    for entries in manifest["files"].values():
        for e in entries:
            if e["path"] == rel:
                e.update(
                    sha256=hashlib.sha256(data).hexdigest(),
                    bytes=len(data),
                    rows=pq.ParquetFile(path).metadata.num_rows,
                )
    mpath.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def edit_manifest(out: Path, change: Callable[[dict], None]) -> None:
    mpath = out / "manifest.json"
    manifest = json.loads(mpath.read_text())
    change(manifest)
    mpath.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
