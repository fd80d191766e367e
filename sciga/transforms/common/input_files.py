"""The one door through which a build reads the files it is given (pages, images, metadata
sidecars, TeX sources), and walks the folders that hold them.

Three rules, for local paths (remote stores have no links, FIFOs or devices):

* **Contained.** A file is read only when its real path (every link resolved) lies inside
  the real path of the folder it was found from (``root``): the page's folder for a page,
  its images, its sidecar and a source beside it; the ``--metadata`` / ``--tex-input``
  folder for what is found there. A link that leads out is refused (``OutsideRootError``),
  so a symlink cannot smuggle ``/etc/...`` or someone's private PNG into a published
  dataset. The check runs before the open (nothing outside is even opened) and again on the
  open descriptor (``/proc/self/fd``), so a link swapped in between is caught too.
* **Regular files only.** A FIFO, socket or device is never read (``NotAFileError``): it is
  refused on ``stat`` before it is opened, and opened with ``O_NONBLOCK`` so that a file
  turned into a FIFO in between cannot block the open either.
* **Walks end.** ``walk_files`` follows links to folders that stay inside the walked
  folder, each real folder once (by device and inode): ``self -> .`` or ``loop -> ..`` cannot
  make a listing hang or list a page twice.

Local paths are taken as they are: a file named ``2401.00001::x.html`` is a local file, not
an fsspec chain (only a URL with a protocol, ``zip://a.html::dump.zip``, is one).
"""

from __future__ import annotations

import errno
import fcntl
import functools
import os
import posixpath
import re
import stat
from collections.abc import Iterator
from typing import BinaryIO, Optional, cast

import fsspec

LOCAL_PROTOCOLS = ("file", "local")
_PROTOCOL_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")


class OutsideRootError(OSError):
    """A path whose real location (after links) lies outside the folder it must stay in."""

    kind = "outside_input"

    def __init__(self, path: str, root: str):
        super().__init__(
            errno.EACCES, f"{path} links outside {root}; files outside the folder they were given in are not read"
        )
        self.path, self.root = path, root


class NotAFileError(OSError):
    """A FIFO, socket, device or folder where a regular file is read."""

    kind = "not_a_file"

    def __init__(self, path: str, what: str):
        super().__init__(errno.EINVAL, f"{path} is {what}, not a regular file; only regular files are read")
        self.path, self.what = path, what


# ------------------------------------------------------------------ URIs


def protocol(uri: str) -> Optional[str]:
    """``gs`` for ``gs://b/x``, ``zip`` for ``zip://a::b.zip``; None for a local path."""
    m = _PROTOCOL_RE.match(uri)
    return m.group(1).lower() if m else None


def is_local(uri: str) -> bool:
    return protocol(uri) in (None, *LOCAL_PROTOCOLS)


def local_path(uri: str) -> str:
    """The path of a local URI (``file:///a/b`` -> ``/a/b``)."""
    m = _PROTOCOL_RE.match(uri)
    return uri[m.end() :] if m else uri


def split_chain(uri: str) -> tuple[str, Optional[str]]:
    """``zip://a/b.html::/x.zip`` -> (``zip://a/b.html``, ``/x.zip``). A local path is never a
    chain, whatever its name holds."""
    if is_local(uri) or "::" not in uri:
        return uri, None
    inner, outer = uri.split("::", 1)
    return inner, outer


def fs_and_path(uri: str):
    """(fsspec filesystem, path) for ``uri``; a local path keeps its name (``::`` included)."""
    if is_local(uri):
        from fsspec.implementations.local import LocalFileSystem

        return LocalFileSystem(), local_path(uri)
    return fsspec.core.url_to_fs(uri)


# ------------------------------------------------------------------ containment


def _real(path: str) -> str:
    return os.path.realpath(path)


@functools.lru_cache(maxsize=4096)
def _real_root(root: str) -> str:
    """A root's real path, resolved once per process: the folders a build reads from do not
    move while it runs (and if one is swapped for a link, its files are judged against where
    it was, which refuses more, never less)."""
    return os.path.realpath(root)


def _under(real: str, base: str) -> bool:
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


def is_inside(path: str, root: str) -> bool:
    """True when ``path``'s real location is ``root``'s real location or below it."""
    return _under(_real(path), _real_root(root))


def check_inside(path: str, root: Optional[str]) -> None:
    """Raise ``OutsideRootError`` when ``path`` resolves outside ``root``. The common case
    costs an ``lstat`` per component below ``root`` (no link there: inside); a full
    ``realpath`` runs only when a link is met or ``path`` is not spelled below ``root``
    (a path that does not exist passes: opening it fails as usual)."""
    if root is None:
        return
    prefix = root.rstrip(os.sep) + os.sep
    if not path.startswith(prefix) or "/../" in path or path.endswith("/.."):
        if not is_inside(path, root):
            raise OutsideRootError(path, root)
        return
    i = len(prefix) - 1
    while i < len(path):
        j = path.find(os.sep, i + 1)
        j = len(path) if j < 0 else j
        try:
            st = os.lstat(path[:j])
        except (FileNotFoundError, NotADirectoryError):
            return
        if stat.S_ISLNK(st.st_mode):
            if not is_inside(path, root):
                raise OutsideRootError(path, root)
            return
        i = j


def _kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _fd_path(fd: int) -> Optional[str]:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # no /proc (not Linux): the check before the open stands
        return None


def open_local(path: str, root: Optional[str] = None) -> BinaryIO:
    """A local regular file inside ``root`` (when given), opened for reading."""
    check_inside(path, root)
    st = os.stat(path)  # FileNotFoundError / PermissionError as they are
    if not stat.S_ISREG(st.st_mode):
        raise NotAFileError(path, _kind_of(st.st_mode))
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotAFileError(path, _kind_of(st.st_mode))
        opened = _fd_path(fd)  # the kernel's resolved path of what was opened
        if root is not None and opened is not None and not _under(opened, _real_root(root)):
            raise OutsideRootError(path, root)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def open_input(uri: str, root: Optional[str] = None) -> BinaryIO:
    """``uri`` opened for reading: a local file through ``open_local`` (contained, regular),
    anything else through fsspec."""
    if is_local(uri):
        return open_local(local_path(uri), None if root is None else local_path(root))
    fs, path = fsspec.core.url_to_fs(uri)
    return cast(BinaryIO, _HoldingFilesystem(fs.open(path, "rb"), fs))


class _HoldingFilesystem:
    """A remote file that keeps its filesystem object alive: a member of a chained URL
    (``zip://a.html::dump.zip``) is read through the zip's file, which closes when that
    filesystem object is collected."""

    def __init__(self, f, fs):
        self._f, self._fs = f, fs

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()
        return False


def read_input(uri: str, root: Optional[str] = None, max_bytes: Optional[int] = None) -> bytes:
    """The bytes of ``uri`` (at most ``max_bytes + 1`` of them, so a caller can tell "too large")."""
    with open_input(uri, root) as f:
        return f.read() if max_bytes is None else read_at_most(f, max_bytes)


def read_at_most(f: BinaryIO, max_bytes: int) -> bytes:
    """At most ``max_bytes + 1`` bytes of ``f``. A local file is read at its size (asking for
    ``max_bytes + 1`` at once makes Python allocate that much first: 64 MiB per image)."""
    try:
        size = os.fstat(f.fileno()).st_size
    except (AttributeError, OSError, ValueError):
        return f.read(max_bytes + 1)
    data = f.read(min(size, max_bytes) + 1)
    if len(data) > size and len(data) <= max_bytes:  # grew while read: the rest, up to the limit
        data += f.read(max_bytes + 1 - len(data))
    return data


def file_size(uri: str, root: Optional[str] = None) -> Optional[int]:
    """Size of a regular file; None when nothing is there. Raises ``OutsideRootError`` /
    ``NotAFileError`` for what is there but may not be read."""
    if not is_local(uri):
        fs, path = fsspec.core.url_to_fs(uri)
        try:
            if not fs.isfile(path):
                return None
            return int(fs.size(path))
        except FileNotFoundError:
            return None
    path = local_path(uri)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    check_inside(path, None if root is None else local_path(root))
    if not stat.S_ISREG(st.st_mode):
        raise NotAFileError(path, _kind_of(st.st_mode))
    return st.st_size


def parent_of(uri: str) -> str:
    """The folder a file is in (as named, links not resolved): the root its neighbours are
    read within."""
    inner, _ = split_chain(uri)
    return posixpath.dirname(inner.replace("\\", "/")) or "."


# ------------------------------------------------------------------ walking


def walk_files(root: str) -> Iterator[str]:
    """Every entry below local folder ``root`` that is not a folder (files, links to files,
    FIFOs...: readers refuse what they must), as paths under ``root``, sorted within each
    folder. Links to folders are followed only when they stay inside ``root``; each real
    folder is walked once."""
    base = _real_root(root)
    seen: set[tuple[int, int]] = set()
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            st = os.stat(folder)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in seen:
            continue
        seen.add((st.st_dev, st.st_ino))
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        subfolders = []
        for e in entries:
            try:
                is_dir = e.is_dir(follow_symlinks=True)
            except OSError:
                is_dir = False
            if not is_dir:
                yield e.path
            elif not e.is_symlink() or is_inside(e.path, base):
                subfolders.append(e.path)
        stack.extend(reversed(subfolders))
