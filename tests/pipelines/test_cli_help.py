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
