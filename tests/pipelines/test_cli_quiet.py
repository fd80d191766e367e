"""Quiet by default: a normal `sciga build` prints no library warnings (only our own
warnings about the user's data and options), `-v` still turns INFO on in our format, and
`sciga --version` names the builder and schema versions."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from quality_fixtures import ROOT

from sciga.schemas.version import BUILDER_VERSION, SCHEMA_VERSION


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT))


def test_sample_build_stderr_has_only_our_own_warnings(tmp_path):
    res = subprocess.run(
        [sys.executable, "-m", "sciga", "build", "--sample", "--output", str(tmp_path / "out")],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "papers                 4" in res.stdout
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    # The one warning left is ours and about the run: no medical classifier weights were given.
    # Our own warnings and the progress line (a plain line when stderr is not a terminal).
    assert all(line.startswith(("WARNING sciga.", "sciga build: ")) for line in lines), "\n".join(lines)
    assert not any("apitools" in line or "Warning:" in line for line in lines)


# Configure as the CLI does, import Apache Beam (which logs the apitools line through the root
# logger while importing), then log from our own logger.
IMPORT_BEAM = r"""
import logging
from sciga.pipelines.cli_logging import configure_logging
configure_logging(verbose=True)
import apache_beam  # noqa: F401 - importing Beam is what used to print the stray warning
logging.getLogger("sciga.check").info("still configured")
logging.getLogger("sciga.check").warning("a real warning")
"""


@pytest.mark.e2e  # imports Beam in a fresh interpreter
def test_library_import_noise_is_dropped_and_our_format_survives():
    res = subprocess.run([sys.executable, "-c", IMPORT_BEAM], env=_env(), capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stderr.splitlines() == ["INFO sciga.check: still configured", "WARNING sciga.check: a real warning"]


def test_version_names_builder_and_schema():
    res = subprocess.run(
        [sys.executable, "-m", "sciga", "--version"], env=_env(), capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0
    assert res.stdout.strip() == f"sciga-builder {BUILDER_VERSION} (schema {SCHEMA_VERSION})"


@pytest.mark.corpus  # the arXiv API's recorded answers
def test_verbose_after_the_command_and_no_progress_bars_in_a_log(tmp_path):
    """`sciga fetch ... -v` (the flag after the command) turns INFO on as `sciga -v fetch`
    does; with stderr a pipe (a log file, CI), the fetch draws no progress bar even without
    --no-progress."""
    from sources_fixtures import CORPUS, FaultServer

    page = (CORPUS / "latexml" / "a1709.html").read_bytes()
    with FaultServer() as s:
        s.add("/html/1605.08386", page, headers={"Content-Type": "text/html; charset=utf-8"})
        env = {**_env(), **s.env()}
        for n, where in enumerate(("after", "before")):
            fetch = ["fetch", "--ids", "1605.08386", "--parts", "meta,html", "--output", str(tmp_path / f"cache{n}")]
            fetch += ["--rate-limit", "0.01", "--retry-backoff", "0.01", "--timeout", "5"]
            argv = [*fetch, "-v"] if where == "after" else ["-v", *fetch]
            res = subprocess.run(
                [sys.executable, "-m", "sciga", *argv], env=env, capture_output=True, text=True, timeout=300
            )
            assert res.returncode == 0, (where, res.stderr[-3000:])
            assert "INFO " in res.stderr, (where, res.stderr[-3000:])
            assert "\r" not in res.stderr and "part/s" not in res.stderr, (where, res.stderr[-3000:])
