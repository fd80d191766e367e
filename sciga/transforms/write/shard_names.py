"""Deterministic Parquet shards in the Hugging Face layout.

``<out>/data/<config>/<split>-NNNNN-of-MMMMM.parquet``. A row's shard is a stable hash of
its paper id, so all rows of a paper share a shard and the same input always gives the same
files; rows are sorted inside a shard, and no wall-clock value is written. The shard count
comes from the row count (``rows_per_shard``), which is itself deterministic.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from sciga.schemas.ids import FIGURE_ID_RE

if TYPE_CHECKING:
    import pyarrow as pa

# pyarrow is imported where a table is written, not here: the launcher reads this module's
# constants (DEFAULT_ROWS_PER_SHARD) before it knows whether anything is to be written, and a
# rebuild with nothing to do then never imports pyarrow (~0.3 s).

SPLIT = "train"
SHARD_RE = re.compile(r"^(?P<split>[\w\-]+)-(?P<i>\d{5})-of-(?P<n>\d{5})\.parquet$")
DEFAULT_ROWS_PER_SHARD = {"papers": 2000, "figures": 1000, "mentions": 200_000, "dead_letter": 200_000}


def stable_hash(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "big")


def shard_name(index: int, n_shards: int, split: str = SPLIT) -> str:
    return f"{split}-{index:05d}-of-{n_shards:05d}.parquet"


def _figure_order(row: dict):
    m = FIGURE_ID_RE.match(row["id"])
    fig = int(m.group("fig")) if m else 0
    sub = int(m.group("sub")) if m and m.group("sub") else 0
    return (row["paper_id"], fig, sub, row["id"])


SORT_KEYS = {
    "papers": lambda r: (r["id"],),
    "figures": _figure_order,
    # Caption and title mentions have no paragraph index (None sorts as -1).
    "mentions": lambda r: (
        r["paper_id"],
        r["section_id"] or "",
        r.get("context") or "",
        r.get("context_id") or "",
        -1 if r["paragraph_index"] is None else r["paragraph_index"],
        r["char_start"],
        r["char_end"],
        r["figure_id"],
    ),
    "dead_letter": lambda r: (r["paper_id"] or "", r["stage"], r["input_uri"] or "", r["error_type"], r["message"]),
}


def table_bytes(config: str, rows: Iterable[dict], row_group_rows: int = 256) -> bytes:
    """Rows -> Parquet bytes (sorted, zstd). Same rows, same bytes."""
    from sciga.schemas.arrow import to_table

    rows = sorted(rows, key=SORT_KEYS[config])
    table = to_table(config, rows)
    return table_to_parquet(table, row_group_rows)


def table_to_parquet(table: pa.Table, row_group_rows: int = 256) -> bytes:
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(
        table,
        buf,
        compression="zstd",
        compression_level=6,
        row_group_size=row_group_rows,
        use_dictionary=True,
        write_statistics=True,
        # Page index and bloom filters stay off: they add bytes without helping the
        # column scans DuckDB and `datasets` do.
    )
    return buf.getvalue()


def empty_table_bytes(config: str) -> bytes:
    """A typed shard with no rows and no row groups: a zero-row row group makes readers that
    size batches from the first row group (Hugging Face `datasets`) fail on the file."""
    import pyarrow.parquet as pq

    from sciga.schemas.arrow import SCHEMAS

    buf = io.BytesIO()
    pq.ParquetWriter(buf, SCHEMAS[config], compression="zstd").close()
    return buf.getvalue()
