"""transforms/write/part_writer.py: a part's bytes depend on its rows, not on how they came in
(a table per paper, or one table), and a row group too large to be one chunk is still
written, row for row."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from sciga.schemas.arrow import paper_row, to_table
from sciga.schemas.records import PaperMeta
from sciga.transforms.parse import parse_latexml_html
from sciga.transforms.write import part_writer
from sciga.transforms.write.layout import ShardLayout
from sciga.transforms.write.part_writer import PartWriter


def _paper_tables(samples: Path) -> list[pa.Table]:
    """One papers table per paper of the embedded sample, five times over (ids apart)."""
    tables = []
    for copy in range(5):
        for html in sorted((samples / "html").glob("*/*.html")):
            meta = json.loads((samples / "meta" / f"{html.stem}.meta.json").read_text())
            paper = parse_latexml_html(html.read_bytes(), PaperMeta.from_dict(meta), input_uri=str(html))
            row = paper_row(paper)
            row["id"] = f"{row['id']}-{copy}"
            tables.append(to_table("papers", [row]))
    return sorted(tables, key=lambda t: t.column("id")[0].as_py())


def _write(root: Path, tables: list[pa.Table]) -> tuple[str, bytes]:
    writer = PartWriter(str(root), "papers", 0, 0, ShardLayout(row_group_rows=8))
    for t in tables:
        writer.add(t)
    path, nbytes, sha = writer.close()
    data = Path(path).read_bytes()
    assert len(data) == nbytes and hashlib.sha256(data).hexdigest() == sha
    return path, data


def test_same_bytes_whether_rows_come_paper_by_paper_or_together(samples, tmp_path):
    tables = _paper_tables(samples)
    one_by_one, data = _write(tmp_path / "a", tables)
    # The same rows cut at the same row groups, each group fed as one table.
    grouped = [pa.concat_tables(tables[i : i + 8]).combine_chunks() for i in range(0, len(tables), 8)]
    _, together = _write(tmp_path / "b", grouped)
    assert data == together
    md = pq.ParquetFile(one_by_one).metadata
    assert md.num_rows == len(tables) and md.num_row_groups == -(-len(tables) // 8)
    assert pq.read_table(one_by_one).to_pylist() == pa.concat_tables(tables).to_pylist()


def test_a_row_group_too_large_for_one_chunk_is_written_as_it_came(samples, tmp_path, monkeypatch):
    tables = _paper_tables(samples)
    monkeypatch.setattr(part_writer, "COMBINE_BELOW_BYTES", 0)  # every row group counts as too large
    path, _ = _write(tmp_path / "c", tables)
    assert pq.read_table(path).to_pylist() == pa.concat_tables(tables).to_pylist()


def test_a_local_part_and_a_bucket_part_are_the_same_bytes(samples, tmp_path):
    """A local part is written by Arrow's own file I/O and hashed once closed; a part in a
    bucket streams through a hashing file object: the same bytes, sizes and hashes."""
    import fsspec

    tables = _paper_tables(samples)
    _, local = _write(tmp_path / "local", tables)
    writer = PartWriter("memory://bucket/parts", "papers", 0, 0, ShardLayout(row_group_rows=8))
    for t in tables:
        writer.add(t)
    path, nbytes, sha = writer.close()
    assert path.startswith("memory://")
    with fsspec.open(path, "rb") as f:
        remote = f.read()
    assert remote == local and nbytes == len(local) and sha == hashlib.sha256(local).hexdigest()
