"""A build diff (``explore/diff.py``) for people and programs: a readable summary for the
terminal, Markdown (the full diff, and the short changelog of a dataset card), and JSON.

The lists of papers are streamed from the diff's DuckDB tables as they are written, so a
diff of millions of changed papers is written in bounded memory; the summary and the card
name at most ``max_listed`` of each kind and say how many more there are.
"""

from __future__ import annotations

import json
from typing import Optional, TextIO

from sciga.explore.diff import CATEGORIES, BuildDiff
from sciga.schemas.arrow import CONFIGS

FIELD_HELP = {
    "metadata": "arXiv metadata (version, authors, dates, categories, comment, venue, DOIs, licence)",
    "text": "title, abstract, section titles and bodies, table captions",
    "figures": "figure rows: numbers, labels, captions",
    "panels": "subfigure rows: labels, subcaptions",
    "mentions": "inline references to figures",
    "images": "figure images",
    "annotations": "teaser, graphical abstract, medical filter",
    "provenance": "where the page came from, its SHA-256 and generator",
}


def _delta(a: int, b: int) -> str:
    d = b - a
    return f"{a:,} -> {b:,} ({'+' if d >= 0 else ''}{d:,})" if d else f"{a:,} (unchanged)"


def _versions(pair: tuple) -> str:
    a, b = (", ".join(x) or "unknown" for x in pair)
    return f"{a} (unchanged)" if a == b else f"{a} -> {b}"


def take_first(it, n: Optional[int]) -> tuple[list, int]:
    """The first ``n`` items of ``it`` (all with n None) and how many there were in all."""
    shown: list = []
    total = 0
    for x in it:
        total += 1
        if n is None or len(shown) < n:
            shown.append(x)
    return shown, total


def images_note(d: BuildDiff) -> str:
    return (
        "images compared by their bytes"
        if d.options.image_bytes
        else "images compared by path, size and perceptual hash, not by their bytes"
    )


def summary_text(d: BuildDiff, max_listed: int = 20) -> str:
    """What ``sciga diff OLD NEW`` prints by default."""
    lines = [f"sciga diff {d.old.location} -> {d.new.location}"]
    if d.empty:
        lines.append("  no differences: same papers, same rows, same schema and builder versions")
        return "\n".join(lines)
    p_old, p_new = d.papers
    lines.append(
        f"  papers      {d.added:,} added, {d.removed:,} removed, {d.changed:,} changed ({p_old:,} -> {p_new:,})"
    )
    if d.changed:
        lines.append(
            "  fields      "
            + ", ".join(f"{c} {d.field_counts[c]:,}" for c in CATEGORIES if d.field_counts[c])
            + " (papers whose field changed)"
        )
    lines.append("  rows        " + "; ".join(f"{c} {_delta(*d.rows[c])}" for c in CONFIGS))
    if d.kinds:
        lines.append("  figure rows " + "; ".join(f"{k} {_delta(*v)}" for k, v in sorted(d.kinds.items())))
    lines.append(f"  schema      {_versions(d.schema_versions)}")
    for c in d.schema:
        lines.append(f"    {c.text()}")
    lines.append(f"  builder     {_versions(d.builder_versions)}")
    if d.dead_letters_added or d.dead_letters_removed or d.dead_letter_types:
        types = "; ".join(f"{t} {_delta(*v)}" for t, v in sorted(d.dead_letter_types.items()))
        lines.append(
            f"  dead letters +{d.dead_letters_added:,} -{d.dead_letters_removed:,}" + (f" ({types})" if types else "")
        )
    for label, it in (("added", d.added_ids()), ("removed", d.removed_ids())):
        shown, total = take_first(it, max_listed)
        if total:
            lines.append(
                f"  {label:<11} "
                + ", ".join(shown)
                + (f" ... and {total - len(shown):,} more" if total > len(shown) else "")
            )
    for label, pairs in (("withheld", d.withheld_papers()), ("released", d.released_papers())):
        shown, total = take_first(pairs, max_listed)
        if total:
            lines.append(
                f"  {label:<11} "
                + ", ".join(f"{pid} ({lic})" for pid, lic in shown)
                + (f" ... and {total - len(shown):,} more" if total > len(shown) else "")
                + " (licence policy)"
            )
    shown, total = take_first(d.changed_papers(), max_listed)
    for pid, fields in shown:
        lines.append(f"  changed     {pid}: {', '.join(fields)}")
    if total > len(shown):
        lines.append(f"  changed     ... and {total - len(shown):,} more (--json or --markdown lists every one)")
    lines.append(f"  note        {images_note(d)}")
    return "\n".join(lines)


def to_json(d: BuildDiff) -> dict:
    """The diff's summary as a dict (lists of papers excluded; see ``write_json``)."""
    return {
        "old": d.old.location,
        "new": d.new.location,
        "empty": d.empty,
        "papers": {
            "old": d.papers[0],
            "new": d.papers[1],
            "added": d.added,
            "removed": d.removed,
            "changed": d.changed,
            "withheld": d.withheld,
            "released": d.released,
        },
        "fields": {c: d.field_counts[c] for c in CATEGORIES},
        "rows": {c: {"old": a, "new": b} for c, (a, b) in d.rows.items()},
        "figure_kinds": {k: {"old": a, "new": b} for k, (a, b) in sorted(d.kinds.items())},
        "schema_version": {"old": d.schema_versions[0], "new": d.schema_versions[1]},
        "builder_version": {"old": d.builder_versions[0], "new": d.builder_versions[1]},
        "schema_changes": [c.__dict__ for c in d.schema],
        "dead_letter": {
            "added": d.dead_letters_added,
            "removed": d.dead_letters_removed,
            "by_type": {t: {"old": a, "new": b} for t, (a, b) in sorted(d.dead_letter_types.items())},
        },
        "image_bytes_compared": d.options.image_bytes,
    }


def write_json(d: BuildDiff, out: TextIO) -> None:
    """The whole diff as one JSON object, the lists streamed into it."""
    head = to_json(d)
    text = json.dumps(head, indent=1, sort_keys=False)
    out.write(text[:-2] if text.endswith("\n}") else text[:-1])  # reopen the object

    def array(name: str, items) -> None:
        out.write(f',\n "{name}": [')
        for i, item in enumerate(items):
            out.write(("," if i else "") + "\n  " + json.dumps(item, sort_keys=True))
        out.write("\n ]")

    array("added_papers", d.added_ids())
    array("removed_papers", d.removed_ids())
    array("changed_papers", ({"id": pid, "fields": fields} for pid, fields in d.changed_papers()))
    array("withheld_papers", ({"id": pid, "licence": lic} for pid, lic in d.withheld_papers()))
    array("released_papers", ({"id": pid, "licence": lic} for pid, lic in d.released_papers()))
    array("dead_letters_added", d.dead_letters("added"))
    array("dead_letters_removed", d.dead_letters("removed"))
    out.write("\n}\n")


def _md_escape(s: str) -> str:
    return str(s).replace("|", "\\|")


def markdown(d: BuildDiff, max_listed: Optional[int] = None, title: Optional[str] = None, level: int = 1) -> str:
    """The diff as Markdown: every paper unless ``max_listed`` says otherwise."""
    h = "#" * level
    out = [f"{h} {title or f'Changes from {d.old.location} to {d.new.location}'}", ""]
    if d.empty:
        out.append("No differences: the same papers and rows, the same schema and builder versions.")
        return "\n".join(out) + "\n"
    p_old, p_new = d.papers
    out += [
        f"- papers: **{d.added:,} added**, **{d.removed:,} removed**, **{d.changed:,} changed** "
        f"({p_old:,} -> {p_new:,})",
        f"- schema version: {_versions(d.schema_versions)}; builder: {_versions(d.builder_versions)}",
        f"- dead letters: +{d.dead_letters_added:,} / -{d.dead_letters_removed:,}",
        f"- {images_note(d)}",
        "",
    ]
    out += [f"{h}# Rows", "", "| config | old | new | change |", "|---|---:|---:|---:|"]
    for c in CONFIGS:
        a, b = d.rows[c]
        out.append(f"| {c} | {a:,} | {b:,} | {b - a:+,} |")
    for k, (a, b) in sorted(d.kinds.items()):
        out.append(f"| figures: {k} | {a:,} | {b:,} | {b - a:+,} |")
    out.append("")
    if d.changed:
        out += [f"{h}# Fields that changed", "", "| field | papers | what it covers |", "|---|---:|---|"]
        out += [f"| {c} | {d.field_counts[c]:,} | {FIELD_HELP[c]} |" for c in CATEGORIES if d.field_counts[c]]
        out.append("")
    if d.schema:
        out += [f"{h}# Schema changes", ""] + [f"- {c.text()}" for c in d.schema] + [""]
    for label, it in (("Added papers", d.added_ids()), ("Removed papers", d.removed_ids())):
        shown, total = take_first(it, max_listed)
        if total:
            out += [f"{h}# {label} ({total:,})", ""] + [f"- `{pid}`" for pid in shown]
            if total > len(shown):
                out.append(f"- ... and {total - len(shown):,} more")
            out.append("")
    for label, pairs in (
        ("Papers withheld for their licence", d.withheld_papers()),
        ("Papers released (no longer withheld)", d.released_papers()),
    ):
        shown, total = take_first(pairs, max_listed)
        if total:
            out += [f"{h}# {label} ({total:,})", ""] + [f"- `{pid}` ({lic})" for pid, lic in shown]
            if total > len(shown):
                out.append(f"- ... and {total - len(shown):,} more")
            out.append("")
    shown, total = take_first(d.changed_papers(), max_listed)
    if total:
        out += [f"{h}# Changed papers ({total:,})", "", "| paper | fields that changed |", "|---|---|"]
        out += [f"| `{pid}` | {', '.join(fields)} |" for pid, fields in shown]
        if total > len(shown):
            out.append(f"| ... | and {total - len(shown):,} more |")
        out.append("")
    for label, which in (("Dead letters added", "added"), ("Dead letters removed", "removed")):
        shown, total = take_first(d.dead_letters(which), max_listed)
        if total:
            out += [f"{h}# {label}", "", "| paper | stage | error type | rows | message |", "|---|---|---|---:|---|"]
            out += [
                f"| `{r['paper_id']}` | {r['stage']} | {r['error_type']} | {r['count']} | {_md_escape(r['message'] or '')} |"
                for r in shown
            ]
            if total > len(shown):
                out.append(f"| ... | | | | and {total - len(shown):,} more |")
            out.append("")
    return "\n".join(out)
