"""Figure and table floats -> Figure / Table records.

Constructs handled (all seen in LaTeXML 0.8.x and oxide output):
- a plain ``figure.ltx_figure`` with one graphic and one ``figcaption``;
- subfigures: 0.8.7 subcaption/subfig child figures (``S4.F4.sf1`` with a ``(a)`` caption),
  0.8.8 flex panels (``figure.ltx_figure_panel``, ``S3.F6.1``, often uncaptioned);
- several graphics and no subfigure elements (a tabular or minipage grid): each graphic
  becomes a panel, as LaTeXML 0.8.8 itself would emit panels, with the label printed for
  it ("(a) Input" under the image, or in the table row below: ``panel_labels.py``) as its
  label and subcaption; the same for one lone subfigure element that holds several
  graphics and no caption text (a ``\subfloat`` wrapping a row of plots); a subcaption
  that is only its tag ("(a)") is no caption (the label stays);
- layout rows: caption-less subfigure elements that hold several images with their own
  printed labels (or captioned panels, or ``\subcaptionbox`` captions LaTeXML 0.8.7 put on
  the holder) are row containers, not panels: each image in them is a panel;
- one element holding several numbered captions (two minipages in one ``figure``): split
  into one Figure per caption, graphics grouped by the caption that shares their
  container, else by order;
- a caption-only figure whose graphic sits in the preceding paragraph (CVPR teaser strip);
- tables (``ltx_table``) become Table records, never figures; algorithm / listing floats
  are neither.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

from sciga.schemas import ids
from sciga.schemas.records import Figure, Image, Subfigure, Table
from sciga.transforms.parse.images import collect_graphics, image_from_element, is_graphic
from sciga.transforms.parse.panel_labels import PanelLabel, printed_labels
from sciga.transforms.parse.text import RenderOptions, TextBuilder, css_classes, plain_text, render_into

_NUMBER_RE = re.compile(r"([A-Z]{0,2}\d+(?:[.\-]\d+)*[a-z]?|[IVXLC]+)\W*$")
_TAG_ONLY_RE = re.compile(r"^\s*(?:<TAG>.*?</TAG>\s*)?$", re.S)


def has_caption_text(text: Optional[str]) -> bool:
    """Is there caption text besides the tag? ``"<TAG> (a) </TAG>"`` alone is not a caption."""
    return bool(text) and not _TAG_ONLY_RE.match(text)


def float_kind(el) -> Optional[str]:
    """'figure', 'table', 'float' (algorithm, listing...) or None for a non-float."""
    tag = el.tag
    if not isinstance(tag, str):
        return None
    c = el.get("class")
    if c and "ltx_" in c:
        # Substring tests on the raw attribute first: this runs on every element.
        if "ltx_table" in c or "ltx_figure" in c or "ltx_float" in c or "ltx_teaserfigure" in c:
            cls = c.split()
            if "ltx_table" in cls:
                return "table"
            if "ltx_figure" in cls or "ltx_teaserfigure" in cls or "ltx_figure_panel" in cls:
                return "figure"
            for t in cls:
                if t.startswith("ltx_float_figure"):
                    return "figure"
            if "ltx_float" in cls:
                return "float"
    if tag == "figure":
        return "figure"
    return None


def is_caption(el) -> bool:
    return el.tag == "figcaption" or "ltx_caption" in css_classes(el)


@dataclass
class Caption:
    element: object
    text: str  # tokenized
    label: Optional[str]  # tag as printed, e.g. "Figure 3:"
    number: Optional[str]
    anchors: list = field(default_factory=list)  # a.ltx_ref met in the caption (text spans)
    citations: list = field(default_factory=list)  # (start, end) of citation elements in the text


def read_caption(el) -> Caption:
    tb = TextBuilder()
    anchors: list = []
    citations: list = []
    render_into(el, tb, RenderOptions(skip_floats=False, anchors=anchors, citations=citations))
    text = tb.text()
    citations = [(a, min(b, len(text))) for a, b in citations]
    label = number = None
    for sub in el.iter():
        if isinstance(sub.tag, str) and "ltx_tag" in css_classes(sub):
            label = plain_text(sub) or None
            break
    if label:
        m = _NUMBER_RE.search(label.rstrip(":.) "))
        number = m.group(1) if m else None
        if number is None and label.startswith("("):
            number = None
    return Caption(element=el, text=text, label=label, number=number, anchors=anchors, citations=citations)


def nearest_float(el, stop):
    """The closest float element strictly between ``el`` and ``stop`` (None if none)."""
    p = el.getparent()
    while p is not None and p is not stop:
        if float_kind(p) is not None:
            return p
        p = p.getparent()
    return None


def _direct(fig_el):
    """Captions and subfigure elements of a float, not entering nested floats."""
    caps, subs = [], []
    for el in fig_el.iter("figcaption", "figure", "div", "span"):
        if el is fig_el:
            continue
        tag = el.tag
        if tag in ("div", "span"):
            c = el.get("class")
            if not c or ("ltx_caption" not in c and "ltx_figure" not in c):
                continue
        if nearest_float(el, fig_el) is not None:
            continue
        if is_caption(el):
            caps.append(el)
        elif float_kind(el) == "figure":
            subs.append(el)
    return caps, subs


def _units(fig_el, subs: list) -> list:
    """Subfigure elements and loose graphics, in document order."""
    graphics: list = []
    collect_graphics(fig_el, graphics, skip_subfigures=True)
    units = [(el, "graphic") for el in graphics]
    if subs:
        units += [(el, "subfigure") for el in subs]
        order = {el: i for i, el in enumerate(fig_el.iter())}
        units.sort(key=lambda u: order.get(u[0], 0))
    return units


def _ancestors(el, stop) -> list:
    out = []
    p = el.getparent()
    while p is not None and p is not stop:
        out.append(p)
        p = p.getparent()
    return out


def _group_by_caption(fig_el, caps: list, units: list) -> list[list]:
    """Split a multi-caption float: units that share a container with exactly one caption
    go to it; the rest are dealt out in order."""
    groups: list[list] = [[] for _ in caps]
    # Sets of element proxies (not id()s): lxml keeps one proxy per node while it is
    # referenced, so membership is node identity.
    unit_anc = [set(_ancestors(u[0], fig_el)) for u in units]
    cap_anc = [_ancestors(c, fig_el) for c in caps]
    taken = [False] * len(units)
    for ci, chain in enumerate(cap_anc):
        for anc in chain:
            others = [cj for cj, ch in enumerate(cap_anc) if cj != ci and anc in ch]
            if others:
                break
            inside = [ui for ui, a in enumerate(unit_anc) if anc in a and not taken[ui]]
            if inside:
                for ui in inside:
                    groups[ci].append(units[ui])
                    taken[ui] = True
                break
    rest = [u for ui, u in enumerate(units) if not taken[ui]]
    empty = [ci for ci, g in enumerate(groups) if not g]
    if rest and empty:
        if len(rest) == len(empty):
            for ci, u in zip(empty, rest):
                groups[ci].append(u)
        else:
            # Deal in order: each caption gets an equal run, the last takes the remainder.
            per = max(1, len(rest) // len(empty))
            for k, ci in enumerate(empty):
                chunk = rest[k * per : (k + 1) * per] if k < len(empty) - 1 else rest[k * per :]
                groups[ci].extend(chunk)
    elif rest:
        groups[-1].extend(rest)
    return groups


@dataclass
class FloatContext:
    paper_id: str
    base_url: Optional[str]
    figures: list = field(default_factory=list)
    tables: list = field(default_factory=list)
    by_html_id: dict = field(default_factory=dict)  # LaTeXML id -> [our ids]
    consumed: set = field(default_factory=set)  # elements whose graphics a figure adopted
    # (record with .caption / .caption_ref_spans, anchors): resolved once every id is known
    caption_anchors: list = field(default_factory=list)


def _graphic_images(els, ctx: FloatContext) -> list[Image]:
    return [image_from_element(g, ctx.base_url) for g in els]


def _subfigure(sub_el, fig_id: str, k: int, ctx: FloatContext) -> Subfigure:
    caps, nested = _direct(sub_el)
    graphics: list = []
    collect_graphics(sub_el, graphics, skip_subfigures=False)
    cap = read_caption(caps[0]) if caps else None
    sid = ids.subfigure_id(fig_id, k)
    html_id = sub_el.get("id")
    if html_id:
        ctx.by_html_id.setdefault(html_id, []).append(sid)
    # A subcaption that is only its tag ("(a)" of a \subfloat without text) says nothing:
    # the label stays, the caption is empty (the linking stage may split one from the parent).
    own_text = bool(cap) and has_caption_text(cap.text)
    sub = Subfigure(
        id=sid,
        html_id=html_id,
        label=cap.label if cap else None,
        caption=cap.text if own_text else "",
        images=_graphic_images(graphics, ctx),
        caption_source="html" if own_text else "none",
        caption_citation_spans=cap.citations if own_text else [],
    )
    if cap and cap.anchors:
        ctx.caption_anchors.append((sub, cap.anchors))
    return sub


def _is_layout_row(el) -> bool:
    """A nested figure without caption text that holds several graphics: a row container
    (``\\subfigure`` / ``\\subfloat`` around a row of images, minipage grids inside it),
    unless the figure decides it is one panel (see ``_panels``). A tag alone ("(a)", which
    LaTeXML prints for a ``\\subfloat`` without a caption) is no caption text."""
    caps, _ = _direct(el)
    if caps and has_caption_text(read_caption(caps[0]).text):
        return False
    graphics: list = []
    collect_graphics(el, graphics, skip_subfigures=False)
    return len(graphics) >= 2


def _captioned_row(el) -> Optional[list]:
    """[(graphic, Caption)] when a nested figure holds several graphics and as many distinct
    captions: LaTeXML 0.8.7 prints the ``\\subcaptionbox``es of a ``subfigure`` as
    captions of that subfigure (each repeated), the images beside them. Paired in order."""
    caps, subs = _direct(el)
    if subs or len(caps) < 2:
        return None
    seen: set = set()
    uniq: list[Caption] = []
    for c in caps:
        cap = read_caption(c)
        if (cap.label, cap.text) not in seen:
            seen.add((cap.label, cap.text))
            uniq.append(cap)
    graphics: list = []
    collect_graphics(el, graphics, skip_subfigures=True)
    if len(uniq) < 2 or len(uniq) != len(graphics):
        return None
    return list(zip(graphics, uniq))


def _unit_entries(el, kind: str, row) -> list:
    """A unit of a figure or row as (element, kind, row, caption) entries: the captioned
    graphics of a captioned row, the entries of a row container, else the unit itself."""
    pairs = _captioned_row(el) if kind == "subfigure" else None
    if pairs:
        return [(g, "captioned", el, cap) for g, cap in pairs]
    if kind == "subfigure" and _is_layout_row(el):
        return _row_entries(el)
    return [(el, kind, row, None)]


def _row_entries(row_el) -> list:
    """What a row container holds, in document order: graphics, nested figures, and the
    captioned graphics of a nested captioned row; a nested row container is opened too."""
    _, subs = _direct(row_el)
    out: list = []
    for el, kind in _units(row_el, subs):
        out.extend(_unit_entries(el, kind, row_el))
    return out


def _graphic_panel(graphic, label: Optional[PanelLabel], fig_id: str, k: int, ctx: FloatContext) -> Subfigure:
    """One graphic as a panel, with the label printed for it (its text is the subcaption;
    a label alone is only the label, as for a tag-only subcaption)."""
    img = image_from_element(graphic, ctx.base_url)
    own_text = bool(label and label.text)
    return Subfigure(
        id=ids.subfigure_id(fig_id, k),
        html_id=graphic.get("id"),
        label=label.label if label else None,
        caption=f"<TAG> {label.label} </TAG> {label.text}" if own_text else "",
        images=[img],
        caption_source="html" if own_text else "none",
    )


def _captioned_panel(graphic, cap: Caption, fig_id: str, k: int, ctx: FloatContext) -> Subfigure:
    """One graphic of a captioned row as a panel with its caption."""
    own_text = has_caption_text(cap.text)
    sub = Subfigure(
        id=ids.subfigure_id(fig_id, k),
        html_id=graphic.get("id"),
        label=cap.label,
        caption=cap.text if own_text else "",
        images=[image_from_element(graphic, ctx.base_url)],
        caption_source="html" if own_text else "none",
        caption_citation_spans=cap.citations if own_text else [],
    )
    if own_text and cap.anchors:
        ctx.caption_anchors.append((sub, cap.anchors))
    return sub


def _panels(fig_el, group: list, fig_id: str, ctx: FloatContext) -> tuple[list[Subfigure], list[Image]]:
    """The panels of a figure (and all its images) from its units in document order.

    A panel is an image with its own label, or a nested figure that is one panel (a
    captioned subfigure, or one with a single image). Caption-less nested figures holding
    several images are row containers, layout rather than panels, when what they hold
    carries its own labels (two labelled images or captioned panels at least): then every
    image in the rows is a panel ("(a) Input", ..., "(h) Ours" in three rows are eight
    panels) and a nested captioned figure in a row stays one. A nested figure holding
    several images and as many captions (``\\subcaptionbox``es) is such a row too. A lone
    row container (dd3d: one ``\\subfloat`` around three plots) is opened the same way,
    labels or not. Otherwise each nested figure stays one panel, as LaTeXML drew it.
    Several graphics without nested figures (a tabular or minipage grid) are one panel
    each, labelled where a label is printed for them."""
    entries: list = []  # (element, "graphic" | "subfigure" | "captioned", its row or None, Caption or None)
    for el, kind in group:
        entries.extend(_unit_entries(el, kind, None))
    graphics = [el for el, kind, _, _ in entries if kind == "graphic"]
    labels = dict(zip(graphics, printed_labels(fig_el, graphics)))
    rows = list(dict.fromkeys(row for _, _, row, _ in entries if row is not None))
    labelled_in_rows = sum(
        1
        for el, kind, row, _ in entries
        if row is not None
        and (kind == "captioned" or (kind == "graphic" and labels[el]) or (kind == "subfigure" and _direct(el)[0]))
    )
    lone_row = len(rows) == 1 and all(row is not None for _, _, row, _ in entries)
    subfigures: list[Subfigure] = []
    images: list[Image] = []
    if not any(kind == "subfigure" for _, kind in group):
        # Several loose graphics (a tabular or minipage grid): each one a panel.
        for k, g in enumerate(graphics, 1):
            sf = _graphic_panel(g, labels[g], fig_id, k, ctx)
            subfigures.append(sf)
            images.extend(sf.images)
        return subfigures, images
    if not rows or not (labelled_in_rows >= 2 or lone_row):
        # Explicit subfigures, each one panel; loose graphics beside them stay on the figure.
        k = 0
        for el, kind in group:
            if kind == "subfigure":
                k += 1
                sf = _subfigure(el, fig_id, k, ctx)
                subfigures.append(sf)
                images.extend(sf.images)
            else:
                images.append(image_from_element(el, ctx.base_url))
        return subfigures, images
    for row in rows:
        # The row is layout: an anchor to its element names the whole figure.
        if row.get("id"):
            ctx.by_html_id.setdefault(row.get("id"), []).append(fig_id)
    for el, kind, row, cap in entries:
        k = len(subfigures) + 1
        if kind == "subfigure":
            sf = _subfigure(el, fig_id, k, ctx)
        elif kind == "captioned":
            sf = _captioned_panel(el, cap, fig_id, k, ctx)
        elif row is not None or labels[el]:
            sf = _graphic_panel(el, labels[el], fig_id, k, ctx)
        else:
            images.append(image_from_element(el, ctx.base_url))  # an unlabelled graphic beside the rows
            continue
        subfigures.append(sf)
        images.extend(sf.images)
    return subfigures, images


def _adopt_preceding_graphics(fig_el, ctx: FloatContext) -> list:
    """CVPR teaser strips: the image sits in the paragraph right before a caption-only
    figure. Adopt it when that paragraph holds graphics and next to no text."""
    prev = fig_el.getprevious()
    while prev is not None and not isinstance(prev.tag, str):
        prev = prev.getprevious()
    if prev is None or float_kind(prev) is not None:
        return []
    graphics: list = []
    if is_graphic(prev):
        graphics = [prev]
    else:
        collect_graphics(prev, graphics, skip_subfigures=True)
    if not graphics or len(plain_text(prev)) > 40:
        return []
    ctx.consumed.add(prev)
    return graphics


def add_float(fig_el, ctx: FloatContext, section_id: Optional[str], before_first_section: bool) -> None:
    kind = float_kind(fig_el)
    if kind == "table":
        caps, _ = _direct(fig_el)
        cap = read_caption(caps[0]) if caps else None
        idx = len(ctx.tables) + 1
        tid = ids.table_id(ctx.paper_id, idx)
        if fig_el.get("id"):
            ctx.by_html_id.setdefault(fig_el.get("id"), []).append(tid)
        table = Table(
            id=tid,
            html_id=fig_el.get("id"),
            index=idx,
            number=cap.number if cap else None,
            caption=cap.text if cap else "",
            section_id=section_id,
            caption_citation_spans=cap.citations if cap else [],
        )
        ctx.tables.append(table)
        if cap and cap.anchors:
            ctx.caption_anchors.append((table, cap.anchors))
        return
    if kind != "figure":
        return
    caps, subs = _direct(fig_el)
    units = _units(fig_el, subs)
    if not units:
        adopted = _adopt_preceding_graphics(fig_el, ctx)
        units = [(g, "graphic") for g in adopted]
    captions = [read_caption(c) for c in caps]
    if len(captions) > 1:
        # LaTeXML 0.8.7's XSLT repeats a caption that has a panel after it: drop exact repeats.
        seen, uniq, uniq_caps = set(), [], []
        for cap, el in zip(captions, caps):
            if (cap.label, cap.text) in seen:
                continue
            seen.add((cap.label, cap.text))
            uniq.append(cap)
            uniq_caps.append(el)
        captions, caps = uniq, uniq_caps
    groups = _group_by_caption(fig_el, caps, units) if len(captions) > 1 else [units]
    if not captions:
        captions = [None]
    html_id = fig_el.get("id")
    cls = css_classes(fig_el)
    teaser = (
        "ltx_teaserfigure" in cls or bool(html_id and re.match(r"^(?:.*\.)?S0\.F\d+$", html_id)) or before_first_section
    )
    for cap, group in zip(captions, groups):
        idx = len(ctx.figures) + 1
        fid = ids.figure_id(ctx.paper_id, idx)
        if html_id:
            ctx.by_html_id.setdefault(html_id, []).append(fid)
        subfigures: list[Subfigure] = []
        images: list[Image] = []
        graphics = [u[0] for u in group if u[1] == "graphic"]
        if len(graphics) > 1 or any(u[1] == "subfigure" for u in group):
            subfigures, images = _panels(fig_el, group, fid, ctx)
        else:
            images = _graphic_images(graphics, ctx)
        figure = Figure(
            id=fid,
            html_id=html_id,
            index=idx,
            number=cap.number if cap else None,
            label=cap.label if cap else None,
            caption=cap.text if cap else "",
            images=images,
            subfigures=subfigures,
            section_id=section_id,
            is_teaser=teaser,
            caption_citation_spans=cap.citations if cap else [],
        )
        ctx.figures.append(figure)
        if cap and cap.anchors:
            ctx.caption_anchors.append((figure, cap.anchors))
