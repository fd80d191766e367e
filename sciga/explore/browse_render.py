"""HTML for `sciga browse`: pure functions from a build's rows (plain dicts, as DuckDB returns
them) to page text. No IO here; explore/browse.py reads the build and writes the files.

Everything that comes from a paper is escaped. SciGA's tokens (``<MATH>``, ``<NOTE>``,
``<TAG>``) are shown as they are stored, escaped and styled, with the text they enclose
marked, so a person sees exactly what a model would read. Mentions are highlighted at
their character spans and link to the figure (or subfigure) element they name.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from html import escape
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from sciga.schemas.manifest import BuildManifest

TOKEN_RE = re.compile(r"<(/?)(MATH|NOTE|TAG)>")

CSS = """
:root { --ink: #1d2330; --muted: #5b6475; --line: #d9dde5; --accent: #1f5fbf; --bg: #ffffff; --panel: #f6f7fa; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.55 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: var(--ink); background: var(--bg); }
main { max-width: 1100px; margin: 0 auto; padding: 16px 24px 64px; }
header.top { border-bottom: 1px solid var(--line); padding-bottom: 8px; margin-bottom: 16px; }
a { color: var(--accent); }
h1 { font-size: 1.55em; line-height: 1.25; margin: 0.3em 0; }
h2 { font-size: 1.25em; margin-top: 1.6em; border-bottom: 1px solid var(--line); }
h3 { font-size: 1.08em; margin-top: 1.3em; }
h4, h5 { font-size: 1em; margin-top: 1.1em; }
.muted, .meta { color: var(--muted); font-size: 0.9em; }
dl.meta { display: grid; grid-template-columns: 10em 1fr; gap: 0 12px; margin: 8px 0; }
.meta dt { font-weight: 600; }
.meta dd { margin: 0; overflow-wrap: anywhere; }
code, .id { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 0.88em; }
table.list { border-collapse: collapse; width: 100%; font-size: 0.9em; }
table.list th, table.list td { border-bottom: 1px solid var(--line); padding: 4px 6px; text-align: left; vertical-align: top; }
table.list td.n { text-align: right; font-variant-numeric: tabular-nums; }
img.thumb { max-width: 160px; max-height: 90px; border: 1px solid var(--line); background: #fff; }
.badge { display: inline-block; border: 1px solid var(--line); border-radius: 3px; padding: 0 5px; margin: 1px 2px;
         font-size: 0.8em; background: var(--panel); white-space: nowrap; }
.badge.teaser { border-color: #d28b00; background: #fff4dc; }
.badge.ga { border-color: #7a3fbf; background: #f3eaff; }
.badge.medical { border-color: #b3261e; background: #fdecea; }
.badge.error { border-color: #b3261e; color: #b3261e; background: #fff; }
.tok { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 0.78em; border-radius: 3px;
       padding: 0 2px; }
.tok-math { color: #0b5d1e; background: #e3f4e7; }
.tok-note { color: #6b4e00; background: #fff1c2; }
.tok-tag { color: #6a1b9a; background: #f1e4f7; }
.in-math { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 0.9em; color: #0b5d1e; }
.in-note { color: #6b4e00; font-style: italic; }
.in-tag { font-weight: 600; color: #6a1b9a; }
a.mention { background: #fff59d; color: inherit; text-decoration: none; border-bottom: 2px solid #e0b400; padding: 0 1px; }
a.mention:hover, a.mention:focus { background: #ffe14d; }
sup.targets a { font-size: 0.85em; margin-left: 2px; }
span.mention.unresolved { background: #fde0dc; border-bottom: 2px dashed #b3261e; }
p.para { margin: 0.6em 0; }
section.paper-section { margin-left: calc((var(--level, 1) - 1) * 12px); }
figure.fig { border: 1px solid var(--line); border-radius: 6px; background: var(--panel); padding: 10px 12px; margin: 14px 0; }
figure.fig:target, figure.sub:target { outline: 3px solid #e0b400; }
figure.fig > img, figure.sub > img { display: block; max-width: 100%; height: auto; margin: 6px auto; background: #fff;
                                     border: 1px solid var(--line); }
figure.fig .subs { display: flex; flex-wrap: wrap; gap: 10px; }
figure.sub { flex: 1 1 220px; margin: 0; background: #fff; border: 1px solid var(--line); border-radius: 4px; padding: 6px; }
figure.sub > img { max-height: 320px; width: auto; }
figcaption { font-size: 0.93em; }
.fighead { font-size: 0.85em; color: var(--muted); }
.noimage { border: 1px dashed #b3261e; color: #b3261e; padding: 10px; margin: 6px 0; font-size: 0.88em; background: #fff; }
.mentioned-in { font-size: 0.85em; color: var(--muted); }
.ga-box { border: 2px solid #7a3fbf; border-radius: 6px; padding: 8px 12px; background: #faf6ff; }
.counts span { margin-right: 14px; }
"""


def page(title: str, body: str, css_href: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{escape(title)}</title><link rel="stylesheet" href="{escape(css_href)}"></head>\n'
        f"<body><main>\n{body}\n</main></body></html>\n"
    )


def safe_name(key: str) -> str:
    """A file name for an id: letters, digits, ``.``, ``-`` and ``_`` kept; an id that needed
    changing gets a short hash so two ids never share a file (``q-bio/0601999``)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", key).strip(".") or "_"
    if name != key:
        name += "-" + hashlib.sha1(key.encode("utf-8")).hexdigest()[:8]
    return name


def anchor(figure_id: str) -> str:
    """The element id of a figure or subfigure on its paper's page."""
    return "fig-" + re.sub(r"[^A-Za-z0-9._-]", "_", figure_id)


# -- text with tokens and mentions ------------------------------------------------------


@dataclass
class Ref:
    """One mention row placed in a text: the figure it names and the page element it links to."""

    figure_id: str
    surface: str
    resolution: Optional[str]
    target: Optional[str]  # element id on the page, None when the figure has no element


@dataclass
class Mark:
    """A highlighted span: the first ref links from the text, the others from a superscript."""

    start: int
    end: int
    refs: list = field(default_factory=list)
    html_id: str = ""


def group_marks(text: str, spans: Iterable[tuple[int, int, Ref]], id_prefix: str) -> tuple[list[Mark], list[Ref]]:
    """Spans -> non-overlapping marks (same span = one mark with several refs; a span that
    overlaps an earlier mark joins it) and the refs whose span lies outside the text."""
    marks: list[Mark] = []
    outside: list[Ref] = []
    for start, end, ref in sorted(spans, key=lambda s: (s[0], -s[1], s[2].figure_id)):
        if start is None or end is None or not (0 <= start < end <= len(text)):
            outside.append(ref)
        elif marks and start < marks[-1].end:
            marks[-1].refs.append(ref)
        else:
            marks.append(Mark(start, end, [ref]))
    for i, m in enumerate(marks):
        m.html_id = f"{id_prefix}-m{i + 1}"
    return marks, outside


def _title(ref: Ref) -> str:
    return f"{ref.figure_id} ({ref.resolution or 'unknown'}): {ref.surface}"


def _open_ref(ref: Ref, cls: str, html_id: str = "") -> str:
    idattr = f' id="{escape(html_id)}"' if html_id else ""
    if ref.target is None:
        return (
            f'<span class="mention unresolved {cls}"{idattr} data-figure="{escape(ref.figure_id)}" '
            f'title="{escape(_title(ref))} (no such figure on this page)">'
        )
    return (
        f'<a class="ref {cls}"{idattr} href="#{escape(ref.target)}" data-figure="{escape(ref.figure_id)}" '
        f'title="{escape(_title(ref))}">'
    )


def _close_ref(ref: Ref) -> str:
    return "</a>" if ref.target is not None else "</span>"


def _extra_links(refs: list) -> str:
    """The 2nd.. refs of a mark ("Figs. 4a-c" names three panels): one small link each."""
    if not refs:
        return ""
    links = "".join(_open_ref(r, "extra") + escape(r.figure_id.rsplit("_", 1)[-1]) + _close_ref(r) for r in refs)
    return f'<sup class="targets">{links}</sup>'


def _pieces(text: str):
    """(start, end, token match or None) tiling ``text``."""
    pos = 0
    for m in TOKEN_RE.finditer(text):
        if m.start() > pos:
            yield pos, m.start(), None
        yield m.start(), m.end(), m
        pos = m.end()
    if pos < len(text):
        yield pos, len(text), None


def render_text(text: Optional[str], marks: Iterable[Mark] = (), outside: Iterable[Ref] = ()) -> str:
    """Escaped text with its tokens styled and its marks linked. Token markers are spans of
    their own; the text between an opening and a closing marker carries ``in-math`` /
    ``in-note`` / ``in-tag``. Marks are the only elements that cross pieces, and pieces are
    cut at every mark boundary, so the HTML always nests."""
    text = text or ""
    marks = list(marks)
    starts = {m.start: m for m in marks}
    ends = {m.end: m for m in marks}
    cuts = sorted(set(starts) | set(ends))
    out: list[str] = []
    stack: list[str] = []
    for s, e, tok in _pieces(text):
        if tok is not None:
            cls = f"tok tok-{tok.group(2).lower()}"
        else:
            cls = " ".join(f"in-{t.lower()}" for t in stack)
        bounds = [s] + [c for c in cuts if s < c < e] + [e]
        for a, b in zip(bounds, bounds[1:]):
            if a in starts:
                out.append(_open_ref(starts[a].refs[0], "mention", starts[a].html_id))
            piece = escape(text[a:b])
            out.append(f'<span class="{cls}">{piece}</span>' if cls else piece)
            if b in ends:
                out.append(_close_ref(ends[b].refs[0]) + _extra_links(ends[b].refs[1:]))
        if tok is not None:
            tag = tok.group(2)
            if tok.group(1) != "/":
                stack.append(tag)
            elif tag in stack:
                del stack[len(stack) - 1 - stack[::-1].index(tag)]
    out.append(_extra_links(list(outside)))
    return "".join(out)


# -- paper page ----------------------------------------------------------------------------


@dataclass
class ImageFile:
    """Where a figure's image went: ``href`` relative to the page, or why there is none."""

    href: Optional[str] = None
    note: Optional[str] = None  # shown instead of (or beside) the image


def _badge(text: str, cls: str = "") -> str:
    return f'<span class="badge {cls}">{escape(text)}</span>'


def medical_badges(medical: Optional[dict]) -> list[str]:
    if not medical:
        return []
    out = []
    hits = medical.get("keyword_hits") or []
    if medical.get("is_medical"):
        out.append(_badge("medical", "medical"))
    elif hits and medical.get("is_medical") is None:
        out.append(_badge("medical? classifier not run", "medical"))
    if hits:
        out.append(_badge("keywords: " + ", ".join(hits), "medical"))
    if medical.get("classifier_run"):
        labels = medical.get("topk_labels") or []
        scores = medical.get("topk_scores") or []
        out.append(_badge("top-k: " + ", ".join(f"{lab} {sc:.2f}" for lab, sc in zip(labels, scores))))
    return out


def figure_badges(row: dict) -> str:
    b = [_badge(row.get("kind") or "figure")]
    if row.get("is_teaser"):
        b.append(_badge("teaser", "teaser"))
    if row.get("ga_role"):
        b.append(_badge("GA role: " + row["ga_role"], "ga"))
    b += medical_badges(row.get("medical"))
    if row.get("width") and row.get("height"):
        b.append(_badge(f"{row['width']}x{row['height']} px"))
    for key in ("image_kind", "image_source"):
        if row.get(key):
            b.append(_badge(f"{key.split('_')[1]}: {row[key]}"))
    if row.get("subcaption_source"):
        b.append(_badge("subcaption: " + row["subcaption_source"]))
    status = row.get("image_status")
    if status and status not in ("embedded", "in_subfigures"):
        b.append(_badge("image: " + status, "error" if status != "no_images_flag" else ""))
    if row.get("image_error"):
        b.append(_badge(row["image_error"], "error"))
    return "".join(b)


def _image_html(row: dict, image: Optional[ImageFile]) -> str:
    if image is not None and image.href:
        size = ""
        if row.get("width") and row.get("height"):
            size = f' width="{int(row["width"])}" height="{int(row["height"])}"'
        img = f'<img src="{escape(image.href)}" alt="{escape(row["id"])}"{size}>'
        return img + (f'<div class="noimage">{escape(image.note)}</div>' if image.note else "")
    note = (image.note if image is not None and image.note else None) or "no image embedded"
    path = (row.get("image") or {}).get("path") or ", ".join(row.get("image_paths") or [])
    return f'<div class="noimage">{escape(note)}{(" (" + escape(path) + ")") if path else ""}</div>'


def _backlinks(links: list) -> str:
    if not links:
        return '<div class="mentioned-in">not mentioned in the text</div>'
    items = " ".join(f'<a href="#{escape(mid)}">{escape(label)}</a>' for mid, label in links)
    return f'<div class="mentioned-in">mentioned in: {items}</div>'


class PaperView:
    """One paper's page: its ``papers`` row, its ``figures`` rows, its ``mentions`` rows."""

    def __init__(
        self,
        paper: dict,
        figures: list[dict],
        mentions: list[dict],
        dead_letters: list[dict],
        images: dict[str, ImageFile],
    ):
        self.paper = paper
        self.dead_letters = dead_letters
        self.images = images
        self.rows = {f["id"]: f for f in figures}
        self.top = sorted(
            (f for f in figures if f.get("kind") == "figure"), key=lambda f: (f.get("index") or 0, f["id"])
        )
        self.subs: dict[str, list] = {}
        for f in figures:
            if f.get("kind") == "subfigure":
                self.subs.setdefault(f.get("parent_id") or "", []).append(f)
        for v in self.subs.values():
            v.sort(key=lambda f: (f.get("index") or 0, f["id"]))
        self.ga_rows = [f for f in figures if f.get("kind") not in ("figure", "subfigure")]
        self.sections = paper.get("sections") or []
        self.section_index = {s["id"]: i for i, s in enumerate(self.sections)}
        self.mentions = mentions
        self._place_mentions()

    # every element a mention may link to
    def target(self, figure_id: str) -> Optional[str]:
        return anchor(figure_id) if figure_id in self.rows else None

    def _place_mentions(self) -> None:
        by_text: dict[tuple, list] = {}
        for m in self.mentions:
            ctx = m.get("context") or "paragraph"
            if ctx == "paragraph":
                key = ("p", m.get("section_id"), m.get("paragraph_index"))
            elif ctx == "title":
                key = ("t", m.get("section_id"), None)
            else:
                key = ("c", m.get("context_id"), None)
            ref = Ref(m["figure_id"], m.get("surface") or "", m.get("resolution"), self.target(m["figure_id"]))
            by_text.setdefault(key, []).append((m.get("char_start"), m.get("char_end"), ref))
        self.marks: dict[tuple, tuple] = {}
        self.unplaced: list[tuple] = []  # (where, refs) for texts this page does not show
        self.backlinks: dict[str, list] = {}
        for key, spans in sorted(by_text.items(), key=lambda kv: self._document_order(kv[0])):
            text = self._text_of(key)
            if text is None:
                self.unplaced.append((key, [r for _, _, r in spans]))
                continue
            prefix = "m-" + "-".join(re.sub(r"[^A-Za-z0-9]", "_", str(x)) for x in key if x is not None)
            marks, outside = group_marks(text, spans, prefix)
            self.marks[key] = (marks, outside)
            label = self._where(key)
            for mk in marks:
                for r in mk.refs:
                    self.backlinks.setdefault(r.figure_id, []).append((mk.html_id, label))

    def _document_order(self, key: tuple) -> tuple:
        kind, a, b = key
        if kind == "c":
            row = self.rows.get(a) or {}
            return (1, row.get("index") or 0, a, 0)
        return (0, self.section_index.get(a, len(self.sections)), "" if kind == "t" else "p", -1 if b is None else b)

    def _text_of(self, key: tuple) -> Optional[str]:
        kind, a, b = key
        if kind in ("p", "t"):
            i = self.section_index.get(a)
            if i is None:
                return None
            s = self.sections[i]
            if kind == "t":
                return s.get("title") or ""
            paras = s.get("paragraphs") or []
            return paras[b].get("text") or "" if b is not None and 0 <= b < len(paras) else None
        row = self.rows.get(a)
        if row is None:
            return None
        return (row.get("subcaption") if row.get("kind") == "subfigure" else row.get("caption")) or ""

    def _where(self, key: tuple) -> str:
        kind, a, b = key
        if kind == "c":
            return f"caption of {a.rsplit('_', 1)[-1]}"
        s = self.sections[self.section_index[a]]
        name = s.get("number") or a.rsplit("_", 1)[-1]
        return f"§{name} title" if kind == "t" else f"§{name} ¶{b + 1}"

    def _text(self, key: tuple, text: Optional[str]) -> str:
        marks, outside = self.marks.get(key, ([], []))
        return render_text(text, marks, outside)

    # -- blocks -------------------------------------------------------------------------
    def figure_html(self, row: dict) -> str:
        fid = row["id"]
        subs = self.subs.get(fid, [])
        parts = [
            f'<figure class="fig" id="{escape(anchor(fid))}">',
            f'<div class="fighead"><span class="id">{escape(fid)}</span> {escape(row.get("label") or "")} '
            f"{figure_badges(row)}</div>",
        ]
        if subs:
            if (row.get("image") or {}).get("bytes") and fid in self.images:
                parts.append(_image_html(row, self.images.get(fid)))
            parts.append('<div class="subs">')
            for sub in subs:
                parts.append(
                    f'<figure class="sub" id="{escape(anchor(sub["id"]))}">'
                    f'<div class="fighead"><span class="id">{escape(sub["id"])}</span> {figure_badges(sub)}</div>'
                    f"{_image_html(sub, self.images.get(sub['id']))}"
                    f"<figcaption>{self._text(('c', sub['id'], None), sub.get('subcaption')) or '<span class=muted>no subcaption</span>'}"
                    f"</figcaption>{_backlinks(self.backlinks.get(sub['id'], []))}</figure>"
                )
            parts.append("</div>")
        else:
            parts.append(_image_html(row, self.images.get(fid)))
        parts.append(f"<figcaption>{self._text(('c', fid, None), row.get('caption'))}</figcaption>")
        parts.append(_backlinks(self.backlinks.get(fid, [])))
        parts.append("</figure>")
        return "".join(parts)

    def ga_html(self) -> str:
        ga = self.paper.get("graphical_abstract")
        teaser = self.paper.get("teaser") or []
        lines = []
        if ga:
            kind = ga.get("type") or ("de facto" if ga.get("de_facto") else "unknown")
            lines.append(
                f'<div>{_badge("GA type: " + kind, "ga")} <span class="id">{escape(ga.get("id") or "")}</span>'
                f" source: {escape(ga.get('source') or '?')}"
                + (f", score {ga['score']:.3f}" if ga.get("score") is not None else "")
                + "</div>"
            )
            comps = ga.get("components") or []
            links = ", ".join(self._fig_link(c) for c in comps) or "none"
            lines.append(f"<div>components: {links}</div>")
            thumbs = "".join(
                f'<a href="#{escape(anchor(c))}"><img class="thumb ga-thumb" src="{escape(href)}" '
                f'alt="GA component {escape(c)}"></a> '
                for c in comps
                for href in self._picture(c)[:1]
            )
            if thumbs:
                lines.append(f"<div>{thumbs}</div>")
            if ga.get("paths"):
                lines.append(f'<div class="muted">paths: {escape(", ".join(ga["paths"]))}</div>')
            if ga.get("caption"):
                lines.append(f"<div>caption: {render_text(ga['caption'])}</div>")
            if ga.get("error"):
                lines.append(f"<div>{_badge(ga['error'], 'error')}</div>")
        else:
            lines.append('<div class="muted">no graphical abstract</div>')
        lines.append(f"<div>teaser: {', '.join(self._fig_link(t) for t in teaser) or 'none'}</div>")
        for row in self.ga_rows:
            lines.append(
                f'<figure class="fig" id="{escape(anchor(row["id"]))}"><div class="fighead">'
                f'<span class="id">{escape(row["id"])}</span> {figure_badges(row)}</div>'
                f"{_image_html(row, self.images.get(row['id']))}"
                f"<figcaption>{render_text(row.get('caption'))}</figcaption></figure>"
            )
        return '<div class="ga-box">' + "".join(lines) + "</div>"

    def _picture(self, figure_id: str) -> list[str]:
        """Image hrefs showing a figure: its own, else its panels'."""
        own = self.images.get(figure_id)
        if own is not None and own.href:
            return [own.href]
        return [
            href for s in self.subs.get(figure_id, []) if s["id"] in self.images and (href := self.images[s["id"]].href)
        ]

    def _fig_link(self, figure_id: str) -> str:
        t = self.target(figure_id)
        label = escape(figure_id.rsplit("_", 1)[-1])
        return f'<a href="#{escape(t)}">{label}</a>' if t else f'<span class="mention unresolved">{label}</span>'

    def section_html(self, i: int, s: dict) -> str:
        level = max(1, min(int(s.get("level") or 1), 4))
        h = f"h{level + 1}"
        num = (
            f'<span class="muted">{escape(s["number"])}</span> '
            if s.get("number") and "<TAG>" not in (s.get("title") or "")
            else ""
        )
        out = [
            f'<section class="paper-section" id="sec-{escape(re.sub(r"[^A-Za-z0-9._-]", "_", s["id"]))}" style="--level:{level}">',
            f"<{h}>{num}{self._text(('t', s['id'], None), s.get('title')) or escape(s['id'])} "
            f'<span class="id muted">{escape(s["id"])}</span></{h}>',
        ]
        paras = s.get("paragraphs") or []
        if paras:
            for k, p in enumerate(paras):
                out.append(
                    f'<p class="para" id="{escape(self._para_id(s["id"], k))}">{self._text(("p", s["id"], k), p.get("text"))}</p>'
                )
        elif s.get("body"):
            out += [f'<p class="para">{render_text(t)}</p>' for t in s["body"].split("\n\n")]
        for row in self.top:
            if row.get("section_id") == s["id"]:
                out.append(self.figure_html(row))
        out.append("</section>")
        return "".join(out)

    @staticmethod
    def _para_id(section_id: str, k: int) -> str:
        return "p-" + re.sub(r"[^A-Za-z0-9._-]", "_", section_id) + f"-{k}"

    def counts(self) -> dict:
        return {
            "sections": len(self.sections),
            "figures": len(self.top),
            "subfigures": sum(len(v) for v in self.subs.values()),
            "mentions": len(self.mentions),
        }

    def html(self, css_href: str, index_href: str) -> str:
        p = self.paper
        authors = ", ".join(a.get("name") or "" for a in (p.get("authors") or []))
        subj = p.get("subjects") or {}
        conf = p.get("conference") or {}
        prov = p.get("provenance") or {}
        meta = [
            ("authors", authors),
            ("primary category", p.get("primary_category")),
            ("subjects", "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(subj.items()) if v)),
            ("published", p.get("published")),
            ("updated", p.get("updated")),
            ("version", p.get("version")),
            ("venue", " ".join(str(x) for x in (conf.get("venue"), conf.get("year"), conf.get("track")) if x)),
            ("comment", p.get("comment")),
            ("journal ref", p.get("journal_ref")),
            ("DOIs", ", ".join(p.get("dois") or [])),
            ("licence", p.get("license")),
            ("source", " ".join(str(x) for x in (prov.get("source"), prov.get("url") or prov.get("input_uri")) if x)),
            ("generator", " ".join(str(x) for x in (prov.get("generator"), prov.get("generator_version")) if x)),
            ("builder", f"{prov.get('builder_version')} (schema {prov.get('schema_version')})"),
        ]
        c = self.counts()
        parts = [
            f'<header class="top"><a href="{escape(index_href)}">&larr; all papers</a> &middot; '
            f'<span class="id">{escape(p["id"])}</span></header>',
            f"<h1>{render_text(p.get('title')) or escape(p['id'])}</h1>",
            '<dl class="meta">'
            + "".join(f"<dt>{escape(k)}</dt><dd>{escape(str(v))}</dd>" for k, v in meta if v)
            + "</dl>",
            '<p class="counts">' + "".join(f"<span><b>{n}</b> {k}</span>" for k, n in c.items()) + "</p>",
        ]
        if self.dead_letters:
            parts.append("<h2>Dead letters of this paper</h2>" + dead_letter_table(self.dead_letters))
        parts.append(f'<h2>Abstract</h2><p class="para">{render_text(p.get("abstract"))}</p>')
        parts.append("<h2>Graphical abstract and teaser</h2>" + self.ga_html())
        placed = {s["id"] for s in self.sections}
        front = [r for r in self.top if r.get("section_id") not in placed]
        if front:
            parts.append("<h2>Figures outside any section</h2>" + "".join(self.figure_html(r) for r in front))
        parts.append("<h2>Full text</h2>")
        parts += [self.section_html(i, s) for i, s in enumerate(self.sections)]
        if self.unplaced:
            items = "".join(
                f"<li>{escape(self._unplaced_where(key))}: {_extra_links(refs)}</li>" for key, refs in self.unplaced
            )
            parts.append(f"<h2>Mentions in texts not shown here</h2><ul>{items}</ul>")
        return page(f"{p['id']}: {TOKEN_RE.sub('', p.get('title') or '')}", "\n".join(parts), css_href)

    @staticmethod
    def _unplaced_where(key: tuple) -> str:
        kind, a, b = key
        return {"p": f"paragraph {b} of {a}", "t": f"title of {a}", "c": f"caption of {a}"}[kind]


def dead_letter_table(rows: Iterable[dict]) -> str:
    return dead_letter_head() + "".join(dead_letter_row(r) for r in rows) + "</table>"


def dead_letter_head() -> str:
    return (
        '<table class="list dead"><tr><th>paper</th><th>stage</th><th>error type</th><th>message</th>'
        "<th>input</th></tr>"
    )


def dead_letter_row(r: dict) -> str:
    return (
        f'<tr><td class="id">{escape(r.get("paper_id") or "")}</td><td>{escape(r.get("stage") or "")}</td>'
        f"<td>{escape(r.get('error_type') or '')}</td><td>{escape(r.get('message') or '')}</td>"
        f'<td class="id">{escape(r.get("input_uri") or "")}</td></tr>'
    )


# -- index -----------------------------------------------------------------------------------


def index_head(manifest: BuildManifest, total_papers: int, pages: int, css_href: str) -> str:
    counts = manifest.counts
    facts = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if not isinstance(v, dict))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>sciga build</title><link rel="stylesheet" href="{escape(css_href)}"></head>\n<body><main>\n'
        f'<header class="top"><h1>sciga build</h1><div class="muted">sciga-builder '
        f"{escape(str(manifest.builder_version))}, schema {escape(str(manifest.schema_version))}; "
        f"{escape(facts)}</div><div>pages for <b>{pages}</b> of {total_papers} papers</div></header>\n"
        '<h2>Papers</h2><table class="list papers"><tr><th>paper</th><th>teaser</th><th>sections</th><th>figures</th>'
        "<th>subfigures</th><th>mentions</th><th>GA</th><th>medical</th><th>dead letters</th></tr>\n"
    )


def index_row(view: PaperView, page_href: str, teaser: Optional[str]) -> str:
    p = view.paper
    c = view.counts()
    ga = p.get("graphical_abstract")
    ga_text = (
        "none"
        if not ga
        else (ga.get("type") or (f"de facto ({ga.get('source')})" if ga.get("de_facto") else "unknown"))
    )
    rows = list(view.rows.values())
    meds = [r.get("medical") or {} for r in rows]
    hits = sum(1 for m in meds if m.get("keyword_hits"))
    medical = sum(1 for m in meds if m.get("is_medical"))
    unchecked = sum(1 for m in meds if m.get("keyword_hits") and m.get("is_medical") is None)
    parts = [f"{hits} with keywords"] if hits else []
    parts += [f"{medical} medical"] if medical else []
    parts += [f"{unchecked} not classified"] if unchecked else []
    med = ", ".join(parts) or "-"
    dls = ", ".join(f"{d.get('stage')}: {d.get('error_type')}" for d in view.dead_letters) or "-"
    thumb = f'<img class="thumb" src="{escape(teaser)}" alt="teaser of {escape(p["id"])}">' if teaser else "-"
    title = render_text(p.get("title"))
    return (
        f'<tr><td><a href="{escape(page_href)}"><span class="id">{escape(p["id"])}</span></a><br>{title}</td>'
        f"<td>{thumb}</td>"
        + "".join(f'<td class="n">{c[k]}</td>' for k in ("sections", "figures", "subfigures", "mentions"))
        + f"<td>{escape(ga_text)}</td><td>{escape(med)}</td><td>{escape(dls)}</td></tr>\n"
    )


def index_dead_letters_head(total: int) -> str:
    return f"</table>\n<h2>Dead letters ({total})</h2>\n" + (
        '<p class="muted">none</p>' if not total else dead_letter_head()
    )


def index_tail(total_dead: int, shown_dead: int) -> str:
    more = ""
    if total_dead > shown_dead:
        more = (
            f'<p class="muted">{total_dead - shown_dead} more; all of them: '
            '<code>sciga sql OUT "SELECT * FROM dead_letter"</code></p>'
        )
    return ("</table>" if total_dead else "") + more + "\n</main></body></html>\n"
