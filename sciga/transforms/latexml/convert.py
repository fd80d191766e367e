"""An e-print converted to HTML5 with LaTeXML, the engine ar5iv runs, by ourselves.

``convert_eprint(source, paper_id=..., options=LatexmlOptions())`` takes an e-print (its
bytes as arXiv serves them, a ``SourceTree``, or a folder), finds the main TeX file, runs
``latexmlc --format=html5`` on a private copy with images written beside the page (PDF/EPS
figures become ``x1.png``... through ImageMagick + ghostscript, as on ar5iv) and returns the
page, its images and the LaTeXML version. The page parses like an ar5iv page of the same
generator (``tests/transforms/latexml/test_sources_latexml.py`` checks it against real pages).

Limits, per paper: a wall-clock timeout (the whole process group is SIGKILLed, so no
ghostscript child outlives it) and an address-space limit (``ulimit -v``, i.e.
RLIMIT_AS, set by the shell that execs latexmlc: no ``preexec_fn``, which is unsafe in
threaded Beam workers). Failures are StageErrors of stage ``latexml``:

``no_main_file``      no file with ``\\documentclass``/``\\documentstyle`` and ``\\begin{document}``
``pdf_only``          the e-print is a PDF: there is no TeX to convert
``latexml_timeout``   the conversion ran past ``timeout_s``
``latexml_memory``    it ran out of the ``max_memory_bytes`` address space
``latexml_fatal``     LaTeXML stopped on a fatal error (its status 3), or wrote no page
``latexml_missing``   latexmlc is not installed (``apt-get install latexml``)

Same input, same bytes out: ``SOURCE_DATE_EPOCH`` fixes the "Generated on" stamp and
``\\today``, and the timestamps ImageMagick writes into PNG chunks are removed.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Optional, Union

from sciga.transforms.common.errors import StageError
from sciga.transforms.eprints.eprint import SourceTree, read_eprint, read_source_dir, safe_member_name

STAGE = "latexml"
TEX_SUFFIXES = (".tex", ".ltx", ".latex")
COMMON_MAIN_NAMES = ("main", "ms", "paper", "article", "manuscript", "root", "arxiv")
IMAGE_POLICY = """<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by sciga for one LaTeXML conversion: lets ImageMagick read PDF/PS/EPS figures
     (Debian's /etc policy refuses them) so that they become PNGs beside the page, as on
     ar5iv. ghostscript runs with -dSAFER, ImageMagick's default for these coders. -->
<policymap>
  <policy domain="coder" rights="read|write" pattern="{PS,PS2,PS3,EPS,EPSI,EPSF,PDF}" />
</policymap>
"""


@dataclass(frozen=True)
class LatexmlOptions:
    timeout_s: float = 300.0
    max_memory_bytes: int = 4 << 30  # address space (RLIMIT_AS) of latexmlc and its children
    latexmlc: str = "latexmlc"
    extra_args: tuple[str, ...] = ()  # e.g. ("--preload=ar5iv.sty",) where that binding is installed
    source_date_epoch: int = 0  # "Generated on" and \today; fixed so the output is reproducible
    convert_pdf_figures: bool = True  # allow ImageMagick's PDF/EPS coders for this run only
    work_dir: Optional[str] = None  # where the per-paper temporary folder goes (default: system temp)
    keep_log: bool = False  # return LaTeXML's whole log, not just its tail


@dataclass
class LatexmlResult:
    paper_id: str
    html: bytes
    assets: dict = field(default_factory=dict)  # relative path -> bytes (images beside the page)
    main_file: str = ""
    latexml_version: str = ""
    status: int = 0  # LaTeXML's: 0 no problems, 1 warnings, 2 errors (3 fatal is a StageError)
    warnings: int = 0
    errors: int = 0
    seconds: float = 0.0
    log: str = ""  # the tail of LaTeXML's log (whole with keep_log)

    def write(self, folder: str, stem: Optional[str] = None) -> str:
        """Write ``<stem>.html`` and its images into ``folder`` (as a page with its assets
        beside it, the layout the build reads); returns the page's path."""
        stem = stem or self.paper_id.replace("/", "_")
        os.makedirs(folder, exist_ok=True)
        for rel, data in sorted(self.assets.items()):
            target = os.path.join(folder, *rel.split("/"))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as f:
                f.write(data)
        page = os.path.join(folder, stem + ".html")
        with open(page, "wb") as f:
            f.write(self.html)
        return page


# -- the main file ------------------------------------------------------------------------------
_COMMENT_RE = re.compile(rb"(?<!\\)%[^\n]*")
_CLASS_RE = re.compile(rb"\\document(?:class|style)\s*(?:\[[^\]]*\])?\s*\{")
_BEGIN_RE = re.compile(rb"\\begin\s*\{document\}")
_INCLUDE_RE = re.compile(rb"\\(?:input|include|subfile)\s*\{([^}]+)\}")


def _toplevel_from_readme(files: Mapping[str, bytes]) -> Optional[str]:
    """The file arXiv's 00README (XXX lines ``name toplevelfile``, or 00README.json
    ``{"sources": [{"filename": ..., "usage": "toplevel"}]}``) names as the top level."""
    for name, data in files.items():
        base = name.rsplit("/", 1)[-1].lower()
        if base == "00readme.json":
            try:
                for s in json.loads(data.decode("utf-8", "replace")).get("sources", []):
                    if s.get("usage") == "toplevel" and s.get("filename") in files:
                        return s["filename"]
            except (ValueError, AttributeError):
                continue
        elif base.startswith("00readme"):
            for line in data.decode("utf-8", "replace").splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[1].lower() == "toplevelfile" and parts[0] in files:
                    return parts[0]
    return None


def find_main_file(files: Mapping[str, bytes], *, paper_id: Optional[str] = None, label: str = "e-print") -> str:
    """The e-print's main TeX file: the one its 00README names, else among the files with
    ``\\documentclass`` and ``\\begin{document}`` (outside comments) the one that pulls
    in most of the tree's other files, then a common name (main.tex, ms.tex...), then
    the largest. Raises ``no_main_file`` when no file is a complete document."""
    named = _toplevel_from_readme(files)
    if named:
        return named
    cands = []
    for name, data in files.items():
        low = name.lower()
        if not (low.endswith(TEX_SUFFIXES) or "." not in low.rsplit("/", 1)[-1]):
            continue
        text = _COMMENT_RE.sub(b"", data)
        if not (_CLASS_RE.search(text) and _BEGIN_RE.search(text)):
            continue
        folder = name.rsplit("/", 1)[0] + "/" if "/" in name else ""
        pulled = 0
        for m in _INCLUDE_RE.finditer(text):
            target = folder + m.group(1).decode("utf-8", "replace").strip()
            if target in files or target + ".tex" in files:
                pulled += 1
        stem = low.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        cands.append((pulled, stem in COMMON_MAIN_NAMES, -name.count("/"), len(data), name))
    if not cands:
        raise StageError(
            STAGE,
            "no_main_file",
            f"{label} has no main TeX file (no file with \\documentclass and "
            "\\begin{document}), so LaTeXML cannot convert it.",
            paper_id,
        )
    return max(cands)[-1]


# -- running latexmlc ---------------------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def latexml_version(latexmlc: str = "latexmlc") -> str:
    """``0.8.7`` for the installed latexmlc (for provenance); raises ``latexml_missing``."""
    exe = shutil.which(latexmlc)
    if exe is None:
        raise StageError(
            STAGE,
            "latexml_missing",
            f"{latexmlc} is not installed; install LaTeXML "
            "(apt-get install latexml, or run scripts/setup.sh) to convert e-prints.",
        )
    out = subprocess.run([exe, "--VERSION"], capture_output=True, text=True, timeout=60)
    m = re.search(r"LaTeXML version ([\w.\-]+)", out.stdout + out.stderr)
    return m.group(1) if m else "unknown"


def _strip_png_times(data: bytes) -> bytes:
    """A PNG without its tIME chunk and date text chunks (ImageMagick stamps both with
    the time of conversion), so that the same figure gives the same bytes."""
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        return data
    out, i = [data[:8]], 8
    while i + 8 <= len(data):
        n, kind = struct.unpack(">I4s", data[i : i + 8])
        end = i + 12 + n
        if end > len(data):
            return data  # not a PNG we understand: leave it as it is
        body = data[i + 8 : i + 8 + n]
        drop = kind == b"tIME" or (kind in (b"tEXt", b"zTXt", b"iTXt") and body.split(b"\0", 1)[0].startswith(b"date:"))
        if not drop:
            out.append(data[i:end])
        i = end
        if kind == b"IEND":
            break
    return b"".join(out)


def _materialize(files: Mapping[str, bytes], dest: str, label: str, paper_id: Optional[str]) -> None:
    root = os.path.abspath(dest)
    for name, data in files.items():
        safe = safe_member_name(name)
        target = os.path.abspath(os.path.join(root, *(safe or "").split("/")))
        if not safe or not target.startswith(root + os.sep):
            raise StageError(
                STAGE,
                "unsafe_archive",
                f"{label}: {name!r} would be written outside the conversion folder; nothing was converted.",
                paper_id,
            )
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(data)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _files_of(source: Union[SourceTree, bytes, str], paper_id: Optional[str], label: str) -> dict:
    """Every file of the e-print (not just the TeX-figure stage's subset)."""
    if isinstance(source, (bytes, bytearray)):
        source = read_eprint(bytes(source), label=label, paper_id=paper_id, keep=lambda _: True)
    elif isinstance(source, str):
        source = read_source_dir(source, label=label, paper_id=paper_id, keep=lambda _: True)
    if source.kind in ("pdf", "ps"):
        raise StageError(
            STAGE, "pdf_only", f"{label} is a {source.kind.upper()} only: there is no TeX to convert.", paper_id
        )
    if source.skipped:
        # A tree read with the figure stage's filter lacks .bib, .bst, .tikz, data files...
        # LaTeXML may need them; say so rather than convert a partial tree silently.
        raise ValueError(
            f"{label}: the SourceTree was read with a file filter ({len(source.skipped)} files "
            "skipped); read it with keep=lambda p: True for a conversion."
        )
    return dict(source.files)


def convert_eprint(
    source: Union[SourceTree, bytes, str],
    *,
    paper_id: str,
    label: Optional[str] = None,
    options: LatexmlOptions = LatexmlOptions(),
) -> LatexmlResult:
    """One e-print -> LaTeXML HTML5 with its images, or a StageError (stage ``latexml``)."""
    label = label or f"{paper_id} e-print"
    version = latexml_version(options.latexmlc)
    files = _files_of(source, paper_id, label)
    main = find_main_file(files, paper_id=paper_id, label=label)
    work = tempfile.mkdtemp(prefix="sciga-latexml-", dir=options.work_dir)
    try:
        src, out = os.path.join(work, "src"), os.path.join(work, "out")
        os.makedirs(out)
        _materialize(files, src, label, paper_id)
        env = dict(os.environ, SOURCE_DATE_EPOCH=str(int(options.source_date_epoch)))
        if options.convert_pdf_figures:
            cfg = os.path.join(work, "config")
            os.makedirs(os.path.join(cfg, "ImageMagick"))
            with open(os.path.join(cfg, "ImageMagick", "policy.xml"), "w") as f:
                f.write(IMAGE_POLICY)
            env["XDG_CONFIG_HOME"] = cfg  # read after /etc's policy, so its rules win for this run
        stem = "page"
        cmd = [
            "/bin/sh",
            "-c",
            'ulimit -v "$0" 2>/dev/null || exit 125; exec "$@"',
            str(max(1, options.max_memory_bytes // 1024)),
            shutil.which(options.latexmlc) or options.latexmlc,
            "--format=html5",
            f"--dest={os.path.join(out, stem + '.html')}",
            *options.extra_args,
            main,
        ]
        log_path = os.path.join(work, "latexmlc.log")
        t0 = time.monotonic()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                cmd,
                cwd=src,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
            try:
                rc = proc.wait(timeout=options.timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                proc.wait()
                raise StageError(
                    STAGE,
                    "latexml_timeout",
                    f"{label}: LaTeXML did not finish {main} within "
                    f"{options.timeout_s:g} s and was stopped; the paper has no converted page "
                    "(raise --latexml-timeout for very long papers).",
                    paper_id,
                ) from None
            finally:
                _kill_group(proc)  # no child (ghostscript, ImageMagick) outlives the paper
        seconds = time.monotonic() - t0
        with open(log_path, "rb") as f:
            log_text = f.read().decode("utf-8", "replace")
        tail = log_text[-4000:]
        status_m = re.findall(r"Status:conversion:(\d)", log_text)
        status = int(status_m[-1]) if status_m else None
        page = os.path.join(out, stem + ".html")
        if "Out of memory" in log_text or (rc < 0 and status is None and -rc in (signal.SIGSEGV, signal.SIGABRT)):
            raise StageError(
                STAGE,
                "latexml_memory",
                f"{label}: LaTeXML ran out of its "
                f"{options.max_memory_bytes >> 20} MiB memory limit converting {main}; the paper has "
                "no converted page.",
                paper_id,
            )
        if rc == 125:
            raise StageError(
                STAGE, "latexml_memory", f"{label}: the memory limit could not be set for LaTeXML.", paper_id
            )
        if status == 3 or status is None or not os.path.exists(page):
            fatal = re.search(r"^Fatal:[^\n]*", log_text, re.M)
            why = fatal.group(0) if fatal else f"exit status {rc}, no page written"
            raise StageError(
                STAGE,
                "latexml_fatal",
                f"{label}: LaTeXML stopped on a fatal error converting {main} "
                f"({why[:300]}); the paper has no converted page.",
                paper_id,
            )
        with open(page, "rb") as f:
            html = f.read()
        assets = {}
        for dirpath, _, names in os.walk(out):
            for n in names:
                full = os.path.join(dirpath, n)
                rel = os.path.relpath(full, out).replace(os.sep, "/")
                if rel == stem + ".html" or rel == "LaTeXML.cache" or rel.endswith(".css"):
                    continue
                with open(full, "rb") as f:
                    data = f.read()
                assets[rel] = _strip_png_times(data) if rel.lower().endswith(".png") else data
        return LatexmlResult(
            paper_id=paper_id,
            html=html,
            assets=dict(sorted(assets.items())),
            main_file=main,
            latexml_version=version,
            status=status,
            seconds=round(seconds, 3),
            warnings=len(re.findall(r"^Warning:", log_text, re.M)),
            errors=len(re.findall(r"^Error:", log_text, re.M)),
            log=log_text if options.keep_log else tail,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
