"""The quality gate: every suite over one build, with Great Expectations on an ephemeral context.

``run_gate(out_dir)`` flattens the build (DuckDB for the nested configs, Python for file
facts and image bytes), validates each flat table with its suite and returns a
``GateResult``: which expectations failed, how many rows they found and example ids. It
never raises on bad data: a table that cannot even be computed (an unreadable shard, a
missing column) is itself a failed check saying why.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

import duckdb
import numpy as np
import pandas as pd

from sciga.quality import facts
from sciga.quality.defaults import DEFAULT_MAX_DEAD_LETTER_RATE, DEFAULT_MAX_MISSING_IMAGE_RATE, IMAGE_CHECKS
from sciga.quality.suites import SETUP_SQL, FlatTable, flat_tables
from sciga.quality.tokens import explain
from sciga.schemas.arrow import CONFIGS, SCHEMAS
from sciga.transforms.common.storage import duckdb_connect
from sciga.transforms.vision.decode import DEFAULT_MAX_PIXELS

log = logging.getLogger("sciga.quality")
MAX_EXAMPLES = 10


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
            lst = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
            con.execute(f"CREATE OR REPLACE VIEW {config} AS SELECT * FROM read_parquet([{lst}], union_by_name = true)")
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


def _columns(cfg) -> list[str]:
    kw = cfg.kwargs
    if "column" in kw:
        return [kw["column"]]
    return [kw[k] for k in ("column_A", "column_B") if k in kw]


def _validate(gx, ctx, bd, table: FlatTable, df: pd.DataFrame, options: dict) -> list[CheckResult]:
    name = table.name
    suite = gx.ExpectationSuite(name=f"sciga {name}", expectations=table.expectations(options))
    batch = bd.get_batch(batch_parameters={"dataframe": df})
    res = batch.validate(
        suite,
        result_format={
            "result_format": "SUMMARY",
            "unexpected_index_column_names": list(table.index),
            "partial_unexpected_count": MAX_EXAMPLES,
        },
    )
    out = []
    for r in res.results:
        cfg = r.expectation_config
        info = r.exception_info or {}
        err = info.get("exception_message") if info.get("raised_exception") else None
        result = r.result or {}
        out.append(
            CheckResult(
                table=name,
                config=table.config,
                expectation=cfg.type,
                description=cfg.description or cfg.type,
                column=" = ".join(_columns(cfg))
                if cfg.type.startswith("expect_column_pair")
                else ", ".join(_columns(cfg)),
                success=bool(r.success) and not err,
                element_count=int(result.get("element_count") or len(df)),
                unexpected_count=int(result.get("unexpected_count") or 0),
                examples=_examples(
                    result, [] if cfg.type == "expect_column_values_to_not_be_null" else _columns(cfg), table
                ),
                error=err,
            )
        )
        if table.breakdown and not out[-1].success and cfg.kwargs.get("column") == table.breakdown[1]:
            group, col = table.breakdown
            counts = df.loc[df[col].ne(True), group].value_counts()
            out[-1].breakdown = {str(k): int(v) for k, v in sorted(counts.items())}
    return out


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
) -> GateResult:
    """``max_pixels`` None: images are checked against the limit the build was made with
    (manifest.json), else the default; a number given here overrides both."""
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

    con = duckdb_connect(out_dir)  # a gs:// / s3:// / hf:// build is read through its fsspec filesystem
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

    python_tables = {
        "shards": lambda: shards,
        "manifest_counts": lambda: facts.counts_table(manifest, actual),
        "build": lambda: facts.build_table(manifest, actual),
        "images": lambda: facts.images_table(out_dir, image_check, max_pixels, image_workers),
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
                df = python_tables[table.name]()
            elif setup_error:
                raise RuntimeError(setup_error)
            else:
                df = con.execute(table.sql).df()
        except Exception as e:  # noqa: BLE001 - a table we cannot compute is a failed check
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            checks.extend(_error_checks(table, options, f"could not compute the flat table: {msg}"))
            timings[table.name] = time.perf_counter() - t
            continue
        rows[table.name] = len(df)
        checks.extend(_validate(gx, ctx, bd, table, df, options))
        timings[table.name] = timings.get(table.name, 0.0) + time.perf_counter() - t
        log.info("gate: %s (%d rows) in %.2fs", table.name, len(df), timings[table.name])
    con.close()
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
