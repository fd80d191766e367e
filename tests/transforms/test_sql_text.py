"""One way to quote a string for DuckDB (``transforms/common/sql_text.py``): any text comes
back from DuckDB as it went in, quotes and all."""

from __future__ import annotations

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st

from sciga.transforms.common.sql_text import sql_string


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")))
def test_any_text_is_one_literal_that_duckdb_reads_back(text):
    con = duckdb.connect()
    assert con.execute(f"SELECT {sql_string(text)}").fetchall() == [(text,)]


def test_a_quote_cannot_end_the_literal_early():
    con = duckdb.connect()
    hostile = "x'; DROP TABLE t; SELECT '"
    con.execute("CREATE TABLE t AS SELECT 1 AS a")
    assert con.execute(f"SELECT {sql_string(hostile)}").fetchall() == [(hostile,)]
    assert con.execute("SELECT a FROM t").fetchall() == [(1,)]
