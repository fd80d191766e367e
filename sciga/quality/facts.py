"""File-level facts of a build as flat tables: shards, manifest counts, the build row, images.

These are the checks that need Python rather than SQL (Parquet footers, file hashes, the
manifest, image decoders). Each function returns a pandas DataFrame with a ``record``
column that names the thing a row is about, so a failed expectation can cite examples.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Optional

import fsspec
import pandas as pd
import pyarrow.parquet as pq

from sciga.quality.images import check_image
from sciga.schemas.arrow import CONFIGS, SCHEMAS
from sciga.transforms.write.manifest import MANIFEST, shard_files
from sciga.transforms.write.shard_names import SHARD_RE


def read_manifest(out_dir: str) -> tuple[Optional[dict], Optional[str]]:
    """(manifest, problem): the manifest or None with one sentence saying why."""
    fs, root = fsspec.core.url_to_fs(out_dir)
    path = posixpath.join(root, MANIFEST)
    if not fs.exists(path):
        return None, f"{MANIFEST} is missing from {out_dir}"
    try:
        with fs.open(path, "r") as f:
            return json.load(f), None
    except (ValueError, OSError) as e:
        return None, f"{MANIFEST} in {out_dir} is not readable JSON ({e})"


def _sha256(fs, path: str) -> tuple[str, int]:
    h = hashlib.sha256()
    n = 0
    with fs.open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
            n += len(chunk)
    return h.hexdigest(), n


def shards_table(out_dir: str, manifest: Optional[dict]) -> pd.DataFrame:
    """One row per shard on disk or listed in the manifest."""
    fs, root = fsspec.core.url_to_fs(out_dir)
    listed = {}
    for config, entries in ((manifest or {}).get("files") or {}).items():
        for e in entries:
            listed[e["path"]] = (config, e)
    on_disk = {}
    for config in CONFIGS:
        for path in shard_files(out_dir, config):
            on_disk[posixpath.relpath(path, root)] = (config, path)

    def one(rel: str) -> dict:
        config = (on_disk.get(rel) or listed.get(rel))[0]
        row = {
            "record": rel,
            "config": config,
            "on_disk": rel in on_disk,
            "listed": rel in listed,
            "name_ok": bool(SHARD_RE.match(posixpath.basename(rel))) and rel.startswith(f"data/{config}/"),
            "schema_version": None,
            "config_meta": None,
            "schema_matches": False,
            "rows": None,
            "sha256_matches": False,
            "rows_match": False,
            "readable": False,
        }
        if rel in on_disk:
            path = on_disk[rel][1]
            digest, _ = _sha256(fs, path)
            try:
                with fs.open(path, "rb") as f:
                    pf = pq.ParquetFile(f)
                    schema = pf.schema_arrow
                    meta = schema.metadata or {}
                    row["rows"] = pf.metadata.num_rows
                row["readable"] = True
                row["schema_version"] = (meta.get(b"sciga.schema_version") or b"").decode() or None
                row["config_meta"] = (meta.get(b"sciga.config") or b"").decode() or None
                row["schema_matches"] = schema.remove_metadata().equals(SCHEMAS[config].remove_metadata())
            except Exception:  # noqa: BLE001 - an unreadable shard is a finding
                pass
            if rel in listed:
                entry = listed[rel][1]
                row["sha256_matches"] = entry.get("sha256") == digest
                row["rows_match"] = entry.get("rows") == row["rows"]
        return row

    names = sorted(set(on_disk) | set(listed))
    with ThreadPoolExecutor(max_workers=4) as pool:
        rows = list(pool.map(one, names))
    return pd.DataFrame(
        rows,
        columns=[
            "record",
            "config",
            "on_disk",
            "listed",
            "name_ok",
            "readable",
            "schema_version",
            "config_meta",
            "schema_matches",
            "rows",
            "sha256_matches",
            "rows_match",
        ],
    )


COUNT_METRICS = ("papers", "figures", "subfigures", "teasers", "mentions", "dead_letter", "images_embedded")


def counts_table(manifest: Optional[dict], actual: dict) -> pd.DataFrame:
    """Manifest counts next to the counts read from the shards."""
    counts = (manifest or {}).get("counts") or {}
    rows = [{"record": m, "manifest": counts.get(m), "actual": actual.get(m)} for m in COUNT_METRICS]
    inputs = ((manifest or {}).get("inputs") or {}).get("count")
    # A dead letter of a part of a kept paper (scope "part": its e-print, say) is not a lost input.
    dead_inputs = actual.get("dead_letter_inputs", actual.get("dead_letter")) or 0
    rows.append(
        {
            "record": "inputs (= papers + dead-lettered inputs)",
            "manifest": inputs,
            "actual": (actual.get("papers") or 0) + dead_inputs,
        }
    )
    df = pd.DataFrame(rows, columns=["record", "manifest", "actual"])
    return df.astype({"manifest": "Int64", "actual": "Int64"})


def build_table(manifest: Optional[dict], actual: dict) -> pd.DataFrame:
    """One row about the build as a whole: its schema version and dead-letter rate."""
    dead = actual.get("dead_letter_inputs", actual.get("dead_letter")) or 0
    inputs = ((manifest or {}).get("inputs") or {}).get("count")
    if not inputs:
        inputs = (actual.get("papers") or 0) + dead
    rate = dead / inputs if inputs else 0.0
    return pd.DataFrame(
        [
            {
                "record": MANIFEST,
                "schema_version": (manifest or {}).get("schema_version"),
                "builder_version": (manifest or {}).get("builder_version"),
                "inputs": inputs,
                "dead_letter": dead,
                "dead_letter_rate": rate,
            }
        ]
    )


def _check_shard(args) -> list[tuple]:
    """One figures shard -> (id, kind, error, decoded w, decoded h, recorded w, recorded h) per
    embedded image. Runs in a worker process: the shard is read there, so image bytes are
    never pickled between processes."""
    path, protocol, level, max_pixels = args
    fs = fsspec.filesystem(protocol)
    out: list = []
    with fs.open(path, "rb") as f:
        pf = pq.ParquetFile(f)
        names = set(pf.schema_arrow.names)
        if not {"id", "image"} <= names:
            return out
        cols = [c for c in ("id", "image", "image_kind", "width", "height") if c in names]
        for batch in pf.iter_batches(batch_size=256, columns=cols):
            d = batch.to_pydict()
            n = batch.num_rows
            kinds = d.get("image_kind") or [None] * n
            ws = d.get("width") or [None] * n
            hs = d.get("height") or [None] * n
            for i in range(n):
                img = d["image"][i]
                data = img.get("bytes") if img else None
                if data is None:
                    continue
                dw, dh, err = check_image(data, kinds[i], level, max_pixels)
                out.append((d["id"][i], kinds[i], err, dw, dh, ws[i], hs[i]))
    return out


IMAGE_COLUMNS = ["record", "image_kind", "decode_error", "decoded_width", "decoded_height", "width", "height"]


def _image_frame(rows: list) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=IMAGE_COLUMNS)
    return df.astype({"decoded_width": "Int64", "decoded_height": "Int64", "width": "Int64", "height": "Int64"})


def _checked_shards(jobs: list, workers: int) -> Iterator[list[tuple]]:
    """Each figures shard's image facts, in shard order. With ``workers`` > 1, worker
    processes (started fresh, not forked from this process and its memory) check a few shards
    ahead of the one being yielded, never all of them at once."""
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            yield _check_shard(job)
        return
    import multiprocessing
    from collections import deque
    from concurrent.futures import ProcessPoolExecutor

    ahead = 2 * workers
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        pending: deque = deque()
        for job in jobs:
            pending.append(pool.submit(_check_shard, job))
            if len(pending) >= ahead:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def image_frames(
    out_dir: str, level: str = "decode", max_pixels: Optional[int] = None, workers: int = 1, batch_rows: int = 100_000
) -> Iterator[pd.DataFrame]:
    """One row per embedded image (did it decode, and to which size), in consecutive frames of
    at most ``batch_rows`` rows, in shard order; at least one (empty) frame."""
    from sciga.transforms.vision.defaults import DEFAULT_MAX_PIXELS

    rows: list = []
    yielded = False
    if level != "none":
        fs, _ = fsspec.core.url_to_fs(out_dir)
        protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
        jobs = [(p, protocol, level, max_pixels or DEFAULT_MAX_PIXELS) for p in shard_files(out_dir, "figures")]
        for part in _checked_shards(jobs, workers):
            rows.extend(part)
            while len(rows) >= batch_rows:
                yield _image_frame(rows[:batch_rows])
                rows, yielded = rows[batch_rows:], True
    if rows or not yielded:
        yield _image_frame(rows)
