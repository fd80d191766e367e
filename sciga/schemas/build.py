"""Records of the build itself: what flows between the per-paper stages and the writer.

The published rows are in ``records.py``; these types say how a build gets there:

- ``FileDep``: one file a paper's result was made from (or a place that was looked at and
  held nothing). A result is reused only while every dependency still says the same.
- ``PaperWork``: one input on its way through the per-paper stages (parse, TeX, link,
  vision). It carries the paper and the build's bookkeeping around it, so the record type
  itself stays the data contract.
- ``ResultRef``: what is left of a paper once its result is in the result store: a few
  hundred bytes that travel through the shuffles instead of the paper.
- ``MedicalResult`` / ``GAResult``: small annotations produced by the model steps
  (RunInference), merged into stored results before the shards are written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from sciga.schemas.records import DeadLetter, FigureRow, GraphicalAbstract, Medical, MentionRow, Paper


@dataclass(frozen=True)
class FileDep:
    """A file a result depends on. ``size is None`` records that nothing was there."""

    uri: str
    size: Optional[int] = None
    token: Optional[str] = None  # a cheap change token: mtime, GCS generation, S3 ETag ...
    sha256: Optional[str] = None  # content hash, when the content was read
    kind: str = "file"  # "file" | "dir" (token = fingerprint of the tree's names, sizes, tokens)

    @property
    def absent(self) -> bool:
        return self.size is None and self.kind == "file"


@dataclass(frozen=True)
class ImageRef:
    """Where a figure's image bytes are: a file we read (``uri`` + ``sha256``), never the
    bytes themselves, so images do not travel through shuffles."""

    uri: str
    sha256: str
    size: int


@dataclass
class PlannedInput:
    """An input the plan stage decided to (re)compute."""

    uri: str
    key: Optional[str]  # result key; None when the page could not even be hashed
    page_sha256: Optional[str] = None


@dataclass
class PaperWork:
    """One input between the per-paper stages.

    ``paper`` is None once the input is dead-lettered (``dead`` then holds the reason);
    ``dead`` may also hold rows for a *part* of a kept paper (an unsafe e-print: the paper
    stays, its TeX recovery is skipped). ``cacheable`` is False for failures that may pass
    on a rerun (a file that disappeared), so they are retried instead of remembered.
    """

    uri: str
    key: Optional[str]
    paper: Optional[Paper] = None
    fallback_id: Optional[str] = None  # the id the file name gives, for dead letters before parsing
    planned_sha256: Optional[str] = None  # the page's hash when the plan read it
    dead: list[DeadLetter] = field(default_factory=list)
    deps: list[FileDep] = field(default_factory=list)
    cacheable: bool = True
    # Image bytes made during the build (TeX figures rasterized to PNG), by the path the
    # figure names: bytes, or the reason there are none.
    made_images: dict[str, bytes] = field(default_factory=dict)
    made_image_errors: dict[str, str] = field(default_factory=dict)
    figure_rows: list[FigureRow] = field(default_factory=list)
    mentions: list[MentionRow] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)  # annotations to wait for: "medical", "ga"
    stats: dict[str, int] = field(default_factory=dict)  # counters summed into the manifest

    @property
    def paper_id(self) -> Optional[str]:
        if self.paper is not None:
            return self.paper.id
        return next((d.paper_id for d in self.dead if d.paper_id), self.fallback_id)

    def count(self, name: str, n: int = 1) -> None:
        self.stats[name] = self.stats.get(name, 0) + n

    def live_paper(self) -> Paper:
        """The paper of an item still on its way (the stages after parsing only see those)."""
        if self.paper is None:
            raise ValueError(f"{self.uri}: a dead-lettered input reached a stage after parsing")  # a bug
        return self.paper


@dataclass
class ResultRef:
    """A paper (or a dead-lettered input) whose result is in the store, in a few fields."""

    uri: str
    key: Optional[str]  # None: nothing stored (the dead letters below are all there is)
    paper_id: Optional[str]
    is_paper: bool
    reused: bool = False
    pending: bool = False  # stored without the model steps' annotations yet
    # For choosing among copies of one paper id (dedupe) without reading the results.
    version: Optional[str] = None
    n_figures: int = 0
    n_paragraphs: int = 0
    content_sha256: Optional[str] = None
    license: Optional[str] = None  # the paper's licence URL, as parsed (the writer's policy reads it)
    dead: list[DeadLetter] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)
    # config -> [rows, Arrow bytes, image bytes] of the stored tables (``table_size``);
    # empty for results stored before sizes were recorded: the writer then reads them.
    sizes: dict[str, list[int]] = field(default_factory=dict)
    # False: made with a failure that may pass (an interrupted tool): used in this build,
    # never reused, and no shard part holding it is taken over by a later build.
    final: bool = True
    # config -> SHA-256 of the stored table (``ResultHeader.digests``); empty when nothing is stored.
    digests: dict[str, str] = field(default_factory=dict)


@dataclass
class MedicalResult:
    """Stage 2 of the medical filter for one figure row."""

    key: str
    paper_id: str
    row_id: str
    medical: Medical


@dataclass
class GAResult:
    """A manifest graphical abstract typed against the paper's figures."""

    key: str
    paper_id: str
    graphical_abstract: GraphicalAbstract
    roles: dict[str, Optional[str]]  # figure row id -> ga_role (every row of the paper)
    ga_row: FigureRow  # the GA image as a figures row, its bytes inline


@dataclass
class WriteItem:
    """One paper's share of one shard group, or one dead-letter row."""

    paper_id: str
    key: Optional[str] = None
    reused: bool = False
    dead: Optional[DeadLetter] = None
    size: Optional[list[int]] = None  # [rows, Arrow bytes, image bytes] of its stored table for this config
    final: bool = True  # ResultRef.final
    stats: dict[str, int] = field(default_factory=dict)  # the result's stage counters (papers config only)
    digest: Optional[str] = None  # SHA-256 of its stored table for this config (``ResultHeader.digests``)
    # The licence policy's word on a papers row (``schemas/licences.py``): the licence it is
    # withheld for (only its metadata is written), and the licence given by --assume-licence
    # to a paper without one. ``digest`` then names the row as written, not as stored.
    withheld: Optional[str] = None
    assumed_licence: Optional[str] = None


# ------------------------------------------------------------------ what the writer keeps on disk
# The two records below are written as JSON (``to_json``) and read back (``from_json``); the
# bytes on disk are part of the build's contract (a rerun of an older build's folder reads
# them), so ``to_json`` writes exactly the keys that were always written.


def _file_dep_json(dep: FileDep) -> dict:
    return {k: v for k, v in vars(dep).items() if v is not None}


@dataclass
class ResultHeader:
    """The header of a stored result (``header.json`` in its zip in the result store): the
    facts the plan stage needs to reuse it and the writer needs to place it, without reading
    its tables."""

    key: str
    uri: str
    paper_id: Optional[str] = None
    is_paper: bool = False
    version: Optional[str] = None
    n_figures: int = 0
    n_paragraphs: int = 0
    content_sha256: Optional[str] = None
    license: Optional[str] = None  # the paper's licence URL (written since schema 1.4.0)
    dead: list[DeadLetter] = field(default_factory=list)
    deps: list[FileDep] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)  # model steps whose annotations are still to merge
    complete: bool = False  # no pending annotations
    stats: dict[str, int] = field(default_factory=dict)
    # False: made with a failure that may pass (an interrupted tool, an I/O error); the
    # writer reads it in this build, the next build computes the paper again.
    final: bool = True
    # config -> [rows, Arrow bytes, image bytes] of the stored tables; set by the store when
    # it writes the result (``ResultStore.write``).
    sizes: dict[str, list[int]] = field(default_factory=dict)
    # config -> SHA-256 of the stored table's bytes; set by the store with ``sizes``. The key
    # names the page and the code, not the rest a result reads (its metadata sidecar, its
    # images): a paper recomputed because its sidecar changed is stored under the same key,
    # and only the digest tells its rows from the ones a previous build's shard holds.
    digests: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        out: dict = {
            "key": self.key,
            "uri": self.uri,
            "paper_id": self.paper_id,
            "is_paper": self.is_paper,
            "version": self.version,
            "n_figures": self.n_figures,
            "n_paragraphs": self.n_paragraphs,
            "content_sha256": self.content_sha256,
            "dead": [dict(vars(d)) for d in self.dead],
            "deps": [_file_dep_json(d) for d in self.deps],
            "pending": list(self.pending),
            "complete": self.complete,
            "stats": dict(sorted(self.stats.items())),
            "final": self.final,
            "sizes": {k: list(v) for k, v in self.sizes.items()},
        }
        if self.digests:  # written since 0.1.3; a header without them reads as it always did
            out["digests"] = dict(sorted(self.digests.items()))
        if self.license is not None:
            out["license"] = self.license
        return out

    @classmethod
    def from_json(cls, d: dict) -> ResultHeader:
        """A header as stored; keys an older build did not write take their defaults."""
        return cls(
            key=d["key"],
            uri=d["uri"],
            paper_id=d.get("paper_id"),
            is_paper=bool(d.get("is_paper")),
            version=d.get("version"),
            n_figures=int(d.get("n_figures") or 0),
            n_paragraphs=int(d.get("n_paragraphs") or 0),
            content_sha256=d.get("content_sha256"),
            license=d.get("license"),
            dead=[DeadLetter(**x) for x in d.get("dead") or []],
            deps=[FileDep(**x) for x in d.get("deps") or []],
            pending=list(d.get("pending") or []),
            complete=bool(d.get("complete")),
            stats=dict(d.get("stats") or {}),
            final=bool(d.get("final", True)),
            sizes={k: list(v) for k, v in (d.get("sizes") or {}).items()},
            digests={str(k): str(v) for k, v in (d.get("digests") or {}).items()},
        )


@dataclass
class PartInfo:
    """One part file the writer staged (``<parts>/<config>/<part>.parquet``) and its sidecar
    (``<part>.parquet.json``): what finalizing needs to number it into ``data/``, count the
    build and keep the results it stands on."""

    config: str
    group: int
    part: int
    path: Optional[str] = None  # None: the part holds no row and no file was written
    rows: int = 0
    bytes: int = 0
    sha256: Optional[str] = None
    counts: dict[str, int] = field(default_factory=dict)
    keys: list[str] = field(default_factory=list)  # the results in the part
    # Of the part's results and the options that shape its rows (``part_fingerprint``): a
    # later build takes a part with the same fingerprint over. None when a result in it is
    # not final; dead-letter parts are never taken over and carry none.
    fingerprint: Optional[str] = None
    reused: bool = False  # taken over from the previous build
    # [paper id, result key, table digest] of each paper whose rows the part holds, in order
    # (paper configs): a later build takes unchanged papers' rows from this part (``write/stage.py``).
    members: list[list[str]] = field(default_factory=list)
    # Row groups copied byte for byte from the previous build's shards (``parquet_splice``).
    row_groups_taken: int = 0

    def to_json(self) -> dict:
        out: dict = {"config": self.config, "group": self.group, "part": self.part}
        if self.config != "dead_letter":
            out["fingerprint"] = self.fingerprint
        out.update(
            keys=list(self.keys),
            path=self.path,
            rows=self.rows,
            bytes=self.bytes,
            sha256=self.sha256,
            counts=dict(sorted(self.counts.items())),
        )
        if self.reused:
            out["reused"] = True
        if self.members:
            out["members"] = [list(m) for m in self.members]
        if self.row_groups_taken:
            out["row_groups_taken"] = self.row_groups_taken
        return out

    @classmethod
    def from_json(cls, d: dict) -> PartInfo:
        return cls(
            config=d["config"],
            group=int(d["group"]),
            part=int(d["part"]),
            path=d.get("path"),
            rows=int(d.get("rows") or 0),
            bytes=int(d.get("bytes") or 0),
            sha256=d.get("sha256"),
            counts=dict(d.get("counts") or {}),
            keys=list(d.get("keys") or []),
            fingerprint=d.get("fingerprint"),
            reused=bool(d.get("reused")),
            members=[list(m) for m in d.get("members") or []],
            row_groups_taken=int(d.get("row_groups_taken") or 0),
        )
