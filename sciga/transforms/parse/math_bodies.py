"""Skipping what the build never reads: the bodies of ``<math>`` elements.

LaTeXML writes every formula twice more inside its ``<math>``: as presentation MathML and
as content MathML (and often a third time, as annotations). On arXiv pages that is about
half of the page's bytes and more than half of its elements. The build renders a formula
from the ``alttext`` attribute of ``<math>`` alone (``text.math_alttext``), so the body
only costs time: lxml builds it and frees it, 4 to 6 ms of a page's parse.

``without_math_bodies`` cuts the bodies out of the page's bytes before lxml sees them; the
``<math ...>`` start tag, with its ``alttext``, stays. A body is cut only when the tree
lxml builds from the cut page is the whole page's tree less that body's elements:

- its start tag has a double-quoted ``alttext`` (what the renderer reads), holds no ``<``
  and does not end in ``/>`` (lxml closes ``<math .../>`` where it stands);
- its content holds no HTML element libxml2 knows, no comment, CDATA, processing
  instruction or raw-text element, no nested ``<math``, and no ``ltx_tag`` / ``ltx_note``
  class (``_UNSAFE_BODY``). Only MathML's own elements, which lxml treats as unknown inline
  elements, so none of them closes or opens anything outside the formula; and none is one
  the build looks for anywhere (captions' tags, headings, figures, sections);
- no attribute value in it holds ``<`` or runs into the ``</math>`` taken as its end, and
  no tag is still open there.

Cutting stops at the first formula that breaks these rules: the ones after it may be
inside it. Where a ``<math`` is not the element it looks like (inside a comment, a script
or an attribute value), a cut could still go wrong; ``kept_every_formula`` checks the tree
built from the cut page, and the caller parses the whole page instead when it fails.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

from sciga.transforms.parse.decode import arrow_slices

# The element names libxml2's HTML parser knows (its element table, which drives what
# closes what) and the HTML5 ones the build looks for. A MathML body holding any of them
# is parsed whole.
_HTML_ELEMENTS = (
    "a abbr acronym address applet area article aside audio b base basefont bdi bdo big "
    "blockquote body br button canvas caption center cite code col colgroup data datalist dd "
    "del details dfn dialog dir div dl dt em embed fieldset figcaption figure font footer form "
    "frame frameset h1 h2 h3 h4 h5 h6 head header hgroup hr html i iframe image img input ins "
    "isindex kbd label legend li link listing main map mark menu meta meter nav nobr noembed "
    "noframes noscript object ol optgroup option output p param picture plaintext pre progress "
    "q rb rp rt rtc ruby s samp script search section select slot small source span strike "
    "strong style sub summary sup svg table tbody td template textarea tfoot th thead time "
    "title tr track tt u ul var video wbr xmp"
).split()

# RE2 (Arrow's regex engine: one linear pass over every body of a page at once).
_UNSAFE_BODY = (
    r"(?i)<(?:[!?]|/?(?:" + "|".join(_HTML_ELEMENTS) + r"|math)[\s/>]|/[^a-z])"
    r"|ltx_tag|ltx_note"
    # A tag or an attribute value still open where the body ends (the "</math>" taken as
    # the end would be inside it), or an attribute value holding "<".
    r"""|<[^>]*\z|="[^"]*(?:<|\z)|='[^']*(?:<|\z)"""
)

_START_TAG_END = re.compile(rb"""(?:[^>"']|"[^"]*"|'[^']*')*>""")
_SPACE = frozenset(b" \t\n\r\f")
_SLASH = ord("/")


def _body_bounds(page: bytes) -> list[int]:
    """Offsets ``[0, start1, end1, start2, end2, ...]`` of the bodies of the page's
    ``<math>`` elements, from just after the start tag to just before the first
    ``</math>`` after it, up to the first whose start tag breaks the module's rules."""
    bounds = [0]
    find, count = page.find, page.count
    pos = 0
    while True:
        i = find(b"<math", pos)
        if i < 0:
            break
        gt = find(b">", i)
        if gt < 0:
            break
        # A ">" inside a quoted attribute value does not end the tag. LaTeXML escapes it,
        # so the quote count is even and the regex only runs on pages written otherwise.
        if count(b'"', i, gt) & 1 or find(b"'", i, gt) >= 0:
            m = _START_TAG_END.match(page, i + 5)
            if m is None:
                break
            gt = m.end() - 1
        end = find(b"</math>", gt)
        if end < 0:
            break
        # A "<" inside the start tag: libxml2 and this reading may not agree where it ends.
        # "/>": libxml2 closes the element there, so what follows is not its body.
        if (
            page[i + 5] not in _SPACE
            or find(b' alttext="', i, gt) < 0
            or find(b"<", i + 1, gt) >= 0
            or page[gt - 1] == _SLASH
        ):
            break
        bounds.append(gt + 1)
        bounds.append(end)
        pos = end + 7
    return bounds


def without_math_bodies(page: bytes) -> bytes:
    """``page`` with the bodies of its ``<math>`` elements cut out where that leaves the
    rest of the tree as it was (see the module's docstring); ``page`` itself if none is."""
    bounds = _body_bounds(page)
    if len(bounds) == 1:
        return page
    bounds.append(len(page))
    # Element k is page[bounds[k]:bounds[k+1]], so the odd elements are the bodies. The
    # regex runs over the gaps between them too: that costs less than copying the bodies out.
    try:
        unsafe = pc.match_substring_regex(arrow_slices(page, bounds), _UNSAFE_BODY)
    except pa.ArrowException:  # an Arrow built without RE2: the page is parsed whole
        return page
    # Cut up to the first body that is not cut: a formula whose ``</math>`` is not where
    # this reading puts it (a nested ``<math``, an HTML element libxml2 will not close)
    # can leave the parser inside it, and the next formulas inside that one.
    flags = unsafe.to_pylist()[1::2] if unsafe.true_count else []
    cut = flags.index(True) if True in flags else (len(bounds) - 2) // 2
    out = []
    pos = 0
    for k in range(1, 2 * cut, 2):
        out.append(page[pos : bounds[k]])
        pos = bounds[k + 1]
    if pos == 0:
        return page
    out.append(page[pos:])
    return b"".join(out)


def kept_every_formula(root, cut_page: bytes) -> bool:
    """Whether the tree lxml built from ``cut_page`` is the one ``without_math_bodies``
    meant: every ``<math`` in the bytes is a ``math`` element (none was inside a comment,
    a script or an attribute value), and every formula without content has the
    ``alttext`` it is rendered from."""
    n = 0
    for el in root.iter("math"):
        n += 1
        if len(el) == 0 and el.get("alttext") is None:
            return False
    # Each ``math`` element comes from a "<math" in the bytes (in any case: the parser
    # lowers tag names), so equal counts mean none of them was anything else.
    try:
        return n == pc.count_substring(arrow_slices(cut_page, [0, len(cut_page)]), "<math", ignore_case=True)[0].as_py()
    except pa.ArrowException:
        return n == cut_page.lower().count(b"<math")
