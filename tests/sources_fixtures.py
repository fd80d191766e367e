"""A real HTTP server on 127.0.0.1 for the sources tests: it serves the real arXiv API
responses of ../shared/corpus/arxiv_api (recorded exchanges, 2016 feeds, the cs.LG page),
real LaTeXML pages and real e-prints, and injects faults on request.

Faults are scripted per path: ``server.script("/html/1605.08386", ["429:0.2", "503", "ok"])``
answers the first request with 429 + ``Retry-After: 0.2``, the second with 503, then
normally. Fault words: ``429[:retry_after]``, ``500``, ``503``, ``reset`` (close the
socket with an RST, no response), ``truncate`` (declare more bytes than sent),
``slow:<seconds>`` (sleep before answering), ``drip`` (send the body one byte every
0.2 s), ``malformed`` (cut the body in half, honest length), ``ok``. Every request is
logged with its path, status and whether it was answered completely.
"""

from __future__ import annotations

import glob
import gzip
import io
import json
import socket
import struct
import tarfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Optional
from urllib.parse import parse_qs, urlsplit

ROOT = Path(__file__).resolve().parents[1]


from conftest import CORPUS  # noqa: E402  (the one corpus lookup of the tests)

HAVE_CORPUS = (CORPUS / "arxiv_api").is_dir()

# ar5iv's page for a conversion that failed (the structure its server renders when the
# converted document is empty: title "No content available", empty ltx_document, the
# conversion report link marked with the fatal severity class).
FAILED_CONVERSION_PAGE = b"""<!DOCTYPE html>
<html lang="en">
<head>
    <meta http-equiv="Content-Type" content="text/html" />
    <meta charset="utf-8" />
    <title> No content available </title>
</head>
<body>
    <div class="ltx_page_main">
      <div class="ltx_page_content">
        <article class="ltx_document">
        </article>
      </div>
      <div class="ar5iv-footer"><a href="/log/astro-ph/0601001" class="ar5iv-text-button ar5iv-severity-fatal">Conversion<br>report</a></div>
      <footer class="ltx_page_footer"></footer>
    </div>
</body>
</html>
"""

ABS_PAGE = b"<!DOCTYPE html><html><head><title>arXiv abstract</title></head><body><h1>Abstract page</h1></body></html>"


def api_key(query: str) -> tuple:
    q = parse_qs(query, keep_blank_values=True)
    get = lambda k: (q.get(k) or [""])[0]
    return (get("search_query"), get("id_list"), get("start") or "0", get("max_results"))


def load_api_responses() -> dict:
    """(search_query, id_list, start, max_results) -> (status, body bytes)."""
    out: dict = {}
    for f in sorted(glob.glob(str(CORPUS / "arxiv_api" / "recorded" / "*.json"))):
        d = json.loads(Path(f).read_text())
        out[api_key(urlsplit(d["url"]).query)] = (d["status_code"], d["body"].encode("utf-8"))
    atom = CORPUS / "arxiv_api" / "atom_2016"
    if (atom / "id_list_1111.2011v2.xml").exists():
        out[("", "1111.2011v2", "0", None)] = (200, (atom / "id_list_1111.2011v2.xml").read_bytes())
    cat = CORPUS / "arxiv_api" / "cat_cs.LG_2026.xml"
    if cat.exists():
        out[("cat:cs.LG", "", "0", None)] = (200, cat.read_bytes())
    return out


def tar_gz_of(files: dict, *, mtime: int = 0) -> bytes:
    """A deterministic .tar.gz of {name: bytes}."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for name in sorted(files):
            ti = tarfile.TarInfo(name)
            ti.size = len(files[name])
            ti.mtime = mtime
            tf.addfile(ti, io.BytesIO(files[name]))
    return gzip.compress(raw.getvalue(), mtime=0)


def tar_gz_of_dir(path: Path) -> bytes:
    files = {}
    for p in sorted(path.rglob("*")):
        if p.is_file():
            files[str(p.relative_to(path))] = p.read_bytes()
    return tar_gz_of(files)


def zero_bomb(gib: int = 10, member: str = "main.tex") -> bytes:
    """A tar.gz whose one member declares ``gib`` GiB of zeros and really inflates to it:
    ~1 KiB per MiB, made by repeating one compressed gzip member (about 10 MiB for 10 GiB)."""
    ti = tarfile.TarInfo(member)
    ti.size = gib << 30
    head = gzip.compress(ti.tobuf(format=tarfile.GNU_FORMAT), mtime=0)
    one_mib = gzip.compress(b"\0" * (1 << 20), compresslevel=9, mtime=0)
    return head + one_mib * (gib * 1024)


def traversal_tarball() -> bytes:
    return tar_gz_of(
        {"main.tex": b"\\documentclass{article}\\begin{document}x\\end{document}", "../../etc/evil.tex": b"owned"}
    )


def symlink_tarball() -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tf:
        ti = tarfile.TarInfo("main.tex")
        data = b"\\documentclass{article}\\begin{document}x\\end{document}"
        ti.size = len(data)
        tf.addfile(ti, io.BytesIO(data))
        link = tarfile.TarInfo("fig.pdf")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        tf.addfile(link)
    return gzip.compress(raw.getvalue(), mtime=0)


class Route:
    def __init__(self, body: bytes, status: int = 200, headers: Optional[dict] = None, etag: Optional[str] = None):
        self.body = body
        self.status = status
        self.headers = headers or {}
        self.etag = etag


class FaultServer:
    """ThreadingHTTPServer on 127.0.0.1 with scripted faults and a request log."""

    def __init__(self, delay: float = 0.0):
        self.api = load_api_responses() if HAVE_CORPUS else {}
        self.routes: dict[str, Route] = {}
        self.scripts: dict[str, list[str]] = {}
        self.default_html: Optional[Callable[[str], Optional[Route]]] = None
        self.default_eprint: Optional[Callable[[str], Optional[Route]]] = None
        self.log: list[dict] = []
        self.delay = delay
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # quiet
                pass

            def do_GET(self):
                server._handle(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    # -- configuration ---------------------------------------------------------------
    def start(self) -> FaultServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def add(
        self, path: str, body: bytes, status: int = 200, headers: Optional[dict] = None, etag: Optional[str] = None
    ):
        self.routes[path] = Route(body, status, headers, etag)

    def script(self, path: str, steps: list[str]) -> None:
        with self._lock:
            self.scripts[path] = list(steps)

    @property
    def api_url(self) -> str:
        return self.base + "/api/query"

    @property
    def html_base(self) -> str:
        return self.base + "/html/"

    @property
    def eprint_base(self) -> str:
        return self.base + "/e-print/"

    def env(self) -> dict:
        return {
            "SCIGA_ARXIV_API_URL": self.api_url,
            "SCIGA_HTML_BASE_URL": self.html_base,
            "SCIGA_EPRINT_BASE_URL": self.eprint_base,
        }

    def requests_for(self, path_prefix: str) -> list[dict]:
        with self._lock:
            return [r for r in self.log if r["path"].startswith(path_prefix)]

    # -- serving -------------------------------------------------------------------------
    def _route(self, path: str, query: str) -> Route:
        if path == "/api/query":
            key = api_key(query)
            hit = self.api.get(key) or self.api.get(key[:3] + (None,))
            if hit is None and "," in key[1]:
                hit = self._batch(key)
            if hit is None:
                return Route(
                    b"<?xml version='1.0'?><feed xmlns='http://www.w3.org/2005/Atom'><title>no recording</title>"
                    b"</feed>",
                    500,
                )
            return Route(hit[1], hit[0], {"Content-Type": "application/atom+xml; charset=utf-8"})
        if path in self.routes:
            return self.routes[path]
        if path.startswith("/abs/"):
            return Route(ABS_PAGE, 200, {"Content-Type": "text/html"})
        if path.startswith("/html/") and self.default_html:
            r = self.default_html(path[len("/html/") :])
            if r is not None:
                return r
        if path.startswith("/e-print/") and self.default_eprint:
            r = self.default_eprint(path[len("/e-print/") :])
            if r is not None:
                return r
        return Route(b"not found", 404, {"Content-Type": "text/plain"})

    def _single(self, one: str):
        for k, v in self.api.items():
            if k[0] == "" and k[1] == one and k[2] == "0":
                return v
        return None

    def _batch(self, key: tuple):
        """An id_list batch nobody recorded: compose it from the single-id recordings
        (a 400 for any id rejects the batch, as the API does; unknown ids give no entry)."""
        if key[2] != "0":
            return None
        bodies = []
        for one in key[1].split(","):
            hit = self._single(one)
            if hit is None:
                continue
            if hit[0] != 200:
                return hit
            bodies.append(hit[1])
        if not bodies:
            return self._single("0000.0000")
        return (200, merge_feeds(bodies))

    def _next_step(self, path: str) -> str:
        with self._lock:
            steps = self.scripts.get(path)
            if steps:
                return steps.pop(0)
        return "ok"

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(h.path)
        path, query = parts.path, parts.query
        step = self._next_step(path)
        entry = {"path": path, "query": query, "step": step, "status": None, "complete": False, "t": time.time()}
        with self._lock:
            self.log.append(entry)
        if self.delay:
            time.sleep(self.delay)
        try:
            self._respond(h, path, query, step, entry)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _send(self, h, status: int, body: bytes, headers: dict, entry: dict, declared: Optional[int] = None) -> None:
        # Logged before writing: the client may read the response (and a test inspect the
        # log) before this thread runs again.
        entry["status"] = status
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(declared if declared is not None else len(body)))
        h.end_headers()
        h.wfile.write(body)
        h.wfile.flush()
        entry["status"] = status
        entry["complete"] = declared is None

    def _respond(self, h, path: str, query: str, step: str, entry: dict) -> None:
        if step.startswith("429"):
            ra = step.split(":", 1)[1] if ":" in step else "0"
            h.close_connection = True
            self._send(h, 429, b"Too Many Requests", {"Retry-After": ra, "Content-Type": "text/plain"}, entry)
            return
        if step in ("500", "502", "503", "504"):
            h.close_connection = True
            self._send(h, int(step), b"server error", {"Content-Type": "text/plain"}, entry)
            return
        if step == "reset":
            sock = h.connection
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            h.close_connection = True
            sock.close()
            entry["status"] = "reset"
            return
        if step.startswith("slow"):
            time.sleep(float(step.split(":", 1)[1]) if ":" in step else 2.0)
        route = self._route(path, query)
        headers = dict(route.headers)
        if route.etag:
            headers["ETag"] = route.etag
            if h.headers.get("If-None-Match") == route.etag:
                entry["status"] = 304
                entry["complete"] = True
                h.send_response(304)
                h.send_header("ETag", route.etag)
                h.send_header("Content-Length", "0")
                h.end_headers()
                return
        body = route.body
        if step == "truncate":
            h.close_connection = True
            self._send(h, route.status, body[: max(1, len(body) // 2)], headers, entry, declared=len(body))
            return
        if step == "malformed":
            body = body[: len(body) // 2]
        if step == "drip":
            h.send_response(route.status)
            for k, v in headers.items():
                h.send_header(k, v)
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            for i in range(len(body)):
                h.wfile.write(body[i : i + 1])
                h.wfile.flush()
                time.sleep(0.2)
            entry["status"] = route.status
            entry["complete"] = True
            return
        if route.status in (301, 302, 303, 307, 308):
            headers.setdefault("Location", body.decode())
            body = b""
        self._send(h, route.status, body, headers, entry)


def merge_feeds(bodies: list[bytes]) -> bytes:
    """One Atom feed holding the entries of several single-id feeds (what the API returns
    for an id_list batch), built from the recorded responses themselves."""
    from lxml import etree

    ns = {"a": "http://www.w3.org/2005/Atom", "os": "http://a9.com/-/spec/opensearch/1.1/"}
    first = etree.fromstring(bodies[0]) if bodies else None
    if first is None:
        raise ValueError("no feeds")
    for e in first.findall("a:entry", ns):
        first.remove(e)
    n = 0
    for b in bodies:
        for e in etree.fromstring(b).findall("a:entry", ns):
            first.append(e)
            n += 1
    tot = first.find("os:totalResults", ns)
    if tot is not None:
        tot.text = str(n)
    return etree.tostring(first, xml_declaration=True, encoding="UTF-8")
