"""Hostile inputs and faults, as an attacker or an unlucky user makes them (issue 23).

* ``Mutations``: inputs mutated from real pages (``../shared/corpus``), one kind at a time:
  names a file system allows but a newline-separated list breaks, FIFOs, links out of the
  input folder and link loops, sidecars of the wrong types, gzip bombs, captions of
  mentions without a sentence boundary, giant formulas, broken bytes... Each planted input
  says what the build must make of it (a paper, a dead letter of a given type, either).
* ``CanaryWatch``: files outside the input folder that a link points at, watched with
  Linux inotify: the check is that nothing *opened* them (a read that leaks nothing into
  the output still fails it), and their bytes must not appear in any output file either.
* ``run_watched``: a command run as a process group under a timeout (no hang), its peak
  RSS summed over the process tree sampled with psutil, and the command's own process's
  peak as the kernel counted it (which a sample on a loaded machine can miss).
* ``accounted``: every listed input is a paper or a dead letter of the build (by URI).

Used by tests/e2e/test_hostile_inputs.py (one minimal input per class, and a seeded fuzz test
of a few dozen inputs) and bench/fuzz.py (the longer run).
"""

from __future__ import annotations

import ctypes
import gzip
import io
import json
import os
import random
import re
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
GB = 1024**3


# ------------------------------------------------------------------ running and measuring


@dataclass
class Watched:
    returncode: int
    stdout: str
    stderr: str
    peak_rss: int  # bytes, summed over the process tree at its largest
    seconds: float
    timed_out: bool
    own_peak_rss: int = 0  # bytes: the command's own process at its largest (the kernel's count)


def sciga_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "sciga", *args]


def cli_env(extra: Optional[dict] = None) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra or {})
    return env


def _tree_rss(proc) -> int:
    import psutil

    total = 0
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def run_watched(
    cmd: list[str],
    timeout: float,
    env: Optional[dict] = None,
    cwd: Optional[str] = None,
    on_tick: Optional[Callable] = None,
) -> Watched:
    """Run ``cmd`` in its own process group; the whole group is killed at ``timeout``.
    ``on_tick(psutil.Process)`` is called at each sample (fault injection hooks in there)."""
    import psutil

    t0 = time.time()
    proc = subprocess.Popen(
        cmd,
        cwd=cwd or str(ROOT),
        env=env or cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        text=True,
    )
    ps = psutil.Process(proc.pid)
    peak, timed_out = 0, False
    import threading

    out: dict = {}

    def pump(name, stream):
        out[name] = stream.read()

    threads = [
        threading.Thread(target=pump, args=("stdout", proc.stdout), daemon=True),
        threading.Thread(target=pump, args=("stderr", proc.stderr), daemon=True),
    ]
    for t in threads:
        t.start()
    own_peak = 0
    while True:
        # wait4, not poll: the kernel's count of the process's peak comes with its status
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode, own_peak = os.waitstatus_to_exitcode(status), usage.ru_maxrss * 1024
            break
        peak = max(peak, _tree_rss(ps))
        if on_tick is not None:
            on_tick(ps)
        if time.time() - t0 > timeout:
            timed_out = True
            kill_group(proc.pid)
            break
        time.sleep(0.05)
    proc.wait()
    kill_group(proc.pid)  # workers left behind by a killed launcher
    for t in threads:
        t.join(timeout=10)
    return Watched(
        proc.returncode, out.get("stdout", ""), out.get("stderr", ""), peak, time.time() - t0, timed_out, own_peak
    )


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


# ------------------------------------------------------------------ canaries (Linux inotify)

IN_ACCESS, IN_OPEN = 0x001, 0x020


class CanaryWatch:
    """inotify watches on canary files: which of them were opened or read since ``start``."""

    def __init__(self, paths: list[Path]):
        self.paths = [Path(p) for p in paths]
        self.libc = ctypes.CDLL("libc.so.6", use_errno=True)
        self.fd = -1
        self.wd: dict[int, Path] = {}

    def __enter__(self) -> CanaryWatch:
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        for p in self.paths:
            wd = self.libc.inotify_add_watch(self.fd, str(p).encode(), IN_OPEN | IN_ACCESS)
            if wd < 0:
                raise OSError(ctypes.get_errno(), f"inotify_add_watch {p} failed")
            self.wd[wd] = p
        return self

    def touched(self) -> list[str]:
        """The canaries opened or read so far (by path)."""
        seen = set()
        while True:
            try:
                buf = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            i = 0
            while i < len(buf):
                wd, mask, _cookie, length = struct.unpack_from("iIII", buf, i)
                if mask & (IN_OPEN | IN_ACCESS) and wd in self.wd:
                    seen.add(str(self.wd[wd]))
                i += 16 + length
        self._seen = getattr(self, "_seen", set()) | seen
        return sorted(self._seen)

    def __exit__(self, *exc):
        os.close(self.fd)
        return False


def bytes_leaked(out: Path, secrets: list[bytes]) -> list[str]:
    """Files under ``out`` that hold one of ``secrets`` (the canaries' marker bytes)."""
    found = []
    for p in sorted(out.rglob("*")):
        if p.is_file() and not p.is_symlink():
            data = p.read_bytes()
            found.extend(f"{p}" for s in secrets if s in data)
    return found


# ------------------------------------------------------------------ the build's accounting


def under_root(uri: Optional[str], root: Optional[Path]) -> Optional[str]:
    """A published input path (relative to the --input folder, issue 41 item 8) as the
    planted input's absolute path, so that it compares with ``Planted.uri``; a URI with a
    scheme (s3://, arxiv:) is kept, an archive chain has its archive joined."""
    if root is None or not uri:
        return uri
    if "::" in uri and uri.split("://", 1)[0] in ("zip", "tar"):
        head, _, outer = uri.rpartition("::")
        # an ar5iv dump is another --input (``dumps``, beside the folder): relative to its own folder
        folder = root if (root / outer).exists() or not (root.parent / outer).exists() else root.parent
        return f"{head}::{under_root(outer, folder)}"
    if "://" in uri.split("/", 1)[0] + "/" or uri.startswith("/"):
        return uri
    return f"{root}/{uri}"


def build_rows(out: Path, root: Optional[Path] = None) -> tuple[list[dict], list[dict]]:
    """(papers [{id, input_uri}], dead letters [{paper_id, stage, error_type, message, input_uri, scope}]);
    ``root``: the --input folder, to have each input_uri as the absolute path it was read from."""
    import pyarrow.parquet as pq

    papers, dead = [], []
    for f in sorted((out / "data" / "papers").glob("*.parquet")):
        t = pq.read_table(f, columns=["id", "provenance"]).to_pylist()
        papers.extend(
            {"id": r["id"], "input_uri": under_root((r["provenance"] or {}).get("input_uri"), root)} for r in t
        )
    for f in sorted((out / "data" / "dead_letter").glob("*.parquet")):
        dead.extend({**d, "input_uri": under_root(d["input_uri"], root)} for d in pq.read_table(f).to_pylist())
    return papers, dead


def accounted(out: Path, listed: set[str], root: Optional[Path] = None) -> list[str]:
    """Problems with the accounting: inputs neither a paper nor an input-scope dead letter,
    outputs that are no input, a manifest that does not reconcile."""
    papers, dead = build_rows(out, root)
    seen = {p["input_uri"] for p in papers} | {d["input_uri"] for d in dead if d.get("scope", "input") != "part"}
    problems = [f"lost: {u!r}" for u in sorted(listed - seen)]
    problems += [f"not an input: {u!r}" for u in sorted(seen - listed)]
    manifest = json.loads((out / "manifest.json").read_text())
    if manifest["inputs"]["count"] != len(listed):
        problems.append(f"the manifest counts {manifest['inputs']['count']} inputs, {len(listed)} were planted")
    if not manifest["reconciled"]:
        problems.append("the manifest says the build is not reconciled")
    return problems


# ------------------------------------------------------------------ mutations


def corpus_pages(corpus: Path) -> list[Path]:
    pages = sorted((corpus / "latexml").glob("*.html")) + sorted((corpus / "html").glob("*.html"))
    assert pages, f"no pages under {corpus}"
    return pages


def png_bytes(seed: int, marker: bytes = b"") -> bytes:
    """A small valid PNG; ``marker`` rides in a tEXt chunk (how a canary is recognised)."""
    import io
    import zlib

    from PIL import Image

    rng = random.Random(seed)
    im = Image.new("RGB", (48, 32), (rng.randrange(256), rng.randrange(256), rng.randrange(256)))
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    data = buf.getvalue()
    if marker:
        chunk = b"tEXt" + b"canary\x00" + marker
        text = struct.pack(">I", len(chunk) - 4) + chunk + struct.pack(">I", zlib.crc32(chunk) & 0xFFFFFFFF)
        data = data[:33] + text + data[33:]  # after IHDR
    return data


@dataclass
class Planted:
    kind: str
    uri: Optional[str]  # the input the listing must find (None: nothing to list, e.g. a link loop only)
    expect: str = "any"  # "paper" | "dead" | "any"
    dead_types: tuple[str, ...] = ()  # acceptable error_type values when dead
    figure_error: Optional[str] = None  # an image_error prefix some figure of the paper must carry
    # "paper" and no other copy took its place (a duplicate dead letter does not count as one)
    kept: bool = False
    ga_status: Optional[str] = None  # the image_status the paper's GA row (``<id>_GA``) must have
    paper_id: Optional[str] = None  # the id the paper must have (when ``kept`` or ``ga_status``)


_PNG16: dict = {}  # side -> a 16-bit PNG, made once per process


@dataclass
class Mutations:
    """Plants hostile inputs into ``inp`` (the --input folder); canaries live in ``outside``."""

    inp: Path
    outside: Path
    pages: list[Path]
    rng: random.Random
    planted: list[Planted] = field(default_factory=list)
    n: int = 0
    marker: bytes = b"SCIGA-CANARY-7f3a9c"
    dumps: list[Path] = field(default_factory=list)  # ar5iv dumps given as more --input specs
    ga_rows: list[tuple[str, str]] = field(default_factory=list)  # (arxiv_id, path) of the GA manifest

    def __post_init__(self):
        self.inp.mkdir(parents=True, exist_ok=True)
        self.outside.mkdir(parents=True, exist_ok=True)
        self.canary_png = self.outside / "canary.png"
        self.canary_png.write_bytes(png_bytes(1, self.marker))
        self.canary_html = self.outside / "canary.html"
        self.canary_html.write_bytes(self.pages[0].read_bytes().replace(b"</body>", self.marker + b"</body>"))
        self.canary_json = self.outside / "canary.meta.json"
        self.canary_json.write_text(json.dumps({"id": "2499.99999", "title": self.marker.decode()}))
        self.canary_tex = self.outside / "canary.src.tar.gz"
        self.canary_tex.write_bytes(gzip.compress(self.marker * 10, mtime=0))
        self.linked_canaries: list[Path] = []  # pages in folders outside that a folder of the input links to

    @property
    def canaries(self) -> list[Path]:
        return [self.canary_png, self.canary_html, self.canary_json, self.canary_tex, *self.linked_canaries]

    @property
    def manifest(self) -> Path:
        """The GA manifest (``ga_rows``), in a folder of its own beside the input."""
        return self.inp.parent / "ga_manifest" / "ga.csv"

    def write_manifest(self) -> Optional[Path]:
        if not self.ga_rows:
            return None
        self.manifest.parent.mkdir(parents=True, exist_ok=True)
        with open(self.manifest, "wb") as f:
            f.write(b"arxiv_id,path\n")
            for pid, path in self.ga_rows:
                f.write(f'{pid},"{path}"\n'.encode("utf-8", "surrogateescape"))
        return self.manifest

    def build_args(self) -> list[str]:
        """The `sciga build` arguments the planted inputs need besides --input FOLDER."""
        args: list[str] = []
        if self.dumps:
            args += ["--input", str(self.inp), *map(str, self.dumps)]
        manifest = self.write_manifest()
        if manifest is not None:
            args += ["--ga-manifest", str(manifest)]
        return args

    # helpers
    def _id(self) -> str:
        self.n += 1
        return f"2490.{self.n:05d}"

    def _base(self) -> bytes:
        return self.rng.choice(self.pages).read_bytes()

    def _folder(self, pid: str) -> Path:
        d = self.inp / pid
        d.mkdir(parents=True, exist_ok=True)
        return d

    def _page(
        self,
        name: str,
        data: bytes,
        pid: Optional[str] = None,
        expect: str = "paper",
        kind: Optional[str] = None,
        dead_types: tuple = (),
        sidecar: bool = True,
    ) -> Path:
        pid = pid or f"2490.{self.n:05d}"  # the id the caller just put in the name
        d = self._folder(pid)
        page = d / name
        page.write_bytes(data)
        if sidecar:
            stem = name[: -len(".html.gz")] if name.endswith(".html.gz") else name.rsplit(".", 1)[0]
            (d / f"{stem}.meta.json").write_text(json.dumps({"id": pid, "title": f"Paper {pid}"}))
        self.planted.append(Planted(kind or "page", str(page), expect, dead_types))
        return page

    def plain_page(self):
        """A good page (a build whose only inputs are bad is another issue's case)."""
        self._page(f"{self._id()}.html", self._base(), kind="plain_page")

    # ---- names
    def name_newline(self):
        self._page(f"{self._id()}\n.html", self._base(), kind="name_newline")

    def name_chain(self):
        self._page(f"{self._id()}::x.html", self._base(), kind="name_chain")

    def name_unicode_space(self):
        self._page(f"{self._id()} ü é — 論文.html", self._base(), kind="name_unicode_space")

    def name_long(self):
        pid = self._id()
        self._page(pid + "-" + "n" * 200 + ".html", self._base(), pid=pid, kind="name_long")

    def name_leading_dash(self):
        self._page(f"--{self._id()}.html", self._base(), kind="name_leading_dash")

    # ---- file kinds
    def fifo_page(self):
        d = self._folder(self._id())
        p = d / "page.html"
        os.mkfifo(p)
        self.planted.append(Planted("fifo_page", str(p), "dead", ("not_a_file",)))

    def page_link_out(self):
        d = self._folder(self._id())
        p = d / "page.html"
        p.symlink_to(self.canary_html)
        self.planted.append(Planted("page_link_out", str(p), "dead", ("outside_input",)))

    def broken_link_page(self):
        d = self._folder(self._id())
        p = d / "page.html"
        p.symlink_to(d / "nowhere.html")
        self.planted.append(Planted("broken_link_page", str(p), "dead", ("missing",)))

    def dir_named_html(self):
        pid = self._id()
        d = self._folder(pid) / "folder.html"
        d.mkdir()
        page = d / f"{pid}.html"
        page.write_bytes(self._eml())  # no sidecar: a page that names no paper itself (else: id_mismatch)
        self.planted.append(Planted("dir_named_html", str(page), "paper"))

    def link_loops(self):
        pid = self._id()
        page = self._page(f"{pid}.html", self._base(), pid=pid, kind="link_loops")
        (page.parent / "self").symlink_to(".")
        (page.parent / "loop").symlink_to("..")
        (page.parent / "up").symlink_to(self.outside)  # a folder out of the input: its page names listed, never read
        self.planted.append(Planted("link_loops", str(page.parent / "up" / "canary.html"), "dead", ("outside_input",)))

    def page_alias_link(self):
        pid = self._id()
        page = self._page(f"{pid}.html", self._base(), pid=pid, kind="page_alias_link")
        (page.parent / "alias.html").symlink_to(page.name)  # the same page twice: listed once

    def _image_page(self, src_for: Callable[[Path], str], kind: str, figure_error: Optional[str]):
        """eml.html-like page whose first figure image is what ``src_for(folder)`` names."""
        pid = self._id()
        base = self._eml()
        d = self._folder(pid)
        src = src_for(d)
        data = base.replace(b'src="x1.png"', f'src="{src}"'.encode(), 1)
        page = d / f"{pid}.html"
        page.write_bytes(data)
        (d / "x2.png").write_bytes(png_bytes(self.n))
        self.planted.append(Planted(kind, str(page), "paper", figure_error=figure_error))

    def image_link_out(self):
        def src(d: Path) -> str:
            (d / "x1.png").symlink_to(self.canary_png)
            return "x1.png"

        self._image_page(src, "image_link_out", "outside_input")

    def image_fifo(self):
        def src(d: Path) -> str:
            os.mkfifo(d / "x1.png")
            return "x1.png"

        self._image_page(src, "image_fifo", "not_a_file")

    def image_src_escape(self):
        srcs = ["../../outside/canary.png", str(self.canary_png), f"file://{self.canary_png}", "figs/../../canary.png"]
        choice = self.rng.choice(srcs)
        self._image_page(lambda d: choice, "image_src_escape", None)

    # SVG figures (issue 44): the rasterizer must refuse what an attacker writes into an SVG,
    # open no file it names (the canary watch sees every open outside the input) and never hang.
    def _hostile_svg(self, inline: bool) -> tuple[str, str]:
        """(refusal kind, markup) of one hostile SVG: entities, a reference to a file outside
        the input, a huge viewBox, a <use> bomb."""
        ns = 'xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink"'
        laughs = (
            '<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY a "aaaaaaaaaa">'
            + "".join(f'<!ENTITY {c} "{("&" + p + ";") * 10}">' for p, c in zip("abcdefgh", "bcdefghi"))
            + f']><svg {ns} width="10" height="10"><text>&i;</text></svg>'
        )
        use_bomb = (
            f'<svg {ns} width="10" height="10"><defs><g id="u0"><rect width="1" height="1"/></g>'
            + "".join(f'<g id="u{i}">' + f'<use xlink:href="#u{i - 1}"/>' * 10 + "</g>" for i in range(1, 9))
            + '</defs><use xlink:href="#u8"/></svg>'
        )
        choices = [
            (
                "external_reference",
                f'<svg {ns} width="10" height="10"><image xlink:href="{self.canary_png}" width="5" height="5"/></svg>',
            ),
            (
                "external_reference",
                f'<svg {ns} width="10" height="10"><image href="file://{self.canary_png}" width="5" height="5"/></svg>',
            ),
            (
                "external_reference",
                f'<svg {ns} width="10" height="10"><image href="../../outside/canary.png" width="5" height="5"/></svg>',
            ),
            ("huge_viewbox", f'<svg {ns} viewBox="0 0 1e12 1e12"><rect width="1e12" height="1e12"/></svg>'),
            ("too_complex", use_bomb),
        ]
        if not inline:  # an HTML page cannot declare entities inside an inline <svg>
            choices.append(("entities", laughs))
        return self.rng.choice(choices)

    def svg_file_hostile(self):
        kind, svg = self._hostile_svg(inline=False)

        def src(d: Path) -> str:
            (d / "fig.svg").write_text(svg)
            return "fig.svg"

        self._image_page(src, "svg_file_hostile", f"svg_refused: {kind}")

    def svg_inline_hostile(self):
        kind, svg = self._hostile_svg(inline=True)
        pid = self._id()
        base = self._eml()
        img = re.search(rb'<img src="x1.png"[^>]*>', base)
        assert img is not None, "eml.html has no x1.png figure"
        inline = svg.replace("<svg ", '<svg id="S3.F1.pic1" class="ltx_picture" ', 1).encode()
        d = self._folder(pid)
        page = d / f"{pid}.html"
        page.write_bytes(base[: img.start()] + inline + base[img.end() :])
        (d / "x2.png").write_bytes(png_bytes(self.n))
        self.planted.append(Planted("svg_inline_hostile", str(page), "paper", figure_error=f"svg_refused: {kind}"))

    def sidecar_link_out(self):
        pid = self._id()
        page = self._page(
            f"{pid}.html",
            self._base(),
            pid=pid,
            kind="sidecar_link_out",
            expect="dead",
            dead_types=("outside_input",),
            sidecar=False,
        )
        (page.parent / f"{pid}.meta.json").symlink_to(self.canary_json)

    def sidecar_fifo(self):
        pid = self._id()
        page = self._page(
            f"{pid}.html",
            self._base(),
            pid=pid,
            kind="sidecar_fifo",
            expect="dead",
            dead_types=("not_a_file",),
            sidecar=False,
        )
        os.mkfifo(page.parent / f"{pid}.meta.json")

    def sidecar_wrong_types(self):
        pid = self._id()
        page = self._page(
            f"{pid}.html",
            self._base(),
            pid=pid,
            kind="sidecar_wrong_types",
            expect="dead",
            dead_types=("bad_metadata",),
            sidecar=False,
        )
        bad = self.rng.choice(
            [
                {"id": 12345},
                {"id": pid, "authors": "A. Author"},
                {"id": pid, "categories": [1, 2]},
                {"id": pid, "conference": {"year": "twenty"}},
                [pid],
                {"id": pid, "title": {"x": 1}},
            ]
        )
        (page.parent / f"{pid}.meta.json").write_text(json.dumps(bad))

    def tex_link_out(self):
        pid = self._id()
        page = self._page(f"{pid}.html", self._base(), pid=pid, kind="tex_link_out")
        (page.parent / f"{pid}.src.tar.gz").symlink_to(self.canary_tex)

    # ---- contents
    def truncated(self):
        data = self._base()
        self._page(f"{self._id()}.html", data[: self.rng.randrange(1, len(data))], kind="truncated", expect="any")

    def bitflips(self):
        data = bytearray(self._base())
        for _ in range(self.rng.randint(1, 50)):
            i = self.rng.randrange(len(data))
            data[i] = self.rng.randrange(256)
        self._page(f"{self._id()}.html", bytes(data), kind="bitflips", expect="any")

    def empty(self):
        self._page(f"{self._id()}.html", b"", kind="empty", expect="dead")

    def not_html(self):
        self._page(
            f"{self._id()}.html",
            self.rng.choice([b"%PDF-1.7\n" + os.urandom(2000), os.urandom(5000)]),
            kind="not_html",
            expect="dead",
        )

    def gzip_bomb(self, inflated_mb: int = 64):
        import zlib

        z = zlib.compressobj(9, zlib.DEFLATED, 31)
        chunk = b"\0" * (1 << 20)
        data = b"".join(z.compress(chunk) for _ in range(inflated_mb)) + z.flush()
        self._page(f"{self._id()}.html.gz", data, kind="gzip_bomb", expect="dead", dead_types=("too_large",))

    def _eml(self) -> bytes:
        """A page with two figures (x1.png, x2.png), so a caption can mention the other one."""
        return next((p for p in self.pages if p.name == "eml.html"), self.pages[0]).read_bytes()

    def caption_mentions(self, chars: int = 50_000):
        """Figure 1's caption: ``chars`` characters of mentions of Figure 2, no sentence boundary."""
        unit = "as Figure 2 shows and "
        body = (unit * (chars // len(unit) + 1))[:chars]
        data = self._eml()
        i = data.find(b"<figcaption")
        j = data.find(b">", i) + 1
        self._page(f"{self._id()}.html", data[:j] + body.encode() + data[j:], kind="caption_mentions")

    def huge_alttext(self, chars: int = 300_000):
        """A paragraph mentioning Figure 1 beside a formula whose alttext has ``chars`` characters."""
        data = self._eml()
        math = ('<math alttext="' + "x+" * (chars // 2) + 'y" display="inline"><mi>x</mi></math>').encode()
        i = data.find(b'<p class="ltx_p"', max(0, data.find(b"<section")))
        j = data.find(b">", i) + 1 if i >= 0 else 0
        # The quote makes the sentence one pysbd must segment (no shortcut), as real prose does.
        data = data[:j] + b'See "Figure 1" and ' + math + b" here. " + data[j:]
        self._page(f"{self._id()}.html", data, kind="huge_alttext")

    def deep_nesting(self, depth: int = 20_000):
        data = self._base()
        i = data.find(b"<article")
        nest = b"<div>" * depth + b"deep" + b"</div>" * depth
        self._page(f"{self._id()}.html", data[:i] + nest + data[i:], kind="deep_nesting", expect="any")

    def entity_bomb(self):
        dtd = (
            b'<?xml version="1.0"?><!DOCTYPE html [<!ENTITY a "aaaaaaaaaa">'
            + b"".join(f'<!ENTITY {c} "{("&" + p + ";") * 10}">'.encode() for p, c in zip("abcdefgh", "bcdefghi"))
            + b"]>"
        )
        data = dtd + self._base().replace(b"<body>", b"<body>&i;", 1)
        self._page(f"{self._id()}.html", data, kind="entity_bomb", expect="any")

    def bad_encoding(self):
        data = self._base().replace(b"charset=UTF-8", b"charset=UTF-8") + bytes(range(128, 256)) * 50
        self._page(f"{self._id()}.html", data, kind="bad_encoding", expect="any")

    def many_figures(self, n: int = 3000):
        figs = b"".join(
            f'<figure id="S9.F{i}" class="ltx_figure"><img src="x{i}.png"><figcaption class="ltx_caption">'
            f'<span class="ltx_tag ltx_tag_figure">Figure {i}: </span>Fig {i}</figcaption></figure>'.encode()
            for i in range(1, n + 1)
        )
        data = self._base()
        i = data.find(b"</article>")
        self._page(f"{self._id()}.html", data[:i] + figs + data[i:], kind="many_figures")

    # ---- issue 43: nothing the listing meets vanishes
    def folder_link_out(self):
        """A folder of the input that is a link to a folder outside it: its pages are listed
        by their names through the link and refused (was: silently skipped)."""
        pid = self._id()
        d = self._folder(pid)
        target = self.outside.parent / "linked_pages" / pid  # beside the canaries: no other link reaches it
        (target / "sub").mkdir(parents=True)
        (d / "linked").symlink_to(target)
        for name in ("2498.00001.html", "sub/x.html"):
            (target / name).write_bytes(self.canary_html.read_bytes())
            self.linked_canaries.append(target / name)
            self.planted.append(Planted("folder_link_out", str(d / "linked" / name), "dead", ("outside_input",)))

    def path_too_long(self):
        """A page whose path is over 4,096 bytes (folders made through descriptors)."""
        pid = self._id()
        fd = os.open(self._folder(pid), os.O_RDONLY)
        path = os.fsencode(self.inp / pid)
        try:
            for i in range(18):
                name = b"d%02d" % i + b"x" * 240
                os.mkdir(name, dir_fd=fd)
                nfd = os.open(name, os.O_RDONLY, dir_fd=fd)
                os.close(fd)
                fd = nfd
                path += b"/" + name
            f = os.open(f"{pid}.html".encode(), os.O_WRONLY | os.O_CREAT, dir_fd=fd)
            os.write(f, self._base())
            os.close(f)
        finally:
            os.close(fd)
        uri = os.fsdecode(path + f"/{pid}.html".encode())
        assert len(os.fsencode(uri)) > 4096
        self.planted.append(Planted("path_too_long", uri, "dead", ("path_too_long",)))

    def name_not_utf8(self):
        """A file name with bytes that are not UTF-8 (Linux allows them): a dead letter that
        names it with \\xNN escapes (was: a warning on stderr only)."""
        pid = self._id()
        d = self._folder(pid)
        raw = os.fsencode(d) + f"/{pid}-".encode() + bytes([0xFF, 0xFE]) + b".html"
        with open(raw, "wb") as f:
            f.write(self._base())
        self.planted.append(Planted("name_not_utf8", str(d / f"{pid}-\\xff\\xfe.html"), "dead", ("bad_name",)))

    def dump_members(self):
        """An ar5iv dump (given as another --input) with a good member and members named
        ``../x.html``, ``/abs/x.html`` and ``a::b.html``."""
        import zipfile

        pid = self._id()
        dump = self.inp.parent / f"dump-{pid}.zip"
        with zipfile.ZipFile(dump, "w") as z:
            z.writestr(f"2490/{pid}.html", self._base())
            for bad in (f"../{pid}a.html", f"/abs/{pid}b.html", f"2490/{pid}::c.html"):
                z.writestr(bad, self._base())
                self.planted.append(Planted("dump_members", f"zip://{bad}::{dump}", "dead", ("unsafe_member",)))
        self.dumps.append(dump)
        self.planted.append(Planted("dump_members", f"zip://2490/{pid}.html::{dump}", "any"))

    # ---- issue 43: :: and NUL in path-like fields
    def src_nul(self):
        self._image_page(lambda d: "figs/teaser%00.png", "src_nul", "image path")

    def src_chain(self):
        self._image_page(
            lambda d: self.rng.choice(["a::b.png", "zip://x.png::/etc/passwd", "x1.png::y"]), "src_chain", None
        )

    def ga_rows_hostile(self):
        """GA manifest rows for a good page that lead outside, hold NUL or '::', or are web
        addresses: refused unopened, the GA row says why (``outside_input`` / ``not_found``)."""
        choices = [
            (str(self.canary_png), "outside_input"),
            (f"file://{self.canary_png}", "outside_input"),
            (os.path.relpath(self.canary_png, self.manifest.parent), "outside_input"),
            ("/proc/self/environ", "outside_input"),
            ("zip://x.png::/etc/passwd", "outside_input"),
            ("http://127.0.0.1:9/ga.png", "outside_input"),
            ("ga\x00.png", "not_found"),
        ]
        path, status = choices[sum(p.kind == "ga_rows_hostile" for p in self.planted) % len(choices)]  # each in turn
        pid = self._id()
        self._page(f"{pid}.html", self._base(), pid=pid, kind="ga_rows_hostile")
        self.planted[-1].ga_status, self.planted[-1].paper_id = status, pid
        self.ga_rows.append((pid, path))

    # ---- issue 43: ids that lie
    def impostor_sidecar(self):
        """A page named for one paper whose sidecar says it is another: a dead letter naming
        both (was: it replaced the genuine page)."""
        genuine = self._id()
        self._page(f"{genuine}.html", self._base(), pid=genuine, kind="impostor_sidecar")
        self.planted[-1].kept, self.planted[-1].paper_id = True, genuine
        liar = self._id()
        d = self._folder(liar)
        (d / f"{liar}.html").write_bytes(self._eml() + b"<!-- a longer, richer copy -->" * 50)
        (d / f"{liar}.meta.json").write_text(json.dumps({"id": genuine, "version": "v9"}))
        self.planted.append(Planted("impostor_sidecar", str(d / f"{liar}.html"), "dead", ("id_mismatch",)))

    def impostor_canonical(self):
        """A page named for one paper whose canonical URL names another."""
        liar, other = self._id(), self._id()
        d = self._folder(liar)
        data = self._base().replace(
            b"<head>", f'<head><link rel="canonical" href="https://arxiv.org/html/{other}v3">'.encode(), 1
        )
        (d / f"{liar}.html").write_bytes(data)
        self.planted.append(Planted("impostor_canonical", str(d / f"{liar}.html"), "dead", ("id_mismatch",)))

    def impostor_unnamed(self):
        """A page whose name gives no id and whose sidecar claims a genuine page's id: the
        genuine one is kept, the other is its duplicate."""
        genuine = self._id()
        self._page(f"{genuine}.html", self._base(), pid=genuine, kind="impostor_unnamed")
        self.planted[-1].kept, self.planted[-1].paper_id = True, genuine
        d = self._folder(self._id())
        (d / "paper.html").write_bytes(self._eml() + b"<!-- richer -->" * 50)
        (d / "paper.meta.json").write_text(json.dumps({"id": genuine, "version": "v9"}))
        self.planted.append(Planted("impostor_unnamed", str(d / "paper.html"), "dead", ("duplicate",)))

    def confusable_id(self):
        """Fullwidth digits, zero-width and bidi characters in a sidecar's id or a file name
        spell the same paper; path syntax is no id."""
        pid = self._id()
        fullwidth = pid.translate(str.maketrans("0123456789.", "０１２３４５６７８９．"))
        spelled = self.rng.choice([fullwidth, pid[:5] + "\u200b" + pid[5:], "\u202e" + pid])
        d = self._folder(pid)
        if self.rng.random() < 0.5:
            (d / f"{pid}.html").write_bytes(self._base())
            (d / f"{pid}.meta.json").write_text(json.dumps({"id": spelled}))
            uri = d / f"{pid}.html"
        else:
            uri = d / f"{spelled}.html"
            uri.write_bytes(self._base())
            (d / f"{spelled}.meta.json").write_text(json.dumps({"id": pid}))
        self.planted.append(Planted("confusable_id", str(uri), "paper", kept=True, paper_id=pid))

    def path_id(self):
        pid = self._id()
        page = self._page(
            f"{pid}.html",
            self._base(),
            pid=pid,
            kind="path_id",
            expect="dead",
            dead_types=("bad_metadata",),
            sidecar=False,
        )
        bad = self.rng.choice(["../../x", "/etc/passwd", "..", "a/../../b"])
        (page.parent / f"{pid}.meta.json").write_text(json.dumps({"id": bad}))

    # ---- issue 43: memory from one page
    def png16_image(self, side: int = 2400):
        """Figure 1 is a 16-bit greyscale PNG (the memory case itself: bench/hostile_memory.py)."""
        if side not in _PNG16:
            _PNG16[side] = png16(side)
        data = _PNG16[side]

        def src(d: Path) -> str:
            (d / "x1.png").write_bytes(data)
            return "x1.png"

        self._image_page(src, "png16_image", None)

    def huge_rows(self):
        """References or figures by the tens of thousands: a capped paper or a dead letter."""
        pid = self._id()
        d = self._folder(pid)
        case = self.rng.choice(["refs_capped", "refs_refused", "figures_refused"])
        if case == "refs_capped":
            page = many_mentions_page(d, self._corpus(), pid, n=21_000)
            self.planted.append(Planted("huge_rows", str(page), "paper"))
        elif case == "refs_refused":
            page = many_mentions_page(d, self._corpus(), pid, n=101_000)
            self.planted.append(Planted("huge_rows", str(page), "dead", ("too_many_rows",)))
        else:
            page = many_figures_page(d, self._corpus(), pid, n=5_100, image_kb=2)
            self.planted.append(Planted("huge_rows", str(page), "dead", ("too_many_rows",)))

    def _corpus(self) -> Path:
        return self.pages[0].parent.parent

    KINDS = (
        "name_newline",
        "name_chain",
        "name_unicode_space",
        "name_long",
        "name_leading_dash",
        "fifo_page",
        "page_link_out",
        "broken_link_page",
        "dir_named_html",
        "link_loops",
        "page_alias_link",
        "image_link_out",
        "image_fifo",
        "image_src_escape",
        "svg_file_hostile",
        "svg_inline_hostile",
        "sidecar_link_out",
        "sidecar_fifo",
        "sidecar_wrong_types",
        "tex_link_out",
        "truncated",
        "bitflips",
        "empty",
        "not_html",
        "gzip_bomb",
        "caption_mentions",
        "huge_alttext",
        "deep_nesting",
        "entity_bomb",
        "bad_encoding",
        "many_figures",
        "folder_link_out",
        "path_too_long",
        "name_not_utf8",
        "dump_members",
        "src_nul",
        "src_chain",
        "impostor_sidecar",
        "impostor_canonical",
        "impostor_unnamed",
        "confusable_id",
        "path_id",
        "png16_image",
        "huge_rows",
    )

    # A GA manifest makes the build run on Beam's DirectRunner, whose processes alone take about
    # 1.5 GB with 2 workers: these kinds are built in their own build, with 1 worker, together
    # with refused inputs (which then travel through Beam's coders too).
    GA_KINDS = ("ga_rows_hostile",) * 7 + ("folder_link_out", "name_not_utf8", "dump_members", "path_too_long")

    def plant(self, count: int) -> list[Planted]:
        """``count`` inputs, every kind once before any kind twice (seeded order)."""
        kinds = []
        while len(kinds) < count:
            batch = list(self.KINDS)
            self.rng.shuffle(batch)
            kinds.extend(batch)
        for k in kinds[:count]:
            getattr(self, k)()
        return self.planted

    def listed(self) -> set[str]:
        return {p.uri for p in self.planted if p.uri is not None}


def build_checked(
    m: Mutations,
    out: Path,
    *extra: str,
    workers: str = "1",
    timeout: float = 600,
    rss_bound: int = int(1.5 * GB),
    expect_rc: int = 0,
    env: Optional[dict] = None,
    on_tick: Optional[Callable] = None,
) -> Watched:
    """`sciga build` over the planted inputs, as a user runs it, with the issue's checks:
    exit status, no hang, peak RSS of the process tree, no canary opened or leaked, every
    input a paper or a dead letter, each planted input as it must come out."""
    cmd = sciga_cmd(
        "build", "--input", str(m.inp), "--output", str(out), "--workers", workers, "--quiet", *m.build_args(), *extra
    )
    with CanaryWatch(m.canaries) as watch:
        r = run_watched(cmd, timeout, env=cli_env(env), on_tick=on_tick)
        touched = watch.touched()
    assert not r.timed_out, f"the build hung (killed after {timeout:.0f} s); stderr: {r.stderr[-2000:]}"
    assert r.returncode == expect_rc, f"exit {r.returncode}, expected {expect_rc}; stderr: {r.stderr[-3000:]}"
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.peak_rss < rss_bound, f"peak RSS {r.peak_rss / GB:.2f} GB, above {rss_bound / GB:.2f} GB"
    assert not touched, f"files outside the input were opened: {touched}"
    if expect_rc == 0:
        assert not bytes_leaked(out, [m.marker]), "a canary's bytes reached the output"
        problems = accounted(out, m.listed(), m.inp) + check_expectations(out, m.planted, m.inp)
        assert not problems, "\n".join(problems)
    return r


def check_expectations(out: Path, planted: list[Planted], root: Optional[Path] = None) -> list[str]:
    """Each planted input came out as it must (a paper, a dead letter of the stated type,
    a figure error of the stated kind)."""
    import pyarrow.parquet as pq

    papers, dead = build_rows(out, root)
    paper_of = {p["input_uri"]: p["id"] for p in papers}
    dead_of: dict[str, list[str]] = {}
    for d in dead:
        dead_of.setdefault(d["input_uri"], []).append(d["error_type"])
    figures = []
    for f in sorted((out / "data" / "figures").glob("*.parquet")):
        figures.extend(pq.read_table(f, columns=["id", "paper_id", "image_error", "image_status"]).to_pylist())
    problems = []
    for p in planted:
        if p.uri is None:
            continue
        if p.kept and paper_of.get(p.uri) != (p.paper_id or paper_of.get(p.uri)):
            problems.append(f"{p.kind}: {p.uri!r} should be paper {p.paper_id}, got {paper_of.get(p.uri)}")
        if p.kept and p.uri not in paper_of:
            problems.append(f"{p.kind}: {p.uri!r} should be kept as a paper, got {dead_of.get(p.uri)}")
        if p.ga_status is not None:
            ga = [f for f in figures if f["id"] == f"{p.paper_id}_GA"]
            if [f["image_status"] for f in ga] != [p.ga_status]:
                problems.append(f"{p.kind}: the GA row of {p.paper_id} should be {p.ga_status}, got {ga}")
        if p.expect == "paper" and p.uri not in paper_of:
            # A duplicate of another planted page is dead-lettered as one: that is still a paper's input.
            if "duplicate" not in dead_of.get(p.uri, []):
                problems.append(f"{p.kind}: {p.uri!r} should be a paper, got {dead_of.get(p.uri)}")
        if p.expect == "dead" and p.uri not in dead_of:
            problems.append(f"{p.kind}: {p.uri!r} should be a dead letter")
        if p.expect == "dead" and p.dead_types and p.uri in dead_of and not set(dead_of[p.uri]) & set(p.dead_types):
            problems.append(f"{p.kind}: {p.uri!r} dead-lettered as {dead_of[p.uri]}, expected one of {p.dead_types}")
        if p.figure_error and p.uri in paper_of:
            errs = [f["image_error"] or "" for f in figures if f["paper_id"] == paper_of[p.uri]]
            if not any(e.startswith(p.figure_error) for e in errs):
                problems.append(f"{p.kind}: no figure of {p.uri!r} carries {p.figure_error}: {errs}")
    return problems


# ------------------------------------------------------------------ one-page memory cases (issue 43)
# Each writes one page (with what it needs beside it) into ``folder`` and returns its path;
# tests build small versions, bench/hostile_memory.py the sizes the issue measured.


def eml_page(corpus: Path) -> bytes:
    """A real page with two figures (``x1.png``, ``x2.png``) and references to Figure 1."""
    return (corpus / "latexml" / "eml.html").read_bytes()


def png16(side: int) -> bytes:
    """A ``side`` x ``side`` 16-bit greyscale PNG: a gradient with noise, small on disk
    (9400 px: about 1.3 MB, under the default pixel limit) and 2 bytes a pixel decoded."""
    import io

    import numpy as np
    from PIL import Image

    y = np.arange(side, dtype=np.uint32)[:, None]
    x = np.arange(side, dtype=np.uint32)[None, :]
    a = ((x * 7 + y * 3) % 65536).astype(np.uint16)
    a[:: max(1, side // 97), :] = 65535  # lines, so the picture is not one flat gradient
    buf = io.BytesIO()
    Image.fromarray(a, "I;16").save(buf, format="PNG", compress_level=6)
    return buf.getvalue()


def png16_page(folder: Path, corpus: Path, pid: str, side: int = 9400) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "x1.png").write_bytes(png16(side))
    page = folder / f"{pid}.html"
    page.write_bytes(eml_page(corpus))
    return page


def many_mentions_page(folder: Path, corpus: Path, pid: str, n: int = 1_000_000) -> Path:
    """A paragraph with ``n`` references to Figure 1 (``<a href="#S3.F1">``)."""
    folder.mkdir(parents=True, exist_ok=True)
    data = eml_page(corpus)
    ref = b'see <a href="#S3.F1" class="ltx_ref">Figure <span class="ltx_text ltx_ref_tag">1</span></a>, '
    i = data.find(b"</section>")
    body = b'<p class="ltx_p">' + ref * n + b"and so on.</p>"
    page = folder / f"{pid}.html"
    page.write_bytes(data[:i] + body + data[i:])
    return page


def many_figures_page(folder: Path, corpus: Path, pid: str, n: int = 100_000, image_kb: int = 12) -> Path:
    """``n`` figures that all show the same image file (``teaser.png``, ~``image_kb`` KB)."""
    import io

    import numpy as np
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(43)
    side = 16
    while True:  # noise compresses badly: grow until the file is about image_kb
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8), "RGB").save(buf, format="PNG")
        if buf.tell() >= image_kb * 1024 or side > 1024:
            break
        side += 8
    (folder / "teaser.png").write_bytes(buf.getvalue())
    figs = b"".join(
        f'<figure id="S9.F{i}" class="ltx_figure"><img src="teaser.png" class="ltx_graphics"><figcaption '
        f'class="ltx_caption"><span class="ltx_tag ltx_tag_figure">Figure {i}: </span>Fig {i}</figcaption>'
        "</figure>".encode()
        for i in range(1, n + 1)
    )
    data = eml_page(corpus)
    i = data.find(b"</article>")
    page = folder / f"{pid}.html"
    page.write_bytes(data[:i] + figs + data[i:])
    return page


class _RepeatedText(io.RawIOBase):
    """``head`` then ``unit`` repeated, ``size`` bytes in all, made as it is read."""

    def __init__(self, head: bytes, unit: bytes, size: int):
        self.pending, self.unit, self.left = head, unit * max(1, (1 << 20) // len(unit)), size

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self.left <= 0:
            return 0
        src = self.pending or self.unit
        n = min(len(b), self.left, len(src))
        b[:n] = src[:n]
        self.pending = src[n:] if self.pending else b""
        self.left -= n
        return n


def big_tex_eprint_page(folder: Path, corpus: Path, pid: str, member_mb: int = 250, members: int = 2) -> Path:
    """A page with its e-print beside it (``<pid>.src.tar.gz``): ``members`` .tex files of
    ``member_mb`` MB each (under the default per-member and total limits), gzip-compressed."""
    import tarfile

    folder.mkdir(parents=True, exist_ok=True)
    unit = b"\\begin{figure}\\includegraphics{x1.png}\\caption{A figure.}\\end{figure} Some text of the paper.\n"
    with (
        open(folder / f"{pid}.src.tar.gz", "wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1, mtime=0) as gz,
    ):
        with tarfile.open(fileobj=gz, mode="w|") as tar:
            for k in range(members):
                info = tarfile.TarInfo(f"part{k}.tex")
                info.size = member_mb * 1024 * 1024
                head = b"\\documentclass{article}\\begin{document}\n" if k == 0 else b""
                tar.addfile(info, io.BufferedReader(_RepeatedText(head, unit, info.size), 1 << 20))
    page = folder / f"{pid}.html"
    page.write_bytes(eml_page(corpus))
    return page
