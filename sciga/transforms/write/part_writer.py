"""Streaming Parquet writer of one shard group: tables in, part files out.

Rows arrive paper by paper, already in the config's order (papers are fed sorted by id and
each paper's rows are stored sorted), so a group never holds more than one row group in
memory. Row groups and parts end at deterministic points (row counts, and the byte sizes
the store recorded for each paper's rows), so the same rows always give the same bytes,
wherever they were read from. Each finished part gets a small
JSON sidecar (rows, bytes, SHA-256, counts) from which the manifest is made without
reading the shards again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import posixpath
from collections.abc import Sequence
from typing import IO, Optional

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from sciga.schemas.arrow import SCHEMAS
from sciga.schemas.build import PartInfo
from sciga.transforms.common.input_files import is_local, local_path
from sciga.transforms.common.result_store import hash_file
from sciga.transforms.write.layout import ShardLayout
from sciga.transforms.write.parquet_splice import (
    Footer,
    Piece,
    SpliceError,
    Struct,
    assemble,
    parse_footer,
    read_footer,
)

log = logging.getLogger(__name__)

ZSTD_LEVEL = 6
COMBINE_BELOW_BYTES = 1 << 30


def parquet_options(config: str) -> dict:
    """zstd everywhere except image bytes: PNG / JPEG do not compress, and skipping zstd
    and the dictionary attempt on them halves the cost of writing a figures shard."""
    schema = SCHEMAS[config]
    if config != "figures":
        return {"compression": "zstd", "compression_level": ZSTD_LEVEL, "use_dictionary": True}
    leaves = _leaf_paths(schema)
    comp = {p: ("none" if p == "image.bytes" else "zstd") for p in leaves}
    level = {p: ZSTD_LEVEL for p in leaves if p != "image.bytes"}
    return {
        "compression": comp,
        "compression_level": level,
        "use_dictionary": [p for p in leaves if p != "image.bytes"],
    }


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


def part_path(root: str, config: str, group: int, part: int) -> str:
    """Where a part file is staged: ``<root>/<config>/g<group>-p<part>.parquet``."""
    return posixpath.join(root.rstrip("/"), config, part_name(group, part))


def cut_parts(sizes: Sequence[tuple[int, int]], rows_per_part: int, max_part_bytes: int) -> list[list[int]]:
    """Where a shard group's parts end: ``sizes`` are (rows, bytes) of its papers in order;
    a part ends before the paper that would take it past ``rows_per_part`` rows or
    ``max_part_bytes`` bytes, so a paper's rows stay in one part (a paper larger than a
    part is a part of its own). Papers with no rows of this config join the current part.
    Returns the papers' indices per part."""
    parts: list[list[int]] = []
    cur: list[int] = []
    rows = nbytes = 0
    for i, (r, b) in enumerate(sizes):
        if cur and r and (rows + r > rows_per_part or nbytes + b > max_part_bytes):
            parts.append(cur)
            cur, rows, nbytes = [], 0, 0
        cur.append(i)
        rows += r
        nbytes += b
    if cur:
        parts.append(cur)
    return parts


_SHAPES: dict[str, Struct] = {}


def writer_shape(config: str) -> Struct:
    """What every Parquet file this writer writes for ``config`` has in its footer besides
    its row groups (schema, metadata, the writer's version): read from a file of no row
    group written in memory, once per process."""
    if config not in _SHAPES:
        sink = pa.BufferOutputStream()
        pq.ParquetWriter(sink, SCHEMAS[config], write_statistics=True, **parquet_options(config)).close()
        data = sink.getvalue().to_pybytes()
        _SHAPES[config] = parse_footer(data, len(data)).shape()
    return _SHAPES[config]


class PartWriter:
    """Writes one part file ``<root>/<config>/g<group>-p<part>.parquet`` from tables fed in
    order, row group by row group, and its JSON sidecar.

    With ``reuse=True`` (a local part) a row group may also be a previous shard's, taken
    as its bytes (``add_row_group``): the row groups written here then go to a file beside
    the part, and the part is assembled from both at ``close`` (``parquet_splice``)."""

    def __init__(self, root: str, config: str, group: int, part: int, layout: ShardLayout, reuse: bool = False):
        self.root = root.rstrip("/")
        self.config = config
        self.group = group
        self.part = part
        self.layout = layout
        self.schema = SCHEMAS[config]
        self.options = parquet_options(config)
        self.path = part_path(root, config, group, part)
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._pending_bytes = 0
        self._writer: Optional[pq.ParquetWriter] = None
        self._file: Optional[IO[bytes]] = None
        self._hashing: Optional[_HashingFile] = None
        self._local: Optional[str] = None  # the file, when written by Arrow's own I/O
        self.rows = 0
        self.reuse = reuse and is_local(self.path)
        # Row groups in order: a previous shard's (a Piece) or the n-th written here (int).
        self._groups: list = []

    @property
    def taken(self) -> int:
        """Row groups taken from previous shards."""
        return sum(isinstance(g, Piece) for g in self._groups)

    @property
    def _written(self) -> int:
        return len(self._groups) - self.taken

    @property
    def at_row_group_start(self) -> bool:
        """Whether the next table starts a row group (none is pending)."""
        return not self._pending

    def add_row_group(self, piece: Piece) -> None:
        """A previous shard's row group, as it is, as this part's next row group: only where
        the rows fed in its place would have made exactly that row group, of a file whose
        footer has this writer's shape (``writer_shape``)."""
        if not self.reuse or self._pending:
            raise ValueError("a row group is taken only at a row group's start, by a local part that reuses")
        self._groups.append(piece)
        self.rows += piece.footer.rows(piece.index)

    def add(self, table: pa.Table, nbytes: Optional[int] = None) -> None:
        """``table``: one paper's rows. ``nbytes``: its size as the row groups are cut (the
        writer passes the size recorded in the store, so that the cut does not depend on
        where the rows were read from); the table's own Arrow size when not given."""
        if table.num_rows == 0:
            return
        self._pending.append(table)
        self._pending_rows += table.num_rows
        self._pending_bytes += table.nbytes if nbytes is None else nbytes
        self.rows += table.num_rows
        if self.layout.ends_row_group(self._pending_rows, self._pending_bytes):
            self._flush_row_group()

    def _flush_row_group(self) -> None:
        if not self._pending:
            return
        if self._writer is None:
            if is_local(self.path):
                # Arrow's own file I/O: through a Python file object every page is a Python
                # call (a part of many small row groups wrote 2.5x slower). Hashed once closed.
                self._local = local_path(self.path) + (FRESH_SUFFIX if self.reuse else "")
                os.makedirs(os.path.dirname(self._local), exist_ok=True)
                self._writer = pq.ParquetWriter(self._local, self.schema, write_statistics=True, **self.options)
            else:
                fs, p = fsspec.core.url_to_fs(self.path)
                fs.makedirs(posixpath.dirname(p), exist_ok=True)
                self._file = fs.open(p, "wb")
                self._hashing = _HashingFile(self._file)
                self._writer = pq.ParquetWriter(self._hashing, self.schema, write_statistics=True, **self.options)
        table = pa.concat_tables(self._pending) if len(self._pending) > 1 else self._pending[0]
        pending_bytes = self._pending_bytes
        # The papers' tables are the row group's only references to their chunks now: once
        # combined, they are freed before the row group is encoded (a papers row group is up
        # to ROW_GROUP_BYTES of full text, held twice otherwise while it is written).
        self._pending, self._pending_rows, self._pending_bytes = [], 0, 0
        if not table.schema.equals(self.schema):  # a cast to the same types still visits every chunk
            table = table.cast(self.schema)
        if pending_bytes < COMBINE_BELOW_BYTES:
            # One chunk per column: the Parquet writer pays per chunk, and a chunk per paper
            # made writing the papers config 2.7x slower. (Above 1 GiB a binary column could
            # not be one chunk: 32-bit offsets; such a row group is written as it came.)
            table = table.combine_chunks()
        self._writer.write_table(table, row_group_size=max(1, table.num_rows))
        self._groups.append(self._written)

    def close(self) -> Optional[tuple[str, int, str]]:
        """(path, bytes, sha256) of the file written; None when no row came."""
        self._flush_row_group()
        if self._writer is None and not self.taken:  # no row came
            return None
        if self._writer is not None:
            self._writer.close()
        if self.reuse:
            self._assemble()
            sha, nbytes = hash_file(local_path(self.path))
            return self.path, nbytes, sha
        if self._local is not None:
            sha, nbytes = hash_file(self._local)
            return self.path, nbytes, sha
        assert self._file is not None and self._hashing is not None  # set with the writer
        self._file.close()
        return self.path, self._hashing.n, self._hashing.h.hexdigest()

    def _assemble(self) -> None:
        """The part from its row groups: the file written here as it is when every row group
        is in it; else the taken row groups' bytes and the written ones' in order. Where a
        file turns out not to be laid out as expected, the part is written again from the
        row groups' rows (the same bytes, the slow way)."""
        final = local_path(self.path)
        fresh = final + FRESH_SUFFIX
        if not self.taken:
            os.replace(fresh, final)
            return
        try:
            written: Optional[Footer] = None
            if self._written:
                with open(fresh, "rb") as f:
                    written = read_footer(f)
                if written.shape() != writer_shape(self.config) or len(written.row_groups) != self._written:
                    raise SpliceError(f"{fresh} is not laid out as this writer writes")
            pieces = [g if isinstance(g, Piece) else Piece(fresh, written, g) for g in self._groups]  # type: ignore[arg-type]
            assemble(final, pieces, writer_shape(self.config))
        except (SpliceError, OSError) as e:
            log.warning("writing %s from its rows: %s", self.path, e)
            self._rewrite(final, fresh)
        finally:
            if os.path.exists(fresh):
                os.remove(fresh)

    def _rewrite(self, final: str, fresh: str) -> None:
        writer = pq.ParquetWriter(final, self.schema, write_statistics=True, **self.options)
        files: dict[str, pq.ParquetFile] = {}
        try:
            for g in self._groups:
                path, index = (g.path, g.index) if isinstance(g, Piece) else (fresh, g)
                if path not in files:
                    files[path] = pq.ParquetFile(path)
                table = files[path].read_row_group(index)
                writer.write_table(table, row_group_size=max(1, table.num_rows))
        finally:
            writer.close()
            for pf in files.values():
                pf.close()


# The file beside a part that its own row groups are written to while it takes others.
FRESH_SUFFIX = ".written"


def write_sidecar(parts_root: str, info: PartInfo) -> None:
    """The part's sidecar, ``<parts_root>/<config>/<part>.parquet.json`` (``read_part_infos``)."""
    fs, p = fsspec.core.url_to_fs(posixpath.join(parts_root, info.config, part_name(info.group, info.part) + ".json"))
    fs.makedirs(posixpath.dirname(p), exist_ok=True)
    with fs.open(p, "w") as f:
        f.write(json.dumps(info.to_json(), sort_keys=True))  # one write; dump writes each token
