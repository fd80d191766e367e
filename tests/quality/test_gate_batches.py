"""The gate validates each flat table in batches (and checks unique ids with a DuckDB
aggregate over the whole table); what it reports must be what Great Expectations reports on
the whole table at once, as the gate did before: the same verdicts, counts, examples and
failures per group, a bad row in the last batch included."""

from __future__ import annotations

import duckdb
import great_expectations.expectations as gxe
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from quality_fixtures import rewrite_shard

from sciga.quality.gate import _gx_context, _rebatched, _sql_frames, _validate, paper_ranges, run_gate
from sciga.quality.suites import FlatTable, papers_between


def _d(exp, description):
    exp.description = description
    return exp


def _expectations(options):
    return [
        _d(gxe.ExpectColumnValuesToNotBeNull(column="id"), "every row has an id"),
        _d(gxe.ExpectColumnValuesToBeUnique(column="id"), "ids are unique"),
        _d(
            gxe.ExpectColumnValuesToMatchRegex(
                column="id", regex=r"^p\d+$", row_condition='source != "stem"', condition_parser="pandas"
            ),
            "ids are p<n> unless from a stem",
        ),
        _d(gxe.ExpectColumnValuesToBeBetween(column="n", min_value=1), "n is positive"),
        _d(gxe.ExpectColumnValuesToBeInSet(column="kind", value_set=["figure", "subfigure"]), "kind is known"),
        _d(
            gxe.ExpectColumnPairValuesToBeEqual(column_A="a", column_B="b", ignore_row_if="either_value_is_missing"),
            "a equals b",
        ),
        _d(gxe.ExpectColumnValuesToBeInSet(column="resolved", value_set=[True]), "every reference resolves"),
    ]


TABLE = FlatTable(
    "t",
    "papers",
    "a flat table with every kind of expectation the gate uses",
    _expectations,
    sql="SELECT * FROM t",
    breakdown=("relation", "resolved"),
)


def _good(i: int) -> dict:
    return {
        "record": f"row {i}",
        "id": f"p{i}",
        "source": "metadata",
        "n": i + 1,
        "kind": "figure",
        "a": f"x{i}",
        "b": f"x{i}",
        "resolved": True,
        "relation": "teaser",
    }


@pytest.fixture(scope="module")
def gx_batch():
    gx, _, bd = _gx_context()
    return gx, bd


def _table(rows: list[dict]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    df = pd.DataFrame(rows)  # noqa: F841 - read by DuckDB by name
    con.execute(
        "CREATE TABLE t AS SELECT record, id, source, CAST(n AS INTEGER) AS n, kind, a, b, "
        "CAST(resolved AS BOOLEAN) AS resolved, relation FROM df"
    )
    return con


def _whole(gx_batch, con) -> tuple[list, int]:
    """As the gate validated before: the whole table in one frame, uniqueness by GX."""
    gx, bd = gx_batch
    return _validate(gx, bd, TABLE, [con.execute(TABLE.sql).df()], {})


def _batched(gx_batch, con, batch_rows: int) -> tuple[list, int]:
    gx, bd = gx_batch
    return _validate(gx, bd, TABLE, _sql_frames(con, TABLE.sql, batch_rows), {}, con)


def test_a_bad_last_row_alone_in_the_last_batch_is_found(gx_batch):
    rows = [_good(i) for i in range(40)]
    rows[-1].update(id="p0", n=0, kind="oddity", a="left", resolved=False, relation="mentions")
    con = _table(rows)
    whole, n = _whole(gx_batch, con)
    failed = {c.description: c for c in whole if not c.success}
    assert set(failed) == {"ids are unique", "n is positive", "kind is known", "a equals b", "every reference resolves"}
    assert failed["ids are unique"].unexpected_count == 2 and failed["ids are unique"].examples == [
        "row 0 (id='p0')",
        "row 39 (id='p0')",
    ]
    assert failed["every reference resolves"].breakdown == {"mentions": 1}
    for batch_rows in (39, 13, 1000):  # the last row alone; several batches; one batch
        assert _batched(gx_batch, con, batch_rows) == (whole, n)


def test_examples_are_the_first_rows_in_order_across_batches(gx_batch):
    rows = [_good(i) for i in range(48)]
    for i in range(3, 48, 4):  # 12 bad rows, in every batch: the examples are the first 10
        rows[i].update(n=-i, kind=None, id=f"p{i - 1}", source="stem" if i % 8 == 3 else "metadata", record=None)
    rows[20]["id"] = None
    con = _table(rows)
    whole, n = _whole(gx_batch, con)
    assert any(not c.success and len(c.examples) == 10 for c in whole)
    for batch_rows in (9, 16):
        assert _batched(gx_batch, con, batch_rows) == (whole, n)


def test_an_empty_table_is_validated_once_with_its_columns(gx_batch):
    con = _table([_good(0)])
    con.execute("DELETE FROM t")
    whole, n = _whole(gx_batch, con)
    assert n == 0 and all(c.success for c in whole)
    assert _batched(gx_batch, con, 5) == (whole, n)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["p1", "p2", "p3", "q4", None]),
            st.sampled_from(["metadata", "stem"]),
            st.one_of(st.none(), st.integers(-2, 3)),
            st.sampled_from(["figure", "subfigure", "oddity", None]),
            st.sampled_from(["x", "y", None]),
            st.booleans(),
            st.sampled_from(["teaser", "mentions"]),
        ),
        min_size=1,
        max_size=20,
    ),
    st.integers(5, 25),
)
def test_any_table_in_any_batches_gives_the_whole_tables_result(gx_batch, cells, batch_rows):
    rows = [
        {
            "record": f"row {i}",
            "id": pid,
            "source": source,
            "n": n,
            "kind": kind,
            "a": a,
            "b": "x",
            "resolved": resolved,
            "relation": relation,
        }
        for i, (pid, source, n, kind, a, resolved, relation) in enumerate(cells)
    ]
    con = _table(rows)
    assert _batched(gx_batch, con, batch_rows) == _whole(gx_batch, con)


def test_the_gate_in_small_batches_gives_the_same_result_as_in_one(build_copy):
    """The real suites on a sample build broken in many ways at once, its last rows included."""

    def papers(rows):
        rows[1]["id"] = None
        rows[-1]["teaser"] = [rows[-1]["id"] + "_F42"]
        return rows + [rows[0]]  # a repeated paper, last

    def figures(rows):
        rows[0]["caption"] = "<TAG> Figure 1: </TAG> A <MATH> caption with no closing token"
        rows[-1]["kind"] = "oddity"
        rows[-1]["width"] = 3
        return rows + [rows[2]]

    def mentions(rows):
        rows[0]["char_start"], rows[0]["char_end"] = 10_000, 10_008
        rows[-1]["surface"] = None
        rows[-1]["sentence"] = "x <NOTE> y"
        return rows + [rows[3]]

    rewrite_shard(build_copy, "papers", papers)
    rewrite_shard(build_copy, "figures", figures)
    rewrite_shard(build_copy, "mentions", mentions)
    one = run_gate(str(build_copy), batch_rows=1_000_000)
    small = run_gate(str(build_copy), batch_rows=16)
    assert len(one.failed) >= 10
    assert small.checks == one.checks
    assert (small.rows, small.counts, small.success) == (one.rows, one.counts, one.success)
    # References joined one paper at a time (a range per paper): the same result again.
    ranged = run_gate(str(build_copy), batch_rows=16, range_rows=1)
    assert any(c.table == "references" and not c.success for c in one.checks)
    assert ranged.checks == one.checks
    assert (ranged.rows, ranged.counts, ranged.success) == (one.rows, one.counts, one.success)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 7), max_size=12), st.integers(1, 9))
def test_rebatched_frames_are_the_same_rows_in_full_batches(sizes, batch_rows):
    start, frames = 0, []
    for n in sizes:
        frames.append(pd.DataFrame({"i": range(start, start + n)}))
        start += n
    out = list(_rebatched(iter(frames), batch_rows))
    if not sizes:
        assert out == []
        return
    assert pd.concat(out, ignore_index=True)["i"].tolist() == list(range(start))  # the same rows, in order
    assert all(len(f) == batch_rows for f in out[:-1])  # only the last batch may be short
    if start == 0 and sizes:
        assert len(out) == 1 and len(out[0]) == 0 and list(out[0].columns) == ["i"]  # one empty frame, its columns


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.sampled_from(["2401.00001", "2401.00002", "2402.1", "a'b", "", None]), min_size=1, max_size=30),
    st.integers(1, 8),
)
def test_paper_ranges_put_every_row_in_exactly_one_range(paper_ids, rows):
    con = duckdb.connect()
    df = pd.DataFrame({"paper_id": pd.Series(paper_ids, dtype=object)})  # noqa: F841 - read by DuckDB by name
    for name in ("_fig", "_figrows", "_sec", "_men"):
        con.execute(f"CREATE TEMP TABLE {name} AS SELECT CAST(paper_id AS VARCHAR) AS paper_id FROM df")
    ranges = paper_ranges(con, rows)
    assert ranges[0][0] == "" and ranges[-1][1] is None
    counts = [
        con.execute(f"SELECT count(*) FROM _sec WHERE {papers_between(low, high)}").fetchone()[0]
        for low, high in ranges
    ]
    assert sum(counts) == len(paper_ids)  # a partition: no row in two ranges, none (NULL ids too) in none
    # A range holds about ``rows`` rows: fewer ranges than 4 tables x ids / rows, plus one
    assert len(ranges) <= 4 * len(paper_ids) // rows + 1
