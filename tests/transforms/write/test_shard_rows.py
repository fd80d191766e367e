"""transforms/write/stage.py: ShardRows, the rows of unchanged papers read back from a previous
build's shard, one paper at a time and forward; a shard that is not what the manifest
recorded, or is damaged, gives no rows (the writer then rebuilds them from the store)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from test_part_writer import _paper_tables

from sciga.transforms.write.layout import ShardLayout
from sciga.transforms.write.part_writer import PartWriter
from sciga.transforms.write.steps import ShardRows


def _shard(samples: Path, root: Path) -> tuple[str, int, list[pa.Table]]:
    tables = _paper_tables(samples)
    writer = PartWriter(str(root), "papers", 0, 0, ShardLayout(row_group_rows=3))  # several row groups
    for t in tables:
        writer.add(t)
    path, nbytes, _ = writer.close()
    return path, nbytes, tables


def test_each_papers_rows_in_order(samples, tmp_path):
    path, nbytes, tables = _shard(samples, tmp_path)
    shard = ShardRows(path, nbytes, "papers")
    ids = [t.column("id")[0].as_py() for t in tables]
    for pid, table in zip(ids, tables):
        got = shard.rows_of(pid)
        assert got is not None and got.to_pylist() == table.to_pylist()
    assert shard.rows_of("9999.99999") is None  # past the end
    shard.close()
    skipping = ShardRows(path, nbytes, "papers")
    assert skipping.rows_of(ids[-1]).to_pylist() == tables[-1].to_pylist()  # forward over row groups
    assert skipping.rows_of("0") is None  # not in the shard


def test_a_shard_not_as_recorded_or_damaged_gives_no_rows(samples, tmp_path):
    path, nbytes, tables = _shard(samples, tmp_path)
    first = tables[0].column("id")[0].as_py()
    assert ShardRows(path, nbytes + 1, "papers").rows_of(first) is None

    data = bytearray(Path(path).read_bytes())
    data[4 : len(data) // 2] = bytes(len(data) // 2 - 4)  # the same size, the row groups zeroed
    Path(path).write_bytes(bytes(data))
    shard = ShardRows(path, nbytes, "papers")
    assert shard.rows_of(first) is None and shard.rows_of(tables[-1].column("id")[0].as_py()) is None


def test_a_row_group_is_taken_only_whole_and_only_from_the_recorded_file(samples, tmp_path):
    """row_group_made_of: the row group that holds exactly the papers asked for, in order,
    from a local shard whose SHA-256 is the one recorded; None otherwise."""
    import hashlib

    path, nbytes, tables = _shard(samples, tmp_path)  # row groups of 3 papers
    sha = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    ids = [t.column("id")[0].as_py() for t in tables]
    columns = ["id", "teaser", "graphical_abstract"]
    shard = ShardRows(path, nbytes, "papers", sha)
    assert shard.row_group_made_of(ids[3:5], 2, columns) is None  # a part of a row group
    piece, counted, row_ids = shard.row_group_made_of(ids[6:9], 3, columns)
    assert (piece.index, row_ids, counted.column_names) == (2, ids[6:9], columns)
    assert shard.rows_of(ids[9]).to_pylist() == tables[9].to_pylist()  # rows read on after it
    assert ShardRows(path, nbytes, "papers", None).row_group_made_of(ids[0:3], 3, columns) is None
    assert ShardRows(path, nbytes, "papers", "0" * 64).row_group_made_of(ids[0:3], 3, columns) is None
    assert ShardRows(path, nbytes, "papers", sha).row_group_made_of(ids[0:3], 3, columns)[0].index == 0
