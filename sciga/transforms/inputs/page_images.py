"""Figure image files of a page on disk (or any fsspec path) next to the HTML.

A local LaTeXML conversion writes images beside the page (``x1.png``, ``figs/a.png``);
an ar5iv page saved with its assets keeps them under ``assets/``. Only files inside the
page's folder are read: a path that climbs out of it is refused, and so is a link whose
target lies outside it (``outside_input``), a FIFO or a device (``not_a_file``).
"""

from __future__ import annotations

import errno
import os
import posixpath
import re
from dataclasses import dataclass, field
from typing import Optional

from sciga.schemas.images import EMBEDDED, NOT_A_FILE, NOT_FOUND, OUTSIDE_INPUT, TOO_LARGE, UNREADABLE
from sciga.transforms.common.input_files import (
    NotAFileError,
    OutsideRootError,
    file_size,
    is_local,
    open_local,
    parent_of,
    read_at_most,
    read_input,
    split_chain,
)

DEFAULT_MAX_IMAGE_BYTES = 64 * 1024 * 1024


def candidate_paths(page_uri: str, image_path: str) -> list[str]:
    # A page inside an archive (``zip://dir/p.html::dump.zip``): look inside the archive.
    inner, chain = split_chain(page_uri)
    base = posixpath.dirname(inner.replace("\\", "/"))
    rel = posixpath.normpath(image_path)
    if rel.startswith("../") or rel == ".." or rel.startswith("/"):
        return []
    cands = [posixpath.join(base, rel)]
    name = posixpath.basename(rel)
    if name != rel:
        cands.append(posixpath.join(base, name))
    # arXiv's oxide pages write ``<id>vN/fig.png``, relative to ``https://arxiv.org/html/<id>vN``:
    # a page saved as ``<id>vN.html`` keeps its images in the folder ``<id>vN/`` beside it.
    m = _VERSIONED_PAGE_RE.match(posixpath.basename(inner.replace("\\", "/")))
    if m:
        cands.append(posixpath.join(base, m.group(1), rel))
    return [c + f"::{chain}" for c in cands] if chain else cands


_VERSIONED_PAGE_RE = re.compile(r"^(\d{4}\.\d{4,5}v\d+)\.x?html?(?:\.gz)?$")


def read_asset(
    page_uri: str, image_path: Optional[str], max_bytes: int = DEFAULT_MAX_IMAGE_BYTES
) -> tuple[Optional[bytes], Optional[str], Optional[str]]:
    """(bytes, path read, error). Errors are reasons for the figure row, not the paper."""
    data, path, err, _ = read_asset_checked(page_uri, image_path, max_bytes)
    return data, path, err


def read_asset_checked(
    page_uri: str, image_path: Optional[str], max_bytes: int = DEFAULT_MAX_IMAGE_BYTES
) -> tuple[Optional[bytes], Optional[str], Optional[str], list[str]]:
    """``read_asset`` plus the candidate places that held no file (for the result's
    dependencies: an image added there later must recompute the paper)."""
    got = find_asset(page_uri, image_path, max_bytes)
    return got.data, got.uri, got.error, got.looked


@dataclass
class AssetRead:
    """One image file looked up beside its page: the bytes, or why there are none
    (``status``: a ``schemas.images`` value) and where the file was or was looked for."""

    data: Optional[bytes] = None
    uri: Optional[str] = None  # the file read, or the file that failed (a link's own name, never its target)
    error: Optional[str] = None
    status: Optional[str] = None  # None when there is no image path at all
    looked: list = field(default_factory=list)  # candidates that held no file

    @property
    def expected_at(self) -> Optional[str]:
        """Where the file was, else the first place it was looked for."""
        return self.uri or (self.looked[0] if self.looked else None)

    @property
    def transient(self) -> bool:
        """The read failed for a reason that may pass (an I/O error): not a final result."""
        return self.status == UNREADABLE


def _fail(status: str, uri: Optional[str], error: str, looked: list) -> AssetRead:
    return AssetRead(None, uri, error, status, looked)


def find_asset(page_uri: str, image_path: Optional[str], max_bytes: int = DEFAULT_MAX_IMAGE_BYTES) -> AssetRead:
    """The image ``image_path`` of the page at ``page_uri``. Only regular files whose real
    path lies inside the page's folder are read (``input_files``): a link out of it is
    ``outside_input``, a FIFO or a device ``not_a_file``, and neither is opened for reading.
    The ``error`` of a refused or failed read starts with its status (``outside_input: ...``,
    ``not_a_file: ...``, ``unreadable: ...``); the sentence after it never names a link's target."""
    if not image_path:
        return AssetRead()
    if "\x00" in image_path:  # `src="a%00.png"`: no file on any disk has that name; nothing is looked up
        return _fail(NOT_FOUND, None, f"image path {image_path!r} holds a NUL byte, which no file name can", [])
    if "::" in image_path and split_chain(page_uri)[1] is not None:
        return _fail(
            NOT_FOUND, None, f"image path {image_path!r} holds '::', which cannot be addressed inside an archive", []
        )
    cands = candidate_paths(page_uri, image_path)
    if not cands:
        return _fail(OUTSIDE_INPUT, None, f"image path {image_path!r} leaves the page folder; refused", [])
    root = parent_of(page_uri)
    looked: list = []
    for cand in cands:
        try:
            if is_local(cand):  # the hot path: one contained open, the size from the open file
                try:
                    f = open_local(cand, root)
                except (FileNotFoundError, NotADirectoryError):
                    looked.append(cand)
                    continue
                with f:
                    size = os.fstat(f.fileno()).st_size
                    if size > max_bytes:
                        return _fail(TOO_LARGE, cand, _too_large(image_path, size, max_bytes), looked)
                    return AssetRead(read_at_most(f, max_bytes), cand, None, EMBEDDED, looked)
            remote_size = file_size(cand, root)
            if remote_size is None:
                looked.append(cand)
                continue
            if remote_size > max_bytes:
                return _fail(TOO_LARGE, cand, _too_large(image_path, remote_size, max_bytes), looked)
            return AssetRead(read_input(cand, root), cand, None, EMBEDDED, looked)
        except OutsideRootError:
            return _fail(
                OUTSIDE_INPUT,
                cand,
                f"{OUTSIDE_INPUT}: image file {image_path} is a link that leads "
                "outside the page's folder; it was not read",
                looked,
            )
        except NotAFileError as e:
            return _fail(
                NOT_A_FILE,
                cand,
                f"{NOT_A_FILE}: image file {image_path} is {e.what}, not a regular file; it was not read",
                looked,
            )
        except OSError as e:
            if e.errno == errno.ENAMETOOLONG:  # no file can be there: not a read that may pass
                looked.append(cand)
                continue
            return _fail(UNREADABLE, cand, f"{UNREADABLE}: image file {image_path} could not be read ({e})", looked)
    return _fail(NOT_FOUND, None, f"image file {image_path} not found next to the page", looked)


def _too_large(image_path: str, size: int, max_bytes: int) -> str:
    return f"image file {image_path} is {size // (1 << 20)} MiB, above the {max_bytes // (1 << 20)} MiB limit"


def read_image_ref(ref, max_bytes: int = DEFAULT_MAX_IMAGE_BYTES) -> bytes:
    """The bytes an ``ImageRef`` points at, checked against its SHA-256 (a file changed
    after it was measured raises ``OSError``). Bytes given directly are returned as they are."""
    import hashlib

    if isinstance(ref, (bytes, bytearray)):
        return bytes(ref)
    data = read_input(ref.uri, None, max_bytes)  # checked below against what was measured inside the page folder
    if len(data) != ref.size or hashlib.sha256(data).hexdigest() != ref.sha256:
        raise OSError(f"image file {ref.uri} changed while the build ran; rerun the build to pick up the new file")
    return data
