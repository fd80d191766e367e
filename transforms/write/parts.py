"""Streaming Parquet writer of one shard group: tables in, part files out.

Rows arrive paper by paper, already in the config's order (papers are fed sorted by id and
each paper's rows are stored sorted), so a group never holds more than one row group in
memory. Row groups and parts end at deterministic points (row and byte counts of the rows
themselves), so the same rows always give the same bytes. Each finished part gets a small
JSON sidecar (rows, bytes, SHA-256, counts) from which the manifest is made without
reading the shards again.
"""
from __future__ import annotations

import hashlib
import json
import posixpath
from typing import Optional

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from sciga.schemas.arrow import SCHEMAS
from sciga.transforms.write.layout import ShardLayout

ZSTD_LEVEL = 6


def parquet_options(config: str) -> dict:
    """zstd everywhere except image bytes: PNG / JPEG do not compress, and skipping zstd
    and the dictionary attempt on them halves the cost of writing a figures shard."""
    schema = SCHEMAS[config]
    if config != "figures":
        return {"compression": "zstd", "compression_level": ZSTD_LEVEL, "use_dictionary": True}
    leaves = _leaf_paths(schema)
    comp = {p: ("none" if p == "image.bytes" else "zstd") for p in leaves}
    level = {p: ZSTD_LEVEL for p in leaves if p != "image.bytes"}
    return {"compression": comp, "compression_level": level, "use_dictionary": [p for p in leaves if p != "image.bytes"]}


def _leaf_paths(schema: pa.Schema) -> list[str]:
    out: list[str] = []

    def walk(prefix: str, typ: pa.DataType):
        if pa.types.is_struct(typ):
            for f in typ:
                walk(f"{prefix}.{f.name}", f.type)
        elif pa.types.is_list(typ) or pa.types.is_large_list(typ):
            walk(f"{prefix}.list.element", typ.value_type)
        else:
            out.append(prefix)

    for f in schema:
        walk(f.name, f.type)
    return out


class _HashingFile:
    """A write-only file that hashes what passes through it."""

    def __init__(self, f):
        self.f = f
        self.h = hashlib.sha256()
        self.n = 0
        self.closed = False

    def write(self, data) -> int:
        mv = memoryview(data)
        self.h.update(mv)
        self.n += mv.nbytes
        self.f.write(mv)
        return mv.nbytes

    def tell(self) -> int:
        return self.n

    def flush(self):
        self.f.flush()

    def close(self):
        if not self.closed:
            self.closed = True

    def writable(self):
        return True

    def seekable(self):
        return False

    def readable(self):
        return False


def part_name(group: int, part: int) -> str:
    return f"g{group:05d}-p{part:04d}.parquet"


class PartWriter:
    """Writes the parts of one (config, group) under ``<root>/<config>/``."""

    def __init__(self, root: str, config: str, group: int, layout: ShardLayout):
        self.root = root.rstrip("/")
        self.config = config
        self.group = group
        self.layout = layout
        self.schema = SCHEMAS[config]
        self.options = parquet_options(config)
        self.parts: list[dict] = []
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._pending_bytes = 0
        self._writer: Optional[pq.ParquetWriter] = None
        self._file = None
        self._hashing: Optional[_HashingFile] = None
        self._part_rows = 0
        self._part_bytes = 0
        self._part_counts: dict = {}
        self._part_keys: list[str] = []

    # -- feeding
    def add(self, table: pa.Table, counts: Optional[dict] = None, key: Optional[str] = None) -> None:
        """One paper's rows (or any rows, already ordered)."""
        if table.num_rows == 0 and not counts and key is None:
            return
        nbytes = table.nbytes
        if self._part_rows and (self._part_rows + table.num_rows > self.layout.rows_per_part(self.config)
                                or self._part_bytes + nbytes > self.layout.max_part_bytes):
            self._close_part()
        if table.num_rows:
            self._pending.append(table)
            self._pending_rows += table.num_rows
            self._pending_bytes += nbytes
            self._part_rows += table.num_rows
            self._part_bytes += nbytes
        for k, v in (counts or {}).items():
            self._part_counts[k] = self._part_counts.get(k, 0) + v
        if key is not None:
            self._part_keys.append(key)
        if self._pending_rows >= self.layout.row_group_rows or self._pending_bytes >= self.layout.row_group_bytes:
            self._flush_row_group()

    def note_key(self, key: str) -> None:
        """A result this part stands on without rows of its own (kept for pruning)."""
        self._part_keys.append(key)

    def close(self) -> list[dict]:
        if self._part_rows or self._pending or self._part_counts or self._part_keys:
            self._close_part()
        return self.parts

    # -- internals
    def _path(self, part: int) -> str:
        return posixpath.join(self.root, self.config, part_name(self.group, part))

    def _open(self) -> None:
        path = self._path(len(self.parts))
        fs, p = fsspec.core.url_to_fs(path)
        fs.makedirs(posixpath.dirname(p), exist_ok=True)
        self._file = fs.open(p, "wb")
        self._hashing = _HashingFile(self._file)
        self._writer = pq.ParquetWriter(self._hashing, self.schema, write_statistics=True, **self.options)

    def _flush_row_group(self) -> None:
        if not self._pending:
            return
        if self._writer is None:
            self._open()
        table = pa.concat_tables(self._pending) if len(self._pending) > 1 else self._pending[0]
        self._writer.write_table(table.cast(self.schema), row_group_size=max(1, table.num_rows))
        self._pending, self._pending_rows, self._pending_bytes = [], 0, 0

    def _close_part(self) -> None:
        self._flush_row_group()
        path = None
        if self._writer is not None:
            self._writer.close()
            self._file.close()
            path = self._path(len(self.parts))
        else:  # no rows (papers without figures, say): counts and keys only, no file
            self._hashing = _HashingFile(None)
        info = {"config": self.config, "group": self.group, "part": len(self.parts), "path": path,
                "rows": self._part_rows, "bytes": self._hashing.n, "sha256": self._hashing.h.hexdigest(),
                "counts": dict(sorted(self._part_counts.items())), "keys": sorted(set(self._part_keys))}
        fs, p = fsspec.core.url_to_fs(self._path(len(self.parts)) + ".json")
        with fs.open(p, "w") as f:
            json.dump(info, f, sort_keys=True)
        self.parts.append(info)
        self._writer = self._file = self._hashing = None
        self._part_rows = self._part_bytes = 0
        self._part_counts, self._part_keys = {}, []
