"""The dataset card's per-paper statistics rows, counted while a papers part is written.

The card's statistics start from one small row per paper (``explore.stats.PAPER_ROWS_SQL``:
token counts, figure counts, the graphical abstract's type; no text), kept per papers shard
in ``OUT/.sciga/card_stats/<shard sha256>-<key>.parquet`` (``explore/card_stats.py``).
Counting them from the finished shards was the longest step left after the workers stopped:
DuckDB read every paper's full text again, 0.44 s of a 1,000-page build's 0.6 s of
finalizing, on one process while the others had nothing left to do.

The process that writes a papers part already holds each paper's row, so it counts them
there (``CardRows``): about 0.3 ms for a paper of 47 KB of full text, in the worker that
writes the part, and the card finds the file made. The numbers are the SQL's (``token_count`` is
``sciga_ntok``, the rest ``PAPER_ROWS_SQL`` column by column), and
``tests/transforms/write/test_card_rows.py`` checks them against DuckDB running that SQL.
``PAPER_ROWS_KEY`` is the SQL's key (``explore.card_stats.code_key``); a test fails when the
SQL changes and this module does not.

A rebuild's part counts only its changed papers: the others' rows are the previous shard's
kept rows, found by the digest of the paper's stored rows (as the card finds them).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from typing import Optional

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

CARD_STATS = "card_stats"  # the folder in OUT/.sciga
# explore.card_stats.code_key() of the SQL these rows equal (its text, macros and layout).
PAPER_ROWS_KEY = "6688e8efa1835aa2"


def kept_rows_suffix(key: str = PAPER_ROWS_KEY) -> str:
    """How every kept file of the counting SQL ``key`` ends (the card lists them by it)."""
    return f"-{key}.parquet"


def kept_rows_name(shard_sha256: str, key: str = PAPER_ROWS_KEY) -> str:
    """The kept file of a papers shard's rows in ``OUT/.sciga/card_stats``: the one name the
    writer keeps them under and the card looks for."""
    return shard_sha256 + kept_rows_suffix(key)


SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("archive", pa.string()),
        ("title_tokens", pa.int64()),
        ("abstract_tokens", pa.int64()),
        # DuckDB sums BIGINTs into a HUGEINT, which its Parquet writer stores as a double.
        ("fulltext_tokens", pa.float64()),
        ("figures", pa.int64()),
        ("subfigures", pa.float64()),
        ("figures_incl_subfigures", pa.float64()),
        ("caption_token_list", pa.list_(pa.field("element", pa.int64()))),
        ("ga_type", pa.string()),
        ("has_ga", pa.bool_()),
        ("ga_de_facto", pa.bool_()),
        ("digest", pa.string()),
    ]
)

# RE2's \s, which DuckDB's regular expressions use: ASCII space, tab, LF, FF, CR (not VT,
# not Unicode spaces).
_TOKEN = re.compile(r"[^\t\n\f\r ]+")


def token_count(s: Optional[str]) -> int:
    """``sciga_ntok(s)``: the maximal runs of characters other than RE2's whitespace."""
    if not s:
        return 0
    t = s.replace("\n\n", " ")
    # A normalized text (the parser's: single spaces, none at either end) has one token more
    # than it has spaces, as the SQL's fast path counts it.
    if not ("  " in t or "\n" in t or "\t" in t or "\r" in t or "\f" in t or t[0] == " " or t[-1] == " "):
        return t.count(" ") + 1
    return len(_TOKEN.findall(s))


def _field(values, name: str) -> list:
    """``values.name`` for each struct of ``values`` (None where the struct is)."""
    return pc.struct_field(values, name).to_pylist()


def _per_row(lists: pa.ChunkedArray, name: str) -> list[Optional[list]]:
    """``[item.name for item in row]`` for each row's list (None for a null list)."""
    flat = _field(pc.list_flatten(lists), name)
    out: list[Optional[list]] = []
    at = 0
    for n in pc.list_value_length(lists).to_pylist():
        if n is None:
            out.append(None)
            continue
        out.append(flat[at : at + n])
        at += n
    return out


def _archive(primary: Optional[str], arxiv: Optional[list], paper_id: Optional[str]) -> Optional[str]:
    """``split_part(coalesce(primary_category, subjects.arxiv[1], <id's part before '/'>), '.', 1)``."""
    x = primary
    if x is None and arxiv:
        x = arxiv[0]
    if x is None and paper_id is not None and "/" in paper_id:
        x = paper_id.split("/", 1)[0]
    return None if x is None else x.split(".", 1)[0]


def paper_rows(table: pa.Table) -> list[dict]:
    """The statistics rows of a papers table's rows (without ``digest``), in its order."""
    ids = table.column("id").to_pylist()
    subjects = table.column("subjects")
    arxiv = pc.struct_field(subjects, "arxiv").to_pylist()
    bodies = _per_row(table.column("sections"), "body")
    figures = table.column("figures")
    captions = _per_row(figures, "caption")
    subfigures = [
        None if subs is None else [None if s is None else len(s) for s in subs]
        for subs in _per_row(figures, "subfigures")
    ]
    ga = table.column("graphical_abstract")
    ga_type, ga_de_facto, has_ga = _field(ga, "type"), _field(ga, "de_facto"), pc.is_valid(ga).to_pylist()
    rows = []
    for i, (paper_id, primary, title, abstract) in enumerate(
        zip(
            ids,
            table.column("primary_category").to_pylist(),
            table.column("title").to_pylist(),
            table.column("abstract").to_pylist(),
        )
    ):
        n_sub = float(sum(n for n in subfigures[i] or () if n is not None))
        caps = captions[i]
        n_fig = None if caps is None else len(caps)
        rows.append(
            {
                "id": paper_id,
                "archive": _archive(primary, arxiv[i], paper_id),
                "title_tokens": token_count(title),
                "abstract_tokens": token_count(abstract),
                "fulltext_tokens": float(sum(token_count(b) for b in bodies[i] or ())),
                "figures": n_fig,
                "subfigures": n_sub,
                "figures_incl_subfigures": None if n_fig is None else n_fig + n_sub,
                "caption_token_list": None if caps is None else [token_count(c) for c in caps],
                "ga_type": ga_type[i],
                "has_ga": has_ga[i],
                "ga_de_facto": bool(ga_de_facto[i]),
            }
        )
    return rows


class CardRows:
    """A papers part's statistics rows, counted as its writer adds each paper's rows (a batch
    of papers at a time: each count is a few calls into Arrow), and kept where the card
    looks for them once the part's SHA-256 is known.

    A rebuild's part (``previous``: the SHA-256 of the previous shards its unchanged papers'
    rows come from) takes those papers' rows from the previous shards' kept rows by digest,
    as the card would, and counts only the papers whose stored rows changed. A row group
    copied as bytes (``add_taken``) holds no table to count: where one of its papers has no
    kept row, the part is left to the card."""

    BATCH_ROWS = 64

    def __init__(self, store_root: str, previous: Iterable[str] = ()):
        from sciga.transforms.common.input_files import is_local, local_path

        # A bucket's card counts from its shards (explore/card_stats.py): nothing to keep.
        self.folder: Optional[str] = os.path.join(local_path(store_root), CARD_STATS) if is_local(store_root) else None
        self.rows: list[Optional[dict]] = []  # in the part's order; None: in the batch
        self.digests: list[Optional[str]] = []
        self._batch: list[pa.Table] = []
        self._batch_at: list[int] = []  # where each batched table's rows go in ``rows``
        self._kept = self._kept_rows(previous) if self.folder is not None else {}

    def _kept_rows(self, shards: Iterable[str]) -> dict[str, dict]:
        """digest -> a kept row of the previous shards (their files that are there)."""
        assert self.folder is not None
        kept: dict[str, dict] = {}
        for sha in sorted(set(shards)):
            path = os.path.join(self.folder, kept_rows_name(sha))
            try:
                table = pq.read_table(path)
            except (OSError, pa.ArrowException):  # not kept (another code's key), or damaged
                continue
            if table.schema != SCHEMA:
                continue
            for row in table.to_pylist():
                digest = row.pop("digest")
                if digest:
                    kept.setdefault(digest, row)
        return kept

    def add(self, table: pa.Table, digest: Optional[str]) -> None:
        """A paper's rows, as the part gets them."""
        if self.folder is None:
            return
        if digest in self._kept and table.num_rows == 1:
            self.rows.append(self._kept[digest])
            self.digests.append(digest)
            return
        self._batch.append(table)
        self._batch_at.append(len(self.rows))
        self.rows += [None] * table.num_rows
        self.digests += [digest] * table.num_rows
        if len(self.rows) - self._batch_at[0] >= self.BATCH_ROWS:
            self._count()

    def add_taken(self, digests: Sequence[Optional[str]]) -> None:
        """The papers of a row group copied as bytes (a row each)."""
        if self.folder is None:
            return
        if not all(d in self._kept for d in digests):
            self.folder = None  # no table to count them from: the card counts this part
            return
        self.rows += [self._kept[d] for d in digests if d is not None]
        self.digests += list(digests)

    def _count(self) -> None:
        if self._batch:
            counted = iter(paper_rows(pa.concat_tables(self._batch)))
            for table, at in zip(self._batch, self._batch_at):
                for k in range(table.num_rows):
                    self.rows[at + k] = next(counted)
        self._batch, self._batch_at = [], []

    def keep(self, sha256: Optional[str], part_rows: int) -> Optional[str]:
        """Write the rows as ``<sha256>-<key>.parquet`` (not again when there); the path, or
        None when this part's rows were not all counted here."""
        if self.folder is None or not sha256 or len(self.digests) != part_rows:
            return None
        path = os.path.join(self.folder, kept_rows_name(sha256))
        if os.path.exists(path):
            return path
        self._count()
        # As the card does: a digest for every row or for none (kept rows are matched by it).
        digests = self.digests if all(self.digests) else [None] * len(self.rows)
        rows = [{**r, "digest": d} for r, d in zip(self.rows, digests) if r is not None]
        if len(rows) != part_rows:  # every row is counted by now; else the card counts them
            return None
        table = pa.Table.from_pylist(rows, schema=SCHEMA)
        os.makedirs(self.folder, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        pq.write_table(table, tmp)
        os.replace(tmp, path)
        return path
