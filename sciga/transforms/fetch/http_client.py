"""The one polite HTTP client every source uses (arXiv API, ar5iv / arXiv HTML, e-prints).

Politeness and robustness rules, all in one place:

* per-host rate limit: at most one request in flight per host, and ``rate_limit`` seconds
  between the end of one request and the start of the next (arXiv asks for one request
  every 3 s; hosts under ``arxiv.org`` never go below that floor, whatever the option says);
* ``429`` / ``5xx`` / connection resets / read timeouts / truncated bodies are retried a
  bounded number of times with exponential backoff, honouring ``Retry-After`` (seconds or
  an HTTP date, capped so a hostile header cannot park the run for a day);
* conditional requests: pass the ``ETag`` / ``Last-Modified`` of a cached copy and a
  ``304`` comes back as ``not_modified`` (nothing downloaded);
* every body is read with a size limit and an overall deadline, so a slow-drip or endless
  response cannot hang or exhaust a worker;
* redirects are followed by hand so each hop passes the rate limiter of its own host.

Other statuses (``400``, ``404`` ...) are returned to the caller, which knows what they mean
for its endpoint; only exhausted retries and transport failures raise ``FetchError``.
"""

from __future__ import annotations

import email.utils
import logging
import random
import socket
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Optional
from urllib.parse import urljoin, urlsplit

import requests

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
DEFAULT_MAX_BYTES = 512 * 1024 * 1024
# arXiv's terms of use: no more than one request every three seconds, one connection.
ARXIV_MIN_INTERVAL = 3.0


def _default_user_agent() -> str:
    try:
        from sciga import __version__
    except Exception:  # noqa: BLE001 - the UA must never break a fetch
        __version__ = "0"
    return (
        f"sciga-builder/{__version__} (+https://github.com/sciga-builder; dataset builder; polite: 1 req/3 s per host)"
    )


@dataclass
class HttpResponse:
    url: str  # final URL, after redirects
    status: int
    headers: dict  # lower-cased names
    body: bytes
    attempts: int = 1
    not_modified: bool = False

    @property
    def etag(self) -> Optional[str]:
        return self.headers.get("etag")

    @property
    def last_modified(self) -> Optional[str]:
        return self.headers.get("last-modified")


class FetchError(Exception):
    """A request that could not be completed. ``kind`` is machine-readable (``timeout``,
    ``connection``, ``truncated``, ``http_<status>``, ``too_large``, ``redirects``);
    ``permanent`` says whether retrying later can help."""

    def __init__(
        self,
        kind: str,
        message: str,
        url: str,
        status: Optional[int] = None,
        attempts: int = 0,
        permanent: bool = False,
    ):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.url = url
        self.status = status
        self.attempts = attempts
        self.permanent = permanent

    def __reduce__(self):
        return (type(self), (self.kind, self.message, self.url, self.status, self.attempts, self.permanent))


def parse_retry_after(value: Optional[str], now: Optional[float] = None) -> Optional[float]:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP-date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (now if now is not None else time.time()))


def host_of(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()


def is_arxiv_host(host: str) -> bool:
    return host == "arxiv.org" or host.endswith(".arxiv.org")


class HostRateLimiter:
    """One request in flight per host, ``interval(host)`` seconds between them."""

    def __init__(self, interval: Callable[[str], float], clock=time.monotonic, sleep=time.sleep):
        self._interval = interval
        self._clock = clock
        self._sleep = sleep
        self._locks: dict[str, threading.Lock] = {}
        self._last_end: dict[str, float] = {}
        self._guard = threading.Lock()

    def _lock(self, host: str) -> threading.Lock:
        with self._guard:
            lk = self._locks.get(host)
            if lk is None:
                lk = self._locks[host] = threading.Lock()
            return lk

    @contextmanager
    def slot(self, host: str):
        lk = self._lock(host)
        with lk:
            last = self._last_end.get(host)
            if last is not None:
                wait = last + self._interval(host) - self._clock()
                if wait > 0:
                    self._sleep(wait)
            try:
                yield
            finally:
                self._last_end[host] = self._clock()

    def defer(self, host: str, seconds: float) -> None:
        """Push the host's next slot back (a Retry-After applies to every caller)."""
        with self._guard:
            base = max(self._last_end.get(host, 0.0), self._clock())
            self._last_end[host] = base + max(0.0, seconds) - self._interval(host)


@dataclass
class ClientStats:
    requests: int = 0
    retries: int = 0
    bytes: int = 0
    not_modified: int = 0
    by_status: dict = field(default_factory=dict)
    failures: int = 0


class PoliteClient:
    def __init__(
        self,
        rate_limit: float = 3.0,
        *,
        max_retries: int = 4,
        backoff_base: float = 1.0,
        backoff_max: float = 60.0,
        retry_after_max: float = 300.0,
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
        total_timeout: float = 600.0,
        max_bytes: int = DEFAULT_MAX_BYTES,
        user_agent: Optional[str] = None,
        arxiv_floor: bool = True,
        max_redirects: int = 5,
        session: Optional[requests.Session] = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        if rate_limit < 0:
            raise ValueError("rate_limit must be >= 0 seconds")
        self.rate_limit = float(rate_limit)
        self.max_retries = int(max_retries)
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.retry_after_max = retry_after_max
        self.timeout = (connect_timeout, read_timeout)
        self.total_timeout = total_timeout
        self.max_bytes = max_bytes
        self.user_agent = user_agent or _default_user_agent()
        self.arxiv_floor = arxiv_floor
        self.max_redirects = max_redirects
        self._session = session
        self._sleep = sleep
        self._local = threading.local()
        self.limiter = HostRateLimiter(self.interval_for, sleep=sleep)
        self.stats = ClientStats()
        self._stats_lock = threading.Lock()
        self._rng = random.Random(0x5C16A)

    # -- configuration -------------------------------------------------------------
    def interval_for(self, host: str) -> float:
        if self.arxiv_floor and is_arxiv_host(host):
            return max(self.rate_limit, ARXIV_MIN_INTERVAL)
        return self.rate_limit

    def session(self) -> requests.Session:
        if self._session is not None:
            return self._session
        s = getattr(self._local, "session", None)
        if s is None:
            s = self._local.session = requests.Session()
            s.headers["User-Agent"] = self.user_agent
        return s

    def _count(self, **kw) -> None:
        with self._stats_lock:
            for k, v in kw.items():
                if k == "status":
                    self.stats.by_status[v] = self.stats.by_status.get(v, 0) + 1
                else:
                    setattr(self.stats, k, getattr(self.stats, k) + v)

    def backoff(self, attempt: int) -> float:
        base = min(self.backoff_max, self.backoff_base * (2**attempt))
        with self._stats_lock:
            jitter = self._rng.uniform(0.5, 1.0)
        return base * jitter

    # -- one request -----------------------------------------------------------------
    def get(
        self,
        url: str,
        *,
        etag: Optional[str] = None,
        last_modified: Optional[str] = None,
        max_bytes: Optional[int] = None,
        headers: Optional[dict] = None,
    ) -> HttpResponse:
        """GET with retries. Returns the final response for any non-retryable status;
        raises FetchError when retries are exhausted or the body is unusable."""
        limit = self.max_bytes if max_bytes is None else max_bytes
        hdrs = {"User-Agent": self.user_agent}
        if headers:
            hdrs.update(headers)
        if etag:
            hdrs["If-None-Match"] = etag
        if last_modified:
            hdrs["If-Modified-Since"] = last_modified
        attempt = 0
        last_err: Optional[FetchError] = None
        while True:
            try:
                resp = self._follow(url, hdrs, limit)
            except FetchError as e:
                if e.permanent:
                    e.attempts = attempt + 1
                    self._count(failures=1)
                    raise
                last_err = e
                wait = self.backoff(attempt)
            else:
                resp.attempts = attempt + 1
                if resp.status not in RETRY_STATUSES:
                    if resp.status == 304:
                        resp.not_modified = True
                        self._count(not_modified=1)
                    return resp
                ra = parse_retry_after(resp.headers.get("retry-after"))
                last_err = FetchError(f"http_{resp.status}", f"HTTP {resp.status}", url, status=resp.status)
                wait = min(ra, self.retry_after_max) if ra is not None else self.backoff(attempt)
                if ra is not None:
                    # The server asked everyone to wait: push the host's next slot back.
                    self.limiter.defer(host_of(resp.url or url), wait)
                    wait = 0.0
            if attempt >= self.max_retries:
                self._count(failures=1)
                assert last_err is not None
                last_err.attempts = attempt + 1
                reason = last_err.message.replace(url, "").strip(" :") or last_err.kind
                last_err.message = (
                    f"{url} failed after {attempt + 1} attempt(s) (last: {reason}); "
                    "the server may be overloaded, rerun later (finished items are kept)"
                )
                last_err.args = (last_err.message,)
                raise last_err
            attempt += 1
            self._count(retries=1)
            log.info("retry %d/%d for %s in %.2fs (%s)", attempt, self.max_retries, url, wait, last_err.kind)
            if wait > 0:
                self._sleep(wait)

    def _follow(self, url: str, hdrs: dict, limit: int) -> HttpResponse:
        current = url
        for _ in range(self.max_redirects + 1):
            resp = self._once(current, hdrs, limit)
            if resp.status in (301, 302, 303, 307, 308) and resp.headers.get("location"):
                current = urljoin(current, resp.headers["location"])
                continue
            return resp
        raise FetchError("redirects", f"{url} redirected more than {self.max_redirects} times", url, permanent=True)

    def _once(self, url: str, hdrs: dict, limit: int) -> HttpResponse:
        host = host_of(url)
        with self.limiter.slot(host):
            self._count(requests=1)
            t0 = time.monotonic()
            try:
                r = self.session().get(url, headers=hdrs, timeout=self.timeout, stream=True, allow_redirects=False)
            except requests.exceptions.Timeout as e:
                raise FetchError("timeout", f"{url} did not answer in time ({type(e).__name__})", url) from None
            except requests.exceptions.InvalidURL as e:
                raise FetchError("bad_url", f"{url} is not a valid URL ({e})", url, permanent=True) from None
            except (requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError) as e:
                raise FetchError("connection", f"{url}: connection failed ({type(e).__name__})", url) from None
            except requests.exceptions.RequestException as e:
                raise FetchError("request", f"{url}: request failed ({e})", url, permanent=True) from None
            try:
                self._count(status=r.status_code)
                headers = {k.lower(): v for k, v in r.headers.items()}
                declared = headers.get("content-length")
                if declared and declared.isdigit() and int(declared) > limit:
                    raise FetchError(
                        "too_large",
                        f"{url} is {int(declared) // (1 << 20)} MiB, above the {limit // (1 << 20)} MiB limit",
                        url,
                        status=r.status_code,
                        permanent=True,
                    )
                if r.status_code in (301, 302, 303, 304, 307, 308) or r.status_code in RETRY_STATUSES:
                    body = b""  # not read: nothing useful, and the connection is closed below
                else:
                    body = self._read_body(r, url, limit, t0)
                    encoded = headers.get("content-encoding", "identity").lower() not in ("", "identity")
                    if declared and declared.isdigit() and not encoded and len(body) != int(declared):
                        raise FetchError(
                            "truncated", f"{url} sent {len(body)} of {declared} bytes", url, status=r.status_code
                        )
                self._count(bytes=len(body))
                return HttpResponse(url=url, status=r.status_code, headers=headers, body=body)
            finally:
                r.close()

    def _read_body(self, r, url: str, limit: int, t0: float) -> bytes:
        # A body that trickles in (one byte per second) never trips the read timeout, and
        # a blocking read of a chunk cannot check the clock: a watchdog shuts the socket
        # down at the deadline, which wakes the read up with an error.
        fired = threading.Event()

        def abort():
            fired.set()
            sock = getattr(getattr(r.raw, "connection", None), "sock", None)
            try:
                if sock is not None:
                    sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        remaining = max(0.0, self.total_timeout - (time.monotonic() - t0))
        dog = threading.Timer(remaining, abort)
        dog.daemon = True
        dog.start()
        try:
            return self._read_chunks(r, url, limit, fired)
        except FetchError:
            if fired.is_set():
                raise FetchError(
                    "timeout", f"{url} took longer than {self.total_timeout:.0f} s to download", url
                ) from None
            raise
        finally:
            dog.cancel()

    def _read_chunks(self, r, url: str, limit: int, fired: threading.Event) -> bytes:
        chunks, n = [], 0
        try:
            for chunk in r.iter_content(64 * 1024):
                n += len(chunk)
                if n > limit:
                    raise FetchError(
                        "too_large",
                        f"{url} is larger than the {limit // (1 << 20)} MiB limit",
                        url,
                        status=r.status_code,
                        permanent=True,
                    )
                chunks.append(chunk)
        except requests.exceptions.ConnectionError as e:
            if "Read timed out" in str(e) or "timed out" in str(e):
                raise FetchError("timeout", f"{url} stalled while sending its body", url) from None
            raise FetchError(
                "connection", f"{url}: connection dropped while reading ({type(e).__name__})", url
            ) from None
        except requests.exceptions.ChunkedEncodingError:
            raise FetchError("truncated", f"{url} ended before its declared length", url) from None
        except requests.exceptions.ContentDecodingError:
            raise FetchError("truncated", f"{url} sent a body that does not decompress", url) from None
        except requests.exceptions.Timeout:
            raise FetchError("timeout", f"{url} stalled while sending its body", url) from None
        except OSError as e:  # the watchdog's shutdown surfaces as a socket error
            raise FetchError("connection", f"{url}: connection dropped while reading ({e})", url) from None
        if fired.is_set():
            raise FetchError("timeout", f"{url} took too long to download", url)
        return b"".join(chunks)
