"""An ``<svg>`` drawn inside a page -> a standalone SVG document (the markup the vision stage
rasterizes).

LaTeXML oxide draws every TikZ/PGF figure as inline ``svg.ltx_picture``. The page is parsed
as HTML, which lower-cases every name (``viewBox`` -> ``viewbox``, ``clipPath`` ->
``clippath``) and drops namespaces; SVG's names are case-sensitive, so a renderer given the
element as parsed sees no viewBox and no clip paths. ``svg_markup`` writes the element back
with SVG's own spelling (the HTML standard's table of SVG names that differ from their
lower-case form) inside the SVG namespace. Nothing here follows a reference or decides what
is safe to draw: the rasterizer refuses what it must (``vision/svg_raster.py``).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Optional
from xml.sax.saxutils import escape, quoteattr

SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"

# The SVG element and attribute names whose spelling is not all lower case (HTML Living
# Standard, "adjust SVG attributes" and the SVG tag-name table).
_TAGS = {
    t.lower(): t
    for t in (
        "altGlyph altGlyphDef altGlyphItem animateColor animateMotion animateTransform clipPath feBlend "
        "feColorMatrix feComponentTransfer feComposite feConvolveMatrix feDiffuseLighting feDisplacementMap "
        "feDistantLight feDropShadow feFlood feFuncA feFuncB feFuncG feFuncR feGaussianBlur feImage feMerge "
        "feMergeNode feMorphology feOffset fePointLight feSpecularLighting feSpotLight feTile feTurbulence "
        "foreignObject glyphRef linearGradient radialGradient textPath"
    ).split()
}
_ATTRS = {
    a.lower(): a
    for a in (
        "attributeName attributeType baseFrequency baseProfile calcMode clipPathUnits diffuseConstant "
        "edgeMode filterUnits glyphRef gradientTransform gradientUnits kernelMatrix kernelUnitLength "
        "keyPoints keySplines keyTimes lengthAdjust limitingConeAngle markerHeight markerUnits markerWidth "
        "maskContentUnits maskUnits numOctaves pathLength patternContentUnits patternTransform patternUnits "
        "pointsAtX pointsAtY pointsAtZ preserveAlpha preserveAspectRatio primitiveUnits refX refY "
        "repeatCount repeatDur requiredExtensions requiredFeatures specularConstant specularExponent "
        "spreadMethod startOffset stdDeviation stitchTiles surfaceScale systemLanguage tableValues targetX "
        "targetY textLength viewBox viewTarget xChannelSelector yChannelSelector zoomAndPan"
    ).split()
}


def svg_markup(el) -> Optional[str]:
    """The inline ``<svg>`` element ``el`` (from lxml's HTML parser) as a standalone SVG
    document, or None when it is not an element. Comments and processing instructions are
    left out; the HTML inside a ``foreignObject`` is kept as it is (the rasterizer turns it
    into SVG text)."""
    if not isinstance(el.tag, str):
        return None
    out: list[str] = []
    _write(el, out, root=True)
    return "".join(out)


@lru_cache(maxsize=4096)
def _name(tag: str) -> str:
    local = tag.rsplit("}", 1)[-1]
    return _TAGS.get(local, local)


@lru_cache(maxsize=4096)
def _attr_name(k: str) -> Optional[str]:
    """SVG's spelling of an attribute name as the HTML parser gave it; None for a namespace
    declaration or a name no XML parser accepts (the attribute is dropped, not the figure)."""
    k = k.rsplit("}", 1)[-1] if k.startswith("{") else k
    if k == "xmlns" or k.startswith("xmlns:"):
        return None
    name = k if k.startswith("xlink:") else _ATTRS.get(k, k)
    return name if _XML_NAME.match(name) else None


_XML_NAME = re.compile(r"^[A-Za-z_][\w.\-]*(?::[A-Za-z_][\w.\-]*)?$")


def _write(el, out: list[str], root: bool = False) -> None:
    tag = _name(el.tag)
    parts = ["<", tag]
    if root:
        parts.append(f' xmlns="{SVG_NS}" xmlns:xlink="{XLINK_NS}"')
    for k, v in el.attrib.items():
        name = _attr_name(k)
        if name is not None:
            parts.append(f" {name}={quoteattr(v)}")
    parts.append(">")
    out.append("".join(parts))
    if el.text:
        out.append(escape(el.text))
    for child in el:
        if isinstance(child.tag, str):
            _write(child, out)
        if child.tail:
            out.append(escape(child.tail))
    out.append(f"</{tag}>")
