"""Figure image files of a page on disk (or any fsspec path) next to the HTML.

A local LaTeXML conversion writes images beside the page (``x1.png``, ``figs/a.png``);
an ar5iv page saved with its assets keeps them under ``assets/``. Only files inside the
page's folder are read: a path that climbs out of it is refused.
"""
from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, field
from typing import Optional

import fsspec

from sciga.schemas.images import EMBEDDED, NOT_FOUND, OUTSIDE_INPUT, TOO_LARGE, UNREADABLE

DEFAULT_MAX_IMAGE_BYTES = 64 * 1024 * 1024


def candidate_paths(page_uri: str, image_path: str) -> list[str]:
    # A page inside an archive (``zip://dir/p.html::dump.zip``): look inside the archive.
    inner, chain = page_uri.split("::", 1) if "::" in page_uri else (page_uri, None)
    base = posixpath.dirname(inner.replace("\\", "/"))
    rel = posixpath.normpath(image_path)
    if rel.startswith("../") or rel == ".." or rel.startswith("/"):
        return []
    cands = [posixpath.join(base, rel)]
    name = posixpath.basename(rel)
    if name != rel:
        cands.append(posixpath.join(base, name))
    return [c + f"::{chain}" for c in cands] if chain else cands


def read_asset(page_uri: str, image_path: Optional[str], max_bytes: int = DEFAULT_MAX_IMAGE_BYTES) -> tuple[Optional[bytes], Optional[str], Optional[str]]:
    """(bytes, path read, error). Errors are reasons for the figure row, not the paper."""
    data, path, err, _ = read_asset_checked(page_uri, image_path, max_bytes)
    return data, path, err


def read_asset_checked(page_uri: str, image_path: Optional[str], max_bytes: int = DEFAULT_MAX_IMAGE_BYTES
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
    uri: Optional[str] = None  # the file read, or the file that failed
    error: Optional[str] = None
    status: Optional[str] = None  # None when there is no image path at all
    looked: list = field(default_factory=list)  # candidates that held no file

    @property
    def expected_at(self) -> Optional[str]:
        """Where the file was, else the first place it was looked for."""
        return self.uri or (self.looked[0] if self.looked else None)


def _fail(status: str, uri: Optional[str], error: str, looked: list) -> AssetRead:
    return AssetRead(None, uri, error, status, looked)


def find_asset(page_uri: str, image_path: Optional[str], max_bytes: int = DEFAULT_MAX_IMAGE_BYTES) -> AssetRead:
    if not image_path:
        return AssetRead()
    cands = candidate_paths(page_uri, image_path)
    if not cands:
        return _fail(OUTSIDE_INPUT, None, f"image path {image_path!r} leaves the page folder; refused", [])
    looked: list = []
    for cand in cands:
        if "://" not in cand and "::" not in cand:  # a local file: no fsspec round trips (hot path)
            try:
                size = os.stat(cand).st_size if os.path.isfile(cand) else None
            except OSError as e:
                return _fail(UNREADABLE, cand, f"image file {image_path} could not be read ({e})", looked)
            if size is None:
                looked.append(cand)
                continue
            if size > max_bytes:
                return _fail(TOO_LARGE, cand, f"image file {image_path} is {size // (1 << 20)} MiB, above the "
                                              f"{max_bytes // (1 << 20)} MiB limit", looked)
            try:
                with open(cand, "rb") as f:
                    return AssetRead(f.read(), cand, None, EMBEDDED, looked)
            except OSError as e:
                return _fail(UNREADABLE, cand, f"image file {image_path} could not be read ({e})", looked)
        fs, path = fsspec.core.url_to_fs(cand)
        try:
            if not fs.isfile(path):
                looked.append(cand)
                continue
            size = fs.size(path)
            if size > max_bytes:
                return _fail(TOO_LARGE, cand, f"image file {image_path} is {size // (1 << 20)} MiB, above the "
                                              f"{max_bytes // (1 << 20)} MiB limit", looked)
            with fs.open(path, "rb") as f:
                return AssetRead(f.read(), cand, None, EMBEDDED, looked)
        except OSError as e:
            return _fail(UNREADABLE, cand, f"image file {image_path} could not be read ({e})", looked)
    return _fail(NOT_FOUND, None, f"image file {image_path} not found next to the page", looked)


def read_image_ref(ref, max_bytes: int = DEFAULT_MAX_IMAGE_BYTES) -> bytes:
    """The bytes an ``ImageRef`` points at, checked against its SHA-256 (a file changed
    after it was measured raises ``OSError``). Bytes given directly are returned as they are."""
    import hashlib

    if isinstance(ref, (bytes, bytearray)):
        return bytes(ref)
    if "://" not in ref.uri and "::" not in ref.uri:
        with open(ref.uri, "rb") as f:
            data = f.read(max_bytes + 1)
    else:
        with fsspec.open(ref.uri, "rb") as f:
            data = f.read(max_bytes + 1)
    if len(data) != ref.size or hashlib.sha256(data).hexdigest() != ref.sha256:
        raise OSError(f"image file {ref.uri} changed while the build ran; rerun the build to pick up the new file")
    return data
