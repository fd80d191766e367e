"""ar5iv dataset dumps: zip archives of LaTeXML pages (one folder per month), read in
place. Nothing is unpacked to disk: members are listed from the zip's central directory
and streamed with a size limit (a member whose header lies about its size is still cut
off at the limit).

Pages inside a dump are addressed with fsspec's chained URLs,
``zip://2401/2401.13641.html::/data/ar5iv-2024-04.zip``, so ``sciga build --input
dump.zip`` reads them through the same code as local files.
"""

from __future__ import annotations

import posixpath
import zipfile
from collections.abc import Iterator
from typing import Optional

import fsspec

from sciga.schemas import ids
from sciga.transforms.common.errors import StageError
from sciga.transforms.common.input_files import NotAFileError, open_input

PAGE_SUFFIXES = (".html", ".htm", ".xhtml", ".html.gz")


def is_dump(uri: str) -> bool:
    return uri.lower().endswith(".zip")


def _abs(uri: str) -> str:
    fs, path = fsspec.core.url_to_fs(uri)
    proto = fs.protocol[0] if isinstance(fs.protocol, (list, tuple)) else fs.protocol
    if proto in ("file", "local"):
        return path
    return f"{proto}://{path}"


def iter_pages(dump_uri: str) -> Iterator[tuple[str, int]]:
    """(member name, uncompressed size) of every page in a dump, in archive order.
    Members with unsafe names (absolute, ``..``) are skipped."""
    try:
        with open_input(dump_uri) as f, zipfile.ZipFile(f) as zf:  # a regular file (a FIFO named .zip never blocks)
            for info in zf.infolist():
                name = info.filename
                if info.is_dir() or not name.lower().endswith(PAGE_SUFFIXES):
                    continue
                if name.startswith("/") or ".." in name.split("/"):
                    continue
                yield name, info.file_size
    except (zipfile.BadZipFile, NotAFileError) as e:
        raise FileNotFoundError(f"{dump_uri} is not a readable zip archive ({e}); check the dump file.") from None


def page_uris(dump_uri: str) -> list[str]:
    """Chained fsspec URIs of the pages in a dump, sorted."""
    outer = _abs(dump_uri)
    return sorted(f"zip://{name}::{outer}" for name, _ in iter_pages(dump_uri))


def paper_id_of_member(name: str) -> Optional[str]:
    base = posixpath.basename(name)
    for suf in sorted(PAGE_SUFFIXES, key=len, reverse=True):
        if base.lower().endswith(suf):
            base = base[: -len(suf)]
            break
    pid, _ = ids.paper_id_from_filename(base)
    return pid


def index_by_id(dump_uris: list[str]) -> dict[str, tuple[str, str]]:
    """paper id -> (dump URI, member), for ``sciga fetch --html-dump``. Later dumps win."""
    out: dict[str, tuple[str, str]] = {}
    for d in dump_uris:
        for name, _ in iter_pages(d):
            pid = paper_id_of_member(name)
            if pid:
                out[pid] = (d, name)
    return out


def read_member(dump_uri: str, member: str, max_bytes: int) -> bytes:
    """One page from a dump, streamed, at most ``max_bytes`` (else StageError)."""
    fs, path = fsspec.core.url_to_fs(dump_uri)
    try:
        with fs.open(path, "rb") as f, zipfile.ZipFile(f) as zf:
            with zf.open(member) as m:
                out = bytearray()
                while True:
                    chunk = m.read(1 << 20)
                    if not chunk:
                        break
                    out += chunk
                    if len(out) > max_bytes:
                        raise StageError(
                            "read",
                            "too_large",
                            f"{member} in {dump_uri} is larger than "
                            f"{max_bytes // (1 << 20)} MiB; raise --max-page-mb if it is genuine.",
                        )
                return bytes(out)
    except KeyError:
        raise StageError("read", "missing", f"{member} is not in {dump_uri}; the dump index is stale.") from None
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise StageError(
            "read", "unreadable", f"{member} in {dump_uri} could not be read ({e}); check the dump file."
        ) from None
