"""Figure files from a TeX source -> PNG bytes.

PDF goes through poppler's ``pdftoppm`` (first page, ``-scale-to`` caps the longest side),
EPS / PS through ghostscript (``-dSAFER``, ``-dEPSCrop``, first page). Both read the file
on stdin and write the PNG on stdout, so nothing touches the disk, and both run under a
timeout: a PDF that makes poppler spin or PostScript that loops forever costs at most
``timeout`` seconds. PNG / JPEG / GIF are passed through after a decode check; TIFF / BMP
are converted with Pillow. Every image is opened with a pixel limit.

Errors are ``StageError(stage="rasterize")`` with a message that names the file and what
to do; the figure stage records them on the figure row, it does not fail the paper. A tool
stopped by a signal or by the timeout is a *transient* error: the paper's result is not
kept as final, so the next build rasterizes the figure again.
"""

from __future__ import annotations

import gzip
import io
import shutil
import subprocess
from typing import Optional

from sciga.transforms.common.errors import StageError

STAGE = "rasterize"
DEFAULT_DPI = 150
DEFAULT_MAX_SIDE = 2048
DEFAULT_TIMEOUT = 60.0
MAX_PIXELS = 64_000_000
PASS_THROUGH = {"png": ".png", "jpeg": ".jpg", "gif": ".gif"}


def _tool(name: str) -> str:
    path = shutil.which(name)
    if not path:
        pkg = "poppler-utils" if name == "pdftoppm" else "ghostscript"
        raise StageError(
            STAGE,
            "tool_missing",
            f"{name} is not installed, so PDF/EPS figures cannot be rasterized; "
            f"install {pkg} (scripts/setup.sh does it).",
        )
    return path


def sniff(data: bytes, name: str = "") -> str:
    """'pdf' | 'ps' | 'png' | 'jpeg' | 'gif' | 'tiff' | 'bmp' | 'svg' | 'unknown'."""
    head = data[:16]
    if head.startswith(b"%PDF"):
        return "pdf"
    if head.startswith(b"%!PS") or head[:4] == b"\xc5\xd0\xd3\xc6":  # DOS EPS binary header
        return "ps"
    if head.startswith(b"\x89PNG"):
        return "png"
    if head[:3] == b"\xff\xd8\xff":
        return "jpeg"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    if head[:4] in (b"II*\x00", b"MM\x00*"):
        return "tiff"
    if head[:2] == b"BM":
        return "bmp"
    if b"<svg" in data[:2048]:
        return "svg"
    return "unknown"


def check_image(png: bytes, label: str) -> tuple[int, int]:
    """Decode-check an image with a pixel limit; (width, height)."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(png)) as im:
            w, h = im.size
            if w * h > MAX_PIXELS:
                raise StageError(
                    STAGE, "too_many_pixels", f"{label} is {w}x{h} pixels, above the {MAX_PIXELS:,} pixel limit."
                )
            im.verify()
            return w, h
    except StageError:
        raise
    except Exception as e:  # noqa: BLE001 - Pillow raises many types for bad files
        raise StageError(STAGE, "bad_image", f"{label} is not a readable image ({type(e).__name__}: {e}).") from None


def _run(cmd: list[str], data: bytes, label: str, what: str, timeout: float) -> bytes:
    try:
        proc = subprocess.run(cmd, input=data, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise StageError(
            STAGE,
            "timeout",
            f"{label}: {what} did not finish within {timeout:.0f} s; the figure was skipped "
            "(raise --rasterize-timeout if it is genuine).",
            transient=True,
        ) from None
    except OSError as e:
        raise StageError(STAGE, "tool_failed", f"{label}: {what} could not be started ({e}).", transient=True) from None
    if proc.returncode < 0:
        # Killed by a signal (Ctrl-C reaches the whole process group, the OOM killer...): not
        # the file's fault, and not a result to keep: the next build rasterizes it again.
        raise StageError(
            STAGE,
            "interrupted",
            f"{label}: {what} was stopped by signal {-proc.returncode}; the figure "
            "has no image in this build and is rasterized again by the next one.",
            transient=True,
        )
    if proc.returncode != 0 or not proc.stdout.startswith(b"\x89PNG"):
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        why = next((ln for ln in err if "rror" in ln), err[0] if err else f"exit code {proc.returncode}")
        raise StageError(
            STAGE,
            "rejected",
            f"{label}: {what} rejected the file ({why[:200]}); the figure has no image from the source.",
        )
    return proc.stdout


def pdf_to_png(
    data: bytes,
    label: str = "figure.pdf",
    *,
    dpi: int = DEFAULT_DPI,
    max_side: int = DEFAULT_MAX_SIDE,
    timeout: float = DEFAULT_TIMEOUT,
) -> bytes:
    cmd = [_tool("pdftoppm"), "-png", "-singlefile", "-f", "1", "-l", "1", "-r", str(dpi)]
    if max_side:
        cmd += ["-scale-to", str(max_side)]
    return _run(cmd, data, label, "pdftoppm", timeout)


def ps_to_png(
    data: bytes, label: str = "figure.eps", *, dpi: int = DEFAULT_DPI, timeout: float = DEFAULT_TIMEOUT
) -> bytes:
    cmd = [
        _tool("gs"),
        "-dSAFER",
        "-dBATCH",
        "-dNOPAUSE",
        "-dQUIET",
        "-sstdout=%stderr",
        "-sDEVICE=png16m",
        f"-r{dpi}",
        "-dEPSCrop",
        "-dFirstPage=1",
        "-dLastPage=1",
        "-dTextAlphaBits=4",
        "-dGraphicsAlphaBits=4",
        "-sOutputFile=-",
        "-",
    ]
    return _run(cmd, data, label, "ghostscript", timeout)


def to_png(
    data: bytes,
    name: str,
    *,
    dpi: int = DEFAULT_DPI,
    max_side: int = DEFAULT_MAX_SIDE,
    timeout: float = DEFAULT_TIMEOUT,
) -> tuple[bytes, Optional[str]]:
    """(image bytes, how) for one figure file: ``how`` is 'pdftoppm', 'ghostscript',
    'pillow' or None (passed through unchanged)."""
    if name.lower().endswith(".gz") and data[:2] == b"\x1f\x8b":
        try:
            data = gzip.GzipFile(fileobj=io.BytesIO(data)).read(256 * 1024 * 1024)
        except (OSError, EOFError) as e:
            raise StageError(STAGE, "bad_image", f"{name} is not a readable gzip file ({e}).") from None
    kind = sniff(data, name)
    if kind == "pdf":
        png = pdf_to_png(data, name, dpi=dpi, max_side=max_side, timeout=timeout)
        check_image(png, name)
        return png, "pdftoppm"
    if kind == "ps":
        png = ps_to_png(data, name, dpi=dpi, timeout=timeout)
        check_image(png, name)
        return png, "ghostscript"
    if kind in PASS_THROUGH:
        check_image(data, name)
        return data, None
    if kind in ("tiff", "bmp"):
        from PIL import Image

        check_image(data, name)
        with Image.open(io.BytesIO(data)) as im:
            out = io.BytesIO()
            im.convert("RGBA" if im.mode in ("RGBA", "LA", "P") else "RGB").save(out, format="PNG")
            return out.getvalue(), "pillow"
    if kind == "svg":
        raise StageError(
            STAGE,
            "unsupported",
            f"{name} is SVG, which is not rasterized here; the figure keeps no image from the source.",
        )
    raise StageError(STAGE, "unsupported", f"{name} is not a PDF, EPS or raster image this builder can read.")


def to_png_many(
    items: list[tuple[str, bytes]],
    *,
    workers: int = 0,
    dpi: int = DEFAULT_DPI,
    max_side: int = DEFAULT_MAX_SIDE,
    timeout: float = DEFAULT_TIMEOUT,
) -> list[tuple[Optional[bytes], Optional[StageError]]]:
    """``to_png`` for several files of one paper; poppler / ghostscript run side by side
    (they are separate processes, so threads are enough). Results keep the input order."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    def one(item):
        name, data = item
        try:
            return to_png(data, name, dpi=dpi, max_side=max_side, timeout=timeout)[0], None
        except StageError as e:
            return None, e

    n = workers or min(4, os.cpu_count() or 1)
    heavy = sum(1 for name, data in items if sniff(data, name) in ("pdf", "ps"))
    if n <= 1 or heavy <= 1:
        return [one(it) for it in items]
    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(one, items))
