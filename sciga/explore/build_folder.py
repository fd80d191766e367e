"""Is this folder a build? One check every command that reads a build runs first."""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

import fsspec

from sciga.transforms.common.sql_text import sql_string

SAMPLE_BUILD = "out/sample"  # where the README's `sciga build --sample --output out/sample` puts it


def check_is_build(out: str) -> None:
    """FileNotFoundError when ``out`` is no build; StorageError (one sentence) when its bucket
    is missing or this account may not read it."""
    from sciga.transforms.common.storage import check_location

    check_location(out)
    fs, root = fsspec.core.url_to_fs(out)
    if not fs.isdir(posixpath.join(root, "data")) and not fs.exists(posixpath.join(root, "manifest.json")):
        raise FileNotFoundError(
            f"{out} is not a build folder (no data/ and no manifest.json); give the --output folder of `sciga build`."
        )


def built_papers(out: str) -> tuple[dict, set]:
    """(paper id -> (version, updated) of every ``papers`` row, ids of the ``dead_letter``
    rows) of the build in ``out``; empty when there is no build there yet. Reads three
    narrow columns."""
    from sciga.transforms.common.storage import duckdb_connect

    fs, root = fsspec.core.url_to_fs(out)
    globs = {c: posixpath.join(out.rstrip("/"), "data", c, "*.parquet") for c in ("papers", "dead_letter")}
    present = {c: bool(fs.glob(posixpath.join(root, "data", c, "*.parquet"))) for c in globs}
    con = duckdb_connect(*globs.values())
    try:
        papers = (
            {}
            if not present["papers"]
            else {
                pid: (version, updated)
                for pid, version, updated in con.execute(
                    f"SELECT id, version, updated FROM read_parquet({sql_string(globs['papers'])})"
                ).fetchall()
            }
        )
        dead = (
            set()
            if not present["dead_letter"]
            else {
                pid
                for (pid,) in con.execute(
                    f"SELECT DISTINCT paper_id FROM read_parquet({sql_string(globs['dead_letter'])}) "
                    "WHERE paper_id IS NOT NULL"
                ).fetchall()
            }
        )
    finally:
        con.close()
    return papers, dead


def notebook_build(env: str = "SCIGA_BUILD", default: str = SAMPLE_BUILD) -> str:
    """The build a notebook reads: ``$SCIGA_BUILD``, else ``out/sample`` found from the working
    folder upwards (a notebook runs in ``notebooks/``, the README builds ``out/sample`` in the
    repository root). FileNotFoundError, saying what to do, when there is none."""
    given = os.environ.get(env)
    if given:
        return given
    here = Path.cwd()
    for folder in (here, *here.parents):
        candidate = folder / default
        if (candidate / "manifest.json").is_file() or (candidate / "data").is_dir():
            return str(candidate)
    raise FileNotFoundError(
        f"no build at {default} in {here} or a folder above it: run `sciga build --sample --output "
        f"{default}` in the repository root, or set {env} to a build folder."
    )
