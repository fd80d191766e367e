"""`sciga browse OUT [--output DIR] [--papers N]`: a static HTML report of a build.

``DIR/index.html`` lists the papers (counts, GA type, teaser, medical flags, dead letters)
and every dead letter with its reason; ``DIR/papers/<id>.html`` shows one paper: metadata,
abstract, graphical abstract and teaser, every section with SciGA's tokens visible, every
figure and subfigure with its image, caption and subcaption, and each mention highlighted in
its paragraph and linked to the figure it names. Open ``index.html`` in any browser: no
server, nothing from the internet (styles are one local file, no fonts or scripts).

Images are *referenced*: each embedded image is written once to ``DIR/images/<paper>/<figure>.<ext>``
and pages point at it with a relative URL. Inlining them as ``data:`` URIs would make every
page a third larger than its images, repeat a teaser's bytes in the index and its page, and
make a paper with many figures one huge file; separate files keep pages small, let the
browser load images as it needs them, and the folder still works copied anywhere or served
as is (a bucket, a static host).

The build is read with DuckDB (explore/views.py) through fsspec paths, so OUT and DIR
may be local folders, ``gs://`` or ``hf://``. Memory stays bounded: paper ids stream from a
cursor, and each chunk of papers is read (papers, figures with their image bytes, mentions,
dead letters), written and dropped before the next one; the index is written as it goes.
"""

from __future__ import annotations

import posixpath
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional

import fsspec

from sciga.explore.browse_render import (
    CSS,
    ImageFile,
    PaperView,
    dead_letter_row,
    index_dead_letters_head,
    index_head,
    index_row,
    index_tail,
    safe_name,
)
from sciga.schemas.manifest import BuildManifest

DEFAULT_PAPERS = 100
CHUNK = 8  # papers read per DuckDB round trip; bounds memory (their figures' image bytes)
MAX_DEAD_LETTER_ROWS = 10_000  # in the index; the rest are counted and `sciga sql` shows them

# (magic prefix, extension, shown by browsers)
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "png", True),
    (b"\xff\xd8\xff", "jpg", True),
    (b"GIF87a", "gif", True),
    (b"GIF89a", "gif", True),
    (b"BM", "bmp", True),
    (b"II*\x00", "tif", False),
    (b"MM\x00*", "tif", False),
    (b"%PDF", "pdf", False),
)


def image_format(data: bytes) -> tuple[str, bool]:
    """(file extension, whether a browser shows it in <img>) from the first bytes."""
    for magic, ext, shown in _MAGIC:
        if data.startswith(magic):
            return ext, shown
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp", True
    head = data[:1024].lstrip().lower()
    if head.startswith((b"<?xml", b"<svg")) and b"<svg" in head:
        return "svg", True
    return "bin", False


@dataclass(frozen=True)
class BrowseOptions:
    out: str
    output: Optional[str] = None  # default OUT/browse (./browse for a build on the Hub, which is read-only)
    papers: int = DEFAULT_PAPERS  # 0: every paper
    paper_ids: tuple = ()  # only these papers (overrides ``papers``)
    chunk: int = CHUNK

    @property
    def folder(self) -> str:
        if self.output:
            return self.output.rstrip("/")
        if fsspec.core.split_protocol(self.out)[0] == "hf":
            return "browse"
        return posixpath.join(self.out.rstrip("/"), "browse")


@dataclass
class BrowseResult:
    folder: str
    index: str
    pages: list = field(default_factory=list)  # paths of paper pages, in index order
    total_papers: int = 0
    images: int = 0
    image_bytes: int = 0
    dead_letters: int = 0
    missing_ids: list = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        lines = [
            f"sciga browse -> {self.folder}",
            f"  paper pages   {len(self.pages):>6} of {self.total_papers} papers",
            f"  images        {self.images:>6} ({self.image_bytes / 1e6:.1f} MB)",
            f"  dead letters  {self.dead_letters:>6}",
            f"  took          {self.seconds:>5.1f}s",
            f"open {self.index}",
        ]
        if self.missing_ids:
            lines.insert(1, f"  not in the build: {', '.join(self.missing_ids)}")
        return "\n".join(lines)


def _connect(out: str):
    """DuckDB with the build's configs and task views; a remote OUT gets its fsspec
    filesystem registered first (huggingface_hub's for hf://)."""
    import duckdb

    from sciga.explore.views import connect

    con = duckdb.connect()
    con.execute("SET parquet_metadata_cache = true")  # each chunk's queries reread the same footers
    return connect(out, con)


def _facts_from_shards(con) -> BuildManifest:
    """The index header's facts when there is no manifest.json: versions from the papers'
    provenance, counts from the shards."""
    builder, schema = con.execute(
        "SELECT any_value(provenance.builder_version), any_value(provenance.schema_version) FROM papers"
    ).fetchall()[0]
    counts = dict(
        zip(
            ("papers", "figures", "subfigures", "mentions", "dead_letter"),
            con.execute(
                "SELECT (SELECT count(*) FROM papers), (SELECT count(*) FROM figures WHERE kind = 'figure'), "
                "(SELECT count(*) FROM figures WHERE kind = 'subfigure'), (SELECT count(*) FROM mentions), "
                "(SELECT count(*) FROM dead_letter)"
            ).fetchall()[0],
        )
    )
    return BuildManifest(schema_version=str(schema), builder_version=str(builder), counts=counts)


def _rows(cur, sql: str, params: Sequence = ()) -> list[dict]:
    cur.execute(sql, list(params))
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


class _Writer:
    """Files under the output folder, through fsspec."""

    def __init__(self, folder: str):
        self.fs, self.root = fsspec.core.url_to_fs(folder)
        self.folder = folder
        self._dirs: set = set()

    def path(self, rel: str) -> str:
        return posixpath.join(self.root, rel)

    def url(self, rel: str) -> str:
        return posixpath.join(self.folder, rel)

    def write(self, rel: str, data: bytes) -> None:
        parent = posixpath.dirname(self.path(rel))
        if parent not in self._dirs:
            self.fs.makedirs(parent, exist_ok=True)
            self._dirs.add(parent)
        with self.fs.open(self.path(rel), "wb") as f:
            f.write(data)


def _write_images(w: _Writer, paper_id: str, figures: list[dict], result: BrowseResult) -> dict:
    """figure id -> ImageFile with an href relative to the folder root."""
    out = {}
    for f in figures:
        data = (f.get("image") or {}).get("bytes")
        if not data:
            out[f["id"]] = ImageFile(None, f.get("image_error") or "no image embedded in the build")
            continue
        ext, shown = image_format(data)
        rel = f"images/{safe_name(paper_id)}/{safe_name(f['id'])}.{ext}"
        w.write(rel, data)
        result.images += 1
        result.image_bytes += len(data)
        note = None if shown else f"{ext} image: browsers do not show this format; the file is {rel}"
        out[f["id"]] = ImageFile(rel if shown else None, note)
    return out


def _relative(images: dict, prefix: str) -> dict:
    return {k: ImageFile(prefix + v.href if v.href else None, v.note) for k, v in images.items()}


def _teaser_href(view: PaperView, images: dict) -> Optional[str]:
    """The index thumbnail: the first teaser, else the GA's first component, with an image
    (a compound figure's first panel)."""
    p = view.paper
    ga = p.get("graphical_abstract") or {}
    for fid in list(p.get("teaser") or []) + list(ga.get("components") or []):
        for cand in [fid] + [s["id"] for s in view.subs.get(fid, [])]:
            img = images.get(cand)
            if img is not None and img.href:
                return img.href
    return None


def browse(options: BrowseOptions) -> BrowseResult:
    from sciga.explore.build_folder import check_is_build
    from sciga.transforms.write.manifest import read_manifest

    t0 = time.perf_counter()
    check_is_build(options.out)
    con = _connect(options.out)
    try:
        manifest = read_manifest(options.out)
    except FileNotFoundError:  # a published version carries the shards and the card, not the manifest
        manifest = _facts_from_shards(con)
    w = _Writer(options.folder)
    result = BrowseResult(folder=options.folder, index=w.url("index.html"))
    result.total_papers = con.execute("SELECT count(*) FROM papers").fetchone()[0]
    result.dead_letters = con.execute("SELECT count(*) FROM dead_letter").fetchone()[0]

    ids_cur = con.cursor()
    if options.paper_ids:
        wanted = sorted(set(options.paper_ids))
        found = {
            r[0]
            for r in con.execute(
                f"SELECT id FROM papers WHERE id IN ({', '.join('?' * len(wanted))})", wanted
            ).fetchall()
        }
        result.missing_ids = [i for i in wanted if i not in found]
        ids_cur.execute(f"SELECT id FROM papers WHERE id IN ({', '.join('?' * len(wanted))}) ORDER BY id", wanted)
        n_pages = len(found)
    else:
        limit = f" LIMIT {int(options.papers)}" if options.papers and options.papers > 0 else ""
        ids_cur.execute("SELECT id FROM papers ORDER BY id" + limit)
        n_pages = (
            min(result.total_papers, options.papers) if options.papers and options.papers > 0 else result.total_papers
        )

    w.write("style.css", CSS.lstrip().encode("utf-8"))
    fs = w.fs
    w.write("index.html", b"")  # creates the folder; the index is then streamed
    q = con.cursor()
    with fs.open(w.path("index.html"), "w", encoding="utf-8") as index:
        index.write(index_head(manifest, result.total_papers, n_pages, "style.css"))
        while True:
            batch = [r[0] for r in ids_cur.fetchmany(max(1, options.chunk))]
            if not batch:
                break
            marks = ", ".join("?" * len(batch))
            papers = _rows(q, f"SELECT * FROM papers WHERE id IN ({marks}) ORDER BY id", batch)
            figures = _rows(q, f"SELECT * FROM figures WHERE paper_id IN ({marks})", batch)
            mentions = _rows(q, f"SELECT * FROM mentions WHERE paper_id IN ({marks})", batch)
            dead = _rows(
                q, f"SELECT * FROM dead_letter WHERE paper_id IN ({marks}) ORDER BY stage, error_type, message", batch
            )
            for paper in papers:
                pid = paper["id"]
                figs = [f for f in figures if f["paper_id"] == pid]
                images = _write_images(w, pid, figs, result)
                view = PaperView(
                    paper,
                    figs,
                    [m for m in mentions if m["paper_id"] == pid],
                    [d for d in dead if d["paper_id"] == pid],
                    _relative(images, "../"),
                )
                rel = f"papers/{safe_name(pid)}.html"
                w.write(rel, view.html("../style.css", "../index.html").encode("utf-8"))
                result.pages.append(w.url(rel))
                index.write(index_row(view, rel, _teaser_href(view, images)))
            del papers, figures, mentions, dead
        index.write(index_dead_letters_head(result.dead_letters))
        shown = 0
        cur = con.cursor()
        cur.execute(
            "SELECT * FROM dead_letter ORDER BY paper_id NULLS FIRST, stage, error_type, input_uri, message "
            f"LIMIT {MAX_DEAD_LETTER_ROWS}"
        )
        cols = [d[0] for d in cur.description]
        while True:
            rows = cur.fetchmany(1000)
            if not rows:
                break
            for r in rows:
                index.write(dead_letter_row(dict(zip(cols, r))))
                shown += 1
        index.write(index_tail(result.dead_letters, shown))
    con.close()
    result.seconds = time.perf_counter() - t0
    return result
