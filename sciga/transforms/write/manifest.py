"""The run's facts beside the shards: counts, versions, inputs, files. Data files never
hold wall-clock values; this manifest is where they go.

A build's counts come from the sidecars its shard groups wrote (``parts.py``), so making
the manifest never reads the shards again; ``count_build`` reads them for builds made
elsewhere."""

from __future__ import annotations

import hashlib
import posixpath
from dataclasses import dataclass, field
from typing import Optional

import fsspec
import pyarrow.parquet as pq

from sciga.schemas.arrow import CONFIGS
from sciga.schemas.build import PartInfo
from sciga.schemas.manifest import BuildManifest, ShardFile
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
    # Dead letters of a *part* of a kept paper (e.g. its e-print): the paper is counted
    # among the papers, so these are not inputs that failed.
    dead_letter_parts: int = 0
    reused: int = 0  # inputs whose stored result was reused (incremental build)
    recomputed: int = 0
    # Per-paper counters summed over the kept papers (images read, TeX figures recovered,
    # mention candidates rejected as another work's figure ...).
    stats: dict = field(default_factory=dict)
    # figures rows by image_status (schemas/images.py): why a row has its image or not.
    image_status: dict = field(default_factory=dict)
    # papers the licence policy withheld (metadata rows only), by licence (``unknown``: none)
    withheld: dict = field(default_factory=dict)

    @property
    def without_image(self) -> dict:
        """Rows a user would expect an image for that have none, by reason."""
        from sciga.schemas.images import counts_as_missing

        return {k: v for k, v in sorted(self.image_status.items()) if counts_as_missing(k) and v}

    @property
    def dead_inputs(self) -> int:
        return self.dead_letter - self.dead_letter_parts

    @property
    def reconciled(self) -> bool:
        return self.inputs == self.papers + self.dead_inputs


def count_build(out_dir: str) -> tuple[BuildCounts, dict[str, list[ShardFile]]]:
    """Counts read back from the shards themselves (footers and a few narrow columns)."""
    fs = _open(out_dir)
    counts = BuildCounts()
    files: dict[str, list[ShardFile]] = {}
    for config in CONFIGS:
        entries = []
        for path in shard_files(out_dir, config):
            with fs.open(path, "rb") as f:
                data = f.read()
            with fs.open(path, "rb") as f:
                pf = pq.ParquetFile(f)
                n = pf.metadata.num_rows
                if config == "figures" and n:
                    kinds = pf.read(columns=["kind"]).column("kind").to_pylist()
                    counts.figures += sum(1 for k in kinds if k == "figure")
                    counts.subfigures += sum(1 for k in kinds if k == "subfigure")
                    counts.images_embedded += n - _null_count(pf, "image.bytes")
                    if "image_status" in pf.schema_arrow.names:
                        for st in pf.read(columns=["image_status"]).column("image_status").to_pylist():
                            if st is not None:  # a shard written by hand may leave it empty
                                counts.image_status[st] = counts.image_status.get(st, 0) + 1
                elif config == "papers" and n:
                    t = pf.read(columns=["teaser"])
                    counts.teasers += sum(len(x or []) for x in t.column("teaser").to_pylist())
                    if "withheld" in pf.schema_arrow.names:
                        for w in pf.read(columns=["withheld"]).column("withheld").to_pylist():
                            if w is not None:
                                counts.withheld[w] = counts.withheld.get(w, 0) + 1
                elif config == "dead_letter" and n:
                    cols = ["error_type"] + (["scope"] if "scope" in pf.schema_arrow.names else [])
                    t = pf.read(columns=cols)
                    for e in t.column("error_type").to_pylist():
                        counts.dead_letter_by_type[e] = counts.dead_letter_by_type.get(e, 0) + 1
                    if "scope" in cols:
                        counts.dead_letter_parts += sum(1 for x in t.column("scope").to_pylist() if x == "part")
            entries.append(
                ShardFile(
                    path=posixpath.relpath(path, fsspec.core.url_to_fs(out_dir)[1]),
                    rows=n,
                    bytes=len(data),
                    sha256=hashlib.sha256(data).hexdigest(),
                )
            )
            if config == "papers":
                counts.papers += n
            elif config == "mentions":
                counts.mentions += n
            elif config == "dead_letter":
                counts.dead_letter += n
        files[config] = entries
    return counts, files


def _null_count(pf, column_path: str) -> int:
    """Nulls of a leaf column from the row-group statistics (no data read)."""
    md = pf.metadata
    idx = next((i for i in range(md.num_columns) if md.schema.column(i).path == column_path), None)
    if idx is None:
        return pf.metadata.num_rows
    total = 0
    for g in range(md.num_row_groups):
        st = md.row_group(g).column(idx).statistics
        if st is None or not st.has_null_count:
            return pf.read(columns=[column_path.split(".")[0]]).column(0).to_pylist().count(None)
        total += st.null_count
    return total


def counts_from_parts(parts: list[PartInfo]) -> BuildCounts:
    """Counts from the sidecars of the part files a build wrote."""
    c = BuildCounts()
    for info in parts:
        cfg, n, k = info.config, info.rows, info.counts
        if cfg == "papers":
            c.papers += n
            c.teasers += k.get("teasers", 0)
            c.reused += k.get("reused", 0)
            c.recomputed += k.get("recomputed", 0)
            for name, v in k.items():
                if name.startswith("stat:"):
                    c.stats[name[5:]] = c.stats.get(name[5:], 0) + v
                elif name.startswith("withheld:"):
                    w = name[len("withheld:") :]
                    c.withheld[w] = c.withheld.get(w, 0) + v
        elif cfg == "figures":
            c.figures += k.get("figures", 0)
            c.subfigures += k.get("subfigures", 0)
            c.images_embedded += k.get("images_embedded", 0)
            for name, v in k.items():
                if name.startswith("image_status:"):
                    st = name[len("image_status:") :]
                    c.image_status[st] = c.image_status.get(st, 0) + v
        elif cfg == "mentions":
            c.mentions += n
        elif cfg == "dead_letter":
            c.dead_letter += n
            c.dead_letter_parts += k.get("dead_part", 0)
            c.reused += k.get("reused", 0)
            c.recomputed += k.get("recomputed", 0)
            for name, v in k.items():
                if name.startswith("type:"):
                    t = name[5:]
                    c.dead_letter_by_type[t] = c.dead_letter_by_type.get(t, 0) + v
    return c


def counts_from_manifest(manifest: BuildManifest) -> BuildCounts:
    """The counts a manifest holds (a build finalized by its job, read back by the launcher)."""
    c = manifest.count
    return BuildCounts(
        inputs=manifest.inputs_count,
        papers=c("papers"),
        figures=c("figures"),
        subfigures=c("subfigures"),
        teasers=c("teasers"),
        mentions=c("mentions"),
        dead_letter=c("dead_letter"),
        images_embedded=c("images_embedded"),
        dead_letter_by_type=dict(manifest.dead_letter_by_type),
        dead_letter_parts=c("dead_letter_parts"),
        reused=manifest.reused,
        recomputed=manifest.recomputed,
        stats=dict(manifest.stats),
        image_status=dict(manifest.image_status),
        withheld=dict(manifest.withheld or {}),
    )


def write_manifest(
    out_dir: str,
    counts: BuildCounts,
    files: dict[str, list[ShardFile]],
    inputs_hash: str,
    options: dict,
    run: Optional[dict] = None,
) -> BuildManifest:
    manifest = BuildManifest(
        schema_version=SCHEMA_VERSION,
        builder_version=BUILDER_VERSION,
        inputs_count=counts.inputs,
        inputs_sha256=inputs_hash,
        counts={
            "papers": counts.papers,
            "figures": counts.figures,
            "subfigures": counts.subfigures,
            "teasers": counts.teasers,
            "mentions": counts.mentions,
            "dead_letter": counts.dead_letter,
            "dead_letter_parts": counts.dead_letter_parts,
            "images_embedded": counts.images_embedded,
        },
        reused=counts.reused,
        recomputed=counts.recomputed,
        stats=dict(counts.stats),
        dead_letter_by_type=dict(counts.dead_letter_by_type),
        image_status=dict(counts.image_status),
        withheld=dict(sorted(counts.withheld.items())) if options.get("licences", "all") != "all" else None,
        reconciled=counts.reconciled,
        files=files,
        options=options,
        run=run or {},
    )
    fs, root = fsspec.core.url_to_fs(out_dir)
    with fs.open(posixpath.join(root, MANIFEST), "w") as f:
        f.write(manifest.dumps())
    return manifest


def read_manifest(out_dir: str) -> BuildManifest:
    fs, root = fsspec.core.url_to_fs(out_dir)
    with fs.open(posixpath.join(root, MANIFEST), "r") as f:
        return BuildManifest.loads(f.read())


def image_lines(counts: BuildCounts) -> list[str]:
    """``figures without an image: N of M`` with a count per reason, and the images left
    out on request; nothing for a build without figure rows."""
    from sciga.schemas.images import BY_DESIGN, ON_REQUEST

    if not counts.image_status:
        return []
    missing = counts.without_image
    expected = sum(v for k, v in counts.image_status.items() if k not in BY_DESIGN)
    n = sum(missing.values())
    line = f"  figures without an image: {n} of {expected}"
    if missing:
        line += "  (" + ", ".join(f"{k}: {v}" for k, v in missing.items()) + "; see image_status in the figures config)"
    lines = [line]
    left_out = sum(counts.image_status.get(k, 0) for k in ON_REQUEST)
    if left_out:
        lines.append(f"  images left out: {left_out}  (--no-images)")
    return lines


def withheld_lines(counts: BuildCounts) -> list[str]:
    """``withheld (licence): N`` by licence, with what to do about it; nothing when the
    licence policy withheld no paper."""
    if not counts.withheld:
        return []
    n = sum(counts.withheld.values())
    lines = [f"  withheld        {n:>8}  (licence policy: metadata rows only, papers.withheld says why)"]
    lines += [f"    {k}: {v}" for k, v in sorted(counts.withheld.items(), key=lambda kv: (-kv[1], kv[0]))]
    if counts.withheld.get("unknown"):
        lines.append(
            "    unknown: pages with no licence; give one in the sidecar's license field, "
            "or --assume-licence URL for pages you own"
        )
    return lines


def summary_text(counts: BuildCounts, out_dir: str, seconds: Optional[float] = None) -> str:
    lines = [
        f"sciga build -> {out_dir}",
        f"  papers          {counts.papers:>8}",
        f"  figures         {counts.figures:>8}",
        f"  subfigures      {counts.subfigures:>8}",
        f"  teasers         {counts.teasers:>8}",
        f"  mentions        {counts.mentions:>8}",
        f"  images embedded {counts.images_embedded:>8}",
    ]
    lines += image_lines(counts)
    lines += [
        f"  dead-lettered   {counts.dead_letter:>8}"
        + (
            f"  ({', '.join(f'{k}: {v}' for k, v in sorted(counts.dead_letter_by_type.items()))})"
            if counts.dead_letter
            else ""
        ),
    ]
    if counts.dead_letter_parts:
        lines.append(f"    of which parts {counts.dead_letter_parts:>5}  (the paper is kept; only that part failed)")
    lines.append(
        f"  inputs          {counts.inputs:>8}  "
        + (
            "(reconciled: inputs = papers + dead-lettered inputs)"
            if counts.reconciled
            else "(NOT reconciled: see manifest.json)"
        )
    )
    lines += withheld_lines(counts)
    if counts.reused:
        lines.append(
            f"  reused          {counts.reused:>8}  (unchanged since the last build; recomputed {counts.recomputed})"
        )
    if seconds is not None:
        lines.append(f"  took            {seconds:>7.1f}s")
    return "\n".join(lines)
