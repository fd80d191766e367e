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

Names are taken as they are: a file named ``2401.00001::x.html`` is a local file and an
object ``s3://b/2401.00001::x.html`` one object, never an fsspec chain. Only a URL of an
archive or cache protocol (``zip://a.html::dump.zip``) is a chain, split at its first ``::``
(a member named with ``::`` cannot be addressed, so the listing refuses it). A name holding a
NUL byte names no file on any disk: it is refused (``BadNameError``) before anything is opened.

Listing a build's inputs (``walk_met``) also reports what it meets but will not read: pages
behind a link to a folder outside the input (their names, never their bytes) and pages whose
path is longer than the system's file calls take.
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
# Protocols whose URL names a file inside another one (``inner::outer``); every other protocol's
# URL is one name, ``::`` included (an S3 key or a GCS object may hold it).
CHAIN_PROTOCOLS = frozenset({"zip", "tar", "libarchive", "simplecache", "filecache", "blockcache"})
# Linux's PATH_MAX counts the final NUL: a path of 4,096 bytes or more fails every call that takes it.
PATH_MAX = 4096
_PROTOCOL_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")


class OutsideRootError(OSError):
    """A path whose real location (after links) lies outside the folder it must stay in."""

    kind = "outside_input"

    def __init__(self, path: str, root: str):
        super().__init__(
            errno.EACCES, f"{path} links outside {root}; files outside the folder they were given in are not read"
        )
        self.path, self.root = path, root


class BadNameError(OSError):
    """A name no file can have (a NUL byte in it): nothing is looked up or opened."""

    def __init__(self, path: str, why: str = "holds a NUL byte"):
        super().__init__(errno.EINVAL, f"{path!r} {why}, which no file name can")
        self.path, self.why = path, why


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


def is_chain(uri: str) -> bool:
    """``zip://a/b.html::/x.zip`` is a chain; ``s3://b/a::b.html`` and local names are not."""
    return "::" in uri and protocol(uri) in CHAIN_PROTOCOLS


def split_chain(uri: str) -> tuple[str, Optional[str]]:
    """``zip://a/b.html::/x.zip`` -> (``zip://a/b.html``, ``/x.zip``). Only an archive or cache
    URL is a chain; a local path or an object store's key never is, whatever its name holds."""
    if not is_chain(uri):
        return uri, None
    inner, outer = uri.split("::", 1)
    return inner, outer


def check_name(uri: str) -> None:
    """Raise ``BadNameError`` for a name no file can have (a NUL byte)."""
    if "\x00" in uri:
        raise BadNameError(uri)


def fs_and_path(uri: str):
    """(fsspec filesystem, path) for ``uri``: a local path and an object store's key keep their
    names (``::`` included); only an archive URL is parsed as fsspec's chain."""
    check_name(uri)
    if is_local(uri):
        from fsspec.implementations.local import LocalFileSystem

        return LocalFileSystem(), local_path(uri)
    if is_chain(uri):
        return fsspec.core.url_to_fs(uri)
    # What url_to_fs does for a URL of one part, without splitting it at "::" (fsspec would
    # hand the part after it to the store's constructor: "TypeError: AioSession...").
    cls = fsspec.get_filesystem_class(protocol(uri))
    return fsspec.filesystem(protocol(uri), **cls._get_kwargs_from_urls(uri)), cls._strip_protocol(uri)


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
    check_name(path)
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
    fs, path = fs_and_path(uri)
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
    check_name(uri)
    if not is_local(uri):
        fs, path = fs_and_path(uri)
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


# What the listing meets below a folder, besides the files it may read.
OUTSIDE = "outside"  # behind a link to a folder that leads out of the walked folder
TOO_LONG = "too_long"  # a path of PATH_MAX bytes or more: no file call takes it
# Entries looked at below one link that leads out, at most: a link to "/" must not make the
# listing walk the machine. Past it the link itself is reported (``LinkedOut.truncated``).
MAX_OUTSIDE_ENTRIES = 10_000


def path_bytes(path: str) -> int:
    return len(os.fsencode(path))


def walk_met(root: str) -> Iterator[tuple[str, Optional[str]]]:
    """Every entry below local folder ``root`` that is not a folder, as (path, why): ``why``
    None for a file ``walk_files`` yields (the same files, in the same order), ``OUTSIDE`` for
    one met behind a link to a folder outside ``root`` (listed by name: nothing there is
    opened, links further out are not followed, at most ``MAX_OUTSIDE_ENTRIES`` entries a link;
    past that, the link itself comes as ``OUTSIDE``), ``TOO_LONG`` for one whose path is
    ``PATH_MAX`` bytes or more (its folder is listed through descriptors, a part of the path
    at a time)."""
    base = _real_root(root)
    seen: set[tuple[int, int]] = set()
    stack: list[tuple[str, Optional[str], Optional[list]]] = [(root, None, None)]
    while stack:
        folder, why, budget = stack.pop()
        # Behind a link that leads out, each link lists its own folder: two links to one
        # outside folder are two sets of inputs, and the second must not vanish as "seen".
        entries = _scan_folder(folder, seen if budget is None else budget[2])
        if entries is None:
            continue
        subfolders: list[tuple[str, Optional[str], Optional[list]]] = []
        for name, is_dir, is_link in entries:
            path = os.path.join(folder, name)
            if budget is not None:
                budget[0] -= 1
                if budget[0] < 0:
                    if budget[0] == -1:
                        yield budget[1], OUTSIDE  # the link itself: more was there than was listed
                    break
            long = path_bytes(path) >= PATH_MAX
            if not is_dir:
                yield path, (TOO_LONG if long else why)
            elif why is not None or long:
                if not is_link:  # outside or too long: real folders only
                    subfolders.append((path, why or TOO_LONG, budget))
            elif not is_link or is_inside(path, base):
                subfolders.append((path, None, None))
            else:
                subfolders.append((path, OUTSIDE, [MAX_OUTSIDE_ENTRIES, path, set()]))
        stack.extend(reversed(subfolders))


def _scan_folder(folder: str, seen: set) -> Optional[list[tuple[str, bool, bool]]]:
    """(name, is a folder (links followed), is a link) of each entry of ``folder``, sorted by
    name; None when it cannot be listed or was listed before (by device and inode)."""
    fd = None
    try:
        if path_bytes(folder) < PATH_MAX:
            st = os.stat(folder)
        else:
            fd = _open_long_folder(folder)
            st = os.fstat(fd)
        if (st.st_dev, st.st_ino) in seen:
            return None
        seen.add((st.st_dev, st.st_ino))
        out = []
        with os.scandir(folder if fd is None else fd) as it:
            for e in it:
                try:
                    is_dir = e.is_dir(follow_symlinks=True)
                except OSError:
                    is_dir = False
                out.append((e.name, is_dir, e.is_symlink()))
        return sorted(out)
    except OSError:
        return None
    finally:
        if fd is not None:
            os.close(fd)


def _open_long_folder(path: str) -> int:
    """A descriptor of a folder whose path is too long to name in one call: opened a few
    names at a time, each group relative to the folder before it."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
    names = [n for n in path.split(os.sep) if n]
    fd = os.open(os.sep if path.startswith(os.sep) else os.curdir, flags)
    try:
        i = 0
        while i < len(names):
            group = [names[i]]
            i += 1
            while i < len(names) and path_bytes(os.sep.join([*group, names[i]])) < PATH_MAX // 2:
                group.append(names[i])
                i += 1
            nfd = os.open(os.sep.join(group), flags, dir_fd=fd)
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd
