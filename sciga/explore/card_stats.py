"""The dataset card's per-paper statistics, kept per papers shard.

Counting the tokens of every paper's full text is most of what rendering the card costs
(0.43 s of the 0.6 s a 1,000-paper build spends finalizing, and it grows with the corpus),
and a build that rewrote a few shards counted every shard again. The rows the statistics
need (``stats.PAPER_ROWS_SQL``: counts, no text) are now kept for each papers shard in
``OUT/.sciga/card_stats/<shard sha256>-<code>.parquet``: a shard is counted once, while
its bytes and the counting code stay the same. Rows and their order are the shard's, so
the statistics are the same numbers. Local builds only (a bucket's card reads its shards,
as before).

A shard written again (a few of its papers changed) is not counted again either: each kept
row carries the digest of the paper's stored row (``ResultHeader.digests``, named by the
shard's member list), and a paper whose digest a kept row has takes that row. Only the
changed papers' text is counted: with 10 of 1,000 text pages changed, 0.5 s became ~0.05 s.

Most shards are not counted here at all: the process that writes a papers part counts its
rows as it writes them and keeps the file under the same name
(``transforms/write/card_rows.py``, the same numbers as this SQL), so a clean build's card
reads what its workers kept. This module counts what they did not: a shard whose writer
copied row groups of the old shard as bytes, and any shard of a build made before.
"""

from __future__ import annotations

import hashlib
import logging
import os
from typing import Optional

from sciga.explore.stats import PAPER_ROWS_SQL, macros_sql
from sciga.schemas.manifest import BuildManifest, ShardFile
from sciga.transforms.common.input_files import is_local, local_path
from sciga.transforms.common.result_store import STORE_DIR
from sciga.transforms.common.sql_text import sql_string
from sciga.transforms.write.card_rows import CARD_STATS, kept_rows_name, kept_rows_suffix

ROWS_LAYOUT = "rows + digest (1)"  # what a kept file holds besides the counting SQL's columns
log = logging.getLogger("sciga.card")


def code_key() -> str:
    """What the kept rows are a function of besides the shard: the counting SQL (the writer
    counts the same rows under this key, ``transforms/write/card_rows.py``)."""
    return hashlib.sha256("\n".join([PAPER_ROWS_SQL, *macros_sql(), ROWS_LAYOUT]).encode()).hexdigest()[:16]


def kept_paper_rows(con, out_dir: str, manifest: BuildManifest) -> Optional[str]:
    """A query of the build's per-paper statistics rows (``SELECT * FROM read_parquet([...])``), the
    missing shards' rows computed and kept first; None where the card computes them from
    the shards (a remote build, a manifest without shard hashes, no papers)."""
    if not is_local(out_dir):
        return None
    entries = [e for e in manifest.shard_files("papers") if e.rows]
    if not entries or not all(e.sha256 and e.path for e in entries):
        return None
    root = local_path(out_dir)
    folder = os.path.join(root, STORE_DIR, CARD_STATS)
    os.makedirs(folder, exist_ok=True)
    for sql in macros_sql():
        con.execute(sql)
    code = code_key()
    kept = sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(kept_rows_suffix(code)))
    keep, paths = set(), []
    for e in entries:
        name = kept_rows_name(e.sha256 or "", code)
        path = os.path.join(folder, name)
        if not os.path.exists(path):
            shard = os.path.join(root, *e.path.split("/"))
            tmp = path + ".tmp"
            con.execute(
                f"COPY ({_shard_rows_sql(con, shard, _members(out_dir, e), kept)}) TO {sql_string(tmp)} (FORMAT parquet)"
            )
            os.replace(tmp, path)
        keep.add(name)
        paths.append(path)
    con.unregister("sciga_card_members")  # registered when a shard was counted from its member list
    for name in os.listdir(folder):
        if name not in keep:
            os.remove(os.path.join(folder, name))
    return "SELECT * EXCLUDE (digest) FROM read_parquet([" + ", ".join(sql_string(p) for p in paths) + "])"


def _members(out_dir: str, entry: ShardFile) -> Optional[list[list[str]]]:
    """[paper id, result key, digest] of each row of a papers shard, in order; None when the
    build did not record them for every row."""
    from sciga.transforms.write.finalize import members_uri, read_members

    if not entry.fingerprint:
        return None
    members = read_members(members_uri(out_dir, entry.fingerprint))
    return members if len(members) == int(entry.rows) else None


def _shard_rows_sql(con, shard: str, members: Optional[list[list[str]]], kept: list[str]) -> str:
    """The query of one papers shard's rows (the counting SQL's columns and ``digest``), in
    the shard's order: a paper whose digest a kept file has takes its row from there, the
    others are counted from the shard."""
    whole = PAPER_ROWS_SQL.format(papers=f"read_parquet({sql_string(shard)})")
    if members is None:
        log.info("card statistics: counted all papers of %s (no member list)", shard)
        return f"SELECT *, NULL::VARCHAR AS digest FROM ({whole})"
    import pyarrow as pa

    want = pa.table(
        {
            "pos": pa.array(range(len(members)), pa.int64()),
            "id": pa.array([m[0] for m in members], pa.string()),
            "digest": pa.array([m[2] for m in members], pa.string()),
        }
    )
    con.register("sciga_card_members", want)
    old_rows = (
        "SELECT * FROM read_parquet([" + ", ".join(sql_string(p) for p in kept) + "]) WHERE digest IS NOT NULL "
        "QUALIFY row_number() OVER (PARTITION BY digest ORDER BY id) = 1"
        if kept
        else f"SELECT *, NULL::VARCHAR AS digest FROM ({whole}) WHERE false"
    )
    old = f"SELECT * FROM ({old_rows}) WHERE digest IN (SELECT digest FROM sciga_card_members)"
    (reused,) = con.execute(f"SELECT count(*) FROM ({old})").fetchone()
    log.info("card statistics: counted %d of %d papers of %s", len(members) - reused, len(members), shard)
    todo = "SELECT id FROM sciga_card_members WHERE digest NOT IN (SELECT digest FROM old)"
    fresh = PAPER_ROWS_SQL.format(papers=f"(SELECT * FROM read_parquet({sql_string(shard)}) WHERE id IN ({todo}))")
    return f"""WITH old AS ({old}), fresh AS ({fresh})
        SELECT * EXCLUDE (pos) FROM (
            SELECT o.* EXCLUDE (digest), w.digest, w.pos FROM sciga_card_members w JOIN old o ON o.digest = w.digest
            UNION ALL BY NAME
            SELECT f.*, w.digest, w.pos FROM sciga_card_members w JOIN fresh f ON f.id = w.id
            WHERE w.digest NOT IN (SELECT digest FROM old)
        ) ORDER BY pos"""
