"""The quality gate: every suite over one build, with Great Expectations on an ephemeral context.

``run_gate(out_dir)`` flattens the build (DuckDB for the nested configs, Python for file
facts and image bytes), validates each flat table with its suite and returns a
``GateResult``: which expectations failed, how many rows they found and example ids. It
never raises on bad data: a table that cannot even be computed (an unreadable shard, a
missing column) is itself a failed check saying why.

Memory does not grow with the build. No flat table is ever held whole:

- DuckDB computes the flat tables under a memory limit and spills its temp tables and joins
  to a temporary folder beyond it;
- Great Expectations validates each flat table in batches of at most ``BATCH_ROWS`` rows
  streamed from DuckDB (image facts: a few shards at a time), and the batches' results are
  added up: counts summed, the first examples kept in row order, failures per group summed;
- the one rule that spans rows, unique ids, is a DuckDB aggregate over the whole flat table,
  reported as Great Expectations reports it (every row of a repeated value is unexpected,
  NULLs are not; the first examples in row order);
- a flat table whose rows never span papers (references: an id must resolve within its
  paper) is computed one range of paper ids at a time (``RANGE_ROWS``), relation by
  relation, so DuckDB joins one range's rows, never the whole build's. On SciGA-145k, the
  whole table in one query ran out of DuckDB's memory limit and failed a sound build.

So the verdicts, counts and examples are those of the whole table validated at once
(tests/quality/test_gate_batches.py holds the gate to that).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

import duckdb
import numpy as np
import pandas as pd

from sciga.quality import facts
from sciga.quality.defaults import DEFAULT_MAX_DEAD_LETTER_RATE, DEFAULT_MAX_MISSING_IMAGE_RATE, IMAGE_CHECKS
from sciga.quality.suites import SETUP_SQL, FlatTable, flat_tables, papers_between
from sciga.quality.tokens import explain
from sciga.schemas.arrow import CONFIGS, SCHEMAS
from sciga.transforms.common.sql_text import sql_string
from sciga.transforms.common.storage import duckdb_connect
from sciga.transforms.vision.defaults import DEFAULT_MAX_PIXELS

log = logging.getLogger("sciga.quality")
MAX_EXAMPLES = 10
# Rows of a flat table validated at a time. The widest flat tables (texts, spans) hold short
# strings, so a batch is tens of MB in pandas; fewer, larger batches cost less time (Great
# Expectations spends a fixed fraction of a second per batch and suite).
BATCH_ROWS = 100_000
# DuckDB's memory while it flattens the build; beyond it, it spills to a temporary folder.
DUCKDB_MEMORY_LIMIT = "512MB"
# A check that never spans papers (references) is computed one range of papers at a time; a
# range holds about this many rows (figures, subfigures, sections, mentions). One query's
# joins over SciGA-145k's ~5 million such rows ran out of DuckDB's 512 MB: it cannot spill
# every join of a query while they all stream.
RANGE_ROWS = 250_000
UNIQUE = "expect_column_values_to_be_unique"


@dataclass
class CheckResult:
    table: str
    config: str
    expectation: str  # GX expectation type
    description: str
    column: str
    success: bool
    element_count: int = 0
    unexpected_count: int = 0
    examples: list = field(default_factory=list)
    error: Optional[str] = None
    breakdown: dict = field(default_factory=dict)  # group -> unexpected rows (e.g. per reference relation)


@dataclass
class GateResult:
    out_dir: str
    success: bool
    checks: list
    options: dict
    rows: dict  # flat table -> rows validated
    counts: dict  # rows per config, read from the shards
    seconds: float
    timings: dict  # flat table -> seconds (flatten + validate)

    @property
    def failed(self) -> list:
        return [c for c in self.checks if not c.success]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["failed"] = len(self.failed)
        return d


def _quiet_gx():
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    import great_expectations  # noqa: F401 - configures its loggers on import; quiet them after

    for name in list(logging.root.manager.loggerDict):
        if name.startswith("great_expectations"):
            logging.getLogger(name).setLevel(logging.ERROR)
    logging.getLogger("great_expectations").setLevel(logging.ERROR)


def _gx_context():
    _quiet_gx()
    import great_expectations as gx
    import great_expectations.execution_engine.pandas_execution_engine as pandas_engine
    from great_expectations.data_context.types.base import ProgressBarsConfig

    # GX fingerprints every dataframe below HASH_THRESHOLD bytes (a full hash of all cells) to
    # recognise a batch it has seen; each flat table is validated exactly once, so that pass
    # is pure cost (it was the largest single cost of the gate on a million rows).
    pandas_engine.HASH_THRESHOLD = 0
    ctx = gx.get_context(mode="ephemeral")
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    # One asset and batch definition for every flat table: each table is handed over as the
    # batch's dataframe (adding assets per table re-serializes the context config each time).
    asset = ctx.data_sources.add_pandas("sciga").add_dataframe_asset(name="flat tables")
    return gx, ctx, asset.add_batch_definition_whole_dataframe("whole table")


def _register_views(con: duckdb.DuckDBPyConnection, out_dir: str, shards: pd.DataFrame) -> None:
    """Config views over the readable shards only (unreadable ones are failures already)."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(out_dir)
    proto = out_dir.split("://", 1)[0] + "://" if "://" in out_dir else ""
    for config in CONFIGS:
        ok = shards[(shards["config"] == config) & shards["readable"].eq(True)]
        files = [f"{proto}{root.rstrip('/')}/{r}" for r in ok["record"]]
        if files:
            lst = ", ".join(sql_string(f) for f in files)
            # Shards of another schema (a finding of the shards table) are read by column name,
            # so the other checks still run. Only then: union_by_name opens every shard's
            # reader when the view is made and keeps it (~0.15 MB a shard, 2,900 shards at
            # SciGA's size); shards of the config's exact schema read the same by position.
            by_name = not ok["schema_matches"].eq(True).all()
            con.execute(
                f"CREATE OR REPLACE VIEW {config} AS SELECT * FROM read_parquet([{lst}], union_by_name = {str(by_name).lower()})"
            )
        else:
            empty = SCHEMAS[config].empty_table()
            con.register(f"_empty_{config}", empty)
            con.execute(f"CREATE OR REPLACE VIEW {config} AS SELECT * FROM _empty_{config}")


ACTUAL_COUNTS_SQL = """
SELECT (SELECT count(*) FROM _pap) AS papers,
       (SELECT count(*) FROM _figrows WHERE kind = 'figure') AS figures,
       (SELECT count(*) FROM _figrows WHERE kind = 'subfigure') AS subfigures,
       (SELECT coalesce(sum(len(teaser)), 0) FROM _pap) AS teasers,
       (SELECT count(*) FROM mentions) AS mentions,
       (SELECT count(*) FROM dead_letter) AS dead_letter,
       (SELECT count(*) FROM dead_letter WHERE coalesce(scope, 'input') = 'input') AS dead_letter_inputs,
       (SELECT count(*) FROM _figrows WHERE has_image) AS images_embedded
"""


def _fmt(v: Any) -> str:
    if isinstance(v, float) and v != v:
        return "NULL"
    if v is None or v is pd.NA:
        return "NULL"
    s = repr(v) if isinstance(v, str) else str(v)
    return s if len(s) <= 80 else s[:77] + "..."


def _examples(result: dict, columns: list[str], table: FlatTable) -> list[str]:
    out = []
    for item in (result.get("partial_unexpected_index_list") or [])[:MAX_EXAMPLES]:
        record = table.label(item) if table.label else item.get("record")
        if record is None or record is pd.NA or (isinstance(record, float) and record != record):
            # A row without a name: show what the row holds instead of a bare "?".
            record = ", ".join(f"{k}={_fmt(v)}" for k, v in item.items()) or "(a row without any value)"
        vals = [(c, item.get(c)) for c in columns if c in item and c not in table.index]
        vals = [(c, v) for c, v in vals if not isinstance(v, (bool, np.bool_))]  # "listed=False" says nothing new
        if vals == [("skeleton", item.get("skeleton"))]:
            why = explain(item.get("skeleton") or "")
            out.append(f"{record} (tokens {item.get('skeleton')!r}: {why})")
        elif vals and not (len(vals) == 1 and vals[0][1] == record):
            out.append(f"{record} (" + ", ".join(f"{c}={_fmt(v)}" for c, v in vals) + ")")
        else:
            out.append(str(record))
    if not out:
        out = [_fmt(v) for v in (result.get("partial_unexpected_list") or [])[:MAX_EXAMPLES]]
    return out


@dataclass
class _Outcome:
    """One expectation's result added up over the batches of its flat table."""

    expectation: Any  # the GX expectation (its type, description and columns)
    success: bool = True
    element_count: int = 0  # GX's element_count, summed (0 where GX gave none)
    unexpected_count: int = 0
    index_examples: list = field(default_factory=list)  # first unexpected rows, in row order
    value_examples: list = field(default_factory=list)
    error: Optional[str] = None
    breakdown: Counter = field(default_factory=Counter)

    def add(self, result) -> None:
        """Add one batch's GX result (an ExpectationValidationResult)."""
        info = result.exception_info or {}
        if info.get("raised_exception") and self.error is None:
            self.error = info.get("exception_message")
        self.success = self.success and bool(result.success)
        r = result.result or {}
        self.element_count += int(r.get("element_count") or 0)
        self.unexpected_count += int(r.get("unexpected_count") or 0)
        room = MAX_EXAMPLES - len(self.index_examples)
        if room > 0:
            self.index_examples.extend((r.get("partial_unexpected_index_list") or [])[:room])
        room = MAX_EXAMPLES - len(self.value_examples)
        if room > 0:
            self.value_examples.extend((r.get("partial_unexpected_list") or [])[:room])

    def check(self, table: FlatTable, rows: int) -> CheckResult:
        cfg = self.expectation.configuration
        columns = _columns(cfg)
        result = CheckResult(
            table=table.name,
            config=table.config,
            expectation=cfg.type,
            description=cfg.description or cfg.type,
            column=" = ".join(columns) if cfg.type.startswith("expect_column_pair") else ", ".join(columns),
            success=self.success and not self.error,
            element_count=self.element_count or rows,
            unexpected_count=self.unexpected_count,
            examples=_examples(
                {"partial_unexpected_index_list": self.index_examples, "partial_unexpected_list": self.value_examples},
                [] if cfg.type == "expect_column_values_to_not_be_null" else columns,
                table,
            ),
            error=self.error,
        )
        if table.breakdown and not result.success and cfg.kwargs.get("column") == table.breakdown[1]:
            result.breakdown = {str(k): int(v) for k, v in sorted(self.breakdown.items())}
        return result


def _columns(cfg) -> list[str]:
    kw = cfg.kwargs
    if "column" in kw:
        return [kw["column"]]
    return [kw[k] for k in ("column_A", "column_B") if k in kw]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _unique_outcome(con: duckdb.DuckDBPyConnection, table: FlatTable, expectation) -> _Outcome:
    """``expect_column_values_to_be_unique`` over the whole flat table, in DuckDB: as GX
    reports it on a pandas frame, every non-NULL row whose value occurs more than once is
    unexpected, and the examples are the first such rows in the table's order."""
    column = expectation.configuration.kwargs["column"]
    col = _quote(column)
    repeated = f"SELECT {col} AS v FROM ({table.sql}) WHERE {col} IS NOT NULL GROUP BY ALL HAVING count(*) > 1"
    row = con.execute(
        f"SELECT coalesce(sum(n), 0) FROM (SELECT count(*) AS n FROM ({table.sql}) "
        f"WHERE {col} IS NOT NULL GROUP BY {col} HAVING count(*) > 1)"
    ).fetchone()
    unexpected = row[0] if row else 0
    out = _Outcome(expectation, success=not unexpected, unexpected_count=int(unexpected))
    if unexpected:
        names = list(dict.fromkeys([column, *table.index]))  # the order of GX's example dicts
        cur = con.execute(
            f"SELECT {', '.join(_quote(c) for c in names)} FROM (SELECT *, row_number() OVER () AS _sciga_row "
            f"FROM ({table.sql})) WHERE {col} IN ({repeated}) ORDER BY _sciga_row LIMIT {MAX_EXAMPLES}"
        )
        out.index_examples = [dict(zip(names, row)) for row in cur.fetchall()]
        out.value_examples = [e[column] for e in out.index_examples]
    return out


def _validate(
    gx,
    bd,
    table: FlatTable,
    frames: Iterable[pd.DataFrame],
    options: dict,
    con: Optional[duckdb.DuckDBPyConnection] = None,
) -> tuple[list[CheckResult], int]:
    """Validate a flat table given as consecutive frames; (its checks, its rows). With
    ``con``, uniqueness is checked by DuckDB over ``table.sql`` (after the frames, whose
    stream the same connection serves)."""
    expectations = table.expectations(options)
    in_duckdb = [con is not None and e.expectation_type == UNIQUE for e in expectations]
    per_batch = [e for e, d in zip(expectations, in_duckdb) if not d]
    outcomes = [_Outcome(e) for e in per_batch]
    suite = gx.ExpectationSuite(name=f"sciga {table.name}", expectations=per_batch)
    result_format = {
        "result_format": "SUMMARY",
        "unexpected_index_column_names": list(table.index),
        "partial_unexpected_count": MAX_EXAMPLES,
    }
    rows = 0
    for df in frames:
        rows += len(df)
        if per_batch:
            res = bd.get_batch(batch_parameters={"dataframe": df}).validate(suite, result_format=result_format)
            for outcome, r in zip(outcomes, res.results):
                outcome.add(r)
        if table.breakdown:
            group, col = table.breakdown
            grouped = next((o for o in outcomes if o.expectation.configuration.kwargs.get("column") == col), None)
            if grouped is not None:
                grouped.breakdown.update(df.loc[df[col].ne(True), group].value_counts().to_dict())
    by_duckdb = iter([_unique_outcome(con, table, e) for e, d in zip(expectations, in_duckdb) if d and con is not None])
    batched = iter(outcomes)
    ordered = [next(by_duckdb) if d else next(batched) for d in in_duckdb]
    return [o.check(table, rows) for o in ordered], rows


def _sql_frames(con: duckdb.DuckDBPyConnection, sql: str, batch_rows: int) -> Iterator[pd.DataFrame]:
    """The rows of ``sql`` as consecutive DataFrames of at most ``batch_rows`` rows, streamed
    from DuckDB (which hands over whole vectors of 2,048 rows); an empty result is one empty
    frame with its columns."""
    result = con.execute(sql)
    vectors = -(-batch_rows // 2048)
    first = True
    while True:
        chunk = result.fetch_df_chunk(vectors)
        if len(chunk) == 0:
            if first:
                yield chunk
            return
        first = False
        for start in range(0, len(chunk), batch_rows):
            yield chunk.iloc[start : start + batch_rows]


# Consecutive ranges of paper ids, each with about ``$rows`` rows of its papers (a paper with
# more is a range of its own): the first id of each range, in order.
PAPER_RANGES_SQL = """
    WITH per_paper AS (
        SELECT coalesce(paper_id, '') AS k, count(*) AS n
        FROM (SELECT paper_id FROM _fig UNION ALL SELECT paper_id FROM _figrows
              UNION ALL SELECT paper_id FROM _sec UNION ALL SELECT paper_id FROM _men)
        GROUP BY ALL),
    running AS (SELECT k, n, sum(n) OVER (ORDER BY k ROWS UNBOUNDED PRECEDING) AS total FROM per_paper)
    SELECT min(k) AS low FROM running GROUP BY (total - n) // $rows ORDER BY low"""


def paper_ranges(con: duckdb.DuckDBPyConnection, rows: int) -> list[tuple[str, Optional[str]]]:
    """[low, high) ranges of paper ids that cover every id (the first starts at '', the last
    has no end), each with about ``rows`` rows of the build."""
    lows = [r[0] for r in con.execute(PAPER_RANGES_SQL, {"rows": max(1, int(rows))}).fetchall()][1:]
    starts = ["", *lows]
    return list(zip(starts, [*lows, None]))


def _per_paper_frames(
    con: duckdb.DuckDBPyConnection, table: FlatTable, ranges: list, batch_rows: int
) -> Iterator[pd.DataFrame]:
    """``table``'s rows part by part and, within a part, range of papers by range: each query
    joins one range's rows only. The rows are those of ``table.sql``: a part's rows for a
    partition of the papers are its rows."""
    assert table.per_papers is not None
    by_range = [table.per_papers(papers_between(low, high)) for low, high in ranges]  # [range][part]
    for part in range(len(by_range[0]) if by_range else 0):
        for queries in by_range:
            yield from _sql_frames(con, queries[part], batch_rows)


def _rebatched(frames: Iterable[pd.DataFrame], batch_rows: int) -> Iterator[pd.DataFrame]:
    """The same rows in frames of ``batch_rows`` (the last may be shorter): many small
    queries' results validated as few batches (a batch costs Great Expectations a fixed
    time). No rows: one empty frame with the columns."""
    pending: list[pd.DataFrame] = []
    held, yielded, empty = 0, False, None
    for df in frames:
        if len(df) == 0:
            empty = df if empty is None else empty
            continue
        pending.append(df)
        held += len(df)
        while held >= batch_rows:
            whole = pd.concat(pending, ignore_index=True)
            yield whole.iloc[:batch_rows]
            yielded = True
            rest = whole.iloc[batch_rows:]
            pending, held = ([rest] if len(rest) else []), len(rest)
    if pending:
        yield pd.concat(pending, ignore_index=True)
    elif not yielded and empty is not None:
        yield empty


def _error_checks(table: FlatTable, options: dict, message: str) -> list[CheckResult]:
    return [
        CheckResult(
            table=table.name,
            config=table.config,
            expectation=e.type if hasattr(e, "type") else type(e).__name__,
            description=e.description or "",
            column="",
            success=False,
            error=message,
        )
        for e in table.expectations(options)
    ]


def build_pixel_limit(manifest: Optional[dict]) -> Optional[int]:
    """The pixel limit the build's vision stage decoded with (``options.max_image_pixels``
    in manifest.json), or None when the manifest does not say."""
    value = ((manifest or {}).get("options") or {}).get("max_image_pixels")
    try:
        return int(value) if value is not None and int(value) > 0 else None
    except (TypeError, ValueError):
        return None


def run_gate(
    out_dir: str,
    max_dead_letter_rate: float = DEFAULT_MAX_DEAD_LETTER_RATE,
    image_check: str = "decode",
    max_pixels: Optional[int] = None,
    image_workers: int = 1,
    max_missing_image_rate: float = DEFAULT_MAX_MISSING_IMAGE_RATE,
    batch_rows: int = BATCH_ROWS,
    memory_limit: str = DUCKDB_MEMORY_LIMIT,
    range_rows: int = RANGE_ROWS,
) -> GateResult:
    """``max_pixels`` None: images are checked against the limit the build was made with
    (manifest.json), else the default; a number given here overrides both. ``batch_rows``:
    rows validated at a time; ``memory_limit``: DuckDB's, beyond which it spills to disk;
    ``range_rows``: rows of the papers a check that never spans papers joins at a time."""
    if image_check not in IMAGE_CHECKS:
        raise ValueError(f"image_check must be one of {IMAGE_CHECKS}, not {image_check!r}")
    t0 = time.perf_counter()
    gx, ctx, bd = _gx_context()
    timings: dict = {}

    t = time.perf_counter()
    manifest, manifest_problem = facts.read_manifest(out_dir)
    if max_pixels is not None:
        pixel_source = "option"
    elif build_pixel_limit(manifest) is not None:
        max_pixels, pixel_source = build_pixel_limit(manifest), "manifest"
    else:
        max_pixels, pixel_source = DEFAULT_MAX_PIXELS, "default"
    options = {
        "max_dead_letter_rate": max_dead_letter_rate,
        "image_check": image_check,
        "max_pixels": max_pixels,
        "max_pixels_source": pixel_source,
        "max_missing_image_rate": max_missing_image_rate,
        "licences": ((manifest or {}).get("options") or {}).get("licences") or "all",  # the build's policy
    }
    shards = facts.shards_table(out_dir, manifest)
    timings["shards"] = time.perf_counter() - t

    with _bounded_duckdb(out_dir, memory_limit) as con:
        return _validate_build(
            con,
            gx,
            bd,
            out_dir,
            options,
            manifest,
            manifest_problem,
            shards,
            image_workers,
            batch_rows,
            range_rows,
            timings,
            t0,
        )


@contextmanager
def _bounded_duckdb(out_dir: str, memory_limit: str) -> Iterator[duckdb.DuckDBPyConnection]:
    """A DuckDB connection that spills to a temporary folder (removed after) beyond
    ``memory_limit``. A gs:// / s3:// / hf:// build is read through its fsspec filesystem.
    The insertion order is kept (DuckDB's default): examples are the first rows in order."""
    spill = tempfile.mkdtemp(prefix="sciga-gate-")
    con = duckdb_connect(
        out_dir,
        con=duckdb.connect(config={"memory_limit": memory_limit, "temp_directory": spill}),
    )
    con.execute("SET enable_progress_bar = false")  # it would print to stdout on a long query
    try:
        yield con
    finally:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)


def _validate_build(
    con: duckdb.DuckDBPyConnection,
    gx,
    bd,
    out_dir: str,
    options: dict,
    manifest: Optional[dict],
    manifest_problem: Optional[str],
    shards: pd.DataFrame,
    image_workers: int,
    batch_rows: int,
    range_rows: int,
    timings: dict,
    t0: float,
) -> GateResult:
    setup_error = None
    t = time.perf_counter()
    try:
        _register_views(con, out_dir, shards)
        for sql in SETUP_SQL:
            con.execute(sql)
        actual = con.execute(ACTUAL_COUNTS_SQL).df().iloc[0].to_dict()
        actual = {k: int(v) for k, v in actual.items()}
    except duckdb.Error as e:
        setup_error = f"the shards could not be read together ({str(e).splitlines()[0]})"
        actual = {}
    timings["flatten (DuckDB temp tables)"] = time.perf_counter() - t

    # Processes decode images only when there are images to decode (a pool costs memory).
    image_workers = image_workers if actual.get("images_embedded", 1) else 1
    python_tables = {
        "shards": lambda: [shards],
        "manifest_counts": lambda: [facts.counts_table(manifest, actual)],
        "build": lambda: [facts.build_table(manifest, actual)],
        "images": lambda: facts.image_frames(
            out_dir, options["image_check"], options["max_pixels"], image_workers, batch_rows
        ),
    }
    checks: list[CheckResult] = []
    rows: dict = {}
    if manifest_problem:
        checks.append(
            CheckResult(
                table="build",
                config="build",
                expectation="manifest_readable",
                description="the build has a readable manifest.json",
                column="",
                success=False,
                error=manifest_problem,
            )
        )
    for table in flat_tables():
        t = time.perf_counter()
        try:
            if table.sql is None:
                table_checks, n = _validate(gx, bd, table, python_tables[table.name](), options)
            elif setup_error:
                raise RuntimeError(setup_error)
            elif table.per_papers is not None:
                ranges = paper_ranges(con, range_rows)
                frames = _rebatched(_per_paper_frames(con, table, ranges, batch_rows), batch_rows)
                table_checks, n = _validate(gx, bd, table, frames, options, con)
                log.info("gate: %s in %d ranges of papers", table.name, len(ranges))
            else:
                table_checks, n = _validate(gx, bd, table, _sql_frames(con, table.sql, batch_rows), options, con)
        except Exception as e:  # noqa: BLE001 - a table we cannot compute is a failed check
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            checks.extend(_error_checks(table, options, f"could not compute the flat table: {msg}"))
            timings[table.name] = time.perf_counter() - t
            continue
        rows[table.name] = n
        checks.extend(table_checks)
        timings[table.name] = timings.get(table.name, 0.0) + time.perf_counter() - t
        log.info("gate: %s (%d rows) in %.2fs", table.name, n, timings[table.name])
    success = all(c.success for c in checks)
    return GateResult(
        out_dir=out_dir,
        success=success,
        checks=checks,
        options=options,
        rows=rows,
        counts=actual,
        seconds=time.perf_counter() - t0,
        timings=timings,
    )
