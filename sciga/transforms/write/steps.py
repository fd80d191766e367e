"""The write steps of a build: results kept, copies resolved, shard groups written.

    PaperWork ──StoreStep──> ResultRef ────┐
    reused ResultRef ──────────────────────┼─ by paper id ─> CollectStep ─> WriteItem
    MedicalResult / GAResult ──────────────┘   (one copy kept, annotations       │
                                               merged into the stored result)     │
                                            by (config, shard group) <───────────┘
                                                 -> CutStep -> PartJob (spread) -> WritePartStep
                                                                     -> part files + sidecars

Only references travel through the shuffles: a paper's rows are read from the result store
where its part is written, and its image bytes from the files the rows point at, one paper
at a time. A shard group is cut into parts from the sizes recorded in the store, and the
parts, not the groups, are spread over the workers: a small build has a handful of groups
but dozens of parts, so the last group no longer leaves one worker writing alone. The part
files land in a staging folder; the launcher numbers them and moves them into ``data/``
when the whole pipeline has succeeded (``finalize.py``).
"""

from __future__ import annotations

import json
import logging
import posixpath
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Optional

import fsspec
import pyarrow as pa

from sciga.schemas.arrow import SCHEMAS, dead_letter_row, figure_row, mention_row, paper_row, rows_table, to_table
from sciga.schemas.build import GAResult, MedicalResult, PaperWork, PartInfo, ResultHeader, ResultRef, WriteItem
from sciga.transforms.common.counters import Counter
from sciga.transforms.common.input_files import is_local, local_path
from sciga.transforms.common.progress import Progress
from sciga.transforms.common.quick_exit import arm_quick_exit
from sciga.transforms.common.result_store import (
    STORED_SCHEMAS,
    ResultStore,
    StoredResult,
    hash_file,
    table_size,
)
from sciga.transforms.common.steps import Step
from sciga.transforms.inputs.page_images import DEFAULT_MAX_IMAGE_BYTES
from sciga.transforms.write.card_rows import CardRows
from sciga.transforms.write.dedupe import duplicate_dead_letter, rank
from sciga.transforms.write.finalize import read_members
from sciga.transforms.write.layout import ShardLayout
from sciga.transforms.write.parquet_splice import Footer, Piece, SpliceError, read_footer
from sciga.transforms.write.part_writer import PartWriter, cut_parts, part_path, write_sidecar, writer_shape
from sciga.transforms.write.published_uri import publish_dead_letter_row, publish_table
from sciga.transforms.write.shard_names import SORT_KEYS

log = logging.getLogger("sciga.write")
CONFIGS_OF_A_PAPER = ("papers", "figures", "mentions")


@dataclass(frozen=True)
class WriteOptions:
    store_root: str
    parts_root: str  # staging folder of this run's part files
    layout: ShardLayout
    no_images: bool = False  # do not embed image bytes in the figures config
    max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES
    progress_dir: Optional[str] = None
    # The previous build's part files by fingerprint (a JSON map staged by the launcher),
    # so that parts of unchanged papers are taken over instead of written again.
    previous_parts: Optional[str] = None
    # The licence policy (``schemas/licences.py``): papers outside it are written as
    # metadata rows only. Applied here, not when papers are parsed, so that another policy
    # rebuilds from the stored results without computing any paper again.
    licences: str = "all"
    assume_licence: Optional[str] = None  # the licence of a paper that has none (--assume-licence)
    # The folders the build read from (``published_uri.normalize_roots``): the shards say
    # every input and image path relative to them, never the machine's absolute location.
    published_roots: tuple[str, ...] = ()


# ------------------------------------------------------------------ results into the store


def result_tables(work: PaperWork) -> dict[str, pa.Table]:
    """A finished paper as the tables the store keeps (sorted as its shards are)."""
    p = work.paper
    if p is None:
        raise RuntimeError(f"{work.uri}: a dead-lettered input has no tables to store")  # a bug: callers check
    figures = sorted((figure_row(r) for r in work.figure_rows), key=SORT_KEYS["figures"])
    mentions = sorted((mention_row(r) for r in work.mentions), key=SORT_KEYS["mentions"])
    return {
        "papers": to_table("papers", [paper_row(p)]),
        "figures": rows_table(figures, STORED_SCHEMAS["figures"]),
        "mentions": to_table("mentions", mentions),
    }


def _count_paragraphs(paper) -> int:
    return sum(len(s.paragraphs) for s in paper.sections)


def _paper_facts(work: PaperWork) -> dict:
    """What a stored header and a reference both say about the paper itself."""
    p = work.paper
    return {
        "paper_id": work.paper_id,
        "is_paper": p is not None,
        "version": p.version if p else None,
        "n_figures": len(p.figures) if p else 0,
        "n_paragraphs": _count_paragraphs(p) if p else 0,
        "content_sha256": p.provenance.content_sha256 if p else None,
        "license": p.license if p else None,
    }


def result_header(work: PaperWork) -> ResultHeader:
    """The header a paper's result is stored with."""
    if work.key is None:
        raise RuntimeError(f"{work.uri}: a result without a key cannot be stored")  # a bug: callers check
    return ResultHeader(
        key=work.key,
        uri=work.uri,
        **_paper_facts(work),
        dead=list(work.dead),
        deps=list(work.deps),
        pending=sorted(set(work.pending)),
        complete=not work.pending,
        stats=dict(sorted(work.stats.items())),
        # False: made with a failure that may pass (an interrupted tool, an I/O error); the
        # writer reads it in this build, the next build computes the paper again.
        final=work.cacheable,
    )


def ref_of(work: PaperWork, stored: Optional[ResultHeader] = None) -> ResultRef:
    """The reference to a paper's result; ``stored``: its header as the store wrote it
    (None: nothing was stored)."""
    return ResultRef(
        uri=work.uri,
        key=work.key if stored is not None else None,
        **_paper_facts(work),
        dead=list(work.dead),
        stats=dict(work.stats),
        pending=bool(work.pending),
        sizes=dict(stored.sizes) if stored is not None else {},
        digests=dict(stored.digests) if stored is not None else {},
        final=work.cacheable,
    )


class StoreStep(Step):
    """PaperWork -> ResultRef, the result written to the store (dead letters too, unless
    they may pass on a rerun)."""

    def __init__(self, options: WriteOptions):
        self.options = options
        self.progress = Progress(options.progress_dir)
        self.stored = Counter("results_stored")

    def setup(self):
        arm_quick_exit()  # every paper passes here: every local worker process sets this up
        self.store = ResultStore(self.options.store_root)

    def process(self, work: PaperWork):
        alive = work.paper is not None
        stored = None
        if work.key and (alive or work.cacheable):
            stored = self.store.write(work.key, result_header(work), result_tables(work) if alive else {})
            self.stored.inc()
        elif alive:
            raise RuntimeError(f"{work.uri}: a parsed paper has no result key")  # a bug: every paper has one
        self.progress.add(inputs=1, papers=int(alive), dead=int(not alive))
        yield ref_of(work, stored)

    def finish(self):
        self.progress.flush()


# ------------------------------------------------------------------ one paper id


def merge_annotations(result: StoredResult, annotations: Iterable) -> dict[str, pa.Table]:
    """The stored tables with the model steps' annotations applied: the GA (paper field,
    figure roles, the GA image's own row) first, then the medical classifier per row."""
    tables = dict(result.tables)
    anns = list(annotations)
    gas = [a for a in anns if isinstance(a, GAResult)]
    meds = {a.row_id: a.medical for a in anns if isinstance(a, MedicalResult)}
    if not gas and not meds:
        return tables
    rows = tables["figures"].to_pylist()
    if gas:
        ga = gas[0]
        papers = tables["papers"].to_pylist()
        from sciga.schemas.arrow import as_plain

        for p in papers:
            p["graphical_abstract"] = as_plain(ga.graphical_abstract)
        tables["papers"] = to_table("papers", papers)
        rows = [r for r in rows if r["kind"] != "graphical_abstract"]
        for r in rows:
            if r["id"] in ga.roles:
                r["ga_role"] = ga.roles[r["id"]]
        rows.append(figure_row(ga.ga_row))
    if meds:
        from sciga.schemas.arrow import as_plain

        for r in rows:
            if r["id"] in meds:
                r["medical"] = as_plain(meds[r["id"]])
    rows.sort(key=SORT_KEYS["figures"])
    tables["figures"] = rows_table(rows, STORED_SCHEMAS["figures"])
    return tables


@dataclass(frozen=True)
class LicenceShape:
    """What the licence policy does to a paper's papers row: withhold it (its licence, or
    ``unknown``), and/or fill in the licence given for papers without one."""

    withheld: Optional[str] = None
    assumed_licence: Optional[str] = None


def licence_shape(licence: Optional[str], policy: str, assume: Optional[str]) -> LicenceShape:
    """The policy's word on a paper of ``licence`` (None: it has none)."""
    from sciga.schemas.licences import withheld_reason

    assumed = assume if not licence and assume else None
    return LicenceShape(withheld_reason(policy, licence or assumed), assumed)


def shaped_digest(digest: Optional[str], shape: LicenceShape) -> Optional[str]:
    """The digest of a papers row as written: the stored table's, unless the policy changes
    the row (then a digest of both, so that parts and previous shards holding the row as it
    was are not taken for it)."""
    import hashlib

    if digest is None or (shape.withheld is None and shape.assumed_licence is None):
        return digest
    blob = f"{digest}|withheld={shape.withheld or ''}|license={shape.assumed_licence or ''}"
    return hashlib.sha256(blob.encode()).hexdigest()


# The papers columns a withheld paper keeps: its metadata, never its content.
WITHHELD_KEEPS = (
    "id",
    "version",
    "title",
    "authors",
    "published",
    "updated",
    "subjects",
    "primary_category",
    "comment",
    "journal_ref",
    "conference",
    "dois",
    "license",
    "withheld",
    "provenance",
)


def shape_papers_table(table: pa.Table, withheld: Optional[str], assumed_licence: Optional[str]) -> pa.Table:
    """A stored papers table as the policy writes it: the assumed licence filled in, and a
    withheld paper's content (abstract, sections, figures, tables, teaser, graphical
    abstract) emptied, ``withheld`` set. Column by column in Arrow (no row is converted to
    Python: the rows of a withheld paper are written without reading its text)."""
    if withheld is None and assumed_licence is None:
        return table
    n = table.num_rows
    columns = {}
    for name in table.column_names:
        col = table.column(name)
        if name == "license" and assumed_licence:
            col = pa.array([v if v else assumed_licence for v in col.to_pylist()], pa.string())
        elif withheld is not None and name == "withheld":
            col = pa.array([withheld] * n, pa.string())
        elif withheld is not None and name not in WITHHELD_KEEPS:
            kind = col.type
            col = pa.array([[]] * n, kind) if pa.types.is_list(kind) else pa.nulls(n, kind)
        columns[name] = col
    return pa.table(columns, schema=table.schema)


class CollectStep(Step):
    """(paper id, [ResultRef | MedicalResult | GAResult]) -> ((config, group), WriteItem).

    One copy of a paper id is kept (``dedupe.rank``); the others become dead letters. The
    annotations of every copy computed in this run are merged into its stored result, which
    is then complete: a later build reuses it as is."""

    def __init__(self, options: WriteOptions):
        self.options = options
        self.duplicates = Counter("duplicates_dead_lettered")

    def setup(self):
        self.store = ResultStore(self.options.store_root)

    def process(self, element):
        _, items = element
        refs = [x for x in items if isinstance(x, ResultRef)]
        anns = [x for x in items if not isinstance(x, ResultRef)]
        layout = self.options.layout
        completed = {
            ref.key: self._complete(ref.key, [a for a in anns if a.key == ref.key])
            for ref in refs
            if ref.key and ref.pending
        }
        papers = sorted(
            (r for r in refs if r.is_paper),
            key=lambda r: rank(r.version, r.n_figures, r.n_paragraphs, r.uri, r.paper_id) + (r.key or "",),
        )
        if papers:
            kept = papers[0]
            pid = kept.paper_id
            assert pid is not None, "a paper's reference names its paper"
            done = completed.get(kept.key) if kept.key else None
            sizes = done.sizes if done is not None else kept.sizes
            digests = done.digests if done is not None else kept.digests
            shape = licence_shape(kept.license, self.options.licences, self.options.assume_licence)
            for config in CONFIGS_OF_A_PAPER:
                if shape.withheld and config != "papers":
                    continue  # a withheld paper's figures, images and mentions are not written
                digest = digests.get(config)
                if config == "papers":
                    digest = shaped_digest(digest, shape)
                yield (
                    (config, layout.group_of(config, pid)),
                    WriteItem(
                        paper_id=pid,
                        key=kept.key,
                        reused=kept.reused,
                        size=sizes.get(config),
                        final=kept.final,
                        stats=dict(kept.stats) if config == "papers" else {},
                        digest=digest,
                        withheld=shape.withheld if config == "papers" else None,
                        assumed_licence=shape.assumed_licence if config == "papers" else None,
                    ),
                )
            for d in kept.dead:  # parts of the kept paper that failed (scope "part")
                yield ("dead_letter", 0), WriteItem(paper_id=pid, dead=d)
            for other in papers[1:]:
                self.duplicates.inc()
                dl = duplicate_dead_letter(
                    other.paper_id or pid,
                    other.uri,
                    other.version,
                    other.content_sha256,
                    kept.uri,
                    kept.version,
                    kept.content_sha256,
                )
                yield (
                    ("dead_letter", 0),
                    WriteItem(paper_id=other.paper_id or "", key=other.key, reused=other.reused, dead=dl),
                )
        for ref in refs:
            if ref.is_paper:
                continue
            for d in ref.dead:
                yield ("dead_letter", 0), WriteItem(paper_id=d.paper_id or "", key=ref.key, reused=ref.reused, dead=d)

    def _complete(self, key: str, anns: list) -> ResultHeader:
        res = self.store.read(key)
        if res is None:
            raise RuntimeError(f"result {key} vanished from the store while the build ran")
        header = replace(res.header, pending=[], complete=True)
        return self.store.write(key, header, merge_annotations(res, anns))


# ------------------------------------------------------------------ one shard group


def _inc(counts: dict, name: str, n: int = 1) -> None:
    counts[name] = counts.get(name, 0) + n


def _with_images(table: pa.Table, no_images: bool, max_bytes: int) -> tuple[pa.Table, int]:
    """A stored figures table -> the published one, each image's bytes read from where the
    row points (or kept inline), ``image`` null where there are no bytes and every row's
    ``image_status`` settled; returns it with the number of embedded images."""
    from sciga.schemas.build import ImageRef
    from sciga.schemas.images import UNREADABLE, settle_status
    from sciga.transforms.inputs.page_images import read_image_ref

    image = table.column("image").combine_chunks()
    if isinstance(image, pa.ChunkedArray):
        image = image.combine_chunks()
    valid = image.is_valid().to_pylist()
    # A null struct's children hold arbitrary values: only read them where it is valid.
    inline = [b if ok else None for b, ok in zip(image.field("bytes").to_pylist(), valid)]
    col = {
        name: table.column(name).to_pylist()
        for name in ("image_uri", "image_sha256", "image_size", "image_error", "image_status", "image_kind")
    }
    paths = [p if ok else None for p, ok in zip(image.field("path").to_pylist(), valid)]
    out, statuses, embedded = [], [], 0
    for i in range(table.num_rows):
        data, status = None, col["image_status"][i]
        has = inline[i] is not None or bool(col["image_sha256"][i])
        if has and not no_images:
            if inline[i] is not None:
                data = inline[i]
            else:
                try:
                    data = read_image_ref(
                        ImageRef(col["image_uri"][i], col["image_sha256"][i], col["image_size"][i]), max_bytes
                    )
                except OSError as e:
                    col["image_error"][i], status, has = str(e), UNREADABLE, False
        statuses.append(
            settle_status(
                status, has_bytes=has, image_kind=col["image_kind"][i], image_path=paths[i], no_images=no_images
            )
        )
        embedded += data is not None
        out.append(data)
    bytes_arr = pa.array(out, pa.binary())
    # `datasets` opens image.path when there are no bytes: the struct is null then.
    new_image = pa.StructArray.from_arrays(
        [bytes_arr, image.field("path")], fields=list(image.type), mask=bytes_arr.is_null()
    )
    table = table.set_column(table.schema.get_field_index("image"), "image", new_image)
    table = table.set_column(
        table.schema.get_field_index("image_error"), "image_error", pa.array(col["image_error"], pa.string())
    )
    table = table.set_column(
        table.schema.get_field_index("image_status"), "image_status", pa.array(statuses, pa.string())
    )
    return table.select(SCHEMAS["figures"].names), embedded


def _figure_counts(table: pa.Table, embedded: int) -> dict:
    kinds = table.column("kind").to_pylist()
    counts = {
        "figures": kinds.count("figure"),
        "subfigures": kinds.count("subfigure"),
        "graphical_abstracts": kinds.count("graphical_abstract"),
        "images_embedded": embedded,
    }
    for status in table.column("image_status").to_pylist():
        _inc(counts, f"image_status:{status}")
    return counts


def part_fingerprint(config: str, members: list, options: WriteOptions) -> str:
    """What a part's bytes depend on: its papers' results (their keys cover the code that
    made them and the writer's own code; their digests, what the results hold) and the
    options that shape the file."""
    import hashlib

    from sciga.schemas.version import BUILDER_VERSION, SCHEMA_VERSION

    lay = options.layout
    blob = json.dumps(
        [
            config,
            SCHEMA_VERSION,
            BUILDER_VERSION,
            options.no_images,
            options.max_image_bytes,
            lay.row_group_rows,
            lay.row_group_bytes,
            # the roots the paths are published against: another root, other path strings
            list(options.published_roots),
            [[m.paper_id, m.key, m.digest] for m in members],
        ],
        separators=(",", ":"),
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def _size_of(config: str, size: list[int], no_images: bool) -> tuple[int, int]:
    """(rows, bytes) of one paper's rows as the part cutting counts them, from the stored
    table's ``table_size`` (image files are counted by their recorded size, not read)."""
    rows, nbytes, images = size
    if config == "figures" and not no_images:
        nbytes += images
    return rows, nbytes


def _link_or_copy(src: str, dst: str, nbytes: Optional[int] = None) -> bool:
    """Make ``dst`` a copy of ``src`` (a hard link on a local disk, a server-side copy on a
    bucket); False when ``src`` is not there any more, or is not ``nbytes`` long (not the
    shard the manifest recorded)."""
    import os
    import shutil

    fs, sp = fsspec.core.url_to_fs(src)
    _, dp = fsspec.core.url_to_fs(dst)
    try:
        if nbytes is not None and fs.size(sp) != nbytes:
            return False
    except (FileNotFoundError, OSError):
        return False
    fs.makedirs(posixpath.dirname(dp), exist_ok=True)
    try:
        if "://" not in src:
            try:
                os.link(sp, dp)
            except OSError:
                shutil.copyfile(sp, dp)
        else:
            fs.copy(sp, dp)
    except (FileNotFoundError, OSError):
        return False
    return True


def read_stored_table(store: ResultStore, it: WriteItem, config: str) -> pa.Table:
    """The stored table of ``config`` for a write item (its paper's result must be there)."""
    if it.key is None:
        raise RuntimeError(f"{it.paper_id}: a write item of a paper has no result key")  # a bug: every paper has one
    table = store.read_table(it.key, config)
    if table is None:
        raise RuntimeError(f"result {it.key} of paper {it.paper_id} is missing from the store")
    return table


@dataclass(frozen=True)
class _Member:
    """A (paper id, result key, table digest) of a recorded member list, as
    ``part_fingerprint`` reads it."""

    paper_id: str
    key: str
    digest: str


PAPER_ID_COLUMN = {"papers": "id", "figures": "paper_id", "mentions": "paper_id"}
# What a part's counts read of a row group taken as its bytes (``_count_rows``): its paper
# ids and the columns the counts come from (of ``image``, its path alone: whether the
# struct is null, not the bytes).
COUNT_COLUMNS = {
    "papers": ["id", "teaser", "graphical_abstract", "withheld"],
    "figures": ["paper_id", "kind", "image_status", "image.path"],
    "mentions": ["paper_id"],
}


class ShardRows:
    """One paper's rows at a time from a previous build's shard, read forward row group by
    row group (a shard's papers are in the order its part's members were, which is the
    order a part's members are written in, and a paper's rows never span two row groups),
    so at most one row group is held. A shard that is not the size the manifest recorded
    gives no rows: its papers are written from the store."""

    def __init__(self, uri: str, nbytes: int, config: str, sha256: Optional[str] = None):
        self.uri = uri
        self.nbytes = nbytes
        self.sha256 = sha256  # recorded by the manifest: bytes are taken only from that file
        self.config = config
        self.column = PAPER_ID_COLUMN[config]
        self._file = None
        self._pf = None
        self._next = 0
        self._table: Optional[pa.Table] = None
        self._ids: list[str] = []
        self._broken = False
        self._footer: Optional[Footer] = None  # read for taking row groups as they are
        self._no_taking = not is_local(uri) or not sha256
        self._scan = 0  # the next row group looked at for taking

    def _open(self) -> bool:
        import pyarrow.parquet as pq

        if self._broken:
            return False
        if self._pf is None:
            try:
                fs, p = fsspec.core.url_to_fs(self.uri)
                if fs.size(p) != self.nbytes:
                    raise OSError(f"{self.uri} is not the shard the manifest recorded")
                if is_local(self.uri):  # Arrow's own file I/O: 3x faster than a Python file object
                    self._pf = pq.ParquetFile(local_path(self.uri))
                else:
                    self._file = fs.open(p, "rb")
                    self._pf = pq.ParquetFile(self._file)
            except (OSError, ValueError) as e:
                log.warning("rewriting from the result store instead of %s: %s", self.uri, e)
                self._broken = True
        return self._pf is not None

    def rows_of(self, paper_id: str) -> Optional[pa.Table]:
        if not self._open():
            return None
        while True:
            if self._ids and self._ids[-1] >= paper_id:
                lo, hi = bisect_left(self._ids, paper_id), bisect_right(self._ids, paper_id)
                return self._table.slice(lo, hi - lo) if hi > lo and self._table is not None else None
            if self._pf is None or self._next >= self._pf.num_row_groups:
                return None
            try:
                self._table = self._pf.read_row_group(self._next)
                self._ids = self._table.column(self.column).to_pylist()
            except (OSError, ValueError, KeyError) as e:  # damaged since: the rest from the store
                log.warning("rewriting from the result store instead of %s: %s", self.uri, e)
                self._broken, self._pf, self._table, self._ids = True, None, None, []
                return None
            self._next += 1

    def row_group_made_of(self, ids: list[str], rows: int, columns: list[str]) -> Optional[tuple]:
        """The row group of this shard that holds the rows of the papers ``ids`` and nothing
        else (``rows`` in all, in that order), to be taken as its bytes: (its ``Piece``, its
        ``columns`` read, the paper id of each of its rows); None where there is none, or
        the shard is not a local file whose footer has this writer's shape. Papers come in
        order, so the row groups are looked at forward, each at most once."""
        if self._no_taking or not ids or not self._open() or self._pf is None:
            return None
        pf, footer = self._pf, self._footer
        if footer is None:
            try:
                # Its bytes are copied, not decoded: a shard damaged since (the same size)
                # would pass into the new one. Only the file the manifest recorded is taken from.
                if hash_file(self.uri)[0] != self.sha256:
                    raise SpliceError("not the shard the manifest recorded")
                with open(local_path(self.uri), "rb") as f:
                    footer = read_footer(f)
                if footer.shape() != writer_shape(self.config) or len(footer.row_groups) != pf.num_row_groups:
                    raise SpliceError("written with another schema, options or Parquet writer")
            except (OSError, SpliceError) as e:
                log.info("not taking row groups from %s: %s", self.uri, e)
                self._no_taking = True
                return None
            self._footer = footer
        while self._scan < len(footer.row_groups):
            k = self._scan
            try:
                table = pf.read_row_group(k, columns=columns)
                row_ids = table.column(self.column).to_pylist()
            except (OSError, ValueError, KeyError) as e:
                log.info("not taking row groups from %s: %s", self.uri, e)
                self._no_taking = True
                return None
            if not row_ids or row_ids[0] > ids[0]:
                return None
            self._scan += 1
            if row_ids[0] < ids[0]:
                continue
            papers = [p for n, p in enumerate(row_ids) if n == 0 or p != row_ids[n - 1]]
            if papers != ids or len(row_ids) != rows or footer.rows(k) != rows:
                return None
            self._next = max(self._next, k + 1)  # rows_of reads on after it
            return Piece(local_path(self.uri), footer, k), table, row_ids
        return None

    def close(self) -> None:
        if self._pf is not None:
            self._pf.close()  # closes the file it opened itself (a local shard), not ours
        if self._file is not None:
            self._file.close()
        self._file = self._pf = self._table = None


@dataclass
class PartJob:
    """One part file to write: its place and its papers (or dead letters), in order."""

    config: str
    group: int
    part: int
    members: list  # [WriteItem]
    sizes: list = field(default_factory=list)  # [(rows, bytes)] of each member, as parts and row groups are cut


class CutStep(Step):
    """((config, group), [WriteItem]) -> PartJob per part of the group. Parts end between
    papers (``cut_parts``), by the sizes the items carry; only results stored before sizes
    were recorded are read to size them."""

    def __init__(self, options: WriteOptions):
        self.options = options
        self.progress = Progress(options.progress_dir)

    def setup(self):
        self.store = ResultStore(self.options.store_root)

    def _size(self, it: WriteItem, config: str) -> list[int]:
        return it.size or table_size(read_stored_table(self.store, it, config))

    def process(self, element):
        (config, group), items = element
        o = self.options
        items = sorted(items, key=lambda it: (it.paper_id or "", it.key or "", it.dead.stage if it.dead else ""))
        if config == "dead_letter":
            jobs = [PartJob(config, group, 0, items)]
        else:
            sizes = [_size_of(config, self._size(it, config), o.no_images) for it in items]
            jobs = [
                PartJob(config, group, part, [items[i] for i in idxs], [sizes[i] for i in idxs])
                for part, idxs in enumerate(cut_parts(sizes, o.layout.rows_per_part(config), o.layout.max_part_bytes))
            ]
        self.progress.add(groups=1, parts=len(jobs))
        yield from jobs

    def finish(self):
        self.progress.flush()


class WritePartStep(Step):
    """PartJob -> PartInfo; the part's papers streamed into its file one paper at a time,
    or, when the previous build in the same folder has a part of exactly these results,
    that file taken over as it is (an incremental build rewrites only the parts whose
    papers changed). In a part that is written again, an unchanged paper's rows are read
    from the previous build's shard that holds them (``ShardRows``), not rebuilt from its
    stored result: a 1% change lands in nearly every shard group, and rebuilding every
    unchanged paper's rows (and reading its images again) was most of a small rebuild."""

    def __init__(self, options: WriteOptions):
        self.options = options
        self.progress = Progress(options.progress_dir)
        self.parts_written = Counter("shard_parts_written")
        self.parts_reused = Counter("shard_parts_reused")

    def setup(self):
        arm_quick_exit()
        self.store = ResultStore(self.options.store_root)
        self.previous: dict = {}
        if self.options.previous_parts:
            try:
                with fsspec.open(self.options.previous_parts, "r") as f:
                    self.previous = json.load(f)
            except (FileNotFoundError, OSError, ValueError):
                self.previous = {}
        # The previous build's shards by (config, shard group): where a paper's rows were.
        self.previous_in_group: dict[tuple[str, int], list[tuple[str, dict]]] = {}
        for fp, e in sorted(self.previous.items()):
            if "group" in e and "members" in e:
                self.previous_in_group.setdefault((e["config"], int(e["group"])), []).append((fp, e))

    def process(self, job: PartJob):
        if job.config == "dead_letter":
            yield self._dead_letter_part(job.group, job.members)
        else:
            yield self._part(job.config, job.group, job.part, job.members, job.sizes)
        self.progress.add(parts_done=1)

    def _rows_in_previous_shards(self, config: str, group: int, members: list) -> dict[int, ShardRows]:
        """member index -> the previous build's shard that holds its rows, for the members
        whose result was reused unchanged (and is final). A shard counts only when its
        member list, under this build's write options, gives the fingerprint the manifest
        recorded for it: same results, same schema, builder and options. A member is the
        same result only with the same table digest: a result recomputed under the same key
        (its sidecar changed) by a build that was killed before it finished is reused by the
        next build, and its rows are not the ones the shard holds."""
        wanted = {
            (m.paper_id, m.key, m.digest): i
            for i, m in enumerate(members)
            if m.reused and m.final and m.key and m.digest
        }
        out: dict[int, ShardRows] = {}
        if not wanted:
            return out
        for fp, e in self.previous_in_group.get((config, group), []):
            listed = read_members(e["members"])
            if not listed or part_fingerprint(config, [_Member(*m) for m in listed], self.options) != fp:
                continue
            hits = [wanted[(p, k, d)] for p, k, d in listed if (p, k, d) in wanted]
            if hits:
                shard = ShardRows(e["uri"], int(e["bytes"]), config, e.get("sha256"))
                for i in hits:
                    out.setdefault(i, shard)
        return out

    def _fingerprint(self, config: str, members: list) -> Optional[str]:
        # A part holding a result that is not final is never taken over by a later build:
        # that build recomputes the paper under the same key, and its rows may differ.
        return part_fingerprint(config, members, self.options) if all(m.final and m.digest for m in members) else None

    def _previous_part(self, fp: Optional[str], config: str) -> Optional[dict]:
        """The previous build's part of this fingerprint and config, if it had one."""
        prev = self.previous.get(fp)
        return prev if prev and prev.get("config") == config else None

    def takes_over(self, job: PartJob) -> bool:
        """Whether ``job``'s part is the previous build's file, taken over as it is (no
        row to write)."""
        if job.config == "dead_letter":
            return False
        return self._previous_part(self._fingerprint(job.config, job.members), job.config) is not None

    def _part(self, config: str, group: int, part: int, members: list, sizes: Optional[list] = None) -> PartInfo:
        o = self.options
        sizes = sizes or []
        fp = self._fingerprint(config, members)
        info = PartInfo(
            config=config,
            group=group,
            part=part,
            fingerprint=fp,
            keys=sorted({m.key for m in members if m.key}),
            members=[[m.paper_id, m.key, m.digest] for m in members if m.key and m.digest],
        )
        prev = self._previous_part(fp, config)
        staged = part_path(o.parts_root, config, group, part)
        if prev and _link_or_copy(prev["uri"], staged, prev.get("bytes")):
            self.parts_reused.inc()
            counts = {k: v for k, v in (prev.get("counts") or {}).items() if k not in ("reused", "recomputed")}
            if config == "papers":  # whether a paper was reused is a fact of this build, not of the part
                counts["reused"] = sum(1 for m in members if m.reused)
                counts["recomputed"] = len(members) - counts["reused"]
            info = replace(
                info,
                path=staged,
                rows=prev["rows"],
                bytes=prev["bytes"],
                sha256=prev["sha256"],
                counts=dict(sorted(counts.items())),
                reused=True,
            )
            write_sidecar(o.parts_root, info)
            return info
        counts = {}
        sources = self._rows_in_previous_shards(config, group, members)
        writer = PartWriter(o.parts_root, config, group, part, o.layout, reuse=bool(sources))
        card = CardRows(o.store_root, {s.sha256 for s in sources.values() if s.sha256}) if config == "papers" else None
        i = 0
        while i < len(members):
            taken = (
                self._previous_row_group(config, members, sizes, sources, i)
                if writer.reuse and writer.at_row_group_start
                else None
            )
            if taken is None:
                self._add_rows(
                    writer, config, members[i], sizes[i] if i < len(sizes) else None, sources.get(i), counts, card
                )
                i += 1
                continue
            end, piece, columns, row_ids = taken  # members[i:end]: one row group of a previous shard
            if card is not None:
                card.add_taken([m.digest for m in members[i:end]])
            for m in members[i:end]:
                lo, hi = bisect_left(row_ids, m.paper_id), bisect_right(row_ids, m.paper_id)
                if hi > lo:
                    _count_rows(config, columns.slice(lo, hi - lo), m, counts)
            writer.add_row_group(piece)
            i = end
        for shard in set(sources.values()):
            shard.close()
        done = writer.close()
        self.parts_written.inc()
        path, nbytes, sha = done if done else (None, 0, None)
        if card is not None:
            card.keep(sha, writer.rows)
        info = replace(
            info,
            path=path,
            rows=writer.rows,
            bytes=nbytes,
            sha256=sha,
            counts=dict(sorted(counts.items())),
            row_groups_taken=writer.taken,
        )
        write_sidecar(o.parts_root, info)
        return info

    def _add_rows(
        self,
        writer: PartWriter,
        config: str,
        it: WriteItem,
        size: Optional[tuple],
        shard: Optional[ShardRows],
        counts: dict,
        card: Optional[CardRows] = None,
    ) -> None:
        """One paper's rows into the part: as the previous build's ``shard`` holds them from
        the same result, else built from its stored result (its images read); a papers
        part's rows counted for the card too."""
        o = self.options
        if config != "papers" and size is not None and size[0] == 0:
            return  # no rows of this config (a paper without figures): nothing to read
        table = shard.rows_of(it.paper_id) if shard is not None else None
        if table is not None:  # the rows as the previous build wrote them from the same result
            _count_rows(config, table, it, counts)
        else:
            table = read_stored_table(self.store, it, config)
            if config == "papers":
                table = shape_papers_table(table, it.withheld, it.assumed_licence)
            if config == "figures":
                # images are read from the stored (absolute) image_uri, then it is published
                table, embedded = _with_images(table, o.no_images, o.max_image_bytes)
                _merge(counts, _figure_counts(table, embedded))
            elif config == "papers":
                _merge(counts, _paper_counts(table, it))
            table = publish_table(config, table, o.published_roots)
        if card is not None:
            card.add(table, it.digest if it.key else None)
        writer.add(table, size[1] if size is not None else None)

    def _previous_row_group(
        self, config: str, members: list, sizes: list, sources: dict[int, ShardRows], i: int
    ) -> Optional[tuple]:
        """Where the row group the writer would cut from ``members[i]`` on is one row group
        of a previous shard (each of its papers' rows read from that shard), that row
        group: (the index after its last member, its ``Piece``, its count columns, their
        paper ids). Called at a row group's start; the cut is the writer's (``PartWriter.add``:
        rows and recorded bytes against the layout's row group size)."""
        shard = sources.get(i)
        if shard is None or len(sizes) != len(members):
            return None
        layout = self.options.layout
        ids: list[str] = []
        rows = nbytes = 0
        end = i
        while end < len(members):
            r, b = sizes[end]
            end += 1
            if not r:  # no rows: the writer adds nothing
                continue
            if sources.get(end - 1) is not shard:
                return None
            ids.append(members[end - 1].paper_id)
            rows += r
            nbytes += b
            if layout.ends_row_group(rows, nbytes):
                break
        found = shard.row_group_made_of(ids, rows, COUNT_COLUMNS[config])
        return None if found is None else (end, *found)

    def _dead_letter_part(self, group: int, items: list) -> PartInfo:
        o = self.options
        rows = sorted(
            (publish_dead_letter_row(dead_letter_row(it.dead), o.published_roots) for it in items),
            key=SORT_KEYS["dead_letter"],
        )
        counts: dict[str, int] = {}
        for it in items:
            scope = it.dead.scope or "input"
            _inc(counts, f"dead_{scope}")
            _inc(counts, f"type:{it.dead.error_type}")
            if scope == "input":
                _inc(counts, "reused" if it.reused else "recomputed")
        writer = PartWriter(o.parts_root, "dead_letter", group, 0, o.layout)
        writer.add(to_table("dead_letter", rows))
        done = writer.close()
        path, nbytes, sha = done if done else (None, 0, None)
        info = PartInfo(
            config="dead_letter",
            group=group,
            part=0,
            path=path,
            rows=writer.rows,
            bytes=nbytes,
            sha256=sha,
            counts=dict(sorted(counts.items())),
            keys=sorted({it.key for it in items if it.key}),
        )
        write_sidecar(o.parts_root, info)
        return info

    def finish(self):
        self.progress.flush()


def _count_rows(config: str, table: pa.Table, it: WriteItem, counts: dict) -> None:
    """Add to a part's ``counts`` one paper's rows as a previous shard holds them."""
    if config == "figures":
        _merge(counts, _figure_counts(table, table.num_rows - table.column("image").null_count))
    elif config == "papers":
        _merge(counts, _paper_counts(table, it))


def _merge(counts: dict, more: dict) -> None:
    for k, v in more.items():
        counts[k] = counts.get(k, 0) + v


def _paper_counts(table: pa.Table, it: WriteItem) -> dict:
    teaser = table.column("teaser").to_pylist()
    counts = {"teasers": sum(len(t or []) for t in teaser), "reused": int(it.reused), "recomputed": int(not it.reused)}
    if "withheld" in table.column_names:
        for w in table.column("withheld").to_pylist():
            if w is not None:
                counts[f"withheld:{w}"] = counts.get(f"withheld:{w}", 0) + 1
    ga = table.column("graphical_abstract").to_pylist()[0]
    if ga:
        counts["ga_" + ("de_facto" if ga.get("de_facto") else (ga.get("type") or "untyped")).lower()] = 1
    for k, v in it.stats.items():  # the stored result's counters, carried by its reference
        if v:
            counts[f"stat:{k}"] = v
    return counts


def paper_key(x) -> str:
    """What the write stage groups a result or an annotation by: its paper id."""
    if isinstance(x, ResultRef):
        if x.is_paper or x.paper_id:
            return f"id:{x.paper_id}"
        return f"uri:{x.uri}"
    return f"id:{x.paper_id}"
