"""The results table, in the layout of SciGA Table 2 (Intra-GA) and Table 3 (Inter-GA),
kept as ``results.json`` (the numbers, with model, data version and seed per row) and
rendered to ``results.md``. Each evaluation replaces its own row (same task, method,
backbone) and leaves the others, so one folder collects a whole benchmark run.
"""

from __future__ import annotations

import json
import os
from typing import Optional

from sciga.training.data import data_version_label

RESULTS_JSON = "results.json"
RESULTS_MD = "results.md"

METHOD_LABELS = {
    "random": "(BL) Random Sampling",
    "abs2cap": "(i) Abs2Cap",
    "ga-bc": "(ii) GA-BC",
    "abs2fig": "(iii) Abs2Fig",
    "abs2fig-cap": "(iv) Abs2Fig w/cap",
}
_ORDER = list(METHOD_LABELS)


def load(results_dir: str) -> dict:
    path = os.path.join(results_dir, RESULTS_JSON)
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    return {"intra": [], "inter": []}


def upsert(results_dir: str, task: str, row: dict) -> tuple[str, str]:
    """Add or replace the row of (task, method, backbone); write JSON and Markdown."""
    os.makedirs(results_dir, exist_ok=True)
    res = load(results_dir)

    def key(r):
        return r["method"], r["backbone"], r.get("split")

    rows = [r for r in res.get(task, []) if key(r) != key(row)]
    rows.append(row)
    rows.sort(
        key=lambda r: (_ORDER.index(r["method"]) if r["method"] in _ORDER else 99, r["backbone"], r.get("split") or "")
    )
    res[task] = rows
    jpath = os.path.join(results_dir, RESULTS_JSON)
    mpath = os.path.join(results_dir, RESULTS_MD)
    with open(jpath, "w", encoding="utf-8") as f:
        json.dump(res, f, indent=2, sort_keys=True)
        f.write("\n")
    with open(mpath, "w", encoding="utf-8") as f:
        f.write(render_markdown(res))
    return jpath, mpath


def _f(v: Optional[float]) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def _pm(m: dict, key: str) -> str:
    if m.get(key) is None:
        return "n/a"
    return f"{m[key]:.3f} ± {m.get(key + '_std') or 0.0:.3f}"


def render_markdown(res: dict) -> str:
    lines = ["# GA recommendation benchmark", ""]
    intra = res.get("intra", [])
    inter = res.get("inter", [])
    if intra:
        lines += [
            "## Intra-GA recommendation (SciGA Table 2)",
            "",
            "| Method | Backbone | R@1 | R@2 | R@3 | MRR | CAR@5 Mean | CAR@5 Above 0.5 | Queries (split) | Data | Seed |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in intra:
            m = r["metrics"]
            lines.append(
                f"| {METHOD_LABELS.get(r['method'], r['method'])} | {r['backbone']} | {_f(m.get('R@1'))} | {_f(m.get('R@2'))} "
                f"| {_f(m.get('R@3'))} | {_f(m.get('MRR'))} | {_f(m.get('CAR@5'))} | {_f(m.get('CAR@5>0.5'))} "
                f"| {m.get('queries', 0)} ({r.get('split')}) | {data_version_label(r['data_version'])} | {r['seed']} |"
            )
        lines.append("")
    if inter:
        lines += [
            "## Inter-GA recommendation (SciGA Table 3)",
            "",
            "| Method | Backbone | Field-P@5 | Field-P@10 | Abs2Abs SBERT@5 | Abs2Abs SBERT@10 | GA2GA CLIP-S@5 | GA2GA CLIP-S@10 | Queries (split) | Data | Seed |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in inter:
            m = r["metrics"]
            lines.append(
                f"| {METHOD_LABELS.get(r['method'], r['method'])} | {r['backbone']} | {_f(m.get('Field-P@5'))} "
                f"| {_f(m.get('Field-P@10'))} | {_pm(m, 'SBERT@5')} | {_pm(m, 'SBERT@10')} | {_pm(m, 'CLIP-S@5')} "
                f"| {_pm(m, 'CLIP-S@10')} | {m.get('queries', 0)} ({r.get('split')}) | {data_version_label(r['data_version'])} | {r['seed']} |"
            )
        lines.append("")
    models = [(r["method"], r["backbone"], r.get("model")) for r in intra + inter if r.get("model")]
    if models:
        lines += ["Models:", ""]
        for method, backbone, model in dict.fromkeys(models):
            lines.append(f"- {METHOD_LABELS.get(method, method)} / {backbone}: `{model}`")
        lines.append("")
    notes = [
        f"- {task} / {METHOD_LABELS.get(r['method'], r['method'])} / {r['backbone']}: {n}"
        for task, rows in (("intra", intra), ("inter", inter))
        for r in rows
        for n in r.get("notes", [])
    ]
    if notes:
        lines += ["Notes:", ""] + notes + [""]
    return "\n".join(lines)
