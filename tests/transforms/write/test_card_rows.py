"""transforms/write/card_rows.py: the card's per-paper statistics rows, counted by the
process that writes a papers part, are the rows DuckDB gives running the card's own SQL
(``explore.stats.PAPER_ROWS_SQL``) on the same papers, for any text and any missing field;
and a build keeps them where the card looks, so that the card does not count them again."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_part_writer import _paper_tables

from sciga.explore.card_stats import code_key
from sciga.explore.stats import PAPER_ROWS_SQL, macros_sql
from sciga.schemas.arrow import SCHEMAS
from sciga.transforms.write.card_rows import PAPER_ROWS_KEY, SCHEMA, CardRows, paper_rows, token_count

# Every kind of whitespace either side of RE2's \s (which DuckDB uses), doubled newlines (the
# blank line between a section's paragraphs), letters in and out of ASCII.
_CHARS = [" ", "  ", "\t", "\n", "\n\n", "\r", "\f", "\v", "\xa0", "\u2003", "\u3000", "a", "bc", "é", "字", "x.y", "-"]
texts = st.one_of(st.none(), st.lists(st.sampled_from(_CHARS), max_size=12).map("".join))


def _duckdb() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    for sql in macros_sql():
        con.execute(sql)
    return con


def test_the_rows_are_counted_under_the_cards_key():
    """The SQL changed and this module did not: count as the new SQL does (and check it
    here), then set ``PAPER_ROWS_KEY`` to ``explore.card_stats.code_key()``."""
    assert PAPER_ROWS_KEY == code_key()


@settings(max_examples=60, deadline=None)
@given(st.lists(texts, min_size=1, max_size=30))
def test_token_count_is_sciga_ntok(values):
    con = _duckdb()
    con.register("v", pa.table({"i": range(len(values)), "s": pa.array(values, pa.string())}))
    want = [n for (n,) in con.execute("SELECT sciga_ntok(s) FROM v ORDER BY i").fetchall()]
    assert [token_count(v) for v in values] == want


def _maybe(strategy):
    return st.one_of(st.none(), strategy)


_ids = st.sampled_from(["2601.00001", "hep-th/9901001", "math.AG/0101001", "a/b/c", "", "nodot"])
_categories = st.sampled_from(["cs.CV", "q-bio.NC", "physics", "", ".x"])
_sections = st.lists(_maybe(st.fixed_dictionaries({"body": texts, "title": texts})), max_size=4)
_subfigures = st.lists(_maybe(st.fixed_dictionaries({"caption": texts})), max_size=3)
_figures = st.lists(_maybe(st.fixed_dictionaries({"caption": texts, "subfigures": _maybe(_subfigures)})), max_size=4)
_ga = st.fixed_dictionaries({"type": _maybe(st.sampled_from(["figure", "teaser"])), "de_facto": _maybe(st.booleans())})
papers = st.fixed_dictionaries(
    {
        "id": _maybe(_ids),
        "title": texts,
        "abstract": texts,
        "primary_category": _maybe(_categories),
        "subjects": _maybe(st.fixed_dictionaries({"arxiv": _maybe(st.lists(_maybe(_categories), max_size=2))})),
        "sections": _maybe(_sections),
        "figures": _maybe(_figures),
        "graphical_abstract": _maybe(_ga),
    }
)


def _sql_rows(table: pa.Table) -> list[dict]:
    con = _duckdb()
    con.register("papers_in", table)
    rel = con.sql(PAPER_ROWS_SQL.format(papers="papers_in"))
    return rel.to_arrow_table().to_pylist()


@settings(max_examples=60, deadline=None)
@given(st.lists(papers, min_size=1, max_size=6))
def test_rows_are_the_sql_rows(rows):
    table = pa.Table.from_pylist(rows, schema=SCHEMAS["papers"])
    assert paper_rows(table) == _sql_rows(table)


def test_edge_rows_are_the_sql_rows():
    """What a draw may miss: where the archive comes from, and empty against missing."""
    rows = [
        {"id": "2601.00001", "subjects": {"arxiv": [""]}},  # '' is a value: coalesce stops there
        {"id": "2601.00002", "subjects": {"arxiv": [None, "cs.CV"]}},  # the first is missing: no archive
        {"id": "hep-th/9901001", "subjects": {"arxiv": []}},  # from the id
        {"id": "math.AG/0101001", "primary_category": None},
        {"id": None, "sections": [None, {"body": None}, {"body": ""}], "figures": []},
        {"id": "x", "figures": [None, {"caption": None, "subfigures": None}, {"subfigures": [None, {}]}]},
        {"id": "y", "graphical_abstract": {"type": None, "de_facto": None}, "title": "\n\n", "abstract": " a  b "},
    ]
    table = pa.Table.from_pylist(rows, schema=SCHEMAS["papers"])
    assert paper_rows(table) == _sql_rows(table)


def test_rows_of_real_papers_are_the_sql_rows(samples):
    table = pa.concat_tables(_paper_tables(samples))
    got = paper_rows(table)
    assert got == _sql_rows(table)
    assert any(r["fulltext_tokens"] > 200 for r in got) and any(r["caption_token_list"] for r in got)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(papers, min_size=2, max_size=4))
def test_kept_file_is_what_duckdb_writes_of_the_sql(tmp_path_factory, rows):
    """The file has the schema DuckDB's COPY of the SQL gives it, so the card reads writer-made
    and card-made files together; a digest for every row, or for none."""
    table = pa.Table.from_pylist(rows, schema=SCHEMAS["papers"])
    root = tmp_path_factory.mktemp("store")
    card = CardRows(str(root))
    for i in range(table.num_rows):
        card.add(table.slice(i, 1), None if i == 0 else f"d{i}")
    assert card.keep("ab" * 32, table.num_rows - 1) is None  # not every row of the part
    path = card.keep("ab" * 32, table.num_rows)
    assert path is not None and path.endswith(f"{'ab' * 32}-{PAPER_ROWS_KEY}.parquet")
    kept = pq.read_table(path)
    assert kept.schema == SCHEMA and kept.column("digest").null_count == table.num_rows
    con = _duckdb()
    con.register("papers_in", table)
    copied = root / "copied.parquet"
    con.execute(
        f"COPY (SELECT *, NULL::VARCHAR AS digest FROM ({PAPER_ROWS_SQL.format(papers='papers_in')})) TO '{copied}'"
    )
    assert pq.read_schema(copied) == SCHEMA
    assert pq.read_table(copied).to_pylist() == kept.to_pylist()


def test_a_bucket_keeps_nothing(samples):
    card = CardRows("memory://store")  # a bucket's card counts its shards
    card.add(_paper_tables(samples)[0], "d")
    assert card.keep("cd" * 32, 1) is None


def test_a_rebuilds_part_counts_only_papers_without_a_kept_row(tmp_path, samples, monkeypatch):
    """Rows of the previous shard's kept file are taken by digest; the others are counted; a
    row group copied as bytes whose papers are all kept needs no table; one that is not
    leaves the part to the card."""
    from sciga.transforms.write import card_rows

    tables = _paper_tables(samples)[:6]
    first = CardRows(str(tmp_path))
    for i, t in enumerate(tables):
        first.add(t, f"d{i}")
    old = pq.read_table(first.keep("aa" * 32, 6))
    counted: list[int] = []
    real = card_rows.paper_rows
    monkeypatch.setattr(card_rows, "paper_rows", lambda t: counted.append(t.num_rows) or real(t))

    again = CardRows(str(tmp_path), ["aa" * 32, "ff" * 32])  # the second previous shard kept nothing
    again.add_taken(["d0", "d1"])
    again.add(tables[2], "d2")
    again.add(tables[3], "changed")
    again.add(tables[4], "d4")
    again.add(tables[5], None)
    new = pq.read_table(again.keep("bb" * 32, 6))
    assert sum(counted) == 2  # tables 3 and 5
    assert new.drop_columns(["digest"]).to_pylist() == old.drop_columns(["digest"]).to_pylist()
    assert new.column("digest").null_count == 6  # one paper without a digest: none has one, as in the card

    gone = CardRows(str(tmp_path), ["aa" * 32])
    gone.add_taken(["d0", "unknown"])
    gone.add(tables[2], "d2")
    assert gone.keep("cc" * 32, 3) is None
