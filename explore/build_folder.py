"""Is this folder a build? One check every command that reads a build runs first."""
from __future__ import annotations

import posixpath

import fsspec


def check_is_build(out: str) -> None:
    """FileNotFoundError when ``out`` is no build; StorageError (one sentence) when its bucket
    is missing or this account may not read it."""
    from sciga.transforms.common.storage import check_location

    check_location(out)
    fs, root = fsspec.core.url_to_fs(out)
    if not fs.isdir(posixpath.join(root, "data")) and not fs.exists(posixpath.join(root, "manifest.json")):
        raise FileNotFoundError(f"{out} is not a build folder (no data/ and no manifest.json); "
                                "give the --output folder of `sciga build`.")
