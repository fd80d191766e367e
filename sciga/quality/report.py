"""Gate results for people: a terminal summary, a Markdown page and a self-contained HTML page."""

from __future__ import annotations

import html
import json
from collections import OrderedDict

from sciga.quality.gate import GateResult
from sciga.schemas.version import BUILDER_VERSION, SCHEMA_VERSION

_PIXEL_SOURCE = {
    "manifest": " (the build's --max-image-pixels, from manifest.json)",
    "default": " (default)",
    "option": " (--max-image-pixels)",
}


def _by_table(result: GateResult) -> OrderedDict[str, list]:
    groups: OrderedDict = OrderedDict()
    for c in result.checks:
        groups.setdefault(c.table, []).append(c)
    return groups


def _headline(result: GateResult) -> str:
    n, bad = len(result.checks), len(result.failed)
    verdict = "PASSED" if result.success else "FAILED"
    return (
        f"Quality gate {verdict}: {n - bad} of {n} expectations met on {result.out_dir} "
        f"({result.seconds:.1f}s; schema {SCHEMA_VERSION}, builder {BUILDER_VERSION})"
    )


def summary_text(result: GateResult, max_examples: int = 5) -> str:
    """What the terminal shows: the verdict and, per failure, counts and example ids."""
    lines = [_headline(result)]
    for c in result.failed:
        where = f"{c.table}" + (f" [{c.column}]" if c.column else "")
        if c.error:
            lines.append(f"  FAILED {where}: {c.description} -- {c.error}")
            continue
        lines.append(
            f"  FAILED {where}: {c.description} -- {c.expectation}: "
            f"{c.unexpected_count} of {c.element_count} rows unexpected"
        )
        if c.breakdown:
            lines.append("      by " + ", ".join(f"{k}: {v}" for k, v in c.breakdown.items()))
        for ex in c.examples[:max_examples]:
            lines.append(f"      e.g. {ex}")
    return "\n".join(lines)


def _md_cell(s) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def markdown(result: GateResult) -> str:
    lines = [
        f"# sciga quality gate: {'PASSED' if result.success else 'FAILED'}",
        "",
        _headline(result),
        "",
        f"Options: dead-letter rate at most {result.options['max_dead_letter_rate']:g}; "
        f"missing-image rate at most {result.options.get('max_missing_image_rate', 0.5):g}; "
        f"image check `{result.options['image_check']}`, pixel limit {result.options['max_pixels']:,}"
        f"{_PIXEL_SOURCE.get(result.options.get('max_pixels_source'), '')}.",
        "",
        "Rows per config: " + ", ".join(f"{k} {v}" for k, v in sorted(result.counts.items())),
        "",
    ]
    if result.failed:
        lines += [
            "## Failed expectations",
            "",
            "| flat table | column | expectation | rule | unexpected | examples |",
            "|---|---|---|---|---:|---|",
        ]
        for c in result.failed:
            unexpected = c.error if c.error else f"{c.unexpected_count} of {c.element_count}"
            if c.breakdown:
                unexpected += " (" + ", ".join(f"{k}: {v}" for k, v in c.breakdown.items()) + ")"
            lines.append(
                f"| {_md_cell(c.table)} | {_md_cell(c.column)} | `{c.expectation}` | {_md_cell(c.description)} | "
                f"{_md_cell(unexpected)} | {_md_cell('; '.join(c.examples[:5]))} |"
            )
        lines.append("")
    lines += ["## All expectations", ""]
    for table, checks in _by_table(result).items():
        n = result.rows.get(table)
        lines += [
            f"### {table}" + (f" ({n} rows)" if n is not None else ""),
            "",
            "| | column | expectation | rule | unexpected |",
            "|---|---|---|---|---:|",
        ]
        for c in checks:
            mark = "ok" if c.success else "**FAIL**"
            unexpected = c.error if c.error else str(c.unexpected_count)
            lines.append(
                f"| {mark} | {_md_cell(c.column)} | `{c.expectation}` | {_md_cell(c.description)} | {_md_cell(unexpected)} |"
            )
        lines.append("")
    return "\n".join(lines)


_CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:72em}table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:.25em .5em;vertical-align:top;text-align:left}.ok{color:#186a3b}.fail{color:#b03a2e;font-weight:bold}
code{font-size:.9em}h1.fail,h1.ok{font-size:1.6em}"""


def html_page(result: GateResult) -> str:
    e = html.escape
    verdict_cls = "ok" if result.success else "fail"
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>sciga quality gate</title><style>{_CSS}</style></head><body>",
        f"<h1 class='{verdict_cls}'>sciga quality gate: {'PASSED' if result.success else 'FAILED'}</h1>",
        f"<p>{e(_headline(result))}</p>",
        f"<p>Rows per config: {e(', '.join(f'{k} {v}' for k, v in sorted(result.counts.items())))}</p>",
    ]
    if result.failed:
        parts.append(
            "<h2>Failed expectations</h2><table><tr><th>flat table</th><th>column</th><th>expectation</th>"
            "<th>rule</th><th>unexpected</th><th>examples</th></tr>"
        )
        for c in result.failed:
            unexpected = c.error if c.error else f"{c.unexpected_count} of {c.element_count}"
            if c.breakdown:
                unexpected += " (" + ", ".join(f"{k}: {v}" for k, v in c.breakdown.items()) + ")"
            ex = "<br>".join(e(x) for x in c.examples[:10])
            parts.append(
                f"<tr><td>{e(c.table)}</td><td>{e(c.column)}</td><td><code>{e(c.expectation)}</code></td>"
                f"<td>{e(c.description)}</td><td class='fail'>{e(unexpected)}</td><td>{ex}</td></tr>"
            )
        parts.append("</table>")
    parts.append("<h2>All expectations</h2>")
    for table, checks in _by_table(result).items():
        n = result.rows.get(table)
        parts.append(
            f"<h3>{e(table)}{f' ({n} rows)' if n is not None else ''}</h3><table><tr><th></th><th>column</th>"
            "<th>expectation</th><th>rule</th><th>unexpected</th></tr>"
        )
        for c in checks:
            cls, mark = ("ok", "ok") if c.success else ("fail", "FAIL")
            unexpected = c.error if c.error else str(c.unexpected_count)
            parts.append(
                f"<tr><td class='{cls}'>{mark}</td><td>{e(c.column)}</td><td><code>{e(c.expectation)}</code></td>"
                f"<td>{e(c.description)}</td><td>{e(unexpected)}</td></tr>"
            )
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)


def json_text(result: GateResult) -> str:
    return json.dumps(result.to_dict(), indent=2, sort_keys=True, default=str) + "\n"
