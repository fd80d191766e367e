"""Graphics inside a figure -> Image records, with every path form LaTeXML emits.

Path forms seen in the wild (normalized ``path`` in brackets):
``/html/2303.17564/assets/x1.png`` ar5iv [assets/x1.png]; ``x1.png`` under
``<base href="/html/2401.13641v1/">`` arxiv.org [x1.png]; ``2401.13641v2/fig.png`` oxide
[fig.png]; ``extracted/5301/fig.png`` oxide [extracted/5301/fig.png]; ``figs/a%20b.png``
local conversions [figs/a b.png]. SVG comes as ``<object type="image/svg+xml" data=...>``
or inline ``<svg class="ltx_picture">``; a graphic LaTeXML could not find is an
``img.ltx_missing_image`` with an empty ``src``; a picture it could not render leaves raw
TeX in a ``span.ltx_picture``.
"""

from __future__ import annotations

import re
from typing import Optional
from urllib.parse import unquote, urljoin, urlsplit

from sciga.schemas.records import Image
from sciga.transforms.parse.inline_svg import svg_markup
from sciga.transforms.parse.text import css_classes

_PAPER_PREFIX = re.compile(r"^(?:/?html/[^/]+/|(?:\d{4}\.\d{4,5}|[a-z]+(?:-[a-z]+)*(?:\.[A-Z]{2})?/\d{7})(?:v\d+)?/)")


def normalize_asset_path(src: str) -> Optional[str]:
    """A path relative to the paper's asset root, whatever form the page used."""
    if not src:
        return None
    s = src.strip()
    if s.startswith("data:"):
        return None
    parts = urlsplit(s)
    path = unquote(parts.path if (parts.scheme or parts.netloc) else s.split("#", 1)[0].split("?", 1)[0])
    while path.startswith("./"):
        path = path[2:]
    path = _PAPER_PREFIX.sub("", path, count=1)
    path = path.lstrip("/")
    return path or None


def _int(v) -> Optional[int]:
    if v is None:
        return None
    m = re.match(r"\s*(\d+(?:\.\d+)?)", v)
    return int(float(m.group(1))) if m else None


def is_graphic(el) -> bool:
    tag = el.tag
    if not isinstance(tag, str):
        return False
    if tag in ("img", "object", "svg"):
        return True
    cls = css_classes(el)
    return "ltx_picture" in cls or "ltx_missing_image" in cls or "ltx_missing" in cls


def image_from_element(el, base_url: Optional[str]) -> Image:
    tag = el.tag
    cls = css_classes(el)
    html_id = el.get("id")
    w, h = _int(el.get("width")), _int(el.get("height"))
    if tag == "img":
        src = el.get("src") or ""
        if "ltx_missing_image" in cls or "ltx_missing" in cls or not src.strip():
            return Image(path=None, url=None, kind="missing", width=w, height=h, html_id=html_id)
        path = normalize_asset_path(src)
        kind = "svg" if (path or "").lower().endswith(".svg") else "raster"
        return Image(path=path, url=_url(base_url, src), kind=kind, width=w, height=h, html_id=html_id)
    if tag == "object":
        data = el.get("data") or ""
        if not data.strip():
            return Image(path=None, kind="missing", width=w, height=h, html_id=html_id)
        path = normalize_asset_path(data)
        typ = (el.get("type") or "").lower()
        kind = "svg" if ("svg" in typ or (path or "").lower().endswith(".svg")) else "raster"
        return Image(path=path, url=_url(base_url, data), kind=kind, width=w, height=h, html_id=html_id)
    if tag == "svg" or tag.endswith("}svg"):
        # The drawing itself travels with the record (not published) for the vision stage to rasterize.
        return Image(path=None, kind="inline_svg", width=w, height=h, html_id=html_id, svg=svg_markup(el))
    if "ltx_missing_image" in cls or "ltx_missing" in cls:
        return Image(path=None, kind="missing", html_id=html_id)
    # An ltx_picture that is neither svg nor contains one: LaTeXML left the TeX unrendered.
    return Image(path=None, kind="unrendered", html_id=html_id)


def _url(base_url: Optional[str], src: str) -> Optional[str]:
    s = src.strip()
    if urlsplit(s).scheme in ("http", "https"):
        return s
    if not base_url:
        return None
    return urljoin(base_url, s)


def collect_graphics(el, out: list, skip_subfigures: bool = True) -> None:
    """Graphic elements under ``el`` in document order, not entering captions, other
    graphics, or (when asked) nested figures, which are collected as subfigures."""
    for child in el:
        tag = child.tag
        if not isinstance(tag, str):
            continue
        if tag == "figcaption":
            continue
        cls = css_classes(child)
        if skip_subfigures and (tag == "figure" or "ltx_figure" in cls or "ltx_figure_panel" in cls):
            continue
        if is_graphic(child):
            if "ltx_picture" in cls and tag != "svg":
                # A picture wrapper: the svg or image inside it is the graphic.
                inner: list = []
                collect_graphics(child, inner, skip_subfigures)
                out.extend(inner if inner else [child])
            else:
                out.append(child)
            continue
        collect_graphics(child, out, skip_subfigures)
