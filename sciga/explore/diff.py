"""What changed between two builds: papers added, removed and changed (with the fields that
changed), rows per config, schema and builder versions, dead letters.

A build is a folder of shards wherever it lies: a local folder, ``gs://...``, or a published
version on the Hub, ``hf://datasets/ORG/NAME@v1.2.0``. Everything is read through DuckDB
over the Parquet shards, and only what the comparison needs:

* A shard with the same SHA-256 on both sides (from ``manifest.json``, or the Hub's LFS
  sha256) holds the same rows on both sides, and a paper's rows of a config lie in one shard,
  so the papers in such a shard are unchanged for that config: it is not read at all. The
  diff of a build with itself reads footers only.
* From the other shards DuckDB reads a few columns and reduces every paper to one 64-bit
  hash per kind of field (below), summed over a paper's rows for the configs with several
  rows per paper; the two sides are then joined on paper ids. Image bytes are hashed only
  with ``image_bytes`` (the default of ``sciga diff``); without it an image is compared by
  its path, size, perceptual hash and error, which reads no image. Memory is DuckDB's
  (``memory_limit``, spilling to a temporary folder), not the size of the builds: the
  per-paper hashes are a few dozen bytes a paper, and the lists of ids are streamed to the
  output from DuckDB, never held in Python.

Fields, by what a reader of the dataset sees (``CATEGORIES``):

* ``metadata``: arXiv metadata (version, authors, dates, subjects, comment, venue, DOIs,
  licence ...): every ``papers`` column not named below;
* ``text``: title, abstract, section ids/titles/bodies, table captions;
* ``figures`` / ``panels``: the ``figures`` rows of figures / of subfigures (ids, numbers,
  labels, captions, subcaptions, sections);
* ``mentions``: the ``mentions`` rows;
* ``images``: every ``image*`` column of the ``figures`` rows (but ``image_uri``, a path on
  the machine that built), width, height, perceptual hash;
* ``annotations``: teaser, graphical abstract, the GA and teaser roles and medical filter of
  figure rows, and the graphical-abstract rows themselves;
* ``provenance``: where the page came from and its SHA-256, generator and version. The input
  path (``input_uri``, a path on the machine that built) and the builder and schema versions
  (reported once, for the whole build) are left out.

Columns that exist on one side only are a schema change, reported as such and left out of
the per-paper comparison; a column whose type changed is compared on what both types share
(the struct fields both have; else its text). So a new schema never makes every paper look
changed, and never stops the diff.
"""

from __future__ import annotations

import logging
import posixpath
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Optional

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from sciga.schemas.arrow import CONFIGS
from sciga.schemas.manifest import BuildManifest
from sciga.transforms.common.errors import UserError
from sciga.transforms.common.sql_text import sql_string

log = logging.getLogger("sciga.diff")

CATEGORIES = ("metadata", "text", "figures", "panels", "mentions", "images", "annotations", "provenance")

# papers columns read for a category other than metadata (nested ones: the fields compared)
TEXT_COLUMNS = {
    "title": None,
    "abstract": None,
    "sections": ("id", "parent_id", "level", "number", "title", "body"),
    "tables": ("id", "index", "number", "caption", "section_id"),
}
PAPER_ANNOTATIONS = ("teaser", "graphical_abstract")
PROVENANCE_FIELDS = ("source", "url", "content_sha256", "generator", "generator_version", "decode_errors", "id_source")
# papers columns never hashed per paper: the key, the nested copy of the figures config
PAPER_SKIPPED = ("id", "figures")
FIGURE_ANNOTATIONS = ("is_teaser", "ga_role", "medical")
FIGURE_IMAGES = ("width", "height", "phash")  # besides every column whose name starts with "image"
DEAD_LETTER_KEY = ("paper_id", "stage", "error_type", "scope")
HUB_CARD = "README.md"
_CARD_VERSIONS = re.compile(r"sciga-builder (\S+) \(schema (\S+)\)")


@dataclass(frozen=True)
class DiffOptions:
    """How two builds are compared (``sciga diff`` flags)."""

    image_bytes: bool = True  # hash image bytes (reads every image of the shards that differ)
    memory_limit: str = "1GB"  # DuckDB's; it spills to a temporary folder beyond that
    threads: Optional[int] = None  # DuckDB threads (default: its own, one per core)


@dataclass
class ShardFile:
    url: str  # what DuckDB and fsspec open (protocol included for remote builds)
    name: str  # data/<config>/<file>
    sha256: Optional[str]
    rows: int = 0


@dataclass
class BuildSide:
    """One build as the diff reads it: its shards, their footers and its versions."""

    location: str  # as given
    fs: fsspec.AbstractFileSystem
    root: str  # path inside ``fs``
    files: dict = field(default_factory=dict)  # config -> [ShardFile]
    schemas: dict = field(default_factory=dict)  # config -> pa.Schema (unified over its files) or None
    schema_versions: set = field(default_factory=set)
    builder_versions: set = field(default_factory=set)
    manifest: Optional[BuildManifest] = None

    def rows(self, config: str) -> int:
        return sum(f.rows for f in self.files.get(config) or [])


def _url(fs, path: str) -> str:
    proto = fs.protocol[0] if isinstance(fs.protocol, (list, tuple)) else fs.protocol
    return path if proto in ("file", "local") else fs.unstrip_protocol(path)


def open_side(location: str, role: str, fs=None) -> BuildSide:
    """The build at ``location`` (``role`` is OLD or NEW, for messages). ``fs``: a filesystem
    to read it with (the Hub with an explicit endpoint); else the location's own."""
    from sciga.transforms.common.storage import check_location

    check_location(location, fs=fs)  # the Hub at the caller's endpoint, when it gives one
    if fs is None:
        if location.startswith("hf://"):
            from sciga.transforms.common.storage import hub_filesystem

            fs, root = hub_filesystem(), location[len("hf://") :]
        else:
            fs, root = fsspec.core.url_to_fs(location)
    else:
        root = location.split("://", 1)[1] if "://" in location else location
    root = root.rstrip("/")
    try:
        is_build = fs.isdir(posixpath.join(root, "data")) or fs.exists(posixpath.join(root, "manifest.json"))
    except Exception as e:  # noqa: BLE001 - a revision or repo that does not exist: said in one sentence below
        log.debug("cannot look into %s: %r", location, e)
        is_build = False
    if not is_build:
        hint = (
            " (a published version is hf://datasets/ORG/NAME@vX.Y.Z)"
            if location.startswith("hf://")
            else "; give the --output folder of `sciga build`"
        )
        raise UserError(f"{role} {location} is not a build (no data/ folder and no manifest.json there){hint}.")
    side = BuildSide(location=location, fs=fs, root=root)
    manifest_path = posixpath.join(root, "manifest.json")
    if fs.exists(manifest_path):
        with fs.open(manifest_path, "rb") as f:
            side.manifest = BuildManifest.loads(f.read().decode("utf-8"))
    listed = {e.path: e.sha256 or None for es in (side.manifest.files if side.manifest else {}).values() for e in es}
    for config in CONFIGS:
        folder = posixpath.join(root, "data", config)
        entries = fs.ls(folder, detail=True) if fs.isdir(folder) else []
        files = []
        for entry in sorted(entries, key=lambda x: x["name"]):
            if entry.get("type") == "directory" or not entry["name"].endswith(".parquet"):
                continue
            name = posixpath.relpath(entry["name"], root)
            lfs = entry.get("lfs")
            sha = listed.get(name) or (lfs.get("sha256") if isinstance(lfs, dict) else None)
            files.append(ShardFile(url=_url(fs, entry["name"]), name=name, sha256=sha))
        schemas = []
        for f in files:
            with fs.open(posixpath.join(root, f.name), "rb") as fh:
                pf = pq.ParquetFile(fh)
                f.rows = pf.metadata.num_rows
                schemas.append(pf.schema_arrow)
                version = (pf.schema_arrow.metadata or {}).get(b"sciga.schema_version")
                if version:
                    side.schema_versions.add(version.decode())
        side.files[config] = files
        side.schemas[config] = pa.unify_schemas([s.remove_metadata() for s in schemas]) if schemas else None
    if side.manifest and side.manifest.builder_version:
        side.builder_versions.add(side.manifest.builder_version)
    else:
        card = posixpath.join(root, HUB_CARD)
        if fs.exists(card):
            with fs.open(card, "rb") as f:
                m = _CARD_VERSIONS.search(f.read().decode("utf-8", "replace"))
            if m:
                side.builder_versions.add(m.group(1))
    return side


# ------------------------------------------------------------------ SQL over both schemas


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t)


def common_expr(expr: str, old: pa.DataType, new: pa.DataType, keep: Optional[tuple] = None, depth: int = 0) -> str:
    """An expression of ``expr`` that reads the same on both sides: the value itself when
    both types are equal, else what both types share (struct fields both have, list elements
    projected alike), else its text. ``keep`` narrows a struct (or a list's struct elements)
    to those fields."""
    if keep is None and old.equals(new):
        return expr
    if pa.types.is_struct(old) and pa.types.is_struct(new):
        names = [old.field(i).name for i in range(old.num_fields)]
        new_names = {new.field(i).name for i in range(new.num_fields)}
        shared = [n for n in names if n in new_names and (keep is None or n in keep)]
        if not shared:
            return "NULL"
        parts = [
            f"{_ident(n)} := {common_expr(f'struct_extract({expr}, {sql_string(n)})', old.field(n).type, new.field(n).type, None, depth + 1)}"
            for n in shared
        ]
        return f"struct_pack({', '.join(parts)})"
    if _is_list(old) and _is_list(new):
        var = f"x{depth}"
        inner = common_expr(var, old.value_type, new.value_type, keep, depth + 1)
        return expr if inner == var else f"[{inner} for {var} in {expr}]"
    return f"CAST({expr} AS VARCHAR)"


def _columns(schema: Optional[pa.Schema]) -> dict:
    return {} if schema is None else {f.name: f.type for f in schema}


def _shared(old: dict, new: dict, names, keep: Optional[dict] = None) -> list[str]:
    """Expressions of the columns ``names`` that both sides have."""
    out = []
    for n in names:
        if n in old and n in new:
            out.append(common_expr(_ident(n), old[n], new[n], (keep or {}).get(n)))
    return out


def _hash(exprs: list[str]) -> str:
    return f"hash({', '.join(exprs)})" if exprs else "NULL::UBIGINT"


def paper_hashes(old: dict, new: dict) -> dict:
    """category -> hash expression over one ``papers`` row."""
    text = [c for c in TEXT_COLUMNS]
    used = set(text) | set(PAPER_ANNOTATIONS) | {"provenance"} | set(PAPER_SKIPPED)
    metadata = [n for n in old if n in new and n not in used]
    return {
        "metadata": _hash(_shared(old, new, metadata)),
        "text": _hash(_shared(old, new, text, TEXT_COLUMNS)),
        "annotations": _hash(_shared(old, new, PAPER_ANNOTATIONS)),
        "provenance": _hash(_shared(old, new, ["provenance"], {"provenance": PROVENANCE_FIELDS})),
    }


def figure_hashes(old: dict, new: dict, image_bytes: bool) -> dict:
    """part -> hash expression over one ``figures`` row: ``structure`` (figures or panels
    by the row's kind), ``images``, ``annotations``."""
    # image_uri, like provenance.input_uri, is a path on the machine that built: not a change
    shared = [n for n in old if n in new and n not in ("paper_id", "image_uri")]
    images = [n for n in shared if n.startswith("image") or n in FIGURE_IMAGES]
    annotations = [n for n in shared if n in FIGURE_ANNOTATIONS]
    structure = [n for n in shared if n not in images and n not in annotations]
    image_exprs = []
    for n in images:
        if n == "image" and pa.types.is_struct(old[n]) and pa.types.is_struct(new[n]):
            keep = tuple(f.name for f in old[n] if f.name != "bytes")
            image_exprs.append(common_expr(_ident(n), old[n], new[n], keep))
            if image_bytes and old[n].get_field_index("bytes") >= 0 and new[n].get_field_index("bytes") >= 0:
                image_exprs.append(f"hash(struct_extract({_ident(n)}, 'bytes'))")
        else:
            image_exprs.append(common_expr(_ident(n), old[n], new[n]))
    key = ['"id"'] if "id" in shared else []
    return {
        "structure": _hash(_shared(old, new, structure)),
        "images": _hash(key + image_exprs),
        "annotations": _hash(key + _shared(old, new, annotations)),
    }


# ------------------------------------------------------------------ the diff


@dataclass
class SchemaChange:
    config: str
    column: str
    change: str  # "added" | "removed" | "type"
    old_type: Optional[str] = None
    new_type: Optional[str] = None

    def text(self) -> str:
        if self.change == "added":
            return f"{self.config}.{self.column} added ({self.new_type})"
        if self.change == "removed":
            return f"{self.config}.{self.column} removed (was {self.old_type})"
        return f"{self.config}.{self.column} changed type: {self.old_type} -> {self.new_type}"


def schema_changes(old: BuildSide, new: BuildSide) -> list[SchemaChange]:
    out = []
    for config in CONFIGS:
        a, b = old.schemas.get(config), new.schemas.get(config)
        if a is None or b is None:
            continue  # a config with no shard on one side: its rows say so
        ca, cb = _columns(a), _columns(b)
        for n in ca:
            if n not in cb:
                out.append(SchemaChange(config, n, "removed", old_type=str(ca[n])))
            elif not ca[n].equals(cb[n]):
                out.append(SchemaChange(config, n, "type", str(ca[n]), str(cb[n])))
        out += [SchemaChange(config, n, "added", new_type=str(cb[n])) for n in cb if n not in ca]
    return out


class BuildDiff:
    """The comparison of two builds. Counts are attributes; the lists (added, removed and
    changed papers, dead letters) are read from DuckDB as they are written out. Use it as a
    context manager (or call ``close``): it holds a DuckDB connection and a spill folder."""

    def __init__(self, old: BuildSide, new: BuildSide, options: DiffOptions, con, tmp: str):
        self.old, self.new, self.options = old, new, options
        self.con, self._tmp = con, tmp
        self.rows: dict = {c: (old.rows(c), new.rows(c)) for c in CONFIGS}
        self.kinds: dict = {}  # figure kind -> (old rows, new rows)
        self.schema = schema_changes(old, new)
        self.schema_versions = (sorted(old.schema_versions), sorted(new.schema_versions))
        self.builder_versions = (sorted(old.builder_versions), sorted(new.builder_versions))
        self.added = self.removed = self.changed = 0
        self.withheld = self.released = 0  # papers the licence policy withheld / released (in both)
        self.field_counts: dict = {c: 0 for c in CATEGORIES}
        self.dead_letter_types: dict = {}  # error type -> (old rows, new rows)
        self.dead_letters_added = self.dead_letters_removed = 0
        self.files_read: dict = {}  # config -> (old shards read, new shards read)

    # -- context --------------------------------------------------------------------------
    def __enter__(self) -> BuildDiff:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.con is not None:
            self.con.close()
            self.con = None
        shutil.rmtree(self._tmp, ignore_errors=True)

    # -- what it found --------------------------------------------------------------------
    @property
    def papers(self) -> tuple[int, int]:
        return self.rows["papers"]

    @property
    def versions_changed(self) -> bool:
        return (
            self.schema_versions[0] != self.schema_versions[1] or self.builder_versions[0] != self.builder_versions[1]
        )

    @property
    def data_changed(self) -> bool:
        """Papers added, removed or changed, rows or dead letters that differ."""
        return bool(
            self.added
            or self.removed
            or self.changed
            or self.dead_letters_added
            or self.dead_letters_removed
            or any(a != b for a, b in self.rows.values())
        )

    @property
    def empty(self) -> bool:
        return not (self.data_changed or self.schema or self.versions_changed)

    def added_ids(self) -> Iterator[str]:
        yield from (r[0] for r in self._stream("SELECT id FROM diff_added ORDER BY id"))

    def removed_ids(self) -> Iterator[str]:
        yield from (r[0] for r in self._stream("SELECT id FROM diff_removed ORDER BY id"))

    def withheld_papers(self) -> Iterator[tuple[str, str]]:
        """(paper id, its licence) of the papers ``new`` withholds and ``old`` held in full."""
        yield from self._stream("SELECT id, licence FROM diff_withheld ORDER BY id")

    def released_papers(self) -> Iterator[tuple[str, str]]:
        """(paper id, the licence ``old`` withheld it for) of the papers ``new`` holds in full."""
        yield from self._stream("SELECT id, licence FROM diff_released ORDER BY id")

    def changed_papers(self) -> Iterator[tuple[str, list[str]]]:
        """(paper id, the categories that changed, in ``CATEGORIES`` order)."""
        for pid, cats in self._stream("SELECT id, fields FROM diff_changed ORDER BY id"):
            yield pid, [c for c in CATEGORIES if c in cats]

    def dead_letters(self, which: str) -> Iterator[dict]:
        """The dead-letter rows only ``new`` (which="added") or only ``old`` ("removed") has."""
        table = "diff_dl_added" if which == "added" else "diff_dl_removed"
        cols = ", ".join(DEAD_LETTER_KEY) + ", n, message"
        for r in self._stream(f"SELECT {cols} FROM {table} ORDER BY ALL"):
            yield dict(zip(list(DEAD_LETTER_KEY) + ["count", "message"], r))

    def _stream(self, sql: str, batch: int = 2048):
        cur = self.con.cursor()
        cur.execute(sql)
        while True:
            rows = cur.fetchmany(batch)
            if not rows:
                break
            yield from rows
        cur.close()


def _read(files: list[ShardFile]) -> str:
    return f"read_parquet([{', '.join(sql_string(f.url) for f in files)}], union_by_name = true)"


def _differing(old: BuildSide, new: BuildSide, config: str) -> tuple[list, list]:
    """The shards of ``config`` that are not the same file (by SHA-256) on both sides."""
    a = {f.sha256 for f in old.files.get(config) or [] if f.sha256}
    b = {f.sha256 for f in new.files.get(config) or [] if f.sha256}
    same = a & b
    return (
        [f for f in old.files.get(config) or [] if f.sha256 not in same],
        [f for f in new.files.get(config) or [] if f.sha256 not in same],
    )


def diff_builds(
    old_location: str, new_location: str, options: DiffOptions = DiffOptions(), *, old_fs=None, new_fs=None
) -> BuildDiff:
    """Compare the build at ``old_location`` with the one at ``new_location``."""
    from sciga.transforms.common.storage import duckdb_connect

    old = open_side(old_location, "OLD", old_fs)
    new = open_side(new_location, "NEW", new_fs)
    tmp = tempfile.mkdtemp(prefix="sciga-diff-")
    import duckdb

    # A database file in the spill folder: the per-paper tables live on disk, not in memory.
    con = duckdb_connect(
        *(f.url for s in (old, new) for fs in s.files.values() for f in fs[:1]),
        con=duckdb.connect(posixpath.join(tmp, "diff.duckdb")),
    )
    for side in (old, new):  # a filesystem given by the caller (the Hub at an explicit endpoint)
        if side.location.startswith("hf://") and side.fs is not None:
            try:
                con.unregister_filesystem("hf")
            except Exception:  # noqa: BLE001 - none registered yet
                pass
            con.register_filesystem(side.fs)
            break
    con.execute(f"SET memory_limit = {sql_string(options.memory_limit)}")
    con.execute(f"SET temp_directory = {sql_string(tmp)}")
    con.execute("SET preserve_insertion_order = false")
    if options.threads:
        con.execute(f"SET threads = {int(options.threads)}")
    result = BuildDiff(old, new, options, con, tmp)
    try:
        _compare(result)
    except BaseException:
        result.close()
        raise
    return result


def _compare(d: BuildDiff) -> None:
    con, old, new = d.con, d.old, d.new
    cols = {c: (_columns(old.schemas.get(c)), _columns(new.schemas.get(c))) for c in CONFIGS}

    # papers: ids and the per-paper hashes of the shards that differ
    o_files, n_files = _differing(old, new, "papers")
    d.files_read["papers"] = (len(o_files), len(n_files))
    hashes = paper_hashes(*cols["papers"])
    select = ", ".join(f"{expr} AS {cat}" for cat, expr in hashes.items())
    for side, files, side_cols in (("old", o_files, cols["papers"][0]), ("new", n_files, cols["papers"][1])):
        # the licence policy's word (schema 1.4.0); a build before it withheld nothing
        withheld = "withheld" if "withheld" in side_cols else "NULL::VARCHAR"
        if files:
            body = f"SELECT id, {select}, {withheld} AS withheld FROM {_read(files)}"
        else:
            body = (
                "SELECT NULL::VARCHAR AS id, "
                + ", ".join(f"NULL::UBIGINT AS {c}" for c in hashes)
                + ", NULL::VARCHAR AS withheld LIMIT 0"
            )
        con.execute(f"CREATE TABLE p_{side} AS {body}")
    con.execute("CREATE TABLE diff_added AS SELECT id FROM p_new ANTI JOIN p_old USING (id)")
    con.execute("CREATE TABLE diff_removed AS SELECT id FROM p_old ANTI JOIN p_new USING (id)")
    # Papers the licence policy withheld in new but not in old, and released (the reverse):
    # a policy changed, or an author gave a new version another licence.
    con.execute(
        "CREATE TABLE diff_withheld AS SELECT id, p_new.withheld AS licence FROM p_old JOIN p_new USING (id) "
        "WHERE p_old.withheld IS NULL AND p_new.withheld IS NOT NULL"
    )
    con.execute(
        "CREATE TABLE diff_released AS SELECT id, p_old.withheld AS licence FROM p_old JOIN p_new USING (id) "
        "WHERE p_old.withheld IS NOT NULL AND p_new.withheld IS NULL"
    )
    d.withheld = con.execute("SELECT count(*) FROM diff_withheld").fetchone()[0]
    d.released = con.execute("SELECT count(*) FROM diff_released").fetchone()[0]
    changes = [
        f"SELECT id, '{c}' AS field FROM p_old JOIN p_new USING (id) WHERE p_old.{c} IS DISTINCT FROM p_new.{c}"
        for c in hashes
    ]

    # figures: per paper, the sums of its rows' hashes (figures, panels, images, annotations)
    o_files, n_files = _differing(old, new, "figures")
    d.files_read["figures"] = (len(o_files), len(n_files))
    fh = figure_hashes(*cols["figures"], d.options.image_bytes)
    kind = "kind" if ("kind" in cols["figures"][0] and "kind" in cols["figures"][1]) else "'figure'"
    parts = {
        "figures": f"sum(CASE WHEN coalesce({kind}, 'figure') NOT IN ('subfigure', 'graphical_abstract') "
        f"THEN {fh['structure']} END)",
        "panels": f"sum(CASE WHEN {kind} = 'subfigure' THEN {fh['structure']} END)",
        "images": f"sum({fh['images']})",
        "annotations": f"coalesce(sum({fh['annotations']}), 0) + "
        f"coalesce(sum(CASE WHEN {kind} = 'graphical_abstract' THEN {fh['structure']} END), 0)",
    }
    changes += _per_paper_rows(con, "f", o_files, n_files, parts)

    # mentions: per paper, the sum of its rows' hashes
    o_files, n_files = _differing(old, new, "mentions")
    d.files_read["mentions"] = (len(o_files), len(n_files))
    mcols = [n for n in cols["mentions"][0] if n in cols["mentions"][1] and n != "paper_id"]
    changes += _per_paper_rows(
        con, "m", o_files, n_files, {"mentions": f"sum({_hash(_shared(*cols['mentions'], mcols))})"}
    )

    con.execute(
        f"CREATE TABLE diff_fields AS SELECT DISTINCT id, field FROM ({' UNION ALL '.join(changes)}) "
        "WHERE id IS NOT NULL AND id NOT IN (SELECT id FROM diff_added) AND id NOT IN (SELECT id FROM diff_removed)"
    )
    con.execute("CREATE TABLE diff_changed AS SELECT id, list(field) AS fields FROM diff_fields GROUP BY id")
    d.added = con.execute("SELECT count(*) FROM diff_added").fetchone()[0]
    d.removed = con.execute("SELECT count(*) FROM diff_removed").fetchone()[0]
    d.changed = con.execute("SELECT count(*) FROM diff_changed").fetchone()[0]
    for field_name, n in con.execute("SELECT field, count(*) FROM diff_fields GROUP BY field").fetchall():
        d.field_counts[field_name] = n

    # rows of each figure kind (a narrow column of every figures shard)
    for side_i, build in enumerate((old, new)):
        files = build.files.get("figures") or []
        if files and "kind" in _columns(build.schemas.get("figures")):
            for k, n in con.execute(f"SELECT kind, count(*) FROM {_read(files)} GROUP BY kind").fetchall():
                pair = list(d.kinds.get(k or "unknown", (0, 0)))
                pair[side_i] = n
                d.kinds[k or "unknown"] = tuple(pair)

    _compare_dead_letters(d, cols["dead_letter"])


def _per_paper_rows(con, tag: str, o_files: list, n_files: list, parts: dict) -> list[str]:
    """Tables ``<tag>_old`` / ``<tag>_new`` of per-paper sums over a config's rows (the
    shards that differ), and the SELECTs of (id, field) that differ between them."""
    for side, files in (("old", o_files), ("new", n_files)):
        if files:
            select = ", ".join(f"{expr} AS {name}" for name, expr in parts.items())
            body = f"SELECT paper_id AS id, {select} FROM {_read(files)} GROUP BY paper_id"
        else:
            body = "SELECT NULL::VARCHAR AS id, " + ", ".join(f"NULL::HUGEINT AS {n}" for n in parts) + " LIMIT 0"
        con.execute(f"CREATE TABLE {tag}_{side} AS {body}")
    return [
        f"SELECT coalesce(o.id, n.id) AS id, '{name}' AS field FROM {tag}_old o FULL OUTER JOIN {tag}_new n "
        f"ON o.id = n.id WHERE o.{name} IS DISTINCT FROM n.{name}"
        for name in parts
    ]


def _compare_dead_letters(d: BuildDiff, cols: tuple) -> None:
    """Dead-letter rows by (paper, stage, error type, scope), counted on each side: the
    rows only one side has (messages name inputs by path, so they are shown, not compared)."""
    con = d.con
    o_files, n_files = _differing(d.old, d.new, "dead_letter")
    d.files_read["dead_letter"] = (len(o_files), len(n_files))
    keys = ", ".join(DEAD_LETTER_KEY)
    for side, files, have in (("old", o_files, cols[0]), ("new", n_files, cols[1])):
        if files:
            exprs = ", ".join((_ident(k) if k in have else "NULL::VARCHAR") + f" AS {k}" for k in DEAD_LETTER_KEY)
            message = "message" if "message" in have else "NULL::VARCHAR AS message"
            body = (
                f"SELECT {keys}, count(*) AS n, min(message) AS message FROM "
                f"(SELECT {exprs}, {message} FROM {_read(files)}) GROUP BY {keys}"
            )
        else:
            body = (
                "SELECT "
                + ", ".join(f"NULL::VARCHAR AS {k}" for k in DEAD_LETTER_KEY)
                + ", 0::BIGINT AS n, NULL::VARCHAR AS message LIMIT 0"
            )
        con.execute(f"CREATE TABLE dl_{side} AS {body}")
    on = " AND ".join(f"a.{k} IS NOT DISTINCT FROM b.{k}" for k in DEAD_LETTER_KEY)
    key_cols = ", ".join(f"a.{k}" for k in DEAD_LETTER_KEY)
    for table, a, b in (("diff_dl_added", "dl_new", "dl_old"), ("diff_dl_removed", "dl_old", "dl_new")):
        con.execute(
            f"CREATE TABLE {table} AS SELECT {key_cols}, a.n - coalesce(b.n, 0) AS n, a.message "
            f"FROM {a} a LEFT JOIN {b} b ON {on} WHERE a.n > coalesce(b.n, 0)"
        )
    d.dead_letters_added = con.execute("SELECT coalesce(sum(n), 0) FROM diff_dl_added").fetchone()[0]
    d.dead_letters_removed = con.execute("SELECT coalesce(sum(n), 0) FROM diff_dl_removed").fetchone()[0]
    for side_i, build in enumerate((d.old, d.new)):
        files = build.files.get("dead_letter") or []
        if files and "error_type" in _columns(build.schemas.get("dead_letter")):
            for t, n in con.execute(f"SELECT error_type, count(*) FROM {_read(files)} GROUP BY 1").fetchall():
                pair = list(d.dead_letter_types.get(t or "unknown", (0, 0)))
                pair[side_i] = n
                d.dead_letter_types[t or "unknown"] = tuple(pair)
