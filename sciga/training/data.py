"""Read a build's Parquet shards for the baselines, streaming.

Two passes, neither of which loads a config whole:

* ``load_examples`` reads the ``figures`` config without its image column (a few short
  string columns) and the ``papers`` config batch by batch, and keeps one small text-only
  :class:`~sciga.training.ground_truth.Example` per selected paper (abstract, cleaned
  captions, ids, GT).
* ``iter_example_images`` streams the ``figures`` config's image bytes row group by row
  group, filtered to the wanted papers (shards are sorted by paper id, so Parquet
  statistics skip the rest), and yields each paper's images as soon as its rows are read.
  Only one paper's images are held at a time.

The data version of a build (schema version, builder version, inputs hash from
``manifest.json``) goes into every model file and results table.
"""

from __future__ import annotations

import hashlib
import json
import logging
import posixpath
from collections.abc import Iterable, Iterator, Sequence
from typing import Optional

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from sciga.training.ground_truth import Example, build_example, shapes_example
from sciga.training.splits import DEFAULT_RATIOS, DEFAULT_SALT, in_experiment_subset, split_of

log = logging.getLogger("sciga.training.data")

PAPER_COLUMNS = [
    "id",
    "title",
    "abstract",
    "primary_category",
    "subjects",
    "figures",
    "teaser",
    "graphical_abstract",
    "sections",
]
FIGURE_META_COLUMNS = [
    "id",
    "paper_id",
    "parent_id",
    "kind",
    "image_kind",
    "image_error",
    "image_status",
    "width",
    "ga_role",
    "is_teaser",
]


class DataError(Exception):
    """The build folder cannot be used; the message says what to do."""


_CHECKED: set[str] = set()


def _check_location(data_dir: str) -> None:
    """A missing bucket or no permission (gs://, s3://) as a DataError sentence, once per folder."""
    from sciga.transforms.common.storage import StorageError, check_location

    if data_dir in _CHECKED:
        return
    try:
        check_location(data_dir)
    except StorageError as e:
        raise DataError(f"--data {data_dir}: {e}") from None
    _CHECKED.add(data_dir)


def shard_paths(data_dir: str, config: str) -> list[str]:
    _check_location(data_dir)
    fs, root = fsspec.core.url_to_fs(data_dir)
    d = posixpath.join(root, "data", config)
    if not fs.isdir(d):
        raise DataError(f"{data_dir} has no data/{config}/ shards; point --data at the output folder of `sciga build`.")
    files = sorted(p for p in fs.ls(d, detail=False) if p.endswith(".parquet"))
    if not files:
        raise DataError(f"{data_dir}/data/{config}/ holds no .parquet shards; run `sciga build` into it first.")
    return files


def _dataset(data_dir: str, config: str) -> ds.Dataset:
    from fsspec.implementations.local import LocalFileSystem as FsspecLocal
    from pyarrow.fs import FSSpecHandler, LocalFileSystem, PyFileSystem

    fs, _ = fsspec.core.url_to_fs(data_dir)
    files = shard_paths(data_dir, config)
    afs = LocalFileSystem() if isinstance(fs, FsspecLocal) else PyFileSystem(FSSpecHandler(fs))
    return ds.dataset(files, format="parquet", filesystem=afs)


def _existing(dataset: ds.Dataset, columns: Sequence[str]) -> list[str]:
    names = set(dataset.schema.names)
    return [c for c in columns if c in names]


def iter_rows(data_dir: str, config: str, columns: Sequence[str], batch_size: int = 512, filter=None) -> Iterator[dict]:
    """Rows of one config as dicts, one record batch at a time, in shard order. Without a
    ``filter``, shard by shard with no read-ahead: a dataset scan reads several shards and
    batches ahead, which held 1.9 GB at peak for the papers of 20,000 pages (0.35 GB so)."""
    if filter is not None:
        dset = _dataset(data_dir, config)
        for batch in dset.to_batches(
            columns=_existing(dset, columns),
            filter=filter,
            batch_size=batch_size,
            use_threads=False,
            fragment_readahead=1,
            batch_readahead=1,
        ):
            yield from batch.to_pylist()
        return
    fs, _ = fsspec.core.url_to_fs(data_dir)
    wanted: Optional[list[str]] = None
    for path in shard_paths(data_dir, config):
        with fs.open(path, "rb") as fh:
            pf = pq.ParquetFile(fh)
            names = set(pf.schema_arrow.names)
            if wanted is None:  # the columns of the first shard, as the dataset's schema was
                wanted = [c for c in columns if c in names]
            present = [c for c in wanted if c in names]
            absent = dict.fromkeys(c for c in wanted if c not in names)
            for batch in pf.iter_batches(batch_size=batch_size, columns=present, use_threads=False):
                for row in batch.to_pylist():
                    yield {**row, **absent} if absent else row


def load_examples(
    data_dir: str,
    *,
    splits: Optional[Iterable[str]] = None,
    min_candidates: int = 2,
    category_prefix: Optional[str] = None,
    ratios: Sequence[float] = DEFAULT_RATIOS,
    salt: str = DEFAULT_SALT,
    subset_only: bool = True,
) -> list[Example]:
    """Examples of the papers in ``splits`` (all when None), in paper-id order."""
    wanted = set(splits) if splits else None
    fig_rows: dict[str, list[dict]] = {}
    for row in iter_rows(data_dir, "figures", FIGURE_META_COLUMNS, batch_size=4096):
        # Only the rows an example is made of. Every figures row held as a dict took the
        # loading of the 145,000-page build (2.0 million rows, most of them text pages'
        # figures without an image) to a 1,505 MB peak; 470 MB so (issue 47).
        if not shapes_example(row):
            continue
        pid = row.get("paper_id") or ""
        if wanted is not None and split_of(pid, ratios, salt) not in wanted:
            continue
        fig_rows.setdefault(pid, []).append(row)
    out: list[Example] = []
    seen = skipped = 0
    for paper in iter_rows(data_dir, "papers", PAPER_COLUMNS, batch_size=256):
        pid = paper["id"]
        split = split_of(pid, ratios, salt)
        if wanted is not None and split not in wanted:
            continue
        seen += 1
        ex = build_example(paper, fig_rows.pop(pid, []))
        ex.split = split
        if subset_only and not in_experiment_subset(ex, min_candidates, category_prefix):
            skipped += 1
            continue
        out.append(ex)
    out.sort(key=lambda e: e.paper_id)
    log.info(
        "%d papers read, %d in the experiment subset, %d without a (de-facto) GA or with too few figures",
        seen,
        len(out),
        skipped,
    )
    return out


def iter_example_images(
    data_dir: str, examples: Sequence[Example], batch_size: int = 64
) -> Iterator[tuple[Example, dict[str, bytes]]]:
    """(example, {unit id: image bytes}) for each example that has images, streamed in
    shard order. Images whose bytes are missing are simply absent from the dict."""
    by_pid = {e.paper_id: e for e in examples}
    if not by_pid:
        return
    wanted_units = {u.id for e in examples for c in e.candidates for u in c.units}
    dset = _dataset(data_dir, "figures")
    if "image" not in dset.schema.names:
        raise DataError(f"{data_dir} has no image column in its figures config; rebuild without --no-images.")
    flt = ds.field("paper_id").isin(sorted(by_pid))
    current: Optional[str] = None
    images: dict[str, bytes] = {}
    for batch in dset.to_batches(
        columns=["paper_id", "id", "image"], filter=flt, batch_size=batch_size, use_threads=False
    ):
        pids = batch.column("paper_id").to_pylist()
        ids = batch.column("id").to_pylist()
        img = batch.column("image")
        data = img.field("bytes") if isinstance(img, pa.StructArray) else pc.struct_field(img, "bytes")
        for i, (pid, rid) in enumerate(zip(pids, ids)):
            if pid != current:
                if current is not None:
                    yield by_pid[current], images
                current, images = pid, {}
            if rid in wanted_units:
                b = data[i].as_py()
                if b:
                    images[rid] = b
    if current is not None:
        yield by_pid[current], images


def data_version(data_dir: str) -> dict:
    """What build the data came from: the manifest's schema/builder version and inputs
    hash; without a manifest, the schema version in the shards and a hash of the shard
    names and sizes."""
    fs, root = fsspec.core.url_to_fs(data_dir)
    path = posixpath.join(root, "manifest.json")
    if fs.exists(path):
        with fs.open(path, "r") as f:
            m = json.load(f)
        return {
            "schema_version": m.get("schema_version"),
            "builder_version": m.get("builder_version"),
            "inputs_sha256": (m.get("inputs") or {}).get("sha256"),
        }
    h = hashlib.sha256()
    schema_version = None
    for config in ("papers", "figures"):
        for p in shard_paths(data_dir, config):
            h.update(f"{posixpath.basename(p)}:{fs.size(p)}\n".encode())
            if schema_version is None:
                with fs.open(p, "rb") as f:
                    md = pq.ParquetFile(f).schema_arrow.metadata or {}
                schema_version = (md.get(b"sciga.schema_version") or b"").decode() or None
    return {"schema_version": schema_version, "builder_version": None, "shards_sha256": h.hexdigest()}


def data_version_label(v: dict) -> str:
    digest = v.get("inputs_sha256") or v.get("shards_sha256") or ""
    return f"schema {v.get('schema_version')} / builder {v.get('builder_version')} / inputs {digest[:12]}"
