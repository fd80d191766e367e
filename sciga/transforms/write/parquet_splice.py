"""A Parquet file made of row groups copied byte for byte from other Parquet files.

A rebuild that changed 1% of its papers writes nearly every part again (the changed papers
land in every shard group), yet most of a part's row groups hold only unchanged papers.
Decoding such a row group from the previous shard and encoding it again gives the bytes the
previous shard already holds: Parquet encodes each row group on its own (its own
dictionaries, pages and statistics); only the footer says where each one starts. So a part
is assembled here from byte ranges: the unchanged row groups from the previous shard, the
others from a file the Parquet writer wrote them to, and a footer whose offsets are moved
to where each row group now lies. The result is the file the writer would have written
(the tests compare it with one, byte for byte).

The footer is Thrift's compact protocol. What a splice moves (the row groups, their column
chunks and those chunks' metadata) is read into fields of (field id, type, value) kept in
order, the rest kept as its bytes, and written back by the rules Thrift's own writer
follows, so a footer read and written again is the same bytes (checked before any footer
is used: ``parse_footer``).
Only files laid out as Arrow's writer lays them out are used: row groups back to back,
no page index, bloom filter, encryption or external column file.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Any, BinaryIO, Optional

MAGIC = b"PAR1"

# Thrift compact protocol's type codes.
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(13)
_INTS = (_BYTE, _I16, _I32, _I64)


class SpliceError(ValueError):
    """A file this module does not assemble from (another writer's layout, a damaged footer)."""


# ---------------------------------------------------------------- Thrift compact protocol

# A struct is a list of [field id, type, value] in order. Only the parts of the footer that
# a splice changes are read into values (``Interest``: the fields to read, and what to read
# of each); any other string, list or struct is kept as its bytes (``Raw``) and written back
# as they were. Integers are int, booleans True / False with their field's type.
Struct = list
Interest = dict  # field id -> Interest of that struct (or of each struct of that list)


@dataclass(frozen=True)
class Raw:
    """A value as its bytes in the footer, read no further."""

    data: bytes


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = out = 0
    while True:
        if pos >= len(buf):
            raise SpliceError("a footer ends inside a number")
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if not b & 0x80:
            return out, pos
        shift += 7
        if shift > 70:
            raise SpliceError("a footer holds a number longer than 64 bits")


def _put_varint(out: bytearray, n: int) -> None:
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _unzigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def _skip_varint(buf: bytes, pos: int) -> int:
    """Where the number at ``pos`` ends (IndexError past the end: ``parse_footer`` says so)."""
    start = pos
    while buf[pos] & 0x80:
        pos += 1
        if pos - start > 10:
            raise SpliceError("a footer holds a number longer than 64 bits")
    return pos + 1


def _skip(buf: bytes, pos: int, ttype: int, depth: int) -> int:
    """Where the value of ``ttype`` at ``pos`` ends. Lists of numbers or strings, most of a
    footer's values, are stepped over in one loop (this reads a footer of 500 column chunks
    in a few ms)."""
    if depth > 32:
        raise SpliceError("a footer nests deeper than Parquet's")
    if ttype in (_TRUE, _FALSE, _BYTE):
        pos += 1
    elif ttype in _INTS:
        pos = _skip_varint(buf, pos)
    elif ttype == _DOUBLE:
        pos += 8
    elif ttype == _BINARY:
        n, pos = _varint(buf, pos)
        pos += n
    elif ttype in (_LIST, _SET):
        head = buf[pos]
        pos += 1
        size, etype = head >> 4, head & 0x0F
        if size == 15:
            size, pos = _varint(buf, pos)
        if size > len(buf) - pos:  # every element takes a byte at least
            raise SpliceError("a footer list longer than the footer")
        if etype in _INTS:
            for _ in range(size):
                pos = _skip_varint(buf, pos)
        elif etype == _BINARY:
            for _ in range(size):
                n, pos = _varint(buf, pos)
                pos += n
        else:
            for _ in range(size):
                pos = _skip(buf, pos, etype, depth + 1)
    elif ttype == _MAP:
        size, pos = _varint(buf, pos)
        if size:
            if size > len(buf) - pos:
                raise SpliceError("a footer ends inside a map")
            kv = buf[pos]
            pos += 1
            for _ in range(size):
                pos = _skip(buf, pos, kv >> 4, depth + 1)
                pos = _skip(buf, pos, kv & 0x0F, depth + 1)
    elif ttype == _STRUCT:
        while True:
            head = buf[pos]
            pos += 1
            if head == _STOP:
                break
            ftype = head & 0x0F
            if not head >> 4:
                pos = _skip_varint(buf, pos)
            if ftype in _INTS:
                pos = _skip_varint(buf, pos)
            elif ftype == _BINARY:
                n, pos = _varint(buf, pos)
                pos += n
            elif ftype not in (_TRUE, _FALSE):
                pos = _skip(buf, pos, ftype, depth + 1)
    else:
        raise SpliceError(f"a footer holds an unknown Thrift type {ttype}")
    if pos > len(buf):
        raise SpliceError("a footer ends inside a value")
    return pos


def _read_list(buf: bytes, pos: int, interest: Interest, depth: int) -> tuple[Any, int]:
    """A list of structs, each read with ``interest``: (element type, [structs])."""
    if pos >= len(buf):
        raise SpliceError("a footer ends inside a list")
    head = buf[pos]
    pos += 1
    size, etype = head >> 4, head & 0x0F
    if size == 15:
        size, pos = _varint(buf, pos)
    if etype != _STRUCT:
        raise SpliceError("a footer list that Parquet makes of structs is not")
    if size > len(buf) - pos:
        raise SpliceError("a footer list longer than the footer")
    items = []
    for _ in range(size):
        v, pos = read_struct(buf, pos, interest, depth + 1)
        items.append(v)
    return (etype, items), pos


def read_struct(buf: bytes, pos: int = 0, interest: Optional[Interest] = None, depth: int = 0) -> tuple[Struct, int]:
    """A compact-protocol struct at ``pos``: ([[field id, type, value], ...], end). Fields
    named in ``interest`` (structs, or lists of structs) are read on with theirs; other
    strings, lists and structs are kept as their bytes."""
    if depth > 32:
        raise SpliceError("a footer nests deeper than Parquet's")
    interest = interest or {}
    fields: Struct = []
    last = 0
    while True:
        if pos >= len(buf):
            raise SpliceError("a footer ends inside a struct")
        head = buf[pos]
        pos += 1
        if head == _STOP:
            return fields, pos
        ttype, delta = head & 0x0F, head >> 4
        if delta:
            fid = last + delta
        else:
            n, pos = _varint(buf, pos)
            fid = _unzigzag(n)
        value: Any
        if ttype in (_TRUE, _FALSE):
            value, ttype = ttype == _TRUE, _TRUE
        elif ttype in (_I16, _I32, _I64):
            n, pos = _varint(buf, pos)
            value = _unzigzag(n)
        elif ttype == _BYTE:
            if pos >= len(buf):
                raise SpliceError("a footer ends inside a value")
            value, pos = buf[pos], pos + 1
        elif fid in interest and ttype == _STRUCT:
            value, pos = read_struct(buf, pos, interest[fid], depth + 1)
        elif fid in interest and ttype == _LIST:
            value, pos = _read_list(buf, pos, interest[fid], depth + 1)
        else:
            end = _skip(buf, pos, ttype, depth + 1)
            value, pos = Raw(bytes(buf[pos:end])), end
        fields.append([fid, ttype, value])
        last = fid


def _write_value(out: bytearray, ttype: int, value: Any) -> None:
    """A value as ``read_struct`` reads it: kept bytes, a number, or a struct or list of
    structs it read on."""
    if isinstance(value, Raw):
        out += value.data
    elif ttype == _BYTE:
        out.append(value & 0xFF)
    elif ttype in (_I16, _I32, _I64):
        _put_varint(out, _zigzag(value) & 0xFFFFFFFFFFFFFFFF)
    elif ttype == _LIST:
        etype, items = value
        if len(items) < 15:
            out.append((len(items) << 4) | etype)
        else:
            out.append(0xF0 | etype)
            _put_varint(out, len(items))
        for v in items:
            _write_value(out, etype, v)
    elif ttype == _STRUCT:
        write_struct(out, value)
    else:
        raise SpliceError(f"a footer value of Thrift type {ttype} that was not read")


def write_struct(out: bytearray, fields: Struct) -> None:
    """``fields`` in the compact protocol, as Thrift's own writer writes them: a field's id
    as a delta in its header byte when it is 1 to 15 above the last one's."""
    last = 0
    for fid, ttype, value in fields:
        wire = (_TRUE if value else _FALSE) if ttype in (_TRUE, _FALSE) else ttype
        if 0 < fid - last <= 15:
            out.append(((fid - last) << 4) | wire)
        else:
            out.append(wire)
            _put_varint(out, _zigzag(fid) & 0xFFFF)
        if ttype not in (_TRUE, _FALSE):
            _write_value(out, ttype, value)
        last = fid
    out.append(_STOP)


def _field(fields: Struct, fid: int) -> Optional[list]:
    for f in fields:
        if f[0] == fid:
            return f
    return None


def _int(fields: Struct, fid: int) -> Optional[int]:
    """An integer field's value (None when absent); SpliceError when it is not an integer."""
    f = _field(fields, fid)
    if f is None:
        return None
    if f[1] not in _INTS or not isinstance(f[2], int):
        raise SpliceError(f"a footer field {fid} that Parquet makes an integer is not")
    return f[2]


def _struct(fields: Struct, fid: int) -> Optional[Struct]:
    f = _field(fields, fid)
    if f is None:
        return None
    if f[1] != _STRUCT or not isinstance(f[2], list):
        raise SpliceError(f"a footer field {fid} that Parquet makes a struct is not")
    return f[2]


def _structs(fields: Struct, fid: int) -> list[Struct]:
    """A list-of-structs field's structs ([] when absent)."""
    f = _field(fields, fid)
    if f is None:
        return []
    if f[1] != _LIST or not isinstance(f[2], tuple):
        raise SpliceError(f"a footer field {fid} that Parquet makes a list is not")
    return f[2][1]


# ---------------------------------------------------------------- Parquet's footer

# FileMetaData: 2 schema, 3 num_rows, 4 row_groups, 8 encryption_algorithm,
# 9 footer_signing_key_metadata. RowGroup: 1 columns, 3 num_rows, 5 file_offset,
# 6 total_compressed_size, 7 ordinal. ColumnChunk: 1 file_path, 2 file_offset, 3 meta_data,
# 4/6 offset / column index offsets, 8/9 encryption. ColumnMetaData: 7 total_compressed_size,
# 9 data_page_offset, 10 index_page_offset, 11 dictionary_page_offset, 14 bloom_filter_offset.
_FM_NUM_ROWS, _FM_ROW_GROUPS = 3, 4
_RG_COLUMNS, _RG_NUM_ROWS, _RG_FILE_OFFSET, _RG_ORDINAL = 1, 3, 5, 7
_CC_FILE_OFFSET, _CC_META = 2, 3
_CM_COMPRESSED, _CM_DATA_PAGE, _CM_INDEX_PAGE, _CM_DICT_PAGE = 7, 9, 10, 11
_FM_REFUSED = (8, 9)  # an encrypted file
# What a splice reads of a footer: the row groups, their column chunks and those chunks'
# metadata (where their bytes lie); the rest is kept as bytes.
_FOOTER_INTEREST: Interest = {_FM_ROW_GROUPS: {_RG_COLUMNS: {_CC_META: {}}}}
_CC_REFUSED = (1, 4, 6, 8, 9)  # another file's column, a page index, encryption
_CM_REFUSED = (14,)  # a bloom filter: it lies outside the row group


@dataclass
class Footer:
    """A Parquet file's footer, read: the FileMetaData tree and where each row group's
    bytes lie in the file ([start, end))."""

    meta: Struct
    spans: list[tuple[int, int]]

    @property
    def row_groups(self) -> list[Struct]:
        return _structs(self.meta, _FM_ROW_GROUPS)

    def rows(self, k: int) -> int:
        return _int(self.row_groups[k], _RG_NUM_ROWS) or 0

    def shape(self) -> Struct:
        """The footer less its row groups and row count: what two files written by the same
        writer with the same schema and options have in common."""
        return [f for f in self.meta if f[0] not in (_FM_NUM_ROWS, _FM_ROW_GROUPS)]


def _span(rg: Struct) -> tuple[int, int]:
    """Where a row group's column chunks lie: [start, end), back to back, else SpliceError."""
    for fid in (_RG_NUM_ROWS, _RG_FILE_OFFSET, _RG_ORDINAL):  # the fields a splice reads or moves
        _int(rg, fid)
    start = end = None
    for cc in _structs(rg, _RG_COLUMNS):
        if any(_field(cc, f) is not None for f in _CC_REFUSED):
            raise SpliceError("a column chunk with a page index, encryption or another file")
        _int(cc, _CC_FILE_OFFSET)
        md = _struct(cc, _CC_META)
        if md is None or any(_field(md, f) is not None for f in _CM_REFUSED):
            raise SpliceError("a column chunk without metadata, or with a bloom filter")
        _int(md, _CM_INDEX_PAGE)
        first = _int(md, _CM_DICT_PAGE) or _int(md, _CM_DATA_PAGE)
        size = _int(md, _CM_COMPRESSED)
        if first is None or size is None or first <= 0 or size < 0:
            raise SpliceError("a column chunk whose place is not recorded")
        if end is not None and first != end:
            raise SpliceError("a row group whose column chunks are not back to back")
        start = first if start is None else start
        end = first + size
    if start is None or end is None:
        raise SpliceError("a row group without columns")
    return start, end


def parse_footer(tail: bytes, file_size: int) -> Footer:
    """The footer of a Parquet file of ``file_size`` bytes from its last bytes ``tail`` (at
    least the footer, its length and the magic). SpliceError where it cannot be used."""
    if file_size < 12 or len(tail) < 8 or tail[-4:] != MAGIC:
        raise SpliceError("not a Parquet file")
    n = struct.unpack("<I", tail[-8:-4])[0]
    if n + 8 > len(tail) or n + 12 > file_size:
        raise SpliceError("a Parquet footer longer than the file")
    raw = bytes(tail[-8 - n : -8])
    try:
        meta, end = read_struct(raw, 0, _FOOTER_INTEREST)
    except IndexError:  # the readers step on without checking each byte is there
        raise SpliceError("a footer ends inside a value") from None
    if end != len(raw):
        raise SpliceError("bytes after a Parquet footer's end")
    if any(_field(meta, f) is not None for f in _FM_REFUSED):
        raise SpliceError("an encrypted Parquet file")
    again = bytearray()
    write_struct(again, meta)
    if bytes(again) != raw:  # a writer whose Thrift this module would not write back alike
        raise SpliceError("a Parquet footer this module does not write back byte for byte")
    _int(meta, _FM_NUM_ROWS)
    footer = Footer(meta, [])
    footer.spans = [_span(rg) for rg in footer.row_groups]
    pos = len(MAGIC)
    for start, end in footer.spans:  # row groups back to back from the magic to the footer
        if start != pos:
            raise SpliceError("row groups that are not back to back")
        pos = end
    if pos != file_size - n - 8:
        raise SpliceError("bytes between the last row group and the footer")
    return footer


def read_footer(f: BinaryIO) -> Footer:
    """The footer of the Parquet file open as ``f`` (binary, seekable)."""
    size = f.seek(0, os.SEEK_END)
    if size < 12:
        raise SpliceError("not a Parquet file")
    f.seek(size - 8)
    n = struct.unpack("<I", f.read(4))[0]
    take = min(size, n + 8)
    f.seek(size - take)
    return parse_footer(f.read(take), size)


def _moved(rg: Struct, by: int, ordinal: int) -> Struct:
    """A row group's metadata with every offset moved ``by`` bytes, numbered ``ordinal``."""
    out: Struct = []
    for fid, ttype, value in rg:
        if fid == _RG_FILE_OFFSET:
            value = value + by
        elif fid == _RG_ORDINAL:
            value = ordinal
        elif fid == _RG_COLUMNS:
            value = (value[0], [_moved_column(cc, by) for cc in value[1]])
        out.append([fid, ttype, value])
    return out


def _moved_column(cc: Struct, by: int) -> Struct:
    out: Struct = []
    for fid, ttype, value in cc:
        if fid == _CC_FILE_OFFSET and value:
            value = value + by
        elif fid == _CC_META:
            value = [
                [f, t, v + by if f in (_CM_DATA_PAGE, _CM_INDEX_PAGE, _CM_DICT_PAGE) and v else v] for f, t, v in value
            ]
        out.append([fid, ttype, value])
    return out


@dataclass(frozen=True)
class Piece:
    """Row group ``index`` of the Parquet file at ``path``, whose footer is ``footer``."""

    path: str
    footer: Footer
    index: int


COPY_CHUNK = 1 << 20


def assemble(out_path: str, pieces: list[Piece], shape: Struct) -> None:
    """Write ``out_path``: the magic, the ``pieces``' row groups' bytes in order, and a
    footer of ``shape`` (``Footer.shape``: the writer's schema, metadata and version) with
    those row groups, their offsets moved to where they now lie."""
    row_groups: list[Struct] = []
    rows = 0
    handles: dict[str, BinaryIO] = {}
    try:
        with open(out_path, "wb") as out:
            out.write(MAGIC)
            pos = len(MAGIC)
            for piece in pieces:
                start, end = piece.footer.spans[piece.index]
                src = handles.get(piece.path)
                if src is None:
                    src = handles[piece.path] = open(piece.path, "rb")
                src.seek(start)
                left = end - start
                while left:
                    chunk = src.read(min(left, COPY_CHUNK))
                    if not chunk:
                        raise SpliceError(f"{piece.path} is shorter than its footer says")
                    out.write(chunk)
                    left -= len(chunk)
                row_groups.append(_moved(piece.footer.row_groups[piece.index], pos - start, len(row_groups)))
                rows += piece.footer.rows(piece.index)
                pos += end - start
            # The shape's fields in id order, the row count and the row groups in their place.
            meta = (
                [f for f in shape if f[0] < _FM_NUM_ROWS]
                + [[_FM_NUM_ROWS, _I64, rows], [_FM_ROW_GROUPS, _LIST, (_STRUCT, row_groups)]]
                + [f for f in shape if f[0] > _FM_ROW_GROUPS]
            )
            raw = bytearray()
            write_struct(raw, meta)
            out.write(raw)
            out.write(struct.pack("<I", len(raw)))
            out.write(MAGIC)
    finally:
        for h in handles.values():
            h.close()
