"""transforms/write/parquet_splice.py: a part assembled from row groups copied byte for byte
(from a previous shard, and from the file this build wrote its changed row groups to) is the
file the Parquet writer writes from the same rows, byte for byte; a footer read and written
again is the same bytes; files laid out otherwise (a page index, row groups apart) and
damaged or hostile footers are refused with SpliceError, never another exception."""

from __future__ import annotations

import io
import random
import struct
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_part_writer import _paper_tables

from sciga.schemas.arrow import SCHEMAS, to_table
from sciga.transforms.write import parquet_splice as ps
from sciga.transforms.write.part_writer import PartWriter, parquet_options, writer_shape


def _write(path: Path, config: str, tables: list[pa.Table], **extra) -> Path:
    """``tables`` as the part writer writes them: one row group each."""
    writer = pq.ParquetWriter(str(path), SCHEMAS[config], write_statistics=True, **parquet_options(config), **extra)
    for t in tables:
        writer.write_table(t, row_group_size=max(1, t.num_rows))
    writer.close()
    return path


def _footer(path: Path) -> ps.Footer:
    with open(path, "rb") as f:
        return ps.read_footer(f)


def _figure_groups(n_groups: int, seed: int) -> list[pa.Table]:
    """Figures row groups with and without images (the image struct null or not)."""
    rng = random.Random(seed)
    groups = []
    for g in range(n_groups):
        rows = []
        for i in range(rng.randint(1, 6)):
            has = rng.random() < 0.5
            rows.append(
                {
                    "id": f"2601.{g:05d}_F{i + 1}",
                    "paper_id": f"2601.{g:05d}",
                    "kind": rng.choice(["figure", "subfigure", "graphical_abstract"]),
                    "caption": "A caption " * rng.randint(0, 20),
                    "image": {"bytes": rng.randbytes(rng.randint(10, 400)), "path": f"f{i}.png"} if has else None,
                    "image_status": "embedded" if has else "not_found",
                }
            )
        groups.append(to_table("figures", rows))
    return groups


def _mention_groups(n_groups: int) -> list[pa.Table]:
    return [
        to_table(
            "mentions",
            [
                {"paper_id": f"2601.{g:05d}", "figure_id": f"2601.{g:05d}_F1", "text": "See Figure 1." * i}
                for i in range(1, 4)
            ],
        )
        for g in range(n_groups)
    ]


@pytest.fixture(scope="module")
def paper_groups(samples) -> list[pa.Table]:
    tables = _paper_tables(samples)
    return [pa.concat_tables(tables[i : i + 3]).combine_chunks() for i in range(0, len(tables), 3)]


def test_a_footer_read_and_written_again_is_the_same_bytes(paper_groups, tmp_path):
    for config, groups in (
        ("papers", paper_groups),
        ("figures", _figure_groups(5, 1)),
        ("mentions", _mention_groups(4)),
    ):
        path = _write(tmp_path / f"{config}.parquet", config, groups)
        data = path.read_bytes()
        footer = _footer(path)
        assert len(footer.row_groups) == len(groups)
        assert [footer.rows(k) for k in range(len(groups))] == [g.num_rows for g in groups]
        assert footer.spans[0][0] == 4 and all(a[1] == b[0] for a, b in zip(footer.spans, footer.spans[1:]))
        n = struct.unpack("<I", data[-8:-4])[0]
        again = bytearray()
        ps.write_struct(again, footer.meta)
        assert bytes(again) == data[-8 - n : -8]
        assert footer.shape() == writer_shape(config)  # what every file of this writer shares


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_spliced_file_is_the_writers_file_of_the_same_rows(paper_groups, tmp_path_factory, data):
    config = data.draw(st.sampled_from(["papers", "figures", "mentions"]))
    old_groups = {
        "papers": paper_groups,
        "figures": _figure_groups(6, data.draw(st.integers(0, 99))),
        "mentions": _mention_groups(5),
    }[config]
    tmp = tmp_path_factory.mktemp("splice")
    old = _write(tmp / "old.parquet", config, old_groups)
    # Each row group of the new file: an old one taken as it is, or one written now (an old
    # one less its last row, as a changed paper makes it).
    taken = data.draw(st.lists(st.booleans(), min_size=len(old_groups), max_size=len(old_groups)))
    drop = data.draw(st.lists(st.integers(0, len(old_groups) - 1), max_size=2, unique=True))
    new_groups, pieces, written = [], [], []
    for k, g in enumerate(old_groups):
        if k in drop:
            continue
        if taken[k]:
            new_groups.append(g)
            pieces.append(("old", k))
        else:
            fresh = g.slice(0, max(1, g.num_rows - 1))
            new_groups.append(fresh)
            pieces.append(("new", len(written)))
            written.append(fresh)
    if not new_groups:
        return
    expected = _write(tmp / "expected.parquet", config, new_groups).read_bytes()
    old_footer = _footer(old)
    new_path = _write(tmp / "written.parquet", config, written) if written else None
    new_footer = _footer(new_path) if new_path else None
    out = tmp / "spliced.parquet"
    ps.assemble(
        str(out),
        [
            ps.Piece(str(old), old_footer, k) if side == "old" else ps.Piece(str(new_path), new_footer, k)
            for side, k in pieces
        ],
        writer_shape(config),
    )
    assert out.read_bytes() == expected


def test_files_laid_out_otherwise_are_refused(paper_groups, tmp_path):
    with_index = _write(tmp_path / "index.parquet", "papers", paper_groups[:2], write_page_index=True)
    with pytest.raises(ps.SpliceError):
        _footer(with_index)
    ok = _write(tmp_path / "ok.parquet", "papers", paper_groups[:2]).read_bytes()
    n = struct.unpack("<I", ok[-8:-4])[0]
    gap = ok[: -8 - n] + b"\0" * 16 + ok[-8 - n :]  # bytes between the last row group and the footer
    with pytest.raises(ps.SpliceError):
        ps.parse_footer(gap, len(gap))
    for bad in (b"", b"PAR1", b"not parquet at all", ok[:-1] + b"X", ok[:-8] + struct.pack("<I", 10**9) + b"PAR1"):
        with pytest.raises(ps.SpliceError):
            ps.read_footer(io.BytesIO(bad))


def test_damaged_or_hostile_footers_raise_splice_error_only(paper_groups, tmp_path):
    """Byte flips, truncations and crafted Thrift (huge list sizes, deep nesting, unknown
    types) in a footer: SpliceError or a footer, never an IndexError or a hang."""
    data = _write(tmp_path / "f.parquet", "figures", _figure_groups(3, 7)).read_bytes()
    n = struct.unpack("<I", data[-8:-4])[0]
    start = len(data) - 8 - n
    rng = random.Random(5)
    for _ in range(400):
        bad = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            bad[rng.randrange(start, len(data) - 8)] = rng.randrange(256)
        if rng.random() < 0.2:
            cut = rng.randrange(start, len(data) - 8)
            bad = bad[:cut] + bad[len(data) - 8 :]
            bad[-8:-4] = struct.pack("<I", min(n, cut - start))
        try:
            ps.read_footer(io.BytesIO(bytes(bad)))
        except ps.SpliceError:
            pass
    hostile = [
        bytes([0x19, 0xFC]) + b"\xff\xff\xff\xff\x0f",  # a list of 2**32 structs
        bytes([0x19, 0xF3]) + b"\xff\xff\xff\xff\x0f",  # a list of 2**32 bytes
        bytes([0x1B]) + b"\xff\xff\xff\xff\x0f\x33",  # a map of 2**32 pairs of bytes
        bytes([0x1C]) * 200 + b"\0" * 200,  # structs nested 200 deep
        bytes([0x1D]),  # an unknown type
        bytes([0x16]) + b"\xff" * 20,  # a number longer than 64 bits
    ]
    for footer in hostile:
        blob = b"PAR1" + footer + struct.pack("<I", len(footer)) + b"PAR1"
        with pytest.raises(ps.SpliceError):
            ps.read_footer(io.BytesIO(blob))


def test_a_part_that_takes_row_groups_falls_back_to_its_rows_when_a_file_is_not_as_read(paper_groups, tmp_path):
    """A previous shard changed after its footer was read: the part is written from the row
    groups' rows instead, with the same bytes."""
    old = _write(tmp_path / "old.parquet", "papers", paper_groups[:3])
    expected = _write(tmp_path / "expected.parquet", "papers", paper_groups[:3]).read_bytes()
    footer = _footer(old)
    footer.spans[1] = (footer.spans[1][0], footer.spans[1][1] + 10**6)  # "shorter than its footer says"
    writer = PartWriter(str(tmp_path / "parts"), "papers", 0, 0, ps_layout(), reuse=True)
    writer.add_row_group(ps.Piece(str(old), footer, 0))
    writer.add_row_group(ps.Piece(str(old), footer, 1))
    writer.add(paper_groups[2])
    path, nbytes, _ = writer.close()
    assert Path(path).read_bytes() == expected and nbytes == len(expected)
    assert not Path(path + ".written").exists()
    with pytest.raises(ValueError):  # a row group is taken only where none is pending
        w = PartWriter(str(tmp_path / "p2"), "papers", 0, 0, ps_layout(), reuse=True)
        w.add(paper_groups[0].slice(0, 1))
        w.add_row_group(ps.Piece(str(old), _footer(old), 0))


def ps_layout():
    from sciga.transforms.write.layout import ShardLayout

    return ShardLayout(row_group_rows=3)
