"""`sciga sql` keeps flat memory as the build grows (issue 47): an export of the whole
``papers`` config on 10x the papers peaks where the export of the small build did (the
configs are views over the shards, the result is streamed by COPY in small row groups, DuckDB
spills beyond its limit). And a query piped into another program prints CSV, not the table."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.quality.test_gate_memory import child_result, write_build

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
SMALL, LARGE = 150, 1500  # papers; 144 KB of paragraph text each: 216 MB in the large build
MEMORY_LIMIT = "96MB"

EXPORT = """
import json, resource, sys
from sciga.pipelines.cli import main
rc = main(["sql", sys.argv[1], "--view", "papers", "--output", sys.argv[2], "--memory-limit", sys.argv[3]])
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
print(json.dumps({"rc": rc, "peak_mb": peak}))
"""


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def export_peak(build: Path, target: Path) -> dict:
    """The export in a process of its own: its peak RSS (the kernel's, not sampled)."""
    return child_result(EXPORT, str(build), str(target), MEMORY_LIMIT)


def test_exporting_ten_times_the_papers_takes_the_same_memory(tmp_path):
    small, large = tmp_path / "small", tmp_path / "large"
    write_build(small, SMALL)
    write_build(large, LARGE)
    a = export_peak(small, tmp_path / "small.parquet")
    b = export_peak(large, tmp_path / "large.parquet")
    assert a["rc"] == 0 and b["rc"] == 0
    exported = pq.ParquetFile(tmp_path / "large.parquet")
    assert exported.metadata.num_rows == LARGE
    # Every paper, in the shards' order (insertion order is kept): the same file on every run.
    assert exported.read(columns=["id"]).column("id").to_pylist() == [f"2601.{i:05d}" for i in range(LARGE)]
    # Before, the result was a temp table in memory: the large export took ~+200 MB over the small.
    assert b["peak_mb"] <= 1.15 * a["peak_mb"], (a["peak_mb"], b["peak_mb"])


def test_a_query_piped_into_another_program_prints_csv(tmp_path):
    write_build(tmp_path / "b", 3, per_shard=2)
    query = "SELECT id, title FROM papers ORDER BY id"
    piped = subprocess.run(
        [sys.executable, "-m", "sciga", "sql", str(tmp_path / "b"), query],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert piped.returncode == 0, piped.stderr[-3000:]
    rows = list(csv.reader(io.StringIO(piped.stdout)))
    assert rows == [["id", "title"]] + [[f"2601.{i:05d}", f"A paper number {i} on token routing"] for i in range(3)]
    # --format table still prints the table (a person's view) into a pipe when asked
    table = subprocess.run(
        [sys.executable, "-m", "sciga", "sql", str(tmp_path / "b"), query, "--format", "table"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert table.returncode == 0 and "│" in table.stdout and "2601.00002" in table.stdout, table.stdout
