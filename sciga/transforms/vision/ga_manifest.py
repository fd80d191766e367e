"""The graphical-abstract manifest: which GA image belongs to which paper.

Journals publish GAs outside arXiv, so they enter the build through a CSV file given to
``sciga build --ga-manifest FILE.csv``::

    arxiv_id,path,source
    2401.13641,ga/2401.13641.png,IEEE Access
    2402.00001,ga/2402.00001.jpg,Cell Press

``arxiv_id`` (a version suffix is dropped; normalised and checked as every paper id is,
``schemas/ids.py``) and ``path`` are required, ``source`` (where the GA was published) and
``caption`` are optional. Two rows for one paper keep the first; the rest are reported.

**Where a GA may be read from.** A manifest may come from a collaborator or a download, so
by default its paths are confined: a relative path is read relative to the manifest's
folder, and a path must lie inside the manifest's folder or one of the build's input
folders (``roots``), links resolved (a link that leads out is refused when it is read). An
absolute path elsewhere, ``../`` out of those folders, a ``file://`` URL outside them,
another bucket, an archive URL (``zip://x.png::/etc/passwd``), a NUL byte, and any
``http(s)://`` address are refused without being opened or fetched: the GA's row in the
``figures`` config says why (``image_status`` ``outside_input`` or ``not_found``) and the
paper is built as usual. ``allow_outside`` (``--ga-allow-outside``) lifts the confinement:
paths are read wherever they point, and an http(s) URL is fetched with one plain, polite
GET (a User-Agent naming the builder, a timeout, a size limit, one retry on a 5xx or
connection error).
"""

from __future__ import annotations

import csv
import io
import logging
import os
import posixpath
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional

import fsspec

from sciga.schemas.ids import BadIdError, checked_paper_id
from sciga.schemas.images import NOT_A_FILE, NOT_FOUND, OUTSIDE_INPUT, TOO_LARGE, UNREADABLE
from sciga.transforms.common.input_files import (
    NotAFileError,
    OutsideRootError,
    file_size,
    fs_and_path,
    is_chain,
    is_local,
    local_path,
    protocol,
    read_input,
)

log = logging.getLogger("sciga.vision")

DEFAULT_MAX_GA_BYTES = 32 * 1024 * 1024
DEFAULT_TIMEOUT = 30.0
# How long a GA in a bucket (gs://, s3://) may take to answer whether it is there: a store
# that does not answer (a wrong endpoint, no network) would otherwise be retried by its
# client for a minute and more, and its silence reported as "not found".
STORE_PROBE_SECONDS = 5.0


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
    # The folder the file must stay in when it is read (links resolved); None: read as named
    # (``--ga-allow-outside``).
    root: Optional[str] = None
    # Why the path is not read at all (the GA row's image_error), and that row's image_status.
    refused: Optional[str] = None
    refused_status: Optional[str] = None


class GAReadError(OSError):
    """A GA image that could not be read; ``status`` is its row's ``image_status``."""

    def __init__(self, message: str, status: str = UNREADABLE):
        super().__init__(message)
        self.status = status

    def __str__(self) -> str:
        return self.args[0]


def _is_url(p: str) -> bool:
    return p.lower().startswith(("http://", "https://"))


def _folder_of(uri: str) -> str:
    """The absolute folder of a manifest (local) or its parent key (a store)."""
    if is_local(uri):
        return os.path.dirname(os.path.abspath(local_path(uri)))
    return posixpath.dirname(uri.rstrip("/"))


def _norm_root(root: str) -> str:
    return os.path.abspath(local_path(root)) if is_local(root) else root.rstrip("/")


def _lexically_under(uri: str, folder: str) -> bool:
    folder = folder.rstrip("/")
    return uri == folder or uri.startswith(folder + "/")


def resolve_ga_path(
    p: str, manifest: str, roots: Sequence[str] = (), allow_outside: bool = False
) -> tuple[str, Optional[str], Optional[str], Optional[str]]:
    """(uri, root the file must stay in, why it is refused, the refused row's image_status)
    for manifest path ``p`` (see the module's docstring)."""
    base = _folder_of(manifest)
    if any(ord(ch) < 32 for ch in p):
        return (
            p,
            None,
            f"GA image path {p!r} holds a NUL byte or a control character, which no file name can",
            NOT_FOUND,
        )
    if _is_url(p):
        if allow_outside:
            return p, None, None, None
        return (
            p,
            None,
            f"GA image {p} is a web address; by default GA images are read only from the manifest's folder and "
            "the input folders, never fetched over the network: download it next to the manifest, or give "
            "--ga-allow-outside",
            OUTSIDE_INPUT,
        )
    if p.lower().startswith("file://"):
        p = local_path(p)
    if protocol(p) is not None:
        uri = p
    elif p.startswith("/") or not is_local(base):
        uri = p if p.startswith("/") else posixpath.join(base, p)
    else:
        uri = os.path.join(base, p)
    if is_local(uri):
        uri = os.path.normpath(uri)
    elif not is_chain(uri):
        proto, rest = uri.split("://", 1)
        uri = f"{proto}://{posixpath.normpath(rest)}"
    if allow_outside:
        return uri, None, None, None
    for folder in (base, *map(_norm_root, roots)):
        if (is_local(folder) == is_local(uri)) and not is_chain(uri) and _lexically_under(uri, folder):
            return uri, folder, None, None
    return (
        uri,
        None,
        f"GA image path {p} lies outside the manifest's folder and the input folders, so it was not read: copy "
        "the image next to the manifest, or give --ga-allow-outside to read paths wherever they point",
        OUTSIDE_INPUT,
    )


def read_ga_manifest(path: str, roots: Sequence[str] = (), allow_outside: bool = False) -> list[GAEntry]:
    """The manifest's entries, one per paper; ``roots``: folders besides the manifest's own
    that its paths may lie in (the build's input folders); ``allow_outside``: read paths
    wherever they point (``--ga-allow-outside``)."""
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
    by_id: dict[str, GAEntry] = {}
    order: list[str] = []
    for i, raw in enumerate(rows, start=2):
        r = {(k or "").strip().lower(): _text(v) for k, v in raw.items()}
        raw_id, p = r.get("arxiv_id", ""), r.get("path", "")
        if not raw_id or not p:
            log.warning("GA manifest %s line %d: empty arxiv_id or path; row skipped", path, i)
            continue
        try:
            pid, _ = checked_paper_id(raw_id)
        except BadIdError as e:
            log.warning("GA manifest %s line %d: arxiv_id %r %s; row skipped", path, i, raw_id[:60], e)
            continue
        if pid in by_id:
            by_id[pid].extra_paths.append(p)
            log.warning("GA manifest %s line %d: a second GA for %s; the first one is used", path, i, pid)
            continue
        uri, root, why, status = resolve_ga_path(p, path, roots, allow_outside)
        if why:
            log.warning("GA manifest %s line %d: %s; the GA row of %s says so", path, i, why, pid)
        by_id[pid] = GAEntry(
            paper_id=pid,
            path=p,
            uri=uri,
            source=r.get("source", "").replace("\x00", "") or None,
            caption=r.get("caption", "").replace("\x00", "") or None,
            root=root,
            refused=why,
            refused_status=status,
        )
        order.append(pid)
    return [by_id[k] for k in order]


def _text(v) -> str:
    """A manifest cell as text: stripped, NUL bytes kept (a path with one is refused by name,
    a caption or source loses them)."""
    if isinstance(v, list):  # more cells than the header names
        v = ",".join(x or "" for x in v)
    return (v or "").strip()


def fetch_ga_bytes(entry: GAEntry, max_bytes: int = DEFAULT_MAX_GA_BYTES, timeout: float = DEFAULT_TIMEOUT) -> bytes:
    """The GA image bytes; raises ``GAReadError`` (an OSError) with a sentence naming the GA
    and its row's ``image_status`` on any failure (a refused path is never opened)."""
    if entry.refused:
        raise GAReadError(entry.refused, entry.refused_status or OUTSIDE_INPUT)
    if _is_url(entry.uri):
        return _http_get(entry.uri, max_bytes, timeout)
    if not is_local(entry.uri) and not is_chain(entry.uri):
        remote_size(entry, min(timeout, STORE_PROBE_SECONDS))  # raises GAReadError: not found, unreachable
    try:
        # Only a regular file (a FIFO must not block the build), inside ``entry.root``.
        size = file_size(entry.uri, entry.root)
        if size is None:
            raise FileNotFoundError(entry.uri)
        if size > max_bytes:
            raise GAReadError(
                f"GA image {entry.path} is {size // (1 << 20)} MiB, above the {max_bytes // (1 << 20)} MiB limit",
                TOO_LARGE,
            )
        return read_input(entry.uri, entry.root, max_bytes)
    except FileNotFoundError:
        raise GAReadError(f"GA image {entry.path} not found (looked at {entry.uri})", NOT_FOUND) from None
    except OutsideRootError:
        raise GAReadError(
            f"GA image {entry.path} is a link that leads outside the manifest's folder and the input folders, so "
            "it was not read; copy the image there instead of linking to it",
            OUTSIDE_INPUT,
        ) from None
    except NotAFileError as e:
        raise GAReadError(
            f"GA image {entry.path} is {e.what}, not a regular file; it was not read", NOT_A_FILE
        ) from None
    except GAReadError:
        raise
    except Exception as e:  # noqa: BLE001 - any store or archive error is this GA's, never the paper's
        raise GAReadError(f"GA image {entry.path} could not be read ({type(e).__name__}: {e})") from None


_UNREACHABLE: dict[str, str] = {}  # store (protocol://bucket) -> why, once per process


def _store_of(uri: str) -> str:
    proto, rest = uri.split("://", 1)
    return f"{proto}://{rest.split('/', 1)[0]}"


def remote_size(entry: GAEntry, seconds: float) -> int:
    """The size of a GA in a bucket, asked once with a deadline. Raises ``GAReadError``:
    ``not_found`` when the store answers that nothing is there, ``unreadable`` with a reason
    that says *unreachable* when it does not answer within ``seconds`` or the connection
    fails (and at once for the process's later GAs in that store)."""
    import threading

    store = _store_of(entry.uri)
    if store in _UNREACHABLE:
        raise GAReadError(_UNREACHABLE[store], UNREADABLE)
    got: dict = {}

    def ask() -> None:
        try:
            fs, path = fs_and_path(entry.uri)
            got["info"] = fs.info(path)
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            got["error"] = e

    t = threading.Thread(target=ask, name="ga-store-probe", daemon=True)  # a silent store may hold it
    t.start()
    t.join(seconds)
    if t.is_alive():
        why = f"did not answer within {seconds:g} s"
    elif isinstance(got.get("error"), FileNotFoundError):
        raise GAReadError(f"GA image {entry.path} not found (looked at {entry.uri})", NOT_FOUND)
    elif "error" in got:
        e = got["error"]
        if isinstance(e, PermissionError):
            raise GAReadError(f"GA image {entry.path} may not be read ({e}); check the credentials for {store}")
        why = f"failed to connect: {type(e).__name__}: {str(e)[:200]}"
    elif got["info"].get("type") != "file":
        raise GAReadError(f"GA image {entry.path} is a folder, not a file; it was not read", NOT_A_FILE)
    else:
        return int(got["info"].get("size") or 0)
    _UNREACHABLE[store] = (
        f"GA image {entry.path}: the store {store} is unreachable (it {why}); check the network and the "
        "store's endpoint, then build again"
    )
    raise GAReadError(_UNREACHABLE[store], UNREADABLE)


def ga_file_dep(entry: GAEntry):
    """The result's dependency on the GA file (changing it retypes the GA), or None for a GA
    that is not read from a file (a URL, a refused path: the manifest row's own dependency
    covers it). Hashing reads the file only where ``fetch_ga_bytes`` would."""
    from sciga.transforms.common.result_store import absent_dep, file_dep

    if entry.refused or _is_url(entry.uri):
        return None
    try:
        if not is_local(entry.uri) and not is_chain(entry.uri):
            remote_size(entry, STORE_PROBE_SECONDS)  # a store that does not answer: no dependency
        if file_size(entry.uri, entry.root) is None:
            return absent_dep(entry.uri)
        return file_dep(entry.uri, root=entry.root)
    except Exception:  # noqa: BLE001 - the GA row says what is wrong with the file
        return None


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
