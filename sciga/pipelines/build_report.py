"""What `sciga build` prints after the summary: the dead letters (the user needs them most
when everything failed), the sentence for a build that kept no paper, and what Ctrl-C left
behind."""

from __future__ import annotations

import posixpath
from typing import Optional

MAX_SHOWN = 10


def dead_letter_lines(out_dir: str, limit: int = MAX_SHOWN) -> list[str]:
    """The build's dead letters, one line each (the first ``limit``; all of them are in the
    dead_letter config)."""
    import fsspec
    import pyarrow.parquet as pq

    from sciga.transforms.write.manifest import shard_files

    fs = fsspec.core.url_to_fs(out_dir)[0]
    rows: list[dict] = []
    for path in shard_files(out_dir, "dead_letter"):
        with fs.open(path, "rb") as f:
            # One thread: a pyarrow I/O thread still winding down when the command exits right
            # after this read made the process abort ("terminate called without an active exception").
            rows += (
                pq.ParquetFile(f, pre_buffer=False)
                .read(columns=["paper_id", "stage", "error_type", "message", "input_uri"], use_threads=False)
                .to_pylist()
            )
    if not rows:
        return []
    lines = [f"dead letters ({len(rows)}; all in {posixpath.join(out_dir, 'data', 'dead_letter')}):"]
    for r in rows[:limit]:
        who = r["paper_id"] or r["input_uri"] or "?"
        lines.append(f"  {who} [{r['stage']}/{r['error_type']}]: {r['message']}")
    if len(rows) > limit:
        lines.append(f'  ... and {len(rows) - limit} more: sciga sql {out_dir} "SELECT * FROM dead_letter"')
    return lines


def nothing_kept_sentence(inputs: int, dead: int, out_dir: str) -> Optional[str]:
    """One sentence when inputs were given but no paper came out of them."""
    if inputs <= 0:
        return None
    return (
        f"no paper was built: all {inputs} inputs failed ({dead} dead letters, listed above and in "
        f"{posixpath.join(out_dir, 'data', 'dead_letter')}); fix what they say and run the same command again."
    )


def interrupted_sentence(out_dir: str) -> str:
    """After Ctrl-C: how many papers are kept in the result store and that the same command
    resumes from them."""
    from sciga.transforms.common.result_store import ResultStore, store_root

    try:
        kept = sum(1 for _ in ResultStore(store_root(out_dir)).keys())
    except (OSError, ValueError):
        kept = 0
    results = "the result of 1 input is" if kept == 1 else f"the results of {kept} inputs are"
    return (
        f"interrupted: {results} kept in {store_root(out_dir)}; run the same command again to resume "
        "(kept results are not computed again)."
    )
