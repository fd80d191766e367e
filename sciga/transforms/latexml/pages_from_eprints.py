"""Pages made from e-prints: `sciga build --html-from latexml|auto`.

A paper whose input has metadata but no page (``auto``), or every paper with metadata
(``latexml``), gets its page by converting its e-print with LaTeXML, the engine ar5iv runs
(``latexml_convert.convert_eprint``). The e-print comes from the input itself
(``<stem>.src.tar.gz`` beside the metadata, the ``sciga fetch`` cache layout), from
``--tex-input`` folders, or from arXiv's bulk tars (``--eprints-bulk``).

Converted pages are kept under the build folder, ``.sciga/latexml/<id>/<id>.html`` with
their images and the metadata sidecar beside them: from there on they are ordinary pages
(parsed, linked, measured, reused by an incremental build like any other). A stamp records
the e-print's SHA-256, the LaTeXML version and options, so a rerun converts only papers
whose e-print or converter changed. A conversion that fails is a dead letter of stage
``latexml`` (timeout, fatal TeX error, no main file ...).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Optional

import apache_beam as beam
import fsspec
from apache_beam.metrics import Metrics

from sciga.schemas import ids
from sciga.schemas.build import ResultRef
from sciga.transforms.common.dead_letter import DEAD_LETTER_TAG, dead_letter_from
from sciga.transforms.inputs.pages import CONVERT_PREFIX, META_SUFFIX, read_sidecar_bytes, stem_of
from sciga.transforms.latexml.convert import LatexmlOptions

if TYPE_CHECKING:
    from sciga.transforms.eprints.bulk_reader import BulkEprints

STAGE = "latexml"
HTML_FROM = ("ar5iv", "latexml", "auto")


@dataclass(frozen=True)
class PageSourceOptions:
    html_from: str = (
        "ar5iv"  # ar5iv: pages only; latexml: convert every paper with metadata; auto: convert when no page
    )
    converted_root: str = ""  # <out>/.sciga/latexml
    latexml: LatexmlOptions = field(default_factory=LatexmlOptions)
    tex_dirs: tuple[str, ...] = ()
    bulk: Optional[BulkEprints] = None  # --eprints-bulk


def convert_request(meta_uri: str) -> str:
    return CONVERT_PREFIX + meta_uri


def meta_paper_id(meta_uri: str, data: bytes) -> str:
    """The paper id a sidecar names (else its file stem)."""
    try:
        pid = json.loads(data.decode("utf-8")).get("id")
    except (ValueError, UnicodeDecodeError, AttributeError):
        pid = None
    if pid and isinstance(pid, str):
        return ids.split_version(pid)[0]
    return stem_of(meta_uri[: -len(META_SUFFIX)] + ".html")


def source_meta(source_uri: str) -> tuple[str, bytes]:
    """(paper id, sidecar bytes) for a TeX source given without a sidecar: the id from its
    name; the sidecar names it only when it is an arXiv id (a local id stays the page's
    file-name id, as for any page without metadata)."""
    from sciga.transforms.inputs.tex_inputs import source_paper_id

    pid, how = source_paper_id(source_uri)
    if not pid:
        raise ValueError(f"{source_uri}: no paper id can be made from this name; rename the folder after the paper")
    return pid, json.dumps({"id": pid} if how == "filename" else {}, sort_keys=True).encode()


def _write(uri: str, data: bytes) -> None:
    fs, p = fsspec.core.url_to_fs(uri)
    fs.makedirs(posixpath.dirname(p), exist_ok=True)
    tmp = p + ".tmp"
    with fs.open(tmp, "wb") as f:
        f.write(data)
    fs.mv(tmp, p)


class PageFromEprint(beam.DoFn):
    """input-list line -> page URI. ``latexml:<meta uri>`` lines are converted (or found
    converted); every other line is a page already and passes through. A conversion that
    fails becomes a ``ResultRef`` of a dead-lettered input on the ``dead_letter`` output."""

    def __init__(self, options: PageSourceOptions):
        self.options = options
        self.converted = Metrics.counter("sciga", "latexml_converted")
        self.reused = Metrics.counter("sciga", "latexml_reused")
        self.failed = Metrics.counter("sciga", "latexml_failed")

    def setup(self):
        from sciga.transforms.latexml.convert import latexml_version

        try:
            self.version = latexml_version(self.options.latexml.latexmlc)
        except Exception:  # noqa: BLE001 - each conversion says so on its own
            self.version = ""

    def process(self, line: str):
        if not line.startswith(CONVERT_PREFIX):
            yield line
            return
        meta_uri = line[len(CONVERT_PREFIX) :]
        pid = None
        try:
            if meta_uri.endswith(META_SUFFIX):
                meta = read_sidecar_bytes(meta_uri)
                pid, source = meta_paper_id(meta_uri, meta), None
            else:  # a TeX folder or e-print given as an input: the id is its name, no sidecar needed
                pid, meta, source = *source_meta(meta_uri), meta_uri
            yield self._page(pid, meta_uri, meta, source)
        except Exception as e:  # noqa: BLE001 - every failure becomes a dead letter
            self.failed.inc()
            dl = dead_letter_from(e, STAGE, meta_uri, pid)
            yield beam.pvalue.TaggedOutput(
                DEAD_LETTER_TAG, ResultRef(uri=meta_uri, key=None, paper_id=pid, is_paper=False, dead=[dl])
            )

    def _eprint(self, pid: str, meta_uri: str, source: Optional[str] = None) -> tuple[bytes, str]:
        """(e-print bytes, where they came from): the source given, beside the metadata (also
        as ``<folder of the sidecar>/<id>/``), --tex-input, bulk."""
        from sciga.transforms.common.errors import StageError
        from sciga.transforms.eprints.tex_sources import locate_source

        page_like = meta_uri[: -len(META_SUFFIX)] + ".html"
        src = source or locate_source(page_like, pid, (*self.options.tex_dirs, posixpath.dirname(meta_uri)))
        if src is not None:
            return _read_eprint_source(src, pid), src
        if self.options.bulk is not None:
            return self.options.bulk.source(pid), self.options.bulk.label(pid)
        raise StageError(
            STAGE,
            "no_eprint",
            f"{meta_uri}: paper {pid} has no page and no e-print to convert; fetch its "
            "e-print (`sciga fetch --parts eprint`) or give --eprints-bulk / --tex-input.",
            pid,
        )

    def _page(self, pid: str, meta_uri: str, meta: bytes, source: Optional[str] = None) -> str:
        from sciga.transforms.latexml.convert import convert_eprint

        o = self.options
        stem = ids.safe_filename(pid)
        folder = posixpath.join(o.converted_root, stem)
        page = posixpath.join(folder, stem + ".html")
        data, where = self._eprint(pid, meta_uri, source)
        stamp = json.dumps(
            {
                "eprint_sha256": hashlib.sha256(data).hexdigest(),
                "latexml": self.version,
                "options": asdict(o.latexml),
                "meta_sha256": hashlib.sha256(meta).hexdigest(),
            },
            sort_keys=True,
            default=str,
        )
        fs, _ = fsspec.core.url_to_fs(folder)
        stamp_uri = posixpath.join(folder, "stamp.json")
        try:
            with fsspec.open(stamp_uri, "r") as f:
                if f.read() == stamp and fs.exists(fsspec.core.url_to_fs(page)[1]):
                    self.reused.inc()
                    return page
        except (FileNotFoundError, OSError):
            pass
        result = convert_eprint(data, paper_id=pid, label=where, options=o.latexml)
        for rel, blob in sorted(result.assets.items()):
            _write(posixpath.join(folder, rel), blob)
        _write(posixpath.join(folder, stem + META_SUFFIX), meta)
        _write(page, result.html)
        _write(stamp_uri, stamp.encode())  # last: a page without its stamp is converted again
        self.converted.inc()
        return page


def _read_eprint_source(src: str, pid: str) -> bytes:
    """The e-print at ``src`` as bytes for the converter: a file as it is, an extracted
    folder packed as a tar.gz (names sorted). Both are read as the figure stage reads them:
    inside the folder they were found in, regular files only, within the e-print limits."""
    from sciga.transforms.common import input_files
    from sciga.transforms.common.errors import StageError
    from sciga.transforms.eprints.eprint import DEFAULT_LIMITS, read_source_dir
    from sciga.transforms.eprints.tex_sources import lone_eprint

    root = input_files.parent_of(src)
    fs, path = input_files.fs_and_path(src)
    try:
        lone = lone_eprint(src) if fs.isdir(path) else None
        if lone is not None:  # a paper's folder holding just its e-print (1709.07020/1709.07020v1.tar.gz)
            if input_files.is_local(src):
                input_files.check_inside(path, input_files.local_path(root))
            src, path = lone, input_files.fs_and_path(lone)[1]
            root = input_files.parent_of(src)
        if fs.isdir(path):
            if input_files.is_local(src):
                input_files.check_inside(path, input_files.local_path(root))
            return _pack_files(read_source_dir(src, label=src, paper_id=pid, keep=lambda _: True).files)
        data = input_files.read_input(src, root, DEFAULT_LIMITS.max_total_bytes)
    except (input_files.OutsideRootError, input_files.NotAFileError) as e:
        raise StageError(STAGE, e.kind, f"{src}: {e.strerror}; the e-print was not read.", pid) from None
    if len(data) > DEFAULT_LIMITS.max_total_bytes:
        raise StageError(
            STAGE,
            "size_bomb",
            f"{src} is larger than {DEFAULT_LIMITS.max_total_bytes >> 20} MiB; the e-print was not read.",
            pid,
        )
    return data


def _pack_files(files: dict) -> bytes:
    """Files by relative path as a tar.gz (the converter's input), names sorted."""
    import gzip
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for rel in sorted(files):
            blob = files[rel]
            info = tarfile.TarInfo(rel)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    return gzip.compress(buf.getvalue(), mtime=0)


class PagesFromEprints(beam.PTransform):
    """PCollection[input-list line] -> {``pages``: page URI, ``dead_letter``: ResultRef}."""

    def __init__(self, options: PageSourceOptions):
        super().__init__()
        self.options = options

    def expand(self, lines):
        return lines | "PageFromEprint" >> beam.ParDo(PageFromEprint(self.options)).with_outputs(
            DEAD_LETTER_TAG, main="pages"
        )
