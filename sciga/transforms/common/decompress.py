"""Decompression with a ceiling: a small input never inflates past a stated size.

A 1 MB ``.html.gz`` can inflate to a gigabyte; every place that gunzips input goes through
``gunzip_at_most``, which streams the inflation in chunks and stops one chunk past the
limit, so refusing a bomb costs the limit plus one chunk of memory, never its inflated size.
"""

from __future__ import annotations

import gzip
import io

CHUNK = 1 << 20


class InflatesTooFar(ValueError):
    """The data inflates to more than the limit (a bomb, or a page too large to build)."""

    def __init__(self, limit: int):
        super().__init__(f"it decompresses to more than {limit // (1 << 20)} MiB")
        self.limit = limit


def gunzip_at_most(data: bytes, limit: int) -> bytes:
    """The gzip stream ``data`` inflated, at most ``limit`` bytes (else ``InflatesTooFar``).
    A damaged stream raises what ``gzip`` raises (``OSError``, ``EOFError``, ``zlib.error``)."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=io.BytesIO(data)) as gz:
        while True:
            chunk = gz.read(min(CHUNK, limit + 1 - out.tell()))
            if not chunk:
                return out.getvalue()
            out.write(chunk)
            if out.tell() > limit:
                raise InflatesTooFar(limit)
