"""One paper's record, as a person reads it: `sciga show ID [--build OUT] [--json]`.

``paper_record(con, paper_id)`` gathers everything a build holds about one paper id: its
``papers`` row, its ``figures`` rows (image bytes left out: their size and status stand in),
its ``mentions`` and its ``dead_letter`` rows. ``render_text`` lays that out for a terminal:
metadata, the section outline, each figure with its panels, image status and caption, the
mentions in document order, and the dead letters. A paper id the build does not hold is a
``LookupError`` naming the closest ids it does hold.
"""

from __future__ import annotations

import difflib
import textwrap
from dataclasses import dataclass, field
from typing import Optional

import duckdb

WIDTH = 100


@dataclass
class PaperRecord:
    paper_id: str
    paper: Optional[dict]  # the papers row; None when only dead letters name the id
    figures: list = field(default_factory=list)  # figures rows, image bytes replaced by their size
    mentions: list = field(default_factory=list)
    dead_letters: list = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "paper_id": self.paper_id,
            "paper": self.paper,
            "figures": self.figures,
            "mentions": self.mentions,
            "dead_letter": self.dead_letters,
        }


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: list) -> list[dict]:
    cur = con.execute(sql, params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def paper_record(con: duckdb.DuckDBPyConnection, paper_id: str) -> PaperRecord:
    """Everything the build on ``con`` (explore.views.connect) holds about ``paper_id``."""
    papers = _rows(con, "SELECT * FROM papers WHERE id = ?", [paper_id])
    dead = _rows(con, "SELECT * FROM dead_letter WHERE paper_id = ? ORDER BY stage, input_uri", [paper_id])
    if not papers and not dead:
        ids = [
            r[0]
            for r in con.execute(
                "SELECT id FROM papers UNION SELECT paper_id FROM dead_letter WHERE paper_id IS NOT NULL"
            ).fetchall()
        ]
        close = difflib.get_close_matches(paper_id, ids, n=3, cutoff=0.5)
        hint = (
            f"did you mean {' or '.join(close)}?"
            if close
            else f"it holds {len(ids)} paper ids, e.g. {', '.join(sorted(ids)[:3])}"
            if ids
            else "it holds no paper"
        )
        raise LookupError(f"no paper {paper_id} in this build ({hint})")
    figures = _rows(
        con,
        """SELECT * EXCLUDE (image), image.path AS image_path, octet_length(image.bytes) AS image_bytes
                            FROM figures WHERE paper_id = ? ORDER BY index, kind <> 'figure', id""",
        [paper_id],
    )
    mentions = _rows(con, "SELECT * FROM mentions WHERE paper_id = ?", [paper_id])
    # document order: sections as the paper lists them, then paragraph and offset
    order = {s.get("id"): i for i, s in enumerate((papers[0].get("sections") or []) if papers else [])}
    mentions.sort(
        key=lambda m: (
            order.get(m.get("section_id"), len(order)),
            m.get("context") != "title",
            -1 if m.get("paragraph_index") is None else m["paragraph_index"],
            m.get("char_start") or 0,
        )
    )
    return PaperRecord(paper_id, papers[0] if papers else None, figures, mentions, dead)


def _wrap(text: Optional[str], indent: str, limit: Optional[int] = None) -> str:
    text = " ".join((text or "").split())
    if limit and len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return textwrap.fill(text, WIDTH, initial_indent=indent, subsequent_indent=indent) if text else indent + "(none)"


def _figure_line(row: dict) -> str:
    local = row["id"].split("_", 1)[-1] if row.get("id") else "?"
    status = row.get("image_status") or "?"
    if row.get("image_bytes"):
        size = f"{row['width']}x{row['height']} px, " if row.get("width") else ""
        source = row.get("image_path") or ""
        if status == "rasterized_svg":  # a PNG drawn from an SVG: say so, and where the SVG is
            source = f"rasterized_svg from {row.get('image_uri') or source}"
        image = f"image {size}{row['image_bytes']:,} bytes ({source})"
    else:
        where = row.get("image_uri") or row.get("image_path") or ""
        image = f"no image: {status}" + (f" ({where})" if where and status != "in_subfigures" else "")
    roles = [r for r in ("teaser" if row.get("is_teaser") else None, row.get("ga_role")) if r]
    label = row.get("label") or row.get("number") or ""
    return f"  {local:<8} {label:<12} {image}" + (f"  [{', '.join(roles)}]" if roles else "")


def render_text(rec: PaperRecord) -> str:
    out: list[str] = []
    p = rec.paper
    if p is None:
        out.append(f"{rec.paper_id}: not in the papers config; it failed (dead letters below)")
    else:
        out.append(f"{p['id']}  {' '.join((p.get('title') or '(no title)').split())}")
        authors = ", ".join(a["name"] for a in (p.get("authors") or []) if a.get("name"))
        if authors:
            out.append(_wrap(authors, "  authors: ", 400))
        facts = [f"{k} {p[k]}" for k in ("version", "published", "primary_category", "license") if p.get(k)]
        if facts:
            out.append("  " + ", ".join(facts))
        if p.get("withheld"):
            out.append(
                f"  withheld: its licence ({p['withheld']}) is outside the build's licence policy (--licences), "
                "so only its metadata is in the build: no text, figures, images or mentions"
                + (
                    "; give a licence in its sidecar's license field, or --assume-licence URL for pages you own"
                    if p["withheld"] == "unknown"
                    else ""
                )
            )
        prov = p.get("provenance") or {}
        out.append(
            f"  from {prov.get('input_uri') or '?'} ({prov.get('source') or '?'}, "
            f"{prov.get('generator') or '?'} {prov.get('generator_version') or ''})".rstrip()
        )
        out.append("  abstract:")
        out.append(_wrap(p.get("abstract"), "    ", 600))
        sections = p.get("sections") or []
        out.append(f"  sections ({len(sections)}):")
        for s in sections[:40]:
            depth = "  " * max(0, (s.get("level") or 1) - 1)
            local = (s.get("id") or "?").split("_", 1)[-1]
            out.append(f"    {depth}{local:<8} {' '.join((s.get('title') or '').split())[:80]}")
        if len(sections) > 40:
            out.append(f"    ... and {len(sections) - 40} more")
        ga = p.get("graphical_abstract")
        if ga:
            kind = "de facto" if ga.get("de_facto") else (ga.get("type") or "untyped")
            out.append(f"  graphical abstract: {kind}, components {', '.join(ga.get('components') or []) or '-'}")
        if p.get("teaser"):
            out.append(f"  teaser: {', '.join(p['teaser'])}")
    out.append(
        f"  figures ({sum(1 for f in rec.figures if f.get('kind') == 'figure')} figures, "
        f"{sum(1 for f in rec.figures if f.get('kind') == 'subfigure')} panels):"
    )
    for f in rec.figures:
        line = _figure_line(f)
        out.append(("  " + line) if f.get("kind") == "subfigure" else line)
        text = f.get("subcaption") if f.get("kind") == "subfigure" else f.get("caption")
        if text:
            out.append(_wrap(text, "             " + ("  " if f.get("kind") == "subfigure" else ""), 300))
    out.append(f"  mentions ({len(rec.mentions)}):")
    for m in rec.mentions:
        where = (m.get("section_id") or "?").split("_", 1)[-1]
        where += f" p{m['paragraph_index']}" if m.get("paragraph_index") is not None else f" {m.get('context')}"
        target = (m.get("figure_id") or "?").split("_", 1)[-1]
        out.append(f"    {where:<12} {m.get('surface')!r} -> {target}")
        if m.get("sentence"):
            out.append(_wrap(m["sentence"], "                 ", 240))
    if rec.dead_letters:
        out.append(f"  dead letters ({len(rec.dead_letters)}):")
        for d in rec.dead_letters:
            out.append(
                _wrap(
                    f"[{d.get('stage')}/{d.get('error_type')}, {d.get('scope') or 'input'}] {d.get('message')}", "    "
                )
            )
    else:
        out.append("  dead letters: none")
    return "\n".join(out)
