"""The input listing, known again without walking the input folders when none of them changed.

Listing a build's inputs walks every input folder (``inputs/pages.py``): at 20,000 pages,
40,000 files in 2,800 folders, 0.37 s of a 1.2 s rebuild with nothing to do. A build now
records, with its pages' hashes (``inputs/page_index.py``, key ``"listing"``), the mtime of
every folder below its input folders, taken *before* it listed them. Creating, removing or
renaming a name in a folder changes that folder's mtime (make, ninja and git's untracked
cache rely on it), so while every recorded folder keeps its mtime, no page was added or
removed, and the listing is the one recorded: the pages of the record. A page whose content
changed in place is found by its own stat, as before (``page_index.page_hashes``).

Only plain trees are recorded, and anything else is listed every time, as before:

- local folders given as such (no glob, no archive, no object store), the build's output
  folder not inside them (its own files change with every build);
- no symbolic link, no name that is not UTF-8 and no path too long below them (the listing
  treats each of those in its own way: followed, refused, opened a part at a time);
- no folder changed in the last ``RACY_SECONDS``: a name added within the same tick of the
  file system's clock as the folder's last change could leave its mtime as it was (git calls
  such an entry racy), so a folder that recent is not trusted;
- no folder on a network or FUSE file system (NFS, SMB, sshfs, gcsfuse, ...: ``UNTRUSTED_FS``,
  read from Linux's ``/proc/self/mountinfo``): their clients cache a folder's attributes for
  up to a minute, so a page another machine added can leave the mtime this one sees as it
  was, and bucket mounts make folder mtimes up;
- the listing refused nothing, and the record holds every page it listed (its pages, sorted,
  hash to what the listing gave).
"""

from __future__ import annotations

import functools
import hashlib
import os
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

from sciga.transforms.common.input_files import PATH_MAX
from sciga.transforms.inputs.refused import RefusedInput

LISTING = "listing"  # the key of the listing record in the page index
RACY_SECONDS = 2.0  # a folder changed this recently is not trusted (coarse clocks, NFS clock skew)
MOUNTINFO = "/proc/self/mountinfo"  # Linux: each mount's device and file system type
# File systems whose folder mtimes this machine may see stale (a client's attribute cache) or
# made up (bucket mounts): "fuse" stands for every "fuse.*" (sshfs, gcsfuse, s3fs, rclone).
UNTRUSTED_FS = frozenset({"nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "afs", "ncpfs", "davfs", "fuse", "fuseblk"})


@dataclass(frozen=True)
class InputListing:
    """A build's inputs, and what the listing warns about (sidecars without a page)."""

    inputs: list[str]
    without_page: int = 0  # metadata sidecars with no page beside them (not built with --html-from ar5iv)
    first_without_page: str = ""


def _plain_folder(spec: str) -> Optional[str]:
    """The absolute path of ``spec`` when it names a local folder as such; else None."""
    if "://" in spec or "::" in spec or any(ch in spec for ch in "*?[") or spec.lower().endswith(".zip"):
        return None
    return os.path.abspath(spec) if os.path.isdir(spec) else None


def folder_stamps(specs: Sequence[str], now_ns: Optional[int] = None) -> Optional[list[list]]:
    """``[[folder, mtime_ns], ...]`` of every folder below the input folders ``specs`` (the
    folders themselves included), to be taken before they are listed; None when the tree is
    not one the record may stand for (see the module's docstring)."""
    folders = [_plain_folder(s) for s in specs]
    if not folders or any(f is None for f in folders):
        return None
    newest = (time.time_ns() if now_ns is None else now_ns) - int(RACY_SECONDS * 1e9)
    stamps: dict[str, int] = {}
    trusted = _per_device()
    stack = [f for f in folders if f is not None]
    while stack:
        folder = stack.pop()
        if folder in stamps:
            continue
        try:
            st = os.lstat(folder)  # an input folder that is a link: listed every time
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError:
            return None
        if not stat.S_ISDIR(st.st_mode) or st.st_mtime_ns > newest:
            return None  # racy, or a clock ahead of ours: not trusted
        if not trusted(st.st_dev):
            return None
        stamps[folder] = st.st_mtime_ns
        for e in entries:
            if e.is_symlink() or not _plain_name(e.path):
                return None
            try:
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
            except OSError:
                return None
    return [[f, m] for f, m in sorted(stamps.items())]


def _per_device():
    """``trusted_file_system``, asked once per device for one walk (mounts may change
    between builds of one process, a notebook's)."""
    return functools.lru_cache(maxsize=None)(trusted_file_system)


def trusted_file_system(device: int) -> bool:
    """Whether folder mtimes on the file system of ``device`` (a ``st_dev``) may stand for
    its listing: not one of ``UNTRUSTED_FS`` as ``MOUNTINFO`` names it. Trusted where that
    says nothing (another system; a device it does not list, as btrfs's subvolumes)."""
    fs_type = mounted_file_system_type(device)
    return fs_type is None or fs_type.split(".", 1)[0] not in UNTRUSTED_FS


def mounted_file_system_type(device: int) -> Optional[str]:
    """The file system type ``MOUNTINFO`` gives the mount of ``device`` (None: not known)."""
    wanted = f"{os.major(device)}:{os.minor(device)}"
    try:
        with open(MOUNTINFO, encoding="utf-8", errors="replace") as f:
            for line in f:
                # ID PARENT MAJOR:MINOR ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER_OPTIONS
                fields, sep, rest = line.partition(" - ")
                parts = fields.split()
                if sep and len(parts) > 2 and parts[2] == wanted and rest.split():
                    return rest.split()[0]
    except OSError:
        return None
    return None


def _plain_name(path: str) -> bool:
    try:
        return len(path.encode("utf-8")) < PATH_MAX
    except UnicodeEncodeError:  # not UTF-8: the listing refuses it
        return False


def inputs_digest(inputs: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(inputs).encode("utf-8", "surrogateescape")).hexdigest()


def listing_record(specs: Sequence[str], stamps: Optional[list[list]], listing: InputListing) -> Optional[dict]:
    """What the page index records of this listing (None when it may not stand for it)."""
    if stamps is None or any(isinstance(u, RefusedInput) for u in listing.inputs):
        return None
    return {
        "specs": [_plain_folder(s) for s in specs],
        "folders": stamps,
        "inputs": [len(listing.inputs), inputs_digest(listing.inputs)],
        "without_page": [listing.without_page, listing.first_without_page],
    }


def recorded_listing(record: Any, specs: Sequence[str], recorded_pages: Sequence[str]) -> Optional[InputListing]:
    """The listing a previous build recorded (``record``: the page index's ``"listing"``),
    when it still holds: the same input folders, every recorded folder with its recorded
    mtime, and ``recorded_pages`` (the record's pages, sorted) the pages it listed. Else None."""
    try:
        if not isinstance(record, dict) or record.get("specs") != [_plain_folder(s) for s in specs]:
            return None
        n, digest = record["inputs"]
        if n != len(recorded_pages) or n == 0:
            return None
        trusted = _per_device()
        for folder, mtime in record["folders"]:
            st = os.lstat(folder)
            if st.st_mtime_ns != int(mtime) or not stat.S_ISDIR(st.st_mode):
                return None
            if not trusted(st.st_dev):  # the folders mounted elsewhere since (a network share)
                return None
        if inputs_digest(recorded_pages) != digest:
            return None
        count, first = record.get("without_page") or (0, "")
        return InputListing(list(recorded_pages), int(count), str(first))
    except (OSError, KeyError, TypeError, ValueError):
        return None
