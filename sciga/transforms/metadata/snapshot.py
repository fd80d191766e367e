"""The arXiv metadata snapshot (JSON lines, one paper per line, as distributed on Kaggle)
-> ``<id>.meta.json`` of every selected paper in the fetch cache. Nothing is fetched.

The snapshot is read as a stream from any fsspec path (a local file, ``gs://``, ``s3://``,
``https://``), compressed or not (``.gz``, ``.bz2``, ``.xz``, ``.zst`` by extension), one line
at a time: memory does not grow with the file (about 4 GB, 2.7 million lines in 2026).

Every line is parsed as JSON and its id, categories and versions are checked, because the
selection needs them; the other fields are checked for the papers the selection keeps. A
line that fails (not JSON, not an object, a bad id, no versions, a line longer than
``max_line_bytes``...) never stops the import: it is counted and reported with its line
number. Rerunning the same import is cheap and changes nothing (``MetadataSink``), so a
killed import is resumed by running it again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Optional

from sciga.transforms.fetch.cache import FetchCache
from sciga.transforms.metadata.arxiv_records import (
    RecordError,
    first_version_day,
    meta_from_snapshot,
    paper_id_of,
    versions_of,
)
from sciga.transforms.metadata.cache_sink import ImportReport, MetadataSink
from sciga.transforms.metadata.corpus_selection import Selection

CHECKPOINT_EVERY = 5000  # records between durability barriers


@dataclass(frozen=True)
class SnapshotOptions:
    uri: str
    selection: Selection = field(default_factory=Selection)
    max_line_bytes: int = 16 << 20  # the longest real record is well under 1 MB


def open_snapshot(uri: str):
    """(raw file, decompressed stream) of a snapshot on any fsspec path; the raw file's
    position tells how far the read has got."""
    import fsspec
    from fsspec.compression import compr
    from fsspec.utils import infer_compression

    try:
        fs, path = fsspec.core.url_to_fs(uri)
        raw = fs.open(path, "rb")
    except (OSError, ValueError) as e:
        raise FileNotFoundError(f"--metadata-snapshot {uri} could not be opened ({e}); check the path.") from None
    kind = infer_compression(path)
    if kind is None:
        return raw, raw
    return raw, compr[kind](raw, mode="rb")


def snapshot_size(uri: str) -> Optional[int]:
    import fsspec

    try:
        fs, path = fsspec.core.url_to_fs(uri)
        return fs.size(path)
    except (OSError, ValueError, NotImplementedError):
        return None


def iter_lines(stream, max_line_bytes: int) -> Iterator[tuple[int, Optional[bytes]]]:
    """(line number from 1, bytes without the newline); None for a line over the limit
    (its bytes are skipped, not held)."""
    n = 0
    while True:
        line = stream.readline(max_line_bytes + 1)
        if not line:
            return
        n += 1
        if len(line) > max_line_bytes and not line.endswith(b"\n"):
            while True:  # drain the rest of the over-long line
                more = stream.readline(1 << 20)
                if not more or more.endswith(b"\n"):
                    break
            yield n, None
            continue
        yield n, line.rstrip(b"\r\n")


def _preselect(obj: dict, selection: Selection) -> bool:
    """The selection, from the fields it needs only (RecordError if they, or the id, are broken)."""
    paper_id_of(obj.get("id"))
    cats = obj.get("categories")
    if not isinstance(cats, str) or not cats.split():
        raise RecordError("categories is missing or not a space-separated string")
    if not selection.category_matches(cats.split()):
        return False
    if selection.dated:
        versions = obj.get("versions")
        if not isinstance(versions, list) or not all(isinstance(v, dict) for v in versions):
            raise RecordError("versions is not a list of {version, created}")
        _, first, _ = versions_of([(v.get("version"), v.get("created")) for v in versions])
        return selection.date_matches(first)
    return True


_decode = json.JSONDecoder().decode


def select_line(line: bytes, selection: Selection) -> Optional[dict]:
    """One snapshot line -> its metadata when the selection keeps it, else None.
    RecordError (message prefixed with the paper id when known) if the line is malformed."""
    try:
        obj = _decode(line.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise RecordError(f"not UTF-8 ({e.reason} at byte {e.start})") from None
    except ValueError as e:
        raise RecordError(f"not JSON ({e})") from None
    if not isinstance(obj, dict):
        raise RecordError("the line is not a JSON object")
    try:
        if not _preselect(obj, selection):
            return None
        meta = meta_from_snapshot(obj)
    except RecordError as e:
        pid = obj.get("id")
        raise RecordError((f"{pid}: " if isinstance(pid, str) else "") + str(e)) from None
    return meta if selection.date_matches(first_version_day(meta)) else None


def import_snapshot(
    options: SnapshotOptions,
    cache: FetchCache,
    *,
    progress: Optional[Callable[[int], None]] = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> ImportReport:
    """Read the snapshot, write the selected papers' metadata into ``cache``.
    ``progress(bytes_read)`` is called now and then; Ctrl-C (KeyboardInterrupt) or
    ``should_stop()`` ends it early with everything written so far kept."""
    t0 = time.time()
    sel = options.selection
    report = ImportReport(mode="metadata-snapshot", source=options.uri, cache=cache.root, selection=sel.to_json())
    sink = MetadataSink(cache, "snapshot")
    raw, stream = open_snapshot(options.uri)
    last_progress = 0.0
    try:
        for lineno, line in iter_lines(stream, options.max_line_bytes):
            if line is not None and not line.strip():
                continue
            report.read += 1
            if line is None:
                report.problem(f"line {lineno}", f"longer than {options.max_line_bytes:,} bytes; not a metadata record")
                continue
            try:
                meta = select_line(line, sel)
            except RecordError as e:
                report.problem(f"line {lineno}", str(e))
                continue
            if meta is not None:
                report.selected += 1
                sink.put(meta, {"line": lineno})
                if report.selected % CHECKPOINT_EVERY == 0:
                    sink.checkpoint()
            if progress is not None and lineno % 1000 == 0 and time.time() - last_progress > 0.5:
                last_progress = time.time()
                progress(_tell(raw))
            if should_stop():
                report.interrupted = True
                break
    except KeyboardInterrupt:
        report.interrupted = True
    except OSError as e:
        report.stopped = f"{options.uri} could not be read to the end ({e}); check the file and rerun."
    finally:
        sink.checkpoint()
        _close(raw, stream)
    if progress is not None:
        progress(_tell(raw))
    report.complete = not (report.interrupted or report.stopped)
    report.take_counts(sink.counts)
    report.seconds = time.time() - t0
    return report


def count_selected(options: SnapshotOptions, *, ids_out: Optional[list] = None) -> tuple[int, int, int]:
    """(lines read, papers selected, malformed lines) without writing anything (``sciga
    fetch --plan``). ``ids_out`` receives the selected ids when given."""
    raw, stream = open_snapshot(options.uri)
    read = selected = bad = 0
    try:
        for _, line in iter_lines(stream, options.max_line_bytes):
            if line is not None and not line.strip():
                continue
            read += 1
            try:
                if line is None:
                    raise RecordError("too long")
                meta = select_line(line, options.selection)
            except RecordError:
                bad += 1
                continue
            if meta is not None:
                selected += 1
                if ids_out is not None:
                    ids_out.append(meta["id"])
    finally:
        _close(raw, stream)
    return read, selected, bad


def _close(raw, stream) -> None:
    try:
        stream.close()
        if raw is not stream:
            raw.close()
    except OSError:
        pass


def _tell(raw) -> int:
    try:
        return raw.tell()
    except (OSError, ValueError):
        return 0
