"""The gate's memory does not grow with the build: on 10x the papers (10x the rows of every
flat table, 10x the paragraph text DuckDB flattens) its peak RSS stays where it was. The
constants that bound it (rows validated at a time, DuckDB's memory limit) are set small here
so that a build that fits a test shows it; `bench/size.py` measures the defaults on 20,000
real pages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sciga.schemas.version import BUILDER_VERSION, SCHEMA_VERSION

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
SMALL, LARGE = 150, 1500  # papers
PARAGRAPH_CHARS = 12_000  # 12 paragraphs a paper: 144 KB of text, 216 MB in the large build
BATCH_ROWS, MEMORY_LIMIT = 2048, "96MB"


def _paper(
    i: int, n_figures: int = 2, n_sections: int = 4, paragraph_chars: int = PARAGRAPH_CHARS
) -> tuple[dict, list[dict], list[dict]]:
    pid = f"2601.{i:05d}"
    sentence = "Tokens are routed through a shallow path when frames agree, <MATH> x_{t} </MATH> here. "
    filler = (sentence * (paragraph_chars // len(sentence) + 1))[:paragraph_chars]
    fig_ids = [f"{pid}_F{k}" for k in range(1, n_figures + 1)]
    sections, mentions = [], []
    for s in range(1, n_sections + 1):
        sid = f"{pid}_S{s}"
        paras = []
        for p in range(3):  # a mention in the first paragraph of a section, as papers mostly have
            k = s % n_figures
            number = str(k + 1)
            head = f"Paper {i} section {s} paragraph {p}: " + (f"Figure {number} shows it. " if p == 0 else "")
            start = len(head) - len(" shows it. ") - len(number)
            end = start + len(number)
            spans = [{"start": start, "end": end, "text": number, "ref_id": fig_ids[k]}] if p == 0 else []
            paras.append({"text": head + filler, "html_id": f"S{s}.p{p + 1}", "ref_spans": spans})
            if p == 0:
                mentions.append(
                    {
                        "paper_id": pid,
                        "figure_id": fig_ids[k],
                        "section_id": sid,
                        "paragraph_index": p,
                        "char_start": start,
                        "char_end": end,
                        "surface": number,
                        "resolution": "anchor",
                    }
                )
        sections.append(
            {
                "id": sid,
                "level": 1,
                "number": str(s),
                "title": f"<TAG> {s} </TAG> Section {s}",
                "body": f"Section {s} of paper {i}.",
                "paragraphs": paras,
                "figure_ids": [fig_ids[s % n_figures]],
                "html_id": f"S{s}",
            }
        )
    figures = [
        {"id": fid, "html_id": f"F{k}", "index": k, "number": str(k), "caption": f"<TAG> Figure {k}: </TAG> A plot."}
        for k, fid in enumerate(fig_ids, 1)
    ]
    figure_rows = [
        {
            "id": f["id"],
            "paper_id": pid,
            "kind": "figure",
            "index": f["index"],
            "number": f["number"],
            "caption": f["caption"],
            "image_kind": "raster",
            "image_status": "not_found",
        }
        for f in figures
    ]
    paper = {
        "id": pid,
        "title": f"A paper number {i} on token routing",
        "abstract": "We route tokens. " * 20,
        "primary_category": "cs.CV",
        "sections": sections,
        "figures": figures,
        "teaser": [fig_ids[0]],
        "provenance": {
            "source": "synthetic",
            "builder_version": BUILDER_VERSION,
            "schema_version": SCHEMA_VERSION,
            "id_source": "metadata",
        },
    }
    return paper, figure_rows, mentions


def write_build(out: Path, n_papers: int, per_shard: int = 250, row_group_rows: int = 32, **shape) -> None:
    """A build of ``n_papers`` through the project's own writer and manifest (``shape``: the
    shape of each paper, as ``_paper`` takes it)."""
    from sciga.transforms.write import manifest as mf
    from sciga.transforms.write.shard_names import empty_table_bytes, shard_name, table_bytes

    n_shards = -(-n_papers // per_shard)
    for index, start in enumerate(range(0, n_papers, per_shard)):
        rows: dict[str, list] = {"papers": [], "figures": [], "mentions": []}
        for i in range(start, min(n_papers, start + per_shard)):
            paper, figure_rows, mentions = _paper(i, **shape)
            rows["papers"].append(paper)
            rows["figures"] += figure_rows
            rows["mentions"] += mentions
        for config, config_rows in rows.items():
            path = out / "data" / config / shard_name(index, n_shards)
            path.parent.mkdir(parents=True, exist_ok=True)
            # Small row groups: DuckDB reads a row group whole, so they set how low its limit can go.
            path.write_bytes(table_bytes(config, config_rows, row_group_rows=row_group_rows))
    path = out / "data" / "dead_letter" / shard_name(0, 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(empty_table_bytes("dead_letter"))
    counts, files = mf.count_build(str(out))
    counts.inputs = n_papers
    mf.write_manifest(str(out), counts, files, "synthetic", {})


GATE = """
import json, resource, sys
from sciga.quality.gate import run_gate
ranges = {"range_rows": int(sys.argv[4])} if len(sys.argv) > 4 else {}
r = run_gate(sys.argv[1], max_missing_image_rate=1.0, batch_rows=int(sys.argv[2]), memory_limit=sys.argv[3], **ranges)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
print(json.dumps({"peak_mb": peak, "rows": r.rows, "failed": [(c.table, c.column, c.error) for c in r.failed]}))
"""


def child_result(code: str, *args: str) -> dict:
    """Run ``code`` in a fresh interpreter (so that its peak RSS is its own) and return the
    JSON of its last line of output."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def gate_peak(out: Path, memory_limit: str = MEMORY_LIMIT, *range_rows: int) -> dict:
    """The gate in a process of its own: its peak RSS (the kernel's, not sampled) and rows."""
    return child_result(GATE, str(out), str(BATCH_ROWS), memory_limit, *map(str, range_rows))


def test_the_gate_checks_ten_times_the_rows_in_the_same_memory(tmp_path):
    small, large = tmp_path / "small", tmp_path / "large"
    write_build(small, SMALL)
    write_build(large, LARGE)
    a, b = gate_peak(small), gate_peak(large)
    # Every row was checked, and the builds pass: the same work, 10x over.
    assert a["failed"] == [] and b["failed"] == [], (a["failed"], b["failed"])
    assert b["rows"]["papers"] == 10 * a["rows"]["papers"] and b["rows"]["spans"] == 10 * a["rows"]["spans"]
    # Before, the large build took ~+250 MB over the small one (its paragraph text in DuckDB,
    # its flat tables in pandas); now both stay within the same few tens of MB.
    assert b["peak_mb"] <= 1.15 * a["peak_mb"], (a["peak_mb"], b["peak_mb"])


# Papers with many figures and little text: the references flat table (every id a record
# gives, resolved within its paper) is most of the rows, as on SciGA-145k (~5 million rows).
FIGURE_RICH = {"n_figures": 60, "n_sections": 4, "paragraph_chars": 100, "row_group_rows": 1024}
FIGURE_RICH_LIMIT = "64MB"


def test_references_are_checked_on_ten_times_the_rows_under_the_same_memory_limit(tmp_path):
    """The references table was one query, a join per relation: on the large build it ran
    out of DuckDB's limit ("failed to pin block", as at 145,000 pages), a false failure. Now
    each relation is joined on its own, one range of papers at a time (``RANGE_ROWS``, small
    here so that the large build has several ranges)."""
    small, large = tmp_path / "small", tmp_path / "large"
    write_build(small, 500, **FIGURE_RICH)
    write_build(large, 5000, **FIGURE_RICH)
    a = gate_peak(small, FIGURE_RICH_LIMIT, 50_000)
    b = gate_peak(large, FIGURE_RICH_LIMIT, 50_000)
    assert a["failed"] == [] and b["failed"] == [], (a["failed"], b["failed"])
    assert b["rows"]["references"] == 10 * a["rows"]["references"] == 365_000
    assert b["peak_mb"] <= 1.15 * a["peak_mb"], (a["peak_mb"], b["peak_mb"])
