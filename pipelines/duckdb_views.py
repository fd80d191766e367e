"""DuckDB over a build: one view per config, plus the task views shipped in pipelines/sql/.

``connect(out_dir)`` returns a DuckDB connection where ``papers``, ``figures``,
``mentions`` and ``dead_letter`` are views over the Parquet shards, and every
``pipelines/sql/<name>.sql`` file (one ``SELECT`` each) is registered as view ``<name>``.
"""
from __future__ import annotations

import os
import posixpath
from typing import Optional

import duckdb

from sciga.schemas.arrow import CONFIGS

SQL_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sql")


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


def connect(out_dir: str, con: Optional[duckdb.DuckDBPyConnection] = None) -> duckdb.DuckDBPyConnection:
    con = con or duckdb.connect()
    for config in CONFIGS:
        glob = shard_glob(out_dir, config).replace("'", "''")
        con.execute(f"CREATE OR REPLACE VIEW {config} AS SELECT * FROM read_parquet('{glob}')")
    for name, sql in task_views().items():
        con.execute(f"CREATE OR REPLACE VIEW {name} AS {sql}")
    return con
