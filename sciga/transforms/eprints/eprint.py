"""arXiv e-prints (tar.gz, a single gzipped .tex, PDF-only) read safely.

An e-print is untrusted input. It is read as a stream (``tarfile`` ``r|`` mode over a
counting gzip reader) and refused, as a whole, when any member is unsafe:

* an absolute path, a ``..`` component, a drive letter or a NUL in a name;
* a symbolic or hard link, a device, a FIFO or any other non-regular member;
* a member above ``max_member_bytes`` (checked on the tar header, before any data is
  inflated), a running total above ``max_total_bytes`` (checked on the bytes actually
  inflated, so lying headers and single-file gzip bombs are caught too), or more than
  ``max_members`` members;
* TeX text (the kept files that are not graphics: ``.tex``, ``.sty``, ``.bbl``, names
  without an extension...) above ``max_tex_bytes`` in all: the figure stage decodes and
  scans it several times over (two 250 MB ``.tex`` files, under the other limits, took
  1.6 GB), and no paper's TeX comes near it;
* a long-name or pax extension header above ``max_header_bytes`` (checked on its tar
  header, before ``tarfile`` would read it whole into memory), and GNU sparse members.

Every read is bounded while it streams: member data and single files are read in chunks
of at most ``CHUNK`` bytes and counted, and reading stops at the limit, so refusing an
oversized input costs the limit plus one chunk of memory, never the input's size.

Refusal is a ``StageError`` (stage ``tex_source``) naming the paper, the member and the
reason; nothing is written before the archive has been read completely. ``read_eprint``
keeps the files the figure stage needs in memory; ``safe_extract`` writes them to a
folder (atomically: a temporary folder renamed into place).
"""

from __future__ import annotations

import gzip
import io
import os
import posixpath
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Optional

from sciga.transforms.common.errors import StageError

STAGE = "tex_source"
TEX_EXTS = (".tex", ".ltx", ".latex", ".sty", ".cls", ".bbl", ".txt", ".pdf_tex", ".def", ".cfg")
GRAPHIC_EXTS = (
    ".pdf",
    ".png",
    ".jpg",
    ".jpeg",
    ".eps",
    ".ps",
    ".gif",
    ".tif",
    ".tiff",
    ".bmp",
    ".mps",
    ".eps.gz",
    ".ps.gz",
    ".svg",
    ".jbig2",
    ".jb2",
    ".epsf",
    ".epsi",
)


@dataclass(frozen=True)
class Limits:
    max_total_bytes: int = 512 * 1024 * 1024
    max_member_bytes: int = 256 * 1024 * 1024
    max_members: int = 5000
    max_tex_bytes: int = 64 * 1024 * 1024  # kept TeX text, all files together (see the module's docstring)
    max_name_chars: int = 1024
    max_header_bytes: int = 1 << 20  # a GNU long name / pax header is metadata, not data


DEFAULT_LIMITS = Limits()
CHUNK = 1 << 20  # bytes per read while streaming a member or a single file


@dataclass
class SourceTree:
    """The useful files of one e-print, by normalized relative path."""

    kind: str  # "tar" | "tex" | "pdf" | "ps" | "dir" | "empty"
    files: dict = field(default_factory=dict)  # path -> bytes
    members: int = 0
    total_bytes: int = 0  # inflated bytes read
    skipped: list = field(default_factory=list)  # members not kept (other file types)

    def tex_files(self) -> list[str]:
        return sorted(p for p in self.files if p.lower().endswith((".tex", ".ltx", ".latex")))


def is_tex_text(path: str) -> bool:
    """A kept file that the figure stage reads as TeX text (counted against ``max_tex_bytes``)."""
    return not path.lower().endswith(GRAPHIC_EXTS)


class _TexBudget:
    """The TeX text of one e-print, counted against ``limits.max_tex_bytes`` as files are kept."""

    def __init__(self, label: str, paper_id: Optional[str], limits: Limits):
        self.label, self.paper_id, self.limit, self.used = label, paper_id, limits.max_tex_bytes, 0

    def take(self, name: str, size: int) -> None:
        if not is_tex_text(name):
            return
        self.used += size
        if self.used > self.limit:
            raise _refuse(
                self.label,
                "size_bomb",
                f"its TeX files hold more than {self.limit // (1 << 20)} MiB of text (at {name!r})",
                self.paper_id,
            )


def default_keep(path: str) -> bool:
    low = path.lower()
    base = posixpath.basename(low)
    return low.endswith(TEX_EXTS) or low.endswith(GRAPHIC_EXTS) or base.startswith("00readme") or "." not in base


def _size_bomb(label: str, what: str, paper_id: Optional[str]) -> Callable[[int], StageError]:
    """What ``read_counted`` raises once a member holds more bytes than allowed."""

    def on_exceed(n: int) -> StageError:
        return _refuse(label, "size_bomb", what, paper_id)

    return on_exceed


def _refuse(label: str, error_type: str, why: str, paper_id: Optional[str]) -> StageError:
    return StageError(
        STAGE, error_type, f"{label}: {why}; the e-print was refused and nothing was extracted.", paper_id
    )


def safe_member_name(name: str) -> Optional[str]:
    """The normalized relative path of an archive member, or None if it is unsafe."""
    if not name or "\x00" in name:
        return None
    n = name.replace("\\", "/")
    if n.startswith("/") or (len(n) > 1 and n[1] == ":"):
        return None
    parts = [p for p in n.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        return None
    return "/".join(parts) or None


class _CountingReader(io.RawIOBase):
    """Reads an inflating stream and stops with a StageError past the byte budget."""

    def __init__(self, raw, budget: int, on_exceed: Callable[[int], StageError]):
        self.raw = raw
        self.budget = budget
        self.count = 0
        self.on_exceed = on_exceed

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        data = self.raw.read(len(b))
        n = len(data)
        self.count += n
        if self.count > self.budget:
            raise self.on_exceed(self.count)
        b[:n] = data
        return n


def detect_kind(head: bytes) -> str:
    if head[:2] == b"\x1f\x8b":
        return "gzip"
    if head[:4] == b"%PDF":
        return "pdf"
    if head[:4] == b"%!PS":
        return "ps"
    if head[:2] == b"BZ" and head[2:3] == b"h":
        return "bzip2"
    if len(head) >= 262 and head[257:262] == b"ustar":
        return "tar"
    if head[:4] == b"PK\x03\x04":
        return "zip"
    if not head.strip():
        return "empty"
    return "text"


def _is_tar_header(block: bytes) -> bool:
    if len(block) < 512:
        return False
    if block[257:262] == b"ustar":
        return True
    try:  # v7 tar: verify the header checksum
        chk = int(block[148:156].split(b"\x00", 1)[0].strip() or b"-1", 8)
    except ValueError:
        return False
    calc = sum(block[:148]) + 8 * 32 + sum(block[156:512])
    return chk == calc


def read_counted(f, limit: int, on_exceed: Callable[[int], StageError], chunk: int = CHUNK) -> bytes:
    """All of ``f`` read in chunks and counted; ``on_exceed(n)`` is raised as soon as more
    than ``limit`` bytes have arrived. Memory is the bytes kept plus one chunk (a BytesIO
    grows in place and hands its buffer over without a copy)."""
    out = io.BytesIO()
    n = 0
    while True:
        block = f.read(min(chunk, limit + 1 - n))
        if not block:
            return out.getvalue()
        n += len(block)
        if n > limit:
            raise on_exceed(n)
        out.write(block)


_EXTENSION_TYPES = (
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
)


class _GuardedTarInfo(tarfile.TarInfo):
    """A TarInfo that refuses an oversized long-name / pax header, or a sparse member,
    from its 512-byte header, before ``tarfile`` reads the extension into memory
    (``tarfile`` reads a GNU long name of any declared size whole, then hands it over)."""

    max_header_bytes = DEFAULT_LIMITS.max_header_bytes
    label = "e-print"
    paper_id: Optional[str] = None

    def _proc_member(self, tf):
        if self.type in _EXTENSION_TYPES and self.size > self.max_header_bytes:
            raise _refuse(
                self.label,
                "unsafe_archive",
                f"an extension header (type {self.type!r}) declares "
                f"{self.size} bytes of metadata, above {self.max_header_bytes}",
                self.paper_id,
            )
        if self.type == tarfile.GNUTYPE_SPARSE:
            raise _refuse(self.label, "unsafe_archive", f"member {self.name!r} is a GNU sparse file", self.paper_id)
        return super()._proc_member(tf)  # type: ignore[misc]  # tarfile's per-member hook, not in typeshed


def guarded_tarinfo(label: str, paper_id: Optional[str], limits: Limits) -> type:
    """A ``tarinfo=`` class for ``tarfile.open`` bound to one archive's label and limits
    (a fresh subclass per archive, so concurrent reads never share state)."""
    return type(
        "GuardedTarInfo",
        (_GuardedTarInfo,),
        {"max_header_bytes": limits.max_header_bytes, "label": label, "paper_id": paper_id},
    )


def read_eprint(
    data: bytes,
    *,
    label: str = "e-print",
    paper_id: Optional[str] = None,
    limits: Limits = DEFAULT_LIMITS,
    keep: Callable[[str], bool] = default_keep,
) -> SourceTree:
    """Bytes of an e-print -> SourceTree with the kept files in memory."""
    if not data:
        raise StageError(STAGE, "empty_source", f"{label} is empty; refetch it.", paper_id)
    kind = detect_kind(data[:512])
    if kind == "pdf":
        return SourceTree(kind="pdf", total_bytes=len(data))
    if kind == "ps":
        return SourceTree(kind="ps", total_bytes=len(data))
    if kind in ("zip", "bzip2"):
        raise StageError(
            STAGE,
            "unsupported_source",
            f"{label} is a {kind} archive, which arXiv does not serve as an e-print; check --eprint-base-url.",
            paper_id,
        )

    def too_big(n: int) -> StageError:
        return _refuse(
            label, "size_bomb", f"it inflates to more than {limits.max_total_bytes // (1 << 20)} MiB", paper_id
        )

    if kind == "gzip":
        stream = _CountingReader(gzip.GzipFile(fileobj=io.BytesIO(data)), limits.max_total_bytes, too_big)
    else:
        stream = _CountingReader(io.BytesIO(data), limits.max_total_bytes, too_big)
    buffered = io.BufferedReader(stream, buffer_size=1 << 16)
    try:
        head = buffered.peek(512)[:512]
        if _is_tar_header(head):
            tree = _read_tar(buffered, label, paper_id, limits, keep)
        else:
            single_limit = min(limits.max_member_bytes, limits.max_tex_bytes)  # a single file is TeX (or a PDF)
            body = read_counted(
                buffered,
                single_limit,
                lambda n: _refuse(
                    label,
                    "size_bomb",
                    f"its single file is larger than {single_limit // (1 << 20)} MiB",
                    paper_id,
                ),
            )
            sub = detect_kind(body[:512])
            if sub in ("pdf", "ps"):
                return SourceTree(kind=sub, total_bytes=len(body))
            if not body.strip():
                raise StageError(
                    STAGE,
                    "empty_source",
                    f"{label} holds no TeX (empty file); the paper has no usable source.",
                    paper_id,
                )
            tree = SourceTree(kind="tex", files={"main.tex": body}, members=1)
        tree.total_bytes = stream.count
        return tree
    except StageError:
        raise
    except (OSError, EOFError, zlib.error, tarfile.TarError) as e:
        raise StageError(
            STAGE,
            "corrupt_source",
            f"{label} is not a readable archive ({type(e).__name__}: {e}); refetch it or check the file.",
            paper_id,
        ) from None


def _read_tar(fileobj, label: str, paper_id: Optional[str], limits: Limits, keep) -> SourceTree:
    tree = SourceTree(kind="tar")
    declared_total = 0
    tex = _TexBudget(label, paper_id, limits)
    with tarfile.open(fileobj=fileobj, mode="r|", tarinfo=guarded_tarinfo(label, paper_id, limits)) as tf:
        for m in tf:
            tree.members += 1
            if tree.members > limits.max_members:
                raise _refuse(label, "too_many_members", f"it has more than {limits.max_members} members", paper_id)
            if len(m.name) > limits.max_name_chars:
                raise _refuse(label, "unsafe_archive", f"member name of {len(m.name)} characters is too long", paper_id)
            name = safe_member_name(m.name)
            if name is None:
                raise _refuse(
                    label, "unsafe_archive", f"member {m.name!r} is an absolute path or climbs out with '..'", paper_id
                )
            if m.issym() or m.islnk():
                raise _refuse(label, "unsafe_archive", f"member {m.name!r} is a link (to {m.linkname!r})", paper_id)
            if m.isdir():
                continue
            if not m.isreg():
                what = "device" if (m.ischr() or m.isblk()) else ("FIFO" if m.isfifo() else "special file")
                raise _refuse(label, "unsafe_archive", f"member {m.name!r} is a {what}", paper_id)
            if m.size > limits.max_member_bytes:
                raise _refuse(
                    label,
                    "size_bomb",
                    f"member {m.name!r} declares {m.size // (1 << 20)} MiB, above the "
                    f"{limits.max_member_bytes // (1 << 20)} MiB limit",
                    paper_id,
                )
            declared_total += m.size
            if declared_total > limits.max_total_bytes:
                raise _refuse(
                    label,
                    "size_bomb",
                    f"its members declare more than {limits.max_total_bytes // (1 << 20)} MiB",
                    paper_id,
                )
            f = tf.extractfile(m)
            if keep(name):
                tex.take(name, m.size)  # on the header, before the member is read
                data = (
                    read_counted(
                        f,
                        m.size,
                        _size_bomb(
                            label, f"member {m.name!r} holds more than the {m.size} bytes it declares", paper_id
                        ),
                    )
                    if f is not None
                    else b""
                )
                if len(data) != m.size:
                    raise StageError(
                        STAGE,
                        "corrupt_source",
                        f"{label}: member {m.name!r} is truncated; refetch the e-print.",
                        paper_id,
                    )
                tree.files[name] = data
            else:
                tree.skipped.append(name)
    if tree.members == 0:
        raise StageError(
            STAGE, "empty_source", f"{label} is an empty archive; the paper has no usable source.", paper_id
        )
    return tree


def read_source_dir(
    path: str,
    *,
    label: Optional[str] = None,
    paper_id: Optional[str] = None,
    limits: Limits = DEFAULT_LIMITS,
    keep: Callable[[str], bool] = default_keep,
) -> SourceTree:
    """An already-extracted source folder (local or fsspec), read with the same limits;
    links, files that resolve outside the folder and anything that is not a regular file
    (FIFOs, devices) are skipped, not followed; link loops end (``input_files.walk_files``)."""
    from sciga.transforms.common import input_files

    label = label or path
    fs, root = input_files.fs_and_path(path)
    tree = SourceTree(kind="dir")
    total = 0
    tex = _TexBudget(label, paper_id, limits)
    local = input_files.is_local(path)
    real_root = os.path.realpath(root) if local else None
    found = sorted(input_files.walk_files(root)) if local else sorted(fs.find(root))
    for p in found:
        rel = posixpath.relpath(p, root)
        name = safe_member_name(rel)
        if name is None:
            continue
        tree.members += 1
        if tree.members > limits.max_members:
            raise _refuse(label, "too_many_members", f"it has more than {limits.max_members} files", paper_id)
        if local:
            if os.path.islink(p) or not input_files.is_inside(p, real_root or "") or not os.path.isfile(p):
                tree.skipped.append(name)
                continue
        if not keep(name):
            tree.skipped.append(name)
            continue
        size = fs.size(p)
        if size > limits.max_member_bytes:
            raise _refuse(label, "size_bomb", f"file {name!r} is {size // (1 << 20)} MiB", paper_id)
        total += size
        if total > limits.max_total_bytes:
            raise _refuse(label, "size_bomb", f"its files exceed {limits.max_total_bytes // (1 << 20)} MiB", paper_id)
        tex.take(name, size)
        try:
            f = input_files.open_local(p, real_root) if local else fs.open(p, "rb")
        except (input_files.OutsideRootError, input_files.NotAFileError):
            tree.skipped.append(name)  # changed into a link or a FIFO since it was listed
            continue
        with f:
            tree.files[name] = read_counted(
                f,
                limits.max_member_bytes,
                _size_bomb(
                    label,
                    f"file {name!r} grew past {limits.max_member_bytes // (1 << 20)} MiB while it was read",
                    paper_id,
                ),
            )
    tree.total_bytes = total
    return tree


def safe_extract(
    data: bytes,
    dest: str,
    *,
    label: str = "e-print",
    paper_id: Optional[str] = None,
    limits: Limits = DEFAULT_LIMITS,
    keep: Callable[[str], bool] = lambda p: True,
) -> SourceTree:
    """Validate and extract an e-print into ``dest`` (created; replaced atomically).
    The archive is read completely in memory first, so a refused archive writes nothing."""
    tree = read_eprint(data, label=label, paper_id=paper_id, limits=limits, keep=keep)
    parent = os.path.dirname(os.path.abspath(dest)) or "."
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".extract-", dir=parent)
    try:
        for name, content in tree.files.items():
            target = os.path.join(tmp, *name.split("/"))
            if not os.path.abspath(target).startswith(os.path.abspath(tmp) + os.sep):
                raise _refuse(label, "unsafe_archive", f"member {name!r} resolves outside the folder", paper_id)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as f:
                f.write(content)
        if os.path.isdir(dest):
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return tree
