"""Beam wrapper of the sharded Parquet writer."""
from __future__ import annotations

import posixpath

import apache_beam as beam
import fsspec

from sciga.transforms.write.parquet_shards import (
    DEFAULT_ROWS_PER_SHARD,
    empty_table_bytes,
    paper_key,
    shard_count,
    shard_name,
    shard_of,
    table_bytes,
)


def _write(path: str, data: bytes) -> None:
    fs, p = fsspec.core.url_to_fs(path)
    fs.makedirs(posixpath.dirname(p), exist_ok=True)
    tmp = p + ".inprogress"
    with fs.open(tmp, "wb") as f:
        f.write(data)
    fs.mv(tmp, p)


class _WriteShard(beam.DoFn):
    def __init__(self, config: str, out_dir: str):
        self.config = config
        self.out_dir = out_dir

    def process(self, element, n_shards):
        index, rows = element
        path = posixpath.join(self.out_dir, "data", self.config, shard_name(index, n_shards))
        _write(path, table_bytes(self.config, rows))
        yield path


class _WriteMissingShards(beam.DoFn):
    """Shards no paper hashed into still exist, empty and typed: ``-of-M`` always means M
    files, and a config with no rows at all still has one shard readers can open."""

    def __init__(self, config: str, out_dir: str):
        self.config = config
        self.out_dir = out_dir

    def process(self, n_shards, present):
        have = set(present)
        for index in range(n_shards):
            if index in have:
                continue
            path = posixpath.join(self.out_dir, "data", self.config, shard_name(index, n_shards))
            _write(path, empty_table_bytes(self.config))
            yield path


class WriteShards(beam.PTransform):
    """PCollection[dict rows of one config] -> Parquet shards under ``out_dir/data/<config>``."""

    def __init__(self, config: str, out_dir: str, rows_per_shard: int | None = None):
        super().__init__(label=f"Write[{config}]")
        self.config = config
        self.out_dir = out_dir
        self.rows_per_shard = rows_per_shard or DEFAULT_ROWS_PER_SHARD[config]

    def expand(self, rows):
        config, rps = self.config, self.rows_per_shard
        n = rows | "Count" >> beam.combiners.Count.Globally() | "Shards" >> beam.Map(shard_count, rps)
        n_side = beam.pvalue.AsSingleton(n)
        grouped = (
            rows
            | "Key" >> beam.Map(lambda r, k: (shard_of(paper_key(config, r), k), r), k=n_side)
            | "Group" >> beam.GroupByKey()
        )
        written = grouped | "WriteShard" >> beam.ParDo(_WriteShard(config, self.out_dir), n_shards=n_side)
        present = grouped | "Indices" >> beam.Keys() | "AllIndices" >> beam.combiners.ToList()
        missing = n | "Missing" >> beam.ParDo(_WriteMissingShards(config, self.out_dir),
                                             present=beam.pvalue.AsSingleton(present))
        return (written, missing) | "Files" >> beam.Flatten()
