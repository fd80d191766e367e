"""Builds where they lie: local folders, ``gs://``, ``s3://``, ``hf://`` or any fsspec path.

One code path for every command that reads or writes a build:

* ``duckdb_connect(*paths)``: a DuckDB connection that reads remote paths through the
  fsspec filesystem registered on it (``con.register_filesystem``), never through DuckDB's
  ``httpfs`` extension: nothing is downloaded, and GCS needs no HMAC keys. Credentials are
  the filesystem's usual ones (Application Default Credentials for ``gs://``, the AWS chain
  for ``s3://``, the Hugging Face login for ``hf://``); nothing here reads or prints them.
* ``check_location(url)``: before a command starts work, a bucket that does not exist or
  that this account may not list is one sentence that says what to do, not a traceback
  (and ``gs://typo/out`` is never created as a new bucket by a ``makedirs``).
* ``storage_error_message(exc)``: the same sentence for an error raised mid-way.

The lowest layer that reads builds (quality, training) uses it, so it lives here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Optional

import fsspec

from sciga.transforms.common.errors import exception_chain

LOCAL_PROTOCOLS = (None, "", "file", "local")
# Object stores whose first path segment is a bucket that must exist beforehand.
BUCKET_PROTOCOLS = {"gs": "gs", "gcs": "gs", "s3": "s3", "s3a": "s3"}


class StorageError(OSError):
    """A storage location that cannot be used; the message is one sentence for a person."""


def protocol_of(path: str) -> Optional[str]:
    return fsspec.core.split_protocol(str(path))[0]


def is_remote(path: str) -> bool:
    return protocol_of(path) not in LOCAL_PROTOCOLS


def bucket_of(url: str) -> Optional[str]:
    """``gs://bucket/a/b`` -> ``bucket``; None for paths that have no bucket."""
    proto, rest = fsspec.core.split_protocol(str(url))
    if proto not in BUCKET_PROTOCOLS:
        return None
    return rest.lstrip("/").split("/", 1)[0] or None


def hub_filesystem(endpoint: Optional[str] = None):
    """huggingface_hub's fsspec filesystem, with the one method DuckDB asks for that it lacks
    for repo paths (``modified``, used to cache file metadata). ``endpoint``: another Hub than
    ``HF_ENDPOINT`` (a fresh instance, not fsspec's cached one)."""
    from datetime import datetime, timezone

    from huggingface_hub import HfFileSystem

    class HubFiles(HfFileSystem):
        def modified(self, path: str, **kwargs) -> datetime:
            # Files at a revision never change; DuckDB only compares this value between reads.
            return datetime.fromtimestamp(0, tz=timezone.utc)

    return HubFiles(endpoint=endpoint, skip_instance_cache=True) if endpoint else HubFiles()


def filesystem(protocol: str):
    """The fsspec filesystem DuckDB reads ``protocol://`` paths through."""
    if protocol == "hf":
        return hub_filesystem()
    if protocol in ("gs", "gcs"):
        return _gcs_for_duckdb()
    return fsspec.filesystem(protocol)


def _gcs_for_duckdb():
    """gcsfs, opening files with a plain read-ahead cache. Its default (adaptive background
    prefetching) leaves a pending prefetch task behind for each of the many file handles
    DuckDB opens and drops, and asyncio prints "Task was destroyed but it is pending!" for
    every one; DuckDB does its own read planning, so prefetching buys it nothing."""
    import gcsfs

    class DuckDBGCSFileSystem(gcsfs.GCSFileSystem):
        def _open(self, path, mode="rb", **kwargs):
            if kwargs.get("cache_type") is None:
                kwargs["cache_type"] = "readahead"
            return super()._open(path, mode, **kwargs)

    return DuckDBGCSFileSystem()


def _protocols(fs) -> tuple[str, ...]:
    p = fs.protocol
    return (p,) if isinstance(p, str) else tuple(p)


def register_filesystems(con, paths: Iterable[str]) -> None:
    """Register on ``con`` the fsspec filesystem of every remote path in ``paths`` (once per
    protocol; local paths are DuckDB's own)."""
    done = set(con.list_filesystems())
    for path in paths:
        proto = protocol_of(path) if path else None
        if proto in LOCAL_PROTOCOLS or proto in done:
            continue
        fs = filesystem(proto)
        if not done.intersection(_protocols(fs)):
            con.register_filesystem(fs)
        done.update(_protocols(fs))
        done.add(proto)


def duckdb_connect(*paths: str, con=None):
    """A DuckDB connection (new, or ``con``) that reads ``paths`` wherever they are. Known
    extensions are never installed on the fly: a remote path without a filesystem fails
    with DuckDB's message instead of reaching for the network."""
    import duckdb

    con = con if con is not None else duckdb.connect()
    con.execute("SET autoinstall_known_extensions = false")
    register_filesystems(con, paths)
    return con


# ------------------------------------------------------------------ clear errors


def _listing_probe(fs, proto: str, bucket: str) -> None:
    """One cheap request that needs exactly the permission a command needs first (list
    objects), and tells a missing bucket from a forbidden one. ``buckets.get`` is not used:
    object-level roles (roles/storage.objectViewer) do not grant it."""
    if proto == "gs":
        fs.call("GET", "b/{}/o", bucket, maxResults=1, json_out=True)
    elif proto == "s3":
        fs.call_s3("list_objects_v2", Bucket=bucket, MaxKeys=1)
    else:
        fs.ls(bucket)


PROBE_TIMEOUT_S = 5.0
_PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def _store_address(proto: str) -> Optional[tuple[str, int]]:
    """(host, port) the store's client connects to, where it is known without a request:
    the emulator's or the endpoint's when one is set, Google's for gs://; None otherwise
    (S3's regional hosts, or a proxy in between)."""
    import os
    from urllib.parse import urlsplit

    if any(os.environ.get(v) for v in _PROXY_VARS):
        return None
    if proto == "gs":
        endpoint = os.environ.get("STORAGE_EMULATOR_HOST")
        if not endpoint:
            return ("storage.googleapis.com", 443)
    else:
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        if not endpoint:
            return None
    parts = urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}")
    if not parts.hostname:
        return None
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)


def _reachable_probe(proto: str) -> None:
    """Raise ConnectionError within ``PROBE_TIMEOUT_S`` when the store's server cannot be
    reached at all: gcsfs retries a refused connection six times with backoff (about 30 s a
    request), so an unreachable endpoint otherwise took a minute to say so."""
    import socket

    address = _store_address(proto)
    if address is None:
        return
    try:
        socket.create_connection(address, timeout=PROBE_TIMEOUT_S).close()
    except OSError as e:
        raise ConnectionError(f"{address[0]}:{address[1]}: {e}") from None


def check_location(url: str, fs=None) -> None:
    """Raise StorageError when ``url`` lies in a bucket that does not exist or that this
    account may not list, in a Hub repo or revision that does not exist, or on a server that
    cannot be reached: one sentence naming the endpoint, bucket, repo or revision. Local
    paths pass."""
    if protocol_of(url) == "hf":
        check_hub_location(url, fs)
        return
    bucket = bucket_of(url)
    if bucket is None:
        return
    proto = BUCKET_PROTOCOLS[protocol_of(url) or ""]
    try:
        _reachable_probe(proto)
        fs = fsspec.filesystem(proto)
        _listing_probe(fs, proto, bucket)
    except FileNotFoundError:
        raise StorageError(_missing_bucket(proto, bucket)) from None
    except Exception as e:
        msg = storage_error_message(e, url)
        if msg is None:
            raise
        raise StorageError(msg) from None


def hub_endpoint() -> str:
    from huggingface_hub import constants

    return constants.ENDPOINT


def check_hub_location(url: str, fs=None) -> None:
    """StorageError (one sentence) when the repo or revision ``hf://...`` names does not exist
    or the Hub cannot be reached; one cheap request (the repo's info at that revision).
    ``fs``: the Hub filesystem to ask (one at an explicit endpoint); else HF_ENDPOINT's."""
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    fs = fs if fs is not None else hub_filesystem()
    path = fsspec.core.split_protocol(url)[1]
    endpoint = getattr(fs, "endpoint", None) or hub_endpoint()
    try:
        fs.resolve_path(path)
    except Exception as e:
        causes = list(exception_chain(e))
        repo, revision = _hub_repo_and_revision(path)
        if any(isinstance(c, RevisionNotFoundError) for c in causes):
            raise StorageError(
                f"the Hub repo {repo} at {endpoint} has no revision {revision!r}; give one of its tags or "
                f"branches (e.g. hf://{_hub_prefix(path)}{repo}@main), as `sciga publish --version` made them."
            ) from None
        if any(isinstance(c, RepositoryNotFoundError) for c in causes):
            raise StorageError(
                f"the Hub has no dataset repo {repo} at {endpoint} (or this token cannot see it, if it is "
                "private); check the repo id, HF_ENDPOINT and HF_TOKEN."
            ) from None
        if type(e).__name__ == "HfUriError" or isinstance(e, (ValueError, NotImplementedError)):
            raise StorageError(
                f"{url} is not a Hub path like hf://datasets/ORG/NAME or hf://datasets/ORG/NAME@v1.0.0; check it."
            ) from None
        if any(is_network_error(c) for c in causes):
            raise StorageError(
                f"cannot reach the Hub at {endpoint} for {url} ({type(e).__name__}); check the network and "
                "the endpoint (HF_ENDPOINT, --endpoint), then run the same command again."
            ) from None
        msg = storage_error_message(e, url)
        if msg is None:
            raise
        raise StorageError(msg) from None


def _hub_prefix(path: str) -> str:
    return "datasets/" if path.startswith("datasets/") else ""


def _hub_repo_and_revision(path: str) -> tuple[str, str]:
    """``datasets/ORG/NAME@rev/x`` -> (``ORG/NAME``, ``rev``); revision ``main`` when none."""
    rest = path[len("datasets/") :] if path.startswith("datasets/") else path
    parts = rest.split("/")
    repo = "/".join(parts[:2])
    revision = "main"
    if "@" in repo:
        repo, revision = repo.split("@", 1)
    return repo, revision


def is_network_error(e: BaseException) -> bool:
    """Connection refused, DNS, TLS, timeouts, from any of the HTTP clients the storage
    libraries use (huggingface_hub: httpx; gcsfs and s3fs: aiohttp; boto: botocore)."""
    if isinstance(e, (ConnectionError, TimeoutError)):
        return True
    mod = (type(e).__module__ or "").split(".")[0]
    if mod in ("httpx", "httpx2", "httpcore", "urllib3"):
        return True
    name = type(e).__name__
    if mod == "requests":
        return name in ("ConnectionError", "ConnectTimeout", "ReadTimeout", "Timeout", "SSLError")
    if mod == "aiohttp":
        return name.startswith(("ClientConnector", "ServerTimeout", "ServerDisconnected", "ClientOSError"))
    if mod == "botocore":
        return name in ("EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError", "ConnectionClosedError")
    return False


def _endpoint_of(url: Optional[str]) -> str:
    import os

    proto = protocol_of(url) if url else None
    if proto == "hf":
        return f"the Hub at {hub_endpoint()} (HF_ENDPOINT)"
    if proto in ("gs", "gcs"):
        emulator = os.environ.get("STORAGE_EMULATOR_HOST")
        return f"Google Cloud Storage at {emulator} (STORAGE_EMULATOR_HOST)" if emulator else "Google Cloud Storage"
    if proto in ("s3", "s3a"):
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        return f"S3 at {endpoint}" if endpoint else "S3"
    return "the storage server"


def _missing_bucket(proto: str, bucket: str) -> str:
    create = f"gcloud storage buckets create gs://{bucket}" if proto == "gs" else f"aws s3 mb s3://{bucket}"
    return (
        f"the bucket {proto}://{bucket} does not exist (or this account cannot see it); check the path, "
        f"or create the bucket first ({create})."
    )


_GCS_BUCKET_IN_URL = re.compile(r"(?:^|[\s/])b/([^/?\s]+)")


def storage_error_message(exc: BaseException, url: Optional[str] = None) -> Optional[str]:
    """One sentence for a storage failure anywhere in ``exc``'s chain (no permission, no
    credentials, credentials refused), or None when it is not one. The server's own text is
    left out: it names the account."""
    where = None
    if url and bucket_of(url):
        where = f"{BUCKET_PROTOCOLS[protocol_of(url) or '']}://{bucket_of(url)}"
    for e in exception_chain(exc):
        mod = type(e).__module__ or ""
        text = str(e)
        if is_network_error(e) and url and is_remote(url):
            return (
                f"cannot reach {_endpoint_of(url)} for {url} ({type(e).__name__}); "
                "check the network and the endpoint, then run the same command again."
            )
        if is_network_error(e):
            detail = text.splitlines()[0][:160] if text else ""
            return (
                f"cannot reach a server this command needs ({type(e).__name__}{': ' + detail if detail else ''}); "
                "check the network and the endpoint, then run the same command again."
            )
        if mod.startswith("google.auth") and type(e).__name__ == "DefaultCredentialsError":
            return (
                "no Google Cloud credentials found; run `gcloud auth application-default login` "
                "(or set GOOGLE_APPLICATION_CREDENTIALS to a service account key file) and try again."
            )
        gcs_forbidden = isinstance(e, OSError) and text.startswith("Forbidden:")
        # s3fs raises PermissionError without an errno; a local file's has one (not ours to explain).
        store_denied = isinstance(e, PermissionError) and e.errno is None
        if gcs_forbidden or store_denied or getattr(e, "code", None) == 403:
            m = _GCS_BUCKET_IN_URL.search(text)
            target = f"gs://{m.group(1)}" if (gcs_forbidden and m) else (where or "the storage location")
            return (
                f"this account has no permission to use {target}; grant it access to the bucket "
                "(roles/storage.objectAdmin to build into it, roles/storage.objectViewer to read it) "
                "or use credentials that have it."
            )
        if getattr(e, "code", None) == 401 and mod.startswith("gcsfs"):
            return (
                "Google Cloud Storage refused the credentials (401); refresh them with "
                "`gcloud auth application-default login` and try again."
            )
    return None
