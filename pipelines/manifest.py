"""The run's facts beside the shards: counts, versions, inputs, files. Data files never
hold wall-clock values; this manifest is where they go."""
from __future__ import annotations

import hashlib
import json
import posixpath
from dataclasses import dataclass, field
from typing import Optional

import fsspec
import pyarrow.parquet as pq

from sciga.schemas.arrow import CONFIGS
from sciga.schemas.version import BUILDER_VERSION, SCHEMA_VERSION

MANIFEST = "manifest.json"


def shard_files(out_dir: str, config: str) -> list[str]:
    fs, root = fsspec.core.url_to_fs(out_dir)
    d = posixpath.join(root, "data", config)
    if not fs.isdir(d):
        return []
    return sorted(p for p in fs.ls(d, detail=False) if p.endswith(".parquet"))


def _open(out_dir: str):
    return fsspec.core.url_to_fs(out_dir)[0]


@dataclass
class BuildCounts:
    inputs: int = 0
    papers: int = 0
    figures: int = 0
    subfigures: int = 0
    teasers: int = 0
    mentions: int = 0
    dead_letter: int = 0
    images_embedded: int = 0
    dead_letter_by_type: dict = field(default_factory=dict)

    @property
    def reconciled(self) -> bool:
        return self.inputs == self.papers + self.dead_letter


def count_build(out_dir: str) -> tuple[BuildCounts, dict]:
    """Counts read back from the shards themselves (footers and a few narrow columns)."""
    fs = _open(out_dir)
    counts = BuildCounts()
    files: dict = {}
    for config in CONFIGS:
        entries = []
        for path in shard_files(out_dir, config):
            with fs.open(path, "rb") as f:
                data = f.read()
            with fs.open(path, "rb") as f:
                pf = pq.ParquetFile(f)
                n = pf.metadata.num_rows
                if config == "figures" and n:
                    t = pf.read(columns=["kind", "image"])
                    kinds = t.column("kind").to_pylist()
                    counts.figures += sum(1 for k in kinds if k == "figure")
                    counts.subfigures += sum(1 for k in kinds if k == "subfigure")
                    counts.images_embedded += sum(1 for im in t.column("image").to_pylist() if im and im.get("bytes"))
                elif config == "papers" and n:
                    t = pf.read(columns=["teaser"])
                    counts.teasers += sum(len(x or []) for x in t.column("teaser").to_pylist())
                elif config == "dead_letter" and n:
                    t = pf.read(columns=["error_type"])
                    for e in t.column("error_type").to_pylist():
                        counts.dead_letter_by_type[e] = counts.dead_letter_by_type.get(e, 0) + 1
            entries.append({"path": posixpath.relpath(path, fsspec.core.url_to_fs(out_dir)[1]), "rows": n,
                            "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()})
            if config == "papers":
                counts.papers += n
            elif config == "mentions":
                counts.mentions += n
            elif config == "dead_letter":
                counts.dead_letter += n
        files[config] = entries
    return counts, files


def write_manifest(out_dir: str, counts: BuildCounts, files: dict, inputs_hash: str, options: dict,
                   run: Optional[dict] = None) -> dict:
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "builder_version": BUILDER_VERSION,
        "inputs": {"count": counts.inputs, "sha256": inputs_hash},
        "counts": {
            "papers": counts.papers,
            "figures": counts.figures,
            "subfigures": counts.subfigures,
            "teasers": counts.teasers,
            "mentions": counts.mentions,
            "dead_letter": counts.dead_letter,
            "images_embedded": counts.images_embedded,
        },
        "dead_letter_by_type": dict(sorted(counts.dead_letter_by_type.items())),
        "reconciled": counts.reconciled,
        "files": files,
        "options": options,
        "run": run or {},
    }
    fs, root = fsspec.core.url_to_fs(out_dir)
    with fs.open(posixpath.join(root, MANIFEST), "w") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write("\n")
    return manifest


def read_manifest(out_dir: str) -> dict:
    fs, root = fsspec.core.url_to_fs(out_dir)
    with fs.open(posixpath.join(root, MANIFEST), "r") as f:
        return json.load(f)


def summary_text(counts: BuildCounts, out_dir: str, seconds: Optional[float] = None) -> str:
    lines = [
        f"sciga build -> {out_dir}",
        f"  papers          {counts.papers:>8}",
        f"  figures         {counts.figures:>8}",
        f"  subfigures      {counts.subfigures:>8}",
        f"  teasers         {counts.teasers:>8}",
        f"  mentions        {counts.mentions:>8}",
        f"  images embedded {counts.images_embedded:>8}",
        f"  dead-lettered   {counts.dead_letter:>8}"
        + (f"  ({', '.join(f'{k}: {v}' for k, v in sorted(counts.dead_letter_by_type.items()))})" if counts.dead_letter else ""),
        f"  inputs          {counts.inputs:>8}  "
        + ("(reconciled: inputs = papers + dead-lettered)" if counts.reconciled else "(NOT reconciled: see manifest.json)"),
    ]
    if seconds is not None:
        lines.append(f"  took            {seconds:>7.1f}s")
    return "\n".join(lines)
