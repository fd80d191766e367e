"""SVG figures -> PNG at a bounded size, with a renderer that fetches nothing and reads no file
the SVG names.

arXiv's HTML (LaTeXML oxide) draws every TikZ/PGF figure as an inline ``<svg>``, and papers
ship figures as ``.svg`` files; without this they have no raster image (``svg_only``). The
SVG is one more input an attacker controls, so it is checked before anything draws it:

- it is parsed by lxml with entity resolution, DTD loading and the network off; a document
  type declaration with an internal subset (``<!ENTITY ...>``: billion laughs, external
  entities) is refused (``svg_refused: entities``);
- every reference (``href`` / ``xlink:href``, ``url(...)`` in an attribute or a ``<style>``,
  ``@import``) must point inside the document (``#id``); the only other form kept is an
  embedded ``data:image/png|jpeg|gif|webp`` raster, whose header is checked against the pixel
  limit before the renderer decodes it (``embedded_image`` when it is too large or does not
  decode). Anything else (``http:``, ``file:``, a path) is refused (``svg_refused:
  external_reference``); a plain document type declaration is dropped unread;
- the drawing's size (``width``/``height``/``viewBox``) must be positive, finite, at most
  ``MAX_EXTENT`` user units a side and at most ``MAX_ASPECT`` to 1 (``huge_viewbox``); the
  document at most ``MAX_SVG_BYTES`` and ``MAX_ELEMENTS`` elements, and ``<use>`` may not
  expand it past ``MAX_EXPANDED`` drawn elements (a ``<use>`` bomb is refused as
  ``too_complex``, a ``<use>`` cycle too);
- the PNG is drawn at twice the CSS size, its longer side at most ``MAX_SIDE`` pixels, on
  white.

The renderer is resvg (``resvg-py``, Rust): memory-safe, no network code, and with
``resources_dir`` unset and every reference checked above it opens no file of the SVG's
choosing. The only files it reads are the fonts given here: the DejaVu fonts matplotlib (a
dependency) ships, never the machine's own, so the same SVG gives the same PNG on every
machine. resvg does not draw ``foreignObject`` (HTML inside SVG), where LaTeXML puts a TikZ
node's text (``foreignObject > pre`` / ``span``): each one becomes an SVG ``<text>`` at the
same place before drawing, line by line, so labels and boxed prompts keep their words.

Why resvg and not cairosvg or svglib (bench/svg_raster.py, the same SVGs, one run; numbers in
docs/explanation/benchmarks.md): cairosvg draws them all at about 0.8x resvg's CPU, but it needs
the system's libcairo (no wheel on PyPI), takes its fonts from the machine through fontconfig
(the same SVG would give other pixels on another machine, and the shards are meant to be
byte-identical), and parses the hostile input in Python (cssselect2, tinycss2). svglib drew
none: its renderer (reportlab's renderPM) needs rlPyCairo and pycairo, built from source
against cairo's headers. resvg is one wheel, Rust (memory-safe parser and renderer), has no
network code and uses only the fonts it is given.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import struct
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

from lxml import etree

SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"

MAX_SVG_BYTES = 16 * 1024 * 1024  # an SVG file above this is refused unread by the caller
MAX_ELEMENTS = 200_000
MAX_EXPANDED = 2_000_000  # elements drawn once every <use> is expanded
MAX_EXTENT = 100_000.0  # user units (CSS px) a side, from width/height or the viewBox
MAX_ASPECT = 100.0
MAX_SIDE = 2048  # pixels, the PNG's longer side
SCALE = 2.0  # PNG pixels per CSS pixel, below MAX_SIDE
MAX_EMBEDDED_PIXELS = 40_000_000  # a data: raster inside the SVG (its header is read, not its pixels)


class SvgRefused(Exception):
    """An SVG that is not drawn: ``kind`` says why (entities, external_reference,
    embedded_image, huge_viewbox, too_large, too_complex, malformed, render_failed)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message

    def __str__(self) -> str:
        return f"svg_refused: {self.kind}: {self.message}"


@dataclass
class RasterizedSvg:
    png: bytes
    width: int  # pixels of the PNG
    height: int


def rasterize_svg(data, max_side: int = MAX_SIDE, scale: float = SCALE) -> RasterizedSvg:
    """An SVG document (bytes or str) -> a PNG on white. Raises ``SvgRefused``."""
    svg = prepare_svg(data)
    w, h = svg.size
    s = min(scale, max_side / max(w, h))
    out_w, out_h = max(1, round(w * s)), max(1, round(h * s))
    try:
        png = _render(svg.markup, out_w if w >= h else None, None if w >= h else out_h)
    except (ValueError, OSError) as e:  # resvg's refusal or a failed render
        raise SvgRefused("render_failed", f"the SVG could not be drawn ({e})") from None
    pw, ph = struct.unpack(">II", png[16:24])  # IHDR: resvg rounds the other side itself
    return RasterizedSvg(png=png, width=pw, height=ph)


@dataclass
class PreparedSvg:
    markup: str  # the checked document, foreignObjects turned into text
    size: tuple[float, float]  # intrinsic width, height in CSS px


def prepare_svg(data) -> PreparedSvg:
    """Parse and check an SVG; the markup the renderer is given. Raises ``SvgRefused``."""
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    if len(raw) > MAX_SVG_BYTES:
        raise SvgRefused("too_large", f"{len(raw)} bytes is above the limit of {MAX_SVG_BYTES}")
    if _DECLARES_ENTITIES.search(raw[:65536]) or b"<!ENTITY" in raw.upper():
        raise SvgRefused("entities", "the SVG declares entities (<!ENTITY>); such documents are not drawn")
    # A plain document type declaration (SVG 1.1's PUBLIC one, common in real files) names a
    # DTD on the network: it is dropped unread, not refused.
    raw = _DOCTYPE_RE.sub(b"", raw, count=1)
    try:
        root = etree.fromstring(raw, _parser())
    except (etree.XMLSyntaxError, ValueError) as e:
        raise SvgRefused("malformed", f"not well-formed XML ({e})") from None
    if root is None or root.tag != f"{{{SVG_NS}}}svg":
        raise SvgRefused("malformed", "the document is not an <svg> element in the SVG namespace")
    docinfo = root.getroottree().docinfo
    if docinfo.internalDTD is not None or docinfo.externalDTD is not None:
        raise SvgRefused("entities", "the SVG carries a document type declaration; such documents are not drawn")
    _check_elements(root)
    _check_references(root)
    _foreign_objects_to_text(root)
    size = _intrinsic_size(root)
    return PreparedSvg(markup=etree.tostring(root, encoding="unicode"), size=size)


# A DOCTYPE with an internal subset ([...]), the only place entities are declared.
_DECLARES_ENTITIES = re.compile(rb"<!DOCTYPE[^>\[]*\[", re.I)
_DOCTYPE_RE = re.compile(rb"<!DOCTYPE[^>\[]*>", re.I)


@lru_cache(maxsize=1)
def _parser() -> etree.XMLParser:
    return etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
        collect_ids=False,
    )


# ------------------------------------------------------------------ structure


def _local(tag) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _check_elements(root) -> None:
    """Element count and the drawn size once every <use> is expanded (a cycle is refused)."""
    ids: dict[str, object] = {}
    n = 0
    for el in root.iter():
        if not isinstance(el.tag, str):
            continue
        n += 1
        if n > MAX_ELEMENTS:
            raise SvgRefused("too_complex", f"more than {MAX_ELEMENTS} elements")
        i = el.get("id")
        if i is not None and i not in ids:
            ids[i] = el
    # Keyed by the elements themselves: lxml returns the same proxy object for an element as
    # long as one is referenced (an id() of a dropped proxy can be reused by another element).
    sizes: dict = {}
    visiting: set = set()

    def expanded(el) -> int:
        key = el
        if key in sizes:
            return sizes[key]
        if key in visiting:
            raise SvgRefused("too_complex", "a <use> refers back to an element that contains it")
        visiting.add(key)
        total = 1
        for child in el:
            if isinstance(child.tag, str):
                total += expanded(child)
        if _local(el.tag) == "use":
            ref = _href(el)
            if ref and ref.startswith("#") and ref[1:] in ids:
                total += expanded(ids[ref[1:]])
        visiting.discard(key)
        if total > MAX_EXPANDED:
            raise SvgRefused("too_complex", f"<use> expands the drawing past {MAX_EXPANDED} elements")
        sizes[key] = total
        return total

    try:
        expanded(root)
    except RecursionError:
        raise SvgRefused("too_complex", "elements nest too deeply") from None


# ------------------------------------------------------------------ references


def _href(el) -> Optional[str]:
    v = el.get(f"{{{XLINK_NS}}}href")
    return v if v is not None else el.get("href")


_URL_RE = re.compile(r"url\(\s*(['\"]?)(.*?)\1\s*\)", re.I | re.S)
_DATA_IMAGE_RE = re.compile(r"data:image/(png|jpeg|jpg|gif|webp);base64,(.*)$", re.I | re.S)


def _check_references(root) -> None:
    for el in root.iter():
        if not isinstance(el.tag, str):
            continue
        local = _local(el.tag)
        for name, value in el.attrib.items():
            attr = _local(name)
            if attr == "href":
                _check_target(value.strip(), local)
            elif "url(" in value.lower() or "@import" in value.lower():
                _check_css(value)
        if local == "style" and el.text:
            _check_css(el.text)


def _check_css(css: str) -> None:
    if "@import" in css.lower():
        raise SvgRefused("external_reference", "a style sheet @import")
    for m in _URL_RE.finditer(css):
        target = m.group(2).strip()
        if not target.startswith("#"):
            raise SvgRefused("external_reference", f"url({target[:80]}) does not point inside the document")


def _check_target(target: str, element: str) -> None:
    if target.startswith("#") or target == "":
        return
    m = _DATA_IMAGE_RE.match(target)
    if m and element == "image":
        _check_embedded_image(m.group(2))
        return
    raise SvgRefused("external_reference", f"<{element}> refers to {target[:80]!r}, outside the document")


def _check_embedded_image(b64: str) -> None:
    """A data: raster inside the SVG: its header's size against the pixel limit (resvg would
    decode a decompression bomb without asking)."""
    from PIL import Image

    from sciga.transforms.vision.decode import ImageDecodeError, check_pixels, open_image

    try:
        data = base64.b64decode("".join(b64.split()), validate=True)
        im = open_image(data)
        check_pixels(im.size[0], im.size[1], MAX_EMBEDDED_PIXELS)
    except ImageDecodeError as e:
        raise SvgRefused("embedded_image", f"an embedded image is refused ({e})") from None
    except (binascii.Error, ValueError, OSError, SyntaxError, Image.DecompressionBombError) as e:
        raise SvgRefused("embedded_image", f"an embedded image does not decode ({type(e).__name__})") from None


# ------------------------------------------------------------------ size

_LENGTH_RE = re.compile(r"^\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*(px|pt|pc|mm|cm|in|em|ex|%)?\s*$")
_PER_UNIT = {None: 1.0, "px": 1.0, "pt": 96 / 72, "pc": 16.0, "mm": 96 / 25.4, "cm": 96 / 2.54, "in": 96.0}


def _length(v: Optional[str]) -> Optional[float]:
    if v is None:
        return None
    m = _LENGTH_RE.match(v)
    if not m:
        return None
    unit = m.group(2)
    if unit not in _PER_UNIT:
        return None  # %, em, ex: relative to something a standalone SVG does not have
    return float(m.group(1)) * _PER_UNIT[unit]


def _viewbox(root) -> Optional[tuple[float, float, float, float]]:
    v = root.get("viewBox")
    if v is None:
        return None
    parts = re.split(r"[\s,]+", v.strip())
    try:
        box = tuple(float(p) for p in parts)
    except ValueError:
        raise SvgRefused("huge_viewbox", f"viewBox {v[:60]!r} is not four numbers") from None
    if len(box) != 4:
        raise SvgRefused("huge_viewbox", f"viewBox {v[:60]!r} is not four numbers")
    return box[0], box[1], box[2], box[3]


def _intrinsic_size(root) -> tuple[float, float]:
    box = _viewbox(root)
    if box is not None:
        x, y, bw, bh = box
        _check_extent(bw, bh, "viewBox")
        if not all(math.isfinite(c) and abs(c) <= MAX_EXTENT * 10 for c in (x, y)):
            raise SvgRefused("huge_viewbox", f"viewBox origin {x}, {y} is out of range")
    w, h = _length(root.get("width")), _length(root.get("height"))
    if w is None and h is None:
        if box is None:
            raise SvgRefused("malformed", "the SVG has neither a size nor a viewBox")
        w, h = box[2], box[3]
    elif w is None or h is None:
        if box is None:
            raise SvgRefused("malformed", "the SVG gives one side of its size and no viewBox")
        if w is None:
            w = h * box[2] / box[3]  # type: ignore[operator]
        else:
            h = w * box[3] / box[2]
    _check_extent(w, h, "size")  # type: ignore[arg-type]
    return float(w), float(h)  # type: ignore[arg-type]


def _check_extent(w: float, h: float, what: str) -> None:
    if not (math.isfinite(w) and math.isfinite(h)) or w <= 0 or h <= 0:
        raise SvgRefused("huge_viewbox", f"the {what} {w} x {h} is empty or not finite")
    if w > MAX_EXTENT or h > MAX_EXTENT:
        raise SvgRefused("huge_viewbox", f"the {what} {w:g} x {h:g} is above {MAX_EXTENT:g} a side")
    if max(w, h) / min(w, h) > MAX_ASPECT:
        raise SvgRefused("huge_viewbox", f"the {what} {w:g} x {h:g} is more than {MAX_ASPECT:g} to 1")


# ------------------------------------------------------------------ foreignObject -> text

_FONT_SIZE_RE = re.compile(r"font-size\s*:\s*([\d.]+)\s*(pt|px)?", re.I)
_FG_RE = re.compile(r"--ltx-fg-color\s*:\s*(#[0-9a-fA-F]{3,8})")


def _foreign_objects_to_text(root) -> None:
    """Each ``foreignObject`` -> an SVG ``<text>`` of its words at the same place: one
    ``tspan`` a line, ``pre`` lines kept, other blocks word-wrapped to the box's width, the
    font shrunk until the lines fit its height (monospace for ``pre`` and typewriter text)."""
    for fo in [el for el in root.iter(f"{{{SVG_NS}}}foreignObject")]:
        parent = fo.getparent()
        if parent is None:
            continue
        style = fo.get("style") or ""
        m = _FONT_SIZE_RE.search(style)
        size = float(m.group(1)) * (96 / 72 if (m.group(2) or "pt").lower() == "pt" else 1.0) if m else 96 / 72 * 10
        mono = any(
            _local(el.tag) in ("pre", "code", "tt") or "typewriter" in (el.get("class") or "") for el in fo.iter()
        )
        colour = next((c.group(1) for c in (_FG_RE.search(el.get("style") or "") for el in fo.iter()) if c), None)
        size, lines = _layout(_text_blocks(fo), size, fo, mono)
        text = etree.Element(f"{{{SVG_NS}}}text")
        if fo.get("transform") is not None:
            text.set("transform", fo.get("transform"))
        text.set("font-size", f"{size:.2f}")
        text.set("font-family", "monospace" if mono else "serif")
        text.set("fill", colour or fo.get("color") or "#000000")
        text.set("stroke", "none")
        x = fo.get("x") or "0"
        y0 = _text_top(fo, size)
        for i, line in enumerate(lines):
            span = etree.SubElement(text, f"{{{SVG_NS}}}tspan")
            span.set("x", x)
            span.set("y", f"{y0 + size * (0.9 + 1.2 * i):.2f}")
            span.set("{http://www.w3.org/XML/1998/namespace}space", "preserve")
            span.text = line
        text.tail = fo.tail
        parent.replace(fo, text)


_FLIP_RE = re.compile(r"^\s*matrix\(\s*1\s*[ ,]\s*0\s*[ ,]\s*0\s*[ ,]\s*-1\s*[ ,]\s*0\s*[ ,]\s*([-+\d.eE]+)\s*\)\s*$")


def _text_top(fo, size: float) -> float:
    """Where the text block starts, in the foreignObject's own coordinates. LaTeXML flips a
    foreignObject back upright with ``matrix(1 0 0 -1 0 f)``, ``f`` being its baseline: the
    box hangs from ``f - height`` (oxide: depth 0.2 em below; Perl 0.8.8's bottom-aligned
    minipages: the whole box above the baseline)."""
    y = float(_length(fo.get("y")) or 0.0)
    m = _FLIP_RE.match(fo.get("transform") or "")
    height = _box_length(fo.get("height"), size)
    if m and height and height > 0:
        try:
            return min(y, float(m.group(1)) - height)
        except ValueError:
            return y
    return y


_BLOCKS = frozenset({"p", "div", "li", "pre", "br", "tr", "h1", "h2", "h3", "h4", "h5", "h6"})


def _text_blocks(fo) -> list[tuple[str, bool]]:
    """(text, is preformatted) of each block of a foreignObject, in order."""
    blocks: list[tuple[str, bool]] = []
    current: list[str] = []

    def flush() -> None:
        text = " ".join("".join(current).split())
        if text:
            blocks.append((text, False))
        current.clear()

    def walk(el) -> None:
        local = _local(el.tag)
        block = local in _BLOCKS or "ltx_p" in (el.get("class") or "").split()
        if local == "pre":
            flush()
            blocks.append(("".join(el.itertext()).rstrip("\n"), True))
        else:
            if block:
                flush()
            if el.text:
                current.append(el.text)
            for child in el:
                if isinstance(child.tag, str):
                    walk(child)
                if child.tail:
                    current.append(child.tail)
            if block:
                flush()

    walk(fo)
    flush()
    return blocks


def _box_length(v: Optional[str], em: float) -> Optional[float]:
    if v is not None and v.strip().endswith("em"):
        try:
            return float(v.strip()[:-2]) * em
        except ValueError:
            return None
    return _length(v)


def _layout(blocks: list[tuple[str, bool]], size: float, fo, mono: bool) -> tuple[float, list[str]]:
    """The font size and lines that fit the blocks into the foreignObject's box (LaTeX often
    sets a block smaller than the box's font; the box's width and height say how much)."""
    width = _box_length(fo.get("width"), size)
    height = _box_length(fo.get("height"), size)
    advance = 0.6 if mono else 0.5  # a character's width, in ems
    lines: list[str] = []
    for _ in range(40):
        chars = max(1, int(width / (advance * size))) if width and width > 0 else 10**6
        lines = []
        for text, pre in blocks:
            lines.extend(text.split("\n") if pre else _wrap(text, chars))
        if not lines:
            return size, []
        longest = max(len(line) for line in lines)
        fits_height = not height or height <= 0 or len(lines) * 1.2 * size <= height
        fits_width = not width or width <= 0 or longest * advance * size <= width * 1.02
        if (fits_height and fits_width) or size <= 2.0:
            break
        size = max(2.0, size * 0.9)
    return size, lines


def _wrap(text: str, chars: int) -> list[str]:
    lines: list[str] = []
    line = ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > chars:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        lines.append(line)
    return lines


# ------------------------------------------------------------------ the renderer

_FONTS = ("DejaVuSans.ttf", "DejaVuSerif.ttf", "DejaVuSansMono.ttf")


@lru_cache(maxsize=1)
def font_files() -> tuple[str, ...]:
    """The DejaVu fonts matplotlib ships (never the machine's own fonts: the same PNG
    everywhere). Empty when they are not found: text is then not drawn."""
    import importlib.util
    import os

    spec = importlib.util.find_spec("matplotlib")
    for base in spec.submodule_search_locations or [] if spec else []:
        folder = os.path.join(base, "mpl-data", "fonts", "ttf")
        found = tuple(os.path.join(folder, f) for f in _FONTS if os.path.isfile(os.path.join(folder, f)))
        if found:
            return found
    return ()


def _render(markup: str, width: Optional[int], height: Optional[int]) -> bytes:
    """resvg, given the longer side (it keeps the aspect ratio). ``dpi=96``: CSS units, and
    without it resvg-py turns every ``pt`` and ``mm`` length into zero."""
    import resvg_py

    try:
        png = _draw(resvg_py, markup, width, height)
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except (ValueError, OSError):
        raise
    except BaseException as e:  # noqa: BLE001 - a Rust panic (pyo3's PanicException is a BaseException): this SVG only
        raise SvgRefused(
            "render_failed", f"the renderer failed on this SVG ({type(e).__name__}: {str(e)[:120]})"
        ) from None
    return png


def _draw(resvg_py, markup: str, width: Optional[int], height: Optional[int]) -> bytes:
    png = resvg_py.svg_to_bytes(
        svg_string=markup,
        width=width,
        height=height,
        dpi=96.0,
        background="#ffffff",
        skip_system_fonts=True,
        font_files=list(font_files()),
        font_family="DejaVu Sans",
        serif_family="DejaVu Serif",
        sans_serif_family="DejaVu Sans",
        monospace_family="DejaVu Sans Mono",
        cursive_family="DejaVu Sans",
        fantasy_family="DejaVu Sans",
    )
    return bytes(png)
