"""The graphical-abstract manifest: which GA image belongs to which paper.

Journals publish GAs outside arXiv, so they enter the build through a CSV file given to
``sciga build --ga-manifest FILE.csv``::

    arxiv_id,path,source
    2401.13641,ga/2401.13641.png,IEEE Access
    2402.00001,https://example.org/ga/2402.00001.jpg,Cell Press

``arxiv_id`` (a version suffix is dropped) and ``path`` are required, ``source`` (where the
GA was published) and ``caption`` are optional. A relative path is read relative to the
manifest's folder; an http(s) URL is fetched with one plain, polite GET (a User-Agent
naming the builder, a timeout, a size limit, one retry on a 5xx/connection error). Two rows
for one paper keep the first; the rest are reported.
"""

from __future__ import annotations

import csv
import io
import logging
import posixpath
import time
from dataclasses import dataclass, field
from typing import Optional

import fsspec

from sciga.schemas.ids import split_version
from sciga.transforms.common.input_files import file_size, read_input

log = logging.getLogger("sciga.vision")

DEFAULT_MAX_GA_BYTES = 32 * 1024 * 1024
DEFAULT_TIMEOUT = 30.0


class ManifestError(Exception):
    """A manifest that cannot be used at all (the build stops before it starts)."""


@dataclass
class GAEntry:
    paper_id: str
    path: str  # as written in the manifest
    uri: str  # resolved: absolute local/fsspec path or URL
    source: Optional[str] = None
    caption: Optional[str] = None
    extra_paths: list[str] = field(default_factory=list)  # later rows for the same paper


def _is_url(p: str) -> bool:
    return p.lower().startswith(("http://", "https://"))


def read_ga_manifest(path: str) -> list[GAEntry]:
    try:
        with fsspec.open(path, "rt", encoding="utf-8-sig") as f:
            text = f.read()
    except (OSError, ValueError) as e:
        raise ManifestError(
            f"GA manifest {path} could not be read ({e}); check the path given to --ga-manifest"
        ) from None
    rows = list(csv.DictReader(io.StringIO(text)))
    header = [h.strip().lower() for h in (csv.reader(io.StringIO(text)).__next__() if text.strip() else [])]
    if "arxiv_id" not in header or "path" not in header:
        raise ManifestError(
            f"GA manifest {path} needs the columns arxiv_id,path (optional: source,caption); its header is {','.join(header) or 'empty'}"
        )
    base = posixpath.dirname(path.replace("\\", "/"))
    by_id: dict[str, GAEntry] = {}
    order: list[str] = []
    for i, raw in enumerate(rows, start=2):
        r = {(k or "").strip().lower(): (v or "").strip() for k, v in raw.items()}
        pid, p = split_version(r.get("arxiv_id", ""))[0], r.get("path", "")
        if not pid or not p:
            log.warning("GA manifest %s line %d: empty arxiv_id or path; row skipped", path, i)
            continue
        if pid in by_id:
            by_id[pid].extra_paths.append(p)
            log.warning("GA manifest %s line %d: a second GA for %s; the first one is used", path, i, pid)
            continue
        uri = p if (_is_url(p) or "://" in p or p.startswith("/")) else posixpath.join(base, p) if base else p
        by_id[pid] = GAEntry(
            paper_id=pid, path=p, uri=uri, source=r.get("source") or None, caption=r.get("caption") or None
        )
        order.append(pid)
    return [by_id[k] for k in order]


def fetch_ga_bytes(entry: GAEntry, max_bytes: int = DEFAULT_MAX_GA_BYTES, timeout: float = DEFAULT_TIMEOUT) -> bytes:
    """The GA image bytes; raises OSError with a sentence naming the GA on any failure."""
    if _is_url(entry.uri):
        return _http_get(entry.uri, max_bytes, timeout)
    try:
        # The manifest is the user's own list of files (like --input): a path in it is read as
        # named, but only as a regular file (a FIFO named there must not block the build).
        size = file_size(entry.uri)
        if size is None:
            raise FileNotFoundError(entry.uri)
        if size > max_bytes:
            raise OSError(
                f"GA image {entry.path} is {size // (1 << 20)} MiB, above the {max_bytes // (1 << 20)} MiB limit"
            )
        return read_input(entry.uri, None, max_bytes)
    except FileNotFoundError:
        raise OSError(f"GA image {entry.path} not found (looked at {entry.uri})") from None


def _http_get(url: str, max_bytes: int, timeout: float, attempts: int = 2) -> bytes:
    import requests

    from sciga import __version__

    headers = {"User-Agent": f"sciga-builder/{__version__} (graphical-abstract fetch; one request per GA)"}
    last = ""
    for attempt in range(attempts):
        try:
            with requests.get(url, headers=headers, timeout=timeout, stream=True, allow_redirects=True) as r:
                if r.status_code >= 500:
                    last = f"HTTP {r.status_code}"
                    time.sleep(0.5 * (attempt + 1))
                    continue
                if r.status_code != 200:
                    raise OSError(f"GA image {url} answered HTTP {r.status_code}; check the URL in the manifest")
                declared = r.headers.get("Content-Length")
                if declared and declared.isdigit() and int(declared) > max_bytes:
                    raise OSError(
                        f"GA image {url} is {int(declared) // (1 << 20)} MiB, above the {max_bytes // (1 << 20)} MiB limit"
                    )
                buf = bytearray()
                for chunk in r.iter_content(65536):
                    buf.extend(chunk)
                    if len(buf) > max_bytes:
                        raise OSError(f"GA image {url} is larger than the {max_bytes // (1 << 20)} MiB limit")
                return bytes(buf)
        except requests.RequestException as e:
            last = type(e).__name__
            time.sleep(0.5 * (attempt + 1))
    raise OSError(f"GA image {url} could not be fetched ({last}) after {attempts} attempts")
