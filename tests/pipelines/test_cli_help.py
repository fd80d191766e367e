"""Every option of every command (and of each `sciga train` method) says what it does in
`--help`, and shows its default there."""

from __future__ import annotations

import argparse

from sciga.pipelines.cli import make_parser


def _parsers(parser: argparse.ArgumentParser, name: str = "sciga"):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, p in action.choices.items():
                yield from _parsers(p, f"{name} {sub}")


def test_every_option_of_every_command_has_help_text():
    missing = [
        f"{name} {'/'.join(a.option_strings) or a.dest}"
        for name, p in _parsers(make_parser())
        for a in p._actions
        if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
        and a.help != argparse.SUPPRESS
        and not (a.help or "").strip()
    ]
    assert not missing, "options without help text: " + ", ".join(missing)


def test_help_shows_the_defaults():
    parsers = dict(_parsers(make_parser()))
    ga_bc = parsers["sciga train ga-bc"].format_help()
    assert "(default: 16)" in ga_bc and "(default: 0.0001)" in ga_bc  # --batch-size, --lr
    medical = parsers["sciga train medical-filter"].format_help()
    assert "(default: 20)" in medical  # --epochs
    evaluate = " ".join(parsers["sciga evaluate"].format_help().split())
    assert "(default: test)" in evaluate and "(default: [5, 10])" in evaluate
    build = " ".join(parsers["sciga build"].format_help().split())
    assert "(default: " in build


def test_usage_mistakes_exit_2_in_every_command(tmp_path):
    """A mistake in the command line is exit status 2 with one sentence, whichever command
    (fetch's and publish's own checks used to exit 1), as the CLI page's table says."""
    import os
    import subprocess
    import sys

    from conftest import ROOT

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cases = [
        (["fetch", "--ids", "2401.00001", "--parts", "html", "--output", str(tmp_path / "c")], "--parts"),
        (["publish", str(tmp_path), "--repo-id", "o/n", "--version", "v1.0"], "MAJOR.MINOR.PATCH"),
        (["publish", str(tmp_path), "--repo-id", "not a repo", "--version", "v1.0.0"], "--repo-id"),
        (["build", "--output", str(tmp_path / "o"), "--wokers", "2"], "--wokers"),
    ]
    for argv, needle in cases:
        r = subprocess.run([sys.executable, "-m", "sciga", *argv], env=env, capture_output=True, text=True, timeout=120)
        err = r.stderr.strip()
        assert r.returncode == 2, (argv, r.returncode, err)
        assert needle in err and "\n" not in err and "Traceback" not in err, (argv, err)


def test_the_cli_page_lists_every_commands_exit_statuses():
    import sys

    from conftest import ROOT

    sys.path.insert(0, str(ROOT / "scripts"))
    import docs_gen

    table = docs_gen.exit_codes()
    assert "| every command | 2 |" in table and "| `sciga validate` | 1 | the quality gate failed |" in table
    assert "<!-- sciga:exit-codes -->" in (ROOT / "docs" / "reference" / "cli.md").read_text()
