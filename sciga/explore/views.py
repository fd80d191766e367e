"""DuckDB over a build: one view per config, plus the task views shipped in explore/sql/.

``connect(out_dir)`` returns a DuckDB connection where ``papers``, ``figures``,
``mentions`` and ``dead_letter`` are views over the Parquet shards, and every
``explore/sql/<name>.sql`` file (one ``SELECT`` each) is registered as view ``<name>``.

View parameters: a view file declares each of its parameters in a header comment,

    -- @param min_ratio DOUBLE 1.5: smallest width / height kept

and reads it as the DuckDB variable ``<view>_<name>`` with its default
(``coalesce(getvariable('method_diagrams_min_ratio'), 1.5)``). Set them with
``connect(out, params={"method_diagrams.min_ratio": 1.2})``, ``sciga sql OUT --view
method_diagrams --param min_ratio=1.2``, or ``SET VARIABLE method_diagrams_min_ratio = 1.2``
in SQL; ``RESET VARIABLE`` goes back to the default.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional, Union

import duckdb

from sciga.schemas.arrow import CONFIGS
from sciga.transforms.common.sql_text import sql_string

SQL_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sql")
_PARAM_RE = re.compile(
    r"^--\s*@param\s+(?P<name>[a-z_][a-z0-9_]*)\s+(?P<type>DOUBLE|INTEGER|VARCHAR|BOOLEAN)\s+"
    r"(?P<default>\S+?)\s*:\s*(?P<help>.*)$",
    re.M,
)


class ViewParamError(ValueError):
    """A view parameter that does not exist or whose value does not fit its type."""


@dataclass(frozen=True)
class ViewParam:
    view: str
    name: str
    type: str  # DOUBLE | INTEGER | VARCHAR | BOOLEAN
    default: str  # as written in the view file
    help: str

    @property
    def variable(self) -> str:
        """The DuckDB variable the view reads (``getvariable('<view>_<name>')``)."""
        return f"{self.view}_{self.name}"

    def literal(self, value: object) -> str:
        """``value`` as a SQL literal of this parameter's type; ViewParamError if it is not one."""
        text = str(value).strip()
        try:
            if self.type == "DOUBLE":
                v = float(text)
                if v != v or v in (float("inf"), float("-inf")):
                    raise ValueError
                return repr(v)
            if self.type == "INTEGER":
                return str(int(text))
            if self.type == "BOOLEAN":
                if text.lower() not in ("true", "false", "1", "0"):
                    raise ValueError
                return "TRUE" if text.lower() in ("true", "1") else "FALSE"
        except ValueError:
            raise ViewParamError(f"{self.view}.{self.name} takes a {self.type.lower()}, not {text!r}") from None
        return sql_string(text)


def shard_glob(out_dir: str, config: str) -> str:
    return posixpath.join(out_dir.rstrip("/"), "data", config, "*.parquet")


def task_views() -> dict[str, str]:
    """name -> SELECT text of every shipped task view."""
    views = {}
    if os.path.isdir(SQL_DIR):
        for name in sorted(os.listdir(SQL_DIR)):
            if name.endswith(".sql"):
                with open(os.path.join(SQL_DIR, name), encoding="utf-8") as f:
                    views[name[:-4]] = f.read().strip().rstrip(";")
    return views


def view_parameters() -> dict[str, list[ViewParam]]:
    """view -> the parameters its file declares (``-- @param NAME TYPE DEFAULT: help``)."""
    return {
        view: [ViewParam(view, m["name"], m["type"], m["default"], m["help"].strip()) for m in _PARAM_RE.finditer(sql)]
        for view, sql in task_views().items()
    }


def resolve_param(key: str, view: Optional[str] = None) -> ViewParam:
    """``"method_diagrams.min_ratio"``, or ``"min_ratio"`` with ``view`` (or when one view
    alone has a parameter of that name) -> its ViewParam."""
    params = view_parameters()
    if "." in key:
        view, key = key.split(".", 1)
    if view is not None and view not in params:
        raise ViewParamError(f"there is no task view {view!r} (views: {', '.join(params)})")
    found = [p for v, ps in params.items() if view in (None, v) for p in ps if p.name == key]
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        raise ViewParamError(
            f"{key!r} is a parameter of several views ({', '.join(p.view for p in found)}); write VIEW.{key}"
        )
    known = [
        f"{p.view}.{p.name} ({p.type.lower()}, default {p.default})"
        for v, ps in params.items()
        if view in (None, v)
        for p in ps
    ]
    where = f"view {view}" if view else "any task view"
    raise ViewParamError(f"{key!r} is not a parameter of {where}; parameters: {', '.join(known) or 'none'}")


def set_view_params(con: duckdb.DuckDBPyConnection, params: Mapping[str, object], view: Optional[str] = None) -> None:
    """Set view parameters on ``con`` (keys as for ``resolve_param``)."""
    for key, value in params.items():
        p = resolve_param(key, view)
        con.execute(f"SET VARIABLE {p.variable} = {p.literal(value)}")


def parse_param_args(items: Optional[list[str]]) -> dict[str, str]:
    """["min_ratio=1.2", "method_diagrams.max_ratio=3"] -> {"min_ratio": "1.2", ...}."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ViewParamError(f"--param takes NAME=VALUE, not {item!r}")
        out[key.strip()] = value.strip()
    return out


def connect(
    out_dir: str,
    con: Optional[duckdb.DuckDBPyConnection] = None,
    params: Optional[Mapping[str, Union[float, int, str, bool]]] = None,
    view: Optional[str] = None,
    tasks: bool = True,
) -> duckdb.DuckDBPyConnection:
    """Views over the build in ``out_dir`` (local, gs://, s3://, hf://...) on ``con`` (or a new
    connection). Remote builds are read through their fsspec filesystem (transforms/common/storage.py).
    ``tasks=False``: the configs' views alone (the dataset card reads no task view, and
    binding them cost a build's finalizing ~40 ms)."""
    from sciga.transforms.common.storage import duckdb_connect

    con = duckdb_connect(out_dir, con=con)
    for config in CONFIGS:
        glob = sql_string(shard_glob(out_dir, config))
        con.execute(f"CREATE OR REPLACE VIEW {config} AS SELECT * FROM read_parquet({glob})")
    for name, sql in task_views().items() if tasks else ():
        con.execute(f"CREATE OR REPLACE VIEW {name} AS {sql}")
    if params:
        set_view_params(con, params, view)
    return con
