"""``manifest.json``: the run's facts beside the shards (counts, versions, inputs, files, the
options as given, how it ran), typed like the result store's ``ResultHeader``.

The bytes on disk are those of ``BuildManifest.dumps()``: the JSON of ``to_json()`` with
sorted keys and an indent of 2. A manifest is read with ``from_json``, which takes what an
older builder wrote (keys it did not write take their defaults) and keeps keys it does not
know (``extra``), so reading and writing a manifest again gives the same bytes.

Adding a fact: give the dataclass a new field with a default of None, write it in
``to_json`` only when it is not None, and read it in ``from_json`` with ``d.get``; manifests
without it keep their bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional

# The fixed counts of a build, in the manifest's "counts" (also in BuildCounts).
COUNT_FIELDS = (
    "papers",
    "figures",
    "subfigures",
    "teasers",
    "mentions",
    "dead_letter",
    "dead_letter_parts",
    "images_embedded",
)


@dataclass
class ShardFile:
    """One shard of the build (``data/<config>/<split>-NNNNN-of-MMMMM.parquet``)."""

    path: str  # relative to the build folder
    rows: int
    bytes: int
    sha256: Optional[str]
    # A shard written from a part (every shard but the empty one of a config without rows)
    # also says its shard group, the part's fingerprint and its counts.
    from_part: bool = False
    group: Optional[int] = None
    fingerprint: Optional[str] = None
    counts: Optional[dict[str, int]] = None
    extra: dict[str, Any] = field(default_factory=dict)  # keys of a later builder, kept as they are

    def to_json(self) -> dict:
        out: dict[str, Any] = {**self.extra, "path": self.path, "rows": self.rows, "bytes": self.bytes}
        out["sha256"] = self.sha256
        if self.from_part:
            out.update(group=self.group, fingerprint=self.fingerprint, counts=self.counts)
        return out

    @classmethod
    def from_json(cls, d: dict) -> ShardFile:
        known = ("path", "rows", "bytes", "sha256", "group", "fingerprint", "counts")
        return cls(
            path=d["path"],
            rows=int(d.get("rows") or 0),
            bytes=int(d.get("bytes") or 0),
            sha256=d.get("sha256"),
            from_part="group" in d,
            group=d.get("group"),
            fingerprint=d.get("fingerprint"),
            counts=d.get("counts"),
            extra={k: v for k, v in d.items() if k not in known},
        )


@dataclass
class BuildManifest:
    """``manifest.json`` of a build folder."""

    schema_version: str
    builder_version: str
    inputs_count: int = 0
    inputs_sha256: Optional[str] = None
    counts: dict[str, int] = field(default_factory=dict)  # COUNT_FIELDS
    reused: int = 0  # inputs whose stored result was reused
    recomputed: int = 0
    stats: dict[str, int] = field(default_factory=dict)
    dead_letter_by_type: dict[str, int] = field(default_factory=dict)
    image_status: dict[str, int] = field(default_factory=dict)
    # papers the licence policy withheld, by licence; None for a build under policy "all"
    withheld: Optional[dict[str, int]] = None
    reconciled: bool = False
    files: dict[str, list[ShardFile]] = field(default_factory=dict)  # config -> its shards
    options: dict[str, Any] = field(default_factory=dict)  # the build's options as given
    run: dict[str, Any] = field(default_factory=dict)  # how it ran: runner, workers, seconds ...
    extra: dict[str, Any] = field(default_factory=dict)  # keys of a later builder, kept as they are

    def to_json(self) -> dict:
        out = {
            **self.extra,
            "schema_version": self.schema_version,
            "builder_version": self.builder_version,
            "inputs": {"count": self.inputs_count, "sha256": self.inputs_sha256},
            "counts": dict(self.counts),
            "incremental": {"reused": self.reused, "recomputed": self.recomputed},
            "stats": dict(sorted(self.stats.items())),
            "dead_letter_by_type": dict(sorted(self.dead_letter_by_type.items())),
            "image_status": dict(sorted(self.image_status.items())),
            "reconciled": self.reconciled,
            "files": {config: [f.to_json() for f in fs] for config, fs in self.files.items()},
            "options": self.options,
            "run": self.run,
        }
        if self.withheld is not None:
            out["withheld"] = dict(sorted(self.withheld.items()))
        return out

    def dumps(self) -> str:
        """The file's text (sorted keys, indent 2, a final newline)."""
        return json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, d: dict) -> BuildManifest:
        known = (
            "schema_version",
            "builder_version",
            "inputs",
            "counts",
            "incremental",
            "stats",
            "dead_letter_by_type",
            "image_status",
            "reconciled",
            "files",
            "options",
            "run",
            "withheld",
        )
        inputs, inc = d.get("inputs") or {}, d.get("incremental") or {}
        return cls(
            schema_version=str(d.get("schema_version") or ""),
            builder_version=str(d.get("builder_version") or ""),
            inputs_count=int(inputs.get("count") or 0),
            inputs_sha256=inputs.get("sha256"),
            counts=dict(d.get("counts") or {}),
            reused=int(inc.get("reused") or 0),
            recomputed=int(inc.get("recomputed") or 0),
            stats=dict(d.get("stats") or {}),
            dead_letter_by_type=dict(d.get("dead_letter_by_type") or {}),
            image_status=dict(d.get("image_status") or {}),
            reconciled=bool(d.get("reconciled")),
            files={c: [ShardFile.from_json(e) for e in es or []] for c, es in (d.get("files") or {}).items()},
            options=dict(d.get("options") or {}),
            run=dict(d.get("run") or {}),
            withheld=dict(d["withheld"]) if d.get("withheld") is not None else None,
            extra={k: v for k, v in d.items() if k not in known},
        )

    @classmethod
    def loads(cls, text: str) -> BuildManifest:
        return cls.from_json(json.loads(text))

    def count(self, name: str) -> int:
        """One of the build's counts (``COUNT_FIELDS``), 0 when absent."""
        return int(self.counts.get(name) or 0)

    def shard_files(self, config: str) -> list[ShardFile]:
        return list(self.files.get(config) or [])
