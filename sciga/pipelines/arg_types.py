"""Value checks for the command line, as argparse ``type=`` functions: a nonsense value
(``--workers 0``, ``--figures-per-shard -1``, ``--max-page-mb -5``) is refused while the line
is parsed, with argparse's one line ``sciga build: error: argument --workers: ...``, before
anything starts. Each raises ``argparse.ArgumentTypeError`` with what a valid value is."""

from __future__ import annotations

import argparse


def _number(text: str, kind: type):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {'a whole number' if kind is int else 'a number'}") from None


def positive_int(text: str) -> int:
    """1, 2, 3 ... (worker counts, rows per shard, pixels, retries are never 0 or negative)."""
    n = _number(text, int)
    if n < 1:
        raise argparse.ArgumentTypeError(f"{n} is not allowed; give 1 or more")
    return n


def non_negative_int(text: str) -> int:
    """0, 1, 2 ... (0 has a meaning: none, or every)."""
    n = _number(text, int)
    if n < 0:
        raise argparse.ArgumentTypeError(f"{n} is not allowed; give 0 or more")
    return n


def positive_float(text: str) -> float:
    """A size or a time above 0 (MB, seconds, dpi)."""
    x = _number(text, float)
    if not x > 0 or x == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not allowed; give a number above 0")
    return x


def non_negative_float(text: str) -> float:
    x = _number(text, float)
    if not x >= 0 or x == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not allowed; give 0 or a number above it")
    return x


def rate(text: str) -> float:
    """A fraction from 0 to 1 (0.1 = 10%)."""
    x = _number(text, float)
    if not 0 <= x <= 1:
        raise argparse.ArgumentTypeError(f"{text} is not allowed; give a fraction from 0 to 1 (0.1 = 10%)")
    return x


def unit_interval(text: str) -> float:
    """A threshold from 0 to 1 (a Jaccard overlap, a similarity)."""
    return rate(text)
