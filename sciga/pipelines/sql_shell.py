"""`sciga sql OUT ["SELECT ..."]`: DuckDB over a build's shards, configs and task views pre-registered.

With a query (or ``--view NAME``, with ``--param NAME=VALUE`` for the view's parameters)
it prints or exports the result (``--format table|csv|json|parquet``, ``--output FILE``; the
default is the table on a terminal and CSV when standard output is a pipe or a file, so
``sciga sql OUT "..." | cut -d, -f1`` reads plain rows); without one it starts a small line-based
shell: statements end with ``;``, ``.views`` lists the registered views, ``.schema NAME``
shows one, ``.quit`` leaves. OUT may be a local folder, any fsspec path, or a published
dataset on the Hub, ``hf://datasets/ORG/NAME@v1.2.0`` (read through huggingface_hub's
filesystem, so no DuckDB extension has to be downloaded).

Memory stays flat as the build grows (issue 47): the configs are views over the Parquet
shards (nothing is loaded), DuckDB works under ``--memory-limit`` and spills beyond it to a
temporary folder (removed afterwards), and a csv/json/parquet result is streamed by
``COPY (query) TO ...`` into the file, Parquet in row groups of ``PARQUET_ROW_GROUP_ROWS``
rows (DuckDB's default, 122,880 rows, held a row group of whole papers in memory). Rows keep
their order (insertion order is preserved: an export of ``papers`` lists the shards' rows as
they are, the same on every run).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from typing import Optional, TextIO

import duckdb

from sciga.pipelines.arg_types import positive_int
from sciga.transforms.common.sql_text import sql_string

FORMATS = ("table", "csv", "json", "parquet")
PARQUET_ROW_GROUP_ROWS = 2048  # a papers row holds a whole paper's text: a row group is the writer's buffer
PARQUET_ROW_GROUP_BYTES = "64MB"  # and a cap in bytes for the widest rows
COPY_OPTIONS = {
    "csv": "FORMAT csv, HEADER true",
    "json": "FORMAT json",
    "parquet": f"FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {PARQUET_ROW_GROUP_ROWS}, "
    f"ROW_GROUP_SIZE_BYTES '{PARQUET_ROW_GROUP_BYTES}'",
}
DEFAULT_MEMORY_LIMIT = "512MB"


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "out",
        metavar="OUT",
        nargs="?",
        help="build folder (or hf://datasets/ORG/NAME[@REVISION]); not needed with --list-params",
    )
    ap.add_argument("query", nargs="?", help="one SQL statement; omit for an interactive shell")
    ap.add_argument("--view", metavar="NAME", help="shorthand for SELECT * FROM NAME")
    ap.add_argument(
        "--format",
        choices=FORMATS,
        default=None,
        help="table (default on a terminal), csv (default when standard output is a pipe or a file, "
        "and with --output FILE.csv), json (one object per line) or parquet (needs --output)",
    )
    ap.add_argument("--output", metavar="FILE", help="write the result here instead of standard output")
    ap.add_argument("--max-rows", type=positive_int, default=40, help="rows shown by the table format (default 40)")
    ap.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a task view parameter, e.g. --view method_diagrams --param min_ratio=1.2 "
        "(or VIEW.NAME=VALUE); repeatable. --list-params shows them",
    )
    ap.add_argument(
        "--memory-limit",
        default=DEFAULT_MEMORY_LIMIT,
        metavar="SIZE",
        help=f"DuckDB's memory limit; it spills to a temporary folder beyond it (default {DEFAULT_MEMORY_LIMIT})",
    )
    ap.add_argument(
        "--list-params", action="store_true", help="list every task view parameter with its default and exit"
    )


def open_build(
    out: str,
    params: Optional[dict] = None,
    view: Optional[str] = None,
    memory_limit: Optional[str] = None,
    spill_dir: Optional[str] = None,
) -> duckdb.DuckDBPyConnection:
    """A connection with the build's configs and task views registered (and view
    parameters set: ``{"min_ratio": "1.2"}`` with ``view``, or ``{"VIEW.NAME": ...}``).
    A remote OUT (gs://, s3://, hf://datasets/ORG/NAME@REV ...) is read through its fsspec
    filesystem: no DuckDB extension is downloaded, the user's own login is used.
    ``memory_limit`` / ``spill_dir``: DuckDB's limit and the folder it spills to beyond it."""
    from sciga.explore.views import connect

    config: dict[str, str | bool | int | float | list[str]] = {}
    if memory_limit:
        config["memory_limit"] = memory_limit
    if spill_dir:
        config["temp_directory"] = spill_dir
    con = duckdb.connect(config=config) if config else None
    if con is not None:
        con.execute("SET enable_progress_bar = false")  # it would print to stdout on a long query
    return connect(out, con=con, params=params, view=view)


def params_text() -> str:
    from sciga.explore.views import view_parameters

    lines = []
    for view, params in view_parameters().items():
        for p in params:
            lines.append(f"{view}.{p.name}\t{p.type.lower()}\tdefault {p.default}\t{p.help}")
    return "\n".join(lines) + "\n" if lines else "no task view takes parameters\n"


def hf_filesystem():
    """huggingface_hub's fsspec filesystem as DuckDB needs it (kept here for notebooks)."""
    from sciga.transforms.common.storage import hub_filesystem

    return hub_filesystem()


def view_names(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [
        r[0]
        for r in con.execute(
            "SELECT view_name FROM duckdb_views() WHERE NOT internal AND temporary = false ORDER BY view_name"
        ).fetchall()
    ]


def _materialize(con: duckdb.DuckDBPyConnection, query: str) -> Optional[int]:
    """Run ``query`` into the temp table ``_sciga_result`` and return its row count, or run a
    statement that has no result (``CREATE VIEW ...``, ``SET ...``) and return None."""
    try:
        con.execute(f"CREATE OR REPLACE TEMP TABLE _sciga_result AS {query}")
    except duckdb.ParserException:
        con.execute(query)  # not a query; an error here is the statement's own
        return None
    return con.execute("SELECT count(*) FROM _sciga_result").fetchall()[0][0]


def export(
    con: duckdb.DuckDBPyConnection, query: str, fmt: str, output: Optional[str], stream: TextIO, max_rows: int = 40
) -> int:
    """Run ``query`` and write the result; returns the number of rows. A csv/json/parquet
    result is streamed into the file by ``COPY (query) TO`` (nothing held but DuckDB's
    buffers); the table is a temp table (it spills beyond the connection's memory limit)."""
    if fmt != "table":
        if fmt == "parquet" and output is None:
            raise SystemExit("sciga sql: --format parquet writes binary data; give --output FILE.")
        try:
            return _copy(con, f"({query})", fmt, output, stream)
        except duckdb.ParserException:
            pass  # not a query (SET ..., CREATE VIEW ..., COPY ...): run as before, below
    n = _materialize(con, query)
    if n is None:
        return 0
    if fmt == "table":
        if output is None:
            text = str(con.sql(f"SELECT * FROM _sciga_result LIMIT {int(max_rows)}"))
            stream.write(text.rstrip("\n") + "\n")
            if n > max_rows:
                stream.write(f"({n} rows, {max_rows} shown; use --format csv/json/parquet --output FILE for all)\n")
        else:
            import fsspec

            with fsspec.open(output, "w", encoding="utf-8") as f:  # a local file or gs://...
                f.write(con.execute("SELECT * FROM _sciga_result").df().to_string(index=False) + "\n")
        return n
    _copy(con, "_sciga_result", fmt, output, stream)
    return n


def _copy(con: duckdb.DuckDBPyConnection, source: str, fmt: str, output: Optional[str], stream: TextIO) -> int:
    """``COPY source TO output`` (or to a temporary file copied to ``stream``); the row count."""
    target = output
    tmpdir = None
    if target is None:
        tmpdir = tempfile.mkdtemp(prefix="sciga-sql-")
        target = os.path.join(tmpdir, f"result.{fmt}")
    try:
        row = con.execute(f"COPY {source} TO {sql_string(target)} ({COPY_OPTIONS[fmt]})").fetchone()
        if output is None:
            with open(target, encoding="utf-8") as f:
                shutil.copyfileobj(f, stream)
    finally:
        if tmpdir:
            shutil.rmtree(tmpdir, ignore_errors=True)
    return int(row[0]) if row and row[0] is not None else 0


def repl(con: duckdb.DuckDBPyConnection, stdin: TextIO, stdout: TextIO, fmt: str = "table", max_rows: int = 40) -> int:
    """A line-based shell: statements end with ';'. Errors are shown, never fatal."""
    try:
        import readline  # noqa: F401 - history and line editing on terminals
    except ImportError:
        pass
    interactive = stdin.isatty()
    if interactive:
        stdout.write(
            "sciga sql: views " + ", ".join(view_names(con)) + "\n"
            "end statements with ';'  .views  .schema NAME  .mode table|csv|json  .quit\n"
        )
    buf: list[str] = []
    while True:
        if interactive:
            stdout.write("sciga> " if not buf else "   ...> ")
            stdout.flush()
        line = stdin.readline()
        if not line:
            break
        s = line.strip()
        if not buf and s.startswith("."):
            cmd, _, arg = s.partition(" ")
            if cmd in (".quit", ".exit", ".q"):
                break
            if cmd == ".views":
                stdout.write("\n".join(view_names(con)) + "\n")
            elif cmd == ".schema" and arg:
                try:
                    export(con, f"DESCRIBE {arg.strip()}", "table", None, stdout, 1000)
                except Exception as e:  # noqa: BLE001 - a bad query is reported and the shell goes on
                    stdout.write(f"error: {(str(e).splitlines() or [type(e).__name__])[0]}\n")
            elif cmd == ".mode" and arg.strip() in ("table", "csv", "json"):
                fmt = arg.strip()
            else:
                stdout.write("commands: .views  .schema NAME  .mode table|csv|json  .quit\n")
            continue
        if not s and not buf:
            continue
        buf.append(line)
        if s.endswith(";"):
            query = "".join(buf).strip().rstrip(";")
            buf = []
            try:
                export(con, query, fmt, None, stdout, max_rows)
            except Exception as e:  # noqa: BLE001 - a bad statement never ends the shell
                stdout.write(f"error: {(str(e).splitlines() or [type(e).__name__])[0]}\n")
    return 0


def run(args, rest=None) -> int:
    from sciga.explore.build_folder import check_is_build
    from sciga.explore.views import ViewParamError, parse_param_args

    if args.list_params:  # the parameters are the views', not the build's: no OUT needed
        sys.stdout.write(params_text())
        return 0
    if not args.out:
        print("sciga sql: give the build folder to query (sciga sql OUT [QUERY]).", file=sys.stderr)
        return 2
    if not args.out.startswith("hf://"):
        check_is_build(args.out)
    else:  # a missing repo or revision, or a Hub out of reach: one sentence, before DuckDB's error
        from sciga.transforms.common.storage import check_location

        check_location(args.out)
    spill = tempfile.mkdtemp(prefix="sciga-sql-spill-")
    try:
        try:
            con = open_build(args.out, parse_param_args(args.param), args.view, args.memory_limit, spill)
        except ViewParamError as e:
            print(f"sciga sql: --param: {e}.", file=sys.stderr)
            return 2
        except duckdb.Error as e:  # --memory-limit 12 parsecs
            print(f"sciga sql: --memory-limit {args.memory_limit}: {str(e).splitlines()[0]}", file=sys.stderr)
            return 2
        if args.output:
            from sciga.transforms.common.storage import register_filesystems

            register_filesystems(con, [args.output])  # COPY ... TO 'gs://...' goes through fsspec too
        try:
            return _run_query(con, args)
        finally:
            con.close()  # closes the remote files it opened before the interpreter goes
    finally:
        shutil.rmtree(spill, ignore_errors=True)


def _is_terminal(stream: TextIO) -> bool:
    """True when ``stream`` is a terminal (the table is for a person; a pipe gets CSV)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _run_query(con: duckdb.DuckDBPyConnection, args) -> int:
    if args.view and args.view not in view_names(con):
        from sciga.transforms.common.errors import UserError

        raise UserError(f"--view {args.view} is not a view of this build; the views are {', '.join(view_names(con))}.")
    query = args.query or (f"SELECT * FROM {args.view}" if args.view else None)
    fmt = args.format or (
        ("table" if _is_terminal(sys.stdout) else "csv")
        if args.output is None
        else os.path.splitext(args.output)[1].lstrip(".") or "csv"
    )
    if fmt not in FORMATS:
        fmt = "csv"
    if query is None:
        return repl(con, sys.stdin, sys.stdout, fmt if fmt != "parquet" else "table", args.max_rows)
    try:
        n = export(con, query, fmt, args.output, sys.stdout, args.max_rows)
    except duckdb.Error as e:
        print(f"sciga sql: the query failed: {str(e).splitlines()[0]}", file=sys.stderr)
        return 1
    if args.output:
        print(f"{n} rows -> {args.output}", file=sys.stderr)
    return 0
