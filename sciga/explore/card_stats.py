"""The dataset card's per-paper statistics, kept per papers shard.

Counting the tokens of every paper's full text is most of what rendering the card costs
(0.43 s of the 0.6 s a 1,000-paper build spends finalizing, and it grows with the corpus),
and a build that rewrote a few shards counted every shard again. The rows the statistics
need (``stats.PAPER_ROWS_SQL``: counts, no text) are now kept for each papers shard in
``OUT/.sciga/card_stats/<shard sha256>-<code>.parquet``: a shard is counted once, while
its bytes and the counting code stay the same. Rows and their order are the shard's, so
the statistics are the same numbers. Local builds only (a bucket's card reads its shards,
as before).
"""

from __future__ import annotations

import hashlib
import os
from typing import Optional

from sciga.explore.stats import PAPER_ROWS_SQL, macros_sql
from sciga.transforms.common.input_files import is_local, local_path
from sciga.transforms.common.result_store import STORE_DIR

CARD_STATS = "card_stats"


def _code_key() -> str:
    """What the kept rows are a function of besides the shard: the counting SQL."""
    return hashlib.sha256("\n".join([PAPER_ROWS_SQL, *macros_sql()]).encode()).hexdigest()[:16]


def _quote(path: str) -> str:
    return "'" + path.replace("'", "''") + "'"


def kept_paper_rows(con, out_dir: str, manifest: dict) -> Optional[str]:
    """A query of the build's per-paper statistics rows (``SELECT * FROM read_parquet([...])``), the
    missing shards' rows computed and kept first; None where the card computes them from
    the shards (a remote build, a manifest without shard hashes, no papers)."""
    if not is_local(out_dir):
        return None
    entries = [e for e in (manifest.get("files") or {}).get("papers") or [] if e.get("rows")]
    if not entries or not all(e.get("sha256") and e.get("path") for e in entries):
        return None
    root = local_path(out_dir)
    folder = os.path.join(root, STORE_DIR, CARD_STATS)
    os.makedirs(folder, exist_ok=True)
    for sql in macros_sql():
        con.execute(sql)
    code = _code_key()
    keep, paths = set(), []
    for e in entries:
        name = f"{e['sha256']}-{code}.parquet"
        path = os.path.join(folder, name)
        if not os.path.exists(path):
            shard = os.path.join(root, *e["path"].split("/"))
            tmp = path + ".tmp"
            rows = PAPER_ROWS_SQL.format(papers=f"read_parquet({_quote(shard)})")
            con.execute(f"COPY ({rows}) TO {_quote(tmp)} (FORMAT parquet)")
            os.replace(tmp, path)
        keep.add(name)
        paths.append(path)
    for name in os.listdir(folder):
        if name not in keep:
            os.remove(os.path.join(folder, name))
    return "SELECT * FROM read_parquet([" + ", ".join(_quote(p) for p in paths) + "])"
