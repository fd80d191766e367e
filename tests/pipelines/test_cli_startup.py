"""`sciga` starts fast because a command imports only what it runs: `sciga --help` lists
the commands without importing any of their modules, and `sciga X --help` imports X's
module only. Checked by what a fresh interpreter has imported, not by a stopwatch (timings
are the benchmarks' business: bench/scale.py prints `sciga --help` against a bare Python)."""

from __future__ import annotations

import pytest

from conftest import cli_in_fresh_process

HEAVY = ("apache_beam", "duckdb", "pyarrow", "fsspec", "PIL", "numpy", "great_expectations", "torch", "lxml")


def imported_after(argv: list[str]) -> set[str]:
    return cli_in_fresh_process(argv)[1]


def test_top_level_help_imports_no_command_and_no_library():
    mods = imported_after(["--help"])
    commands = sorted(m for m in mods if m.startswith("sciga.pipelines.") and m not in {"sciga.pipelines.cli"})
    assert [m for m in commands if m != "sciga.pipelines.cli_logging"] == []
    assert [m for m in HEAVY if m in mods] == []


@pytest.mark.parametrize("command,module", [("sql", "sql_shell"), ("validate", "validate"), ("show", "show")])
def test_a_commands_help_imports_only_that_command(command, module):
    mods = imported_after([command, "--help"])
    assert f"sciga.pipelines.{module}" in mods
    others = {"build", "publish", "update", "train", "evaluate", "browse", "fetch", "stats", "diff"}
    assert [m for m in others if f"sciga.pipelines.{m}" in mods] == []
    assert "apache_beam" not in mods
