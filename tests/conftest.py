"""Shared test fixtures: repository paths, the shared corpus, the embedded sample.

The test policy lives here too. CI always has ``../shared/corpus`` and the tools that
``scripts/setup.sh`` installs, so a test that needs them (markers ``corpus`` and ``tool``)
fails with one sentence saying what is missing; it never skips or shrinks. The only skips
allowed are platform-level ones (``ALLOWED_SKIPS``: no GPU here); the run prints how many
tests were skipped and fails on any other skip.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _corpus_dir() -> Path:
    """``$SCIGA_CORPUS``, else ``../shared/corpus`` beside the checkout (as CI lays it out),
    else the development machine's copy. The one place tests look for the corpus."""
    for cand in (os.environ.get("SCIGA_CORPUS"), ROOT.parent / "shared" / "corpus", Path("/work/shared/corpus")):
        if cand and Path(cand).is_dir():
            return Path(cand)
    return ROOT.parent / "shared" / "corpus"


CORPUS = _corpus_dir()
SAMPLES = ROOT / "samples"


ALLOWED_SKIPS = ("no CUDA device", "a GPU is present")  # platform-level: what this machine is, not what it lacks
_skips: list = []


def pytest_runtest_setup(item):
    if item.get_closest_marker("corpus") and not CORPUS.is_dir():
        pytest.fail(f"{item.nodeid} needs the shared corpus, expected at {CORPUS}: CI has it beside the checkout "
                    "(../shared/corpus); set SCIGA_CORPUS to where yours is.", pytrace=False)
    marker = item.get_closest_marker("tool")
    for tool in (marker.args if marker else ()):
        if shutil.which(tool) is None:
            pytest.fail(f"{item.nodeid} needs `{tool}`, which is not installed: run `bash scripts/setup.sh` "
                        "(it installs poppler-utils, ghostscript, latexml, imagemagick and chromium).", pytrace=False)


def pytest_runtest_logreport(report):
    # An expected failure (xfail: a fix that lands with another branch) is not a skip.
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _skips.append((report.nodeid, reason))


def pytest_sessionfinish(session, exitstatus):
    if any(not any(a in why for a in ALLOWED_SKIPS) for _, why in _skips) and session.exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    bad = [(n, why) for n, why in _skips if not any(a in why for a in ALLOWED_SKIPS)]
    terminalreporter.write_line(f"skipped tests: {len(_skips)}, {len(_skips) - len(bad)} of them allowed "
                                f"(only these platform reasons are: {' / '.join(map(repr, ALLOWED_SKIPS))})")
    for n, why in bad:
        terminalreporter.write_line(f"NOT ALLOWED: {n} skipped ({why}); a test needs what CI has, or fails saying so",
                                    red=True)


def pytest_collection_modifyitems(config, items):
    """Tests marked ``gpu`` skip, saying so, where torch sees no CUDA device (CI has none).
    torch is imported only when such a test was collected."""
    gpu_tests = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_tests:
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="no CUDA device")
    for item in gpu_tests:
        item.add_marker(skip)


@pytest.fixture(scope="session")
def corpus() -> Path:
    assert CORPUS.is_dir(), f"the shared corpus is expected at {CORPUS} (set SCIGA_CORPUS)"
    return CORPUS


@pytest.fixture(scope="session")
def samples() -> Path:
    return SAMPLES


def run_cli(*args: str, env: dict | None = None, timeout: int = 600):
    """Run `python -m sciga ...` from the repository root (works installed or not)."""
    import subprocess

    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    if env:
        e.update(env)
    return subprocess.run([sys.executable, "-m", "sciga", *args], cwd=str(ROOT), env=e, capture_output=True,
                          text=True, timeout=timeout)


@contextlib.contextmanager
def scoped_environ(env: dict):
    """``env`` set in this process's environment for the block, then put back as it was
    (for code that reads the environment itself, in-process CLI runs and session fixtures,
    where pytest's function-scoped ``monkeypatch`` does not reach)."""
    from sciga.pipelines.local_run import restore_environ

    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        restore_environ(saved)


@pytest.fixture(scope="session")
def gcs_server(tmp_path_factory):
    """fake-gcs-server on 127.0.0.1 and credentials as a user has them, with the environment
    pointing gcsfs, google-cloud-storage and Beam at them (this process and subprocesses).
    Yields the emulator's URL; every test makes its own bucket."""
    from gcs_fixtures import GcsEmulator, gcs_env, write_adc

    base = tmp_path_factory.mktemp("gcs")
    emulator = GcsEmulator(base / "fake-gcs-server.log").start()
    env = gcs_env(emulator.url, write_adc(base / "adc.json"))
    try:
        with scoped_environ(env):
            yield emulator.url
    finally:
        emulator.stop()


def _build(*argv: str, beam_args=None):
    import argparse

    from sciga.pipelines.build import add_arguments, run_build

    ap = argparse.ArgumentParser()
    add_arguments(ap)
    return run_build(ap.parse_args(list(argv)), beam_args)


SAMPLE_BUCKET = "sciga-sample"


@pytest.fixture(scope="session")
def gs_sample_inputs(gcs_server) -> dict:
    """The embedded sample's pages, sidecars and TeX sources in gs://sciga-sample/."""
    from gcs_fixtures import gcs, upload_tree

    gcs().mkdir(SAMPLE_BUCKET)
    urls = {}
    for part in ("html", "meta", "tex"):
        urls[part] = f"gs://{SAMPLE_BUCKET}/sample/{part}"
        upload_tree(SAMPLES / part, urls[part])
    return urls


def sample_build_args(inputs: dict, output: str) -> list[str]:
    return ["--input", inputs["html"], "--metadata", inputs["meta"], "--tex-input", inputs["tex"], "--output", output,
            "--workers", "1", "--quiet"]


@pytest.fixture(scope="session")
def gs_sample_build(gs_sample_inputs) -> str:
    """`sciga build` gs:// -> gs:// of the sample (in this process, DirectRunner)."""
    out = f"gs://{SAMPLE_BUCKET}/build"
    r = _build(*sample_build_args(gs_sample_inputs, out))
    assert r.counts.papers == 4 and r.counts.reconciled
    return out


@pytest.fixture(scope="session")
def local_sample_twin(tmp_path_factory) -> Path:
    """The same inputs built from the local checkout: what the gs:// build must equal."""
    out = tmp_path_factory.mktemp("twin") / "build"
    local = {part: str(SAMPLES / part) for part in ("html", "meta", "tex")}
    r = _build(*sample_build_args(local, str(out)))
    assert r.counts.papers == 4
    return out


# Fixtures shared by many test modules: defined in their own modules, made available to all
# tests here (conftest fixtures need no import in the test modules that use them).
from browser_fixtures import browser  # noqa: E402, F401 - a fixture, exported to every test module
from quality_fixtures import build_copy, sample_build  # noqa: E402, F401 - fixtures, exported to every test module
