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
import re
import zipfile
from collections.abc import Iterator
from typing import Optional

from sciga.schemas import ids
from sciga.transforms.common.errors import StageError
from sciga.transforms.common.input_files import NotAFileError, fs_and_path, open_input
from sciga.transforms.inputs import refused

PAGE_SUFFIXES = (".html", ".htm", ".xhtml", ".html.gz")


def is_dump(uri: str) -> bool:
    return uri.lower().endswith(".zip")


def _abs(uri: str) -> str:
    fs, path = fs_and_path(uri)
    proto = fs.protocol[0] if isinstance(fs.protocol, (list, tuple)) else fs.protocol
    if proto in ("file", "local"):
        return path
    return f"{proto}://{path}"


def unsafe_name(name: str) -> Optional[str]:
    """Why a member cannot be read by its name (absolute, climbing out with ``..``, holding
    ``::`` or a NUL byte, not UTF-8), or None."""
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:[/\\]", name):
        return "is absolute"
    if ".." in name.replace("\\", "/").split("/"):
        return "climbs out of the archive with '..'"
    if "::" in name:
        return "holds '::', which cannot be addressed inside an archive"
    if "\x00" in name or not refused.is_utf8(name):
        return "holds a NUL byte or bytes that are not UTF-8"
    return None


def iter_members(dump_uri: str) -> Iterator[tuple[str, int, Optional[str]]]:
    """(member name, uncompressed size, why it is unsafe or None) of every page in a dump,
    in archive order."""
    try:
        with open_input(dump_uri) as f, zipfile.ZipFile(f) as zf:  # a regular file (a FIFO named .zip never blocks)
            for info in zf.infolist():
                name = info.filename
                if info.is_dir() or not name.lower().endswith(PAGE_SUFFIXES):
                    continue
                yield name, info.file_size, unsafe_name(name)
    except (zipfile.BadZipFile, NotAFileError) as e:
        raise FileNotFoundError(f"{dump_uri} is not a readable zip archive ({e}); check the dump file.") from None


def iter_pages(dump_uri: str) -> Iterator[tuple[str, int]]:
    """(member name, uncompressed size) of every page in a dump that can be read by its name,
    in archive order."""
    for name, size, why in iter_members(dump_uri):
        if why is None:
            yield name, size


def page_uris(dump_uri: str) -> list[str]:
    """Chained fsspec URIs of the pages in a dump, sorted; a member with an unsafe name is a
    ``refused.RefusedInput`` (counted and dead-lettered, never read)."""
    outer = _abs(dump_uri)
    out: list[str] = []
    for name, _, why in iter_members(dump_uri):
        uri = f"zip://{refused.escaped_name(name)}::{outer}"
        out.append(uri if why is None else refused.unsafe_member(uri, why))
    return sorted(out)


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
    fs, path = fs_and_path(dump_uri)
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
