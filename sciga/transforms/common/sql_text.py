"""SQL text for DuckDB made from values: the one way this project quotes a string."""

from __future__ import annotations


def sql_string(text: str) -> str:
    """``text`` as a SQL string literal: in single quotes, each quote inside doubled (a path
    or an id with a quote in it stays one literal, never the end of one)."""
    return "'" + text.replace("'", "''") + "'"
