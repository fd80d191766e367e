"""Shared test fixtures: repository paths, the shared corpus, the embedded sample.

The test policy lives here too. The shared corpus (``../shared/corpus``: real pages by others,
which the repository does not carry) is beside the checkout in CI; a clone on its own has
none. A test that reads it is marked ``corpus`` (by hand, or found from its code: it names
``CORPUS``, the ``corpus`` fixture or a path inside the corpus). Without the corpus such a
test skips, saying where the corpus comes from (``scripts/fetch_corpus.py``); under CI
(``CI=true``) it fails instead, so CI always runs every corpus test. The tools that
``scripts/setup.sh`` installs (marker ``tool``) are required everywhere: a test that lacks
one fails with one sentence. The only skips allowed are platform-level ones
(``ALLOWED_SKIPS``: no GPU here) and, outside CI, a missing corpus; the run prints how many
tests were skipped and fails on any other skip.

Two tiers. ``e2e`` tests run a whole build, a Beam pipeline end to end or the CLI as a
subprocess (minutes); the rest is the unit tier, ``python -m pytest -m "not e2e"`` (under a
minute). A test is e2e when it lives in ``tests/e2e/``, is marked ``e2e`` (or ``slow``, the
old name), or, found from its code, runs a build (``_runs_a_build``: the test, the fixtures
it uses, and the helpers of its module they call). A unit-tier test that runs a build all
the same fails, saying to mark it (``_unit_tier_guard``), so the tier stays fast.

Test modules import the fixture modules here as top-level modules (``from conftest import
ROOT``, ``from quality_fixtures import ...``): pytest.ini puts ``tests/`` on ``sys.path``, and
test module basenames are unique across the folders (``test_code_policy`` checks it).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _corpus_dir() -> Path:
    """``$SCIGA_CORPUS``, else ``../shared/corpus`` beside the checkout (as CI lays it out).
    The one place tests look for the corpus; no machine's own path is written here."""
    env = os.environ.get("SCIGA_CORPUS")
    return Path(env) if env else ROOT.parent / "shared" / "corpus"


CORPUS = _corpus_dir()
SAMPLES = ROOT / "samples"


# Under CI (CI=true, as every CI service sets it) the corpus is required: CI lays it out beside
# the checkout, and a corpus test that skipped there would hide a regression.
IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
# A clone on its own has no corpus: its tests skip, saying where the corpus comes from.
CORPUS_SKIP = (
    "needs the shared corpus (real pages by others, not in the repository), expected at {where}: "
    "fetch it with `python scripts/fetch_corpus.py` on a machine that is online, or set SCIGA_CORPUS"
)
ALLOWED_SKIPS: tuple[str, ...] = ("no CUDA device", "a GPU is present")  # platform-level: what this machine is
if not IN_CI:
    ALLOWED_SKIPS += ("needs the shared corpus",)
_skips: list = []


def needs_corpus() -> None:
    """For code that reads the corpus outside a test marked ``corpus`` (a module-scoped
    fixture, a helper): skips, or fails under CI, the way the marker does."""
    if CORPUS.is_dir():
        return
    why = CORPUS_SKIP.format(where=CORPUS)
    if IN_CI:
        pytest.fail(why + " (CI=true: the corpus is required)", pytrace=False)
    pytest.skip(why)


def pytest_configure(config):
    import signal

    # A suite started in the background by a script (`bash .ci/run &`) inherits SIGINT
    # ignored, and so would every `sciga` it starts; the tests that press Ctrl-C need what
    # a terminal gives. A handled signal is reset to its default in a child at exec.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_runtest_setup(item):
    if item.get_closest_marker("corpus"):
        needs_corpus()
    marker = item.get_closest_marker("tool")
    for tool in marker.args if marker else ():
        if shutil.which(tool) is None:
            pytest.fail(
                f"{item.nodeid} needs `{tool}`, which is not installed: run `bash scripts/setup.sh` "
                "(it installs poppler-utils, ghostscript, latexml, imagemagick and chromium).",
                pytrace=False,
            )


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
    terminalreporter.write_line(
        f"skipped tests: {len(_skips)}, {len(_skips) - len(bad)} of them allowed "
        f"(only these platform reasons are: {' / '.join(map(repr, ALLOWED_SKIPS))})"
    )
    for n, why in bad:
        terminalreporter.write_line(
            f"NOT ALLOWED: {n} skipped ({why}); a test needs what CI has, or fails saying so", red=True
        )


# A call that runs a whole build or the CLI as a subprocess: the in-process build entry points,
# `sciga build` / `sciga update` driven through `main`, and the helpers that spawn `sciga`.
_BUILD_CALL = re.compile(
    r"\b(run_build|_run_build|_build|build_sample|build_checked|run_cli|sciga_cmd|run_watched|run_notebook)\("
    r"|\bmain\(\s*\[\s*[\"'](build|update)[\"']"
    r"|[\"']-m[\"'],\s*[\"']sciga[\"']"
    r"|\[\s*[\"']sciga[\"'],"
)
_CALLED_NAME = re.compile(r"\b([A-Za-z_]\w*)\(")


@functools.cache
def _runs_a_build(func, depth: int = 2) -> bool:
    """Whether ``func``'s code, or that of a function of its own module it calls (``depth``
    levels down), runs a build (``_BUILD_CALL``)."""
    try:
        src = inspect.getsource(func)
    except (OSError, TypeError):
        return False
    if _BUILD_CALL.search(src):
        return True
    module = sys.modules.get(getattr(func, "__module__", ""), None)
    if not depth or module is None:
        return False
    for name in set(_CALLED_NAME.findall(src)):
        helper = getattr(module, name, None)
        if (
            inspect.isfunction(helper)
            and helper is not func
            and helper.__module__ == module.__name__
            and _runs_a_build(helper, depth - 1)
        ):
            return True
    return False


_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")


def _is_corpus_value(value, depth: int = 2) -> bool:
    """A path (or a str, or a container of them) inside the corpus folder."""
    if isinstance(value, (Path, str)):
        text = str(value)
        return text == str(CORPUS) or text.startswith(str(CORPUS) + os.sep)
    if depth and isinstance(value, (list, tuple, set, frozenset)):
        return any(_is_corpus_value(v, depth - 1) for v in value)
    if depth and isinstance(value, dict):
        return any(_is_corpus_value(v, depth - 1) for v in value.values())
    return False


@functools.cache
def _reads_corpus(func, depth: int = 2) -> bool:
    """Whether ``func``'s code names the corpus: ``CORPUS``, the ``corpus`` fixture, a global of
    its module that is a path inside the corpus, or a function of its module that does so
    (``depth`` levels down). Such a test is marked ``corpus`` without anyone remembering to."""
    try:
        src = inspect.getsource(func)
    except (OSError, TypeError):
        return False
    names = set(_IDENTIFIER.findall(src))
    if "CORPUS" in names or "needs_corpus" in names:
        return True
    module = sys.modules.get(getattr(func, "__module__", ""), None)
    if module is None:
        return False
    for name in names:
        value = getattr(module, name, None)
        if value is None or value is func:
            continue
        if _is_corpus_value(value):
            return True
        if depth and inspect.isfunction(value) and value.__module__ == module.__name__:
            if _reads_corpus(value, depth - 1):
                return True
    return False


def _needs_corpus(item) -> bool:
    func = getattr(item, "function", None)
    if func is not None and _reads_corpus(func):
        return True
    callspec = getattr(item, "callspec", None)
    if callspec is not None and any(_is_corpus_value(v) for v in callspec.params.values()):
        return True
    fixtures = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {}) or {}
    return "corpus" in fixtures or any(
        _reads_corpus(d.func) for name, defs in fixtures.items() if not name.startswith("_") for d in defs
    )


def _is_e2e(item) -> bool:
    if item.get_closest_marker("e2e") or item.get_closest_marker("slow"):
        return True
    if (ROOT / "tests" / "e2e") in Path(str(item.fspath)).resolve().parents:
        return True
    func = getattr(item, "function", None)
    if func is not None and _runs_a_build(func):
        return True
    fixtures = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {}) or {}
    return any(_runs_a_build(d.func) for name, defs in fixtures.items() if name != "_unit_tier_guard" for d in defs)


@pytest.hookimpl(tryfirst=True)  # before pytest's own hook deselects by `-m`
def pytest_collection_modifyitems(config, items):
    """Tests that run a build are marked ``e2e`` (``_is_e2e``). Tests marked ``gpu`` skip,
    saying so, where torch sees no CUDA device (CI has none); torch is imported only when
    such a test was collected."""
    for item in items:
        if _is_e2e(item) and not item.get_closest_marker("e2e"):
            item.add_marker(pytest.mark.e2e)
        if not item.get_closest_marker("corpus") and _needs_corpus(item):
            item.add_marker(pytest.mark.corpus)
    gpu_tests = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_tests:
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="no CUDA device")
    for item in gpu_tests:
        item.add_marker(skip)


@pytest.fixture(autouse=True)
def _unit_tier_guard(request, monkeypatch):
    """A unit-tier test (not ``e2e``) that runs a whole build or `sciga` as a subprocess fails,
    saying to mark it ``e2e``: the unit tier stays under a minute only if nothing slips in."""
    if request.node.get_closest_marker("e2e"):
        yield
        return
    import subprocess

    def refuse(what: str):
        pytest.fail(
            f"{request.node.nodeid} runs {what}, which belongs to the e2e tier: mark it "
            "@pytest.mark.e2e (or move it to tests/e2e/).",
            pytrace=False,
        )

    build_module = sys.modules.get("sciga.executors.build")
    if build_module is not None:
        monkeypatch.setattr(build_module, "_run_build", lambda *a, **k: refuse("a whole build"))
    real_popen = subprocess.Popen

    class GuardedPopen(real_popen):
        def __init__(self, args, *a, **k):
            argv = [str(x) for x in (args if isinstance(args, (list, tuple)) else [args])]
            if argv and (Path(argv[0]).name == "sciga" or argv[1:3] == ["-m", "sciga"]):
                refuse(f"`{' '.join(argv[:4])} ...` as a subprocess")
            super().__init__(args, *a, **k)

    monkeypatch.setattr(subprocess, "Popen", GuardedPopen)
    yield


@pytest.fixture(scope="session")
def corpus() -> Path:
    needs_corpus()
    return CORPUS


@pytest.fixture(scope="session")
def samples() -> Path:
    return SAMPLES


def cli_in_fresh_process(argv: list[str]):
    """`sciga ARGV` through ``cli.main`` in a new interpreter: (the completed process, whose
    return code is main's, and the modules that interpreter had imported by the end)."""
    import json
    import subprocess

    code = (
        "import sys, json\nfrom sciga.pipelines.cli import main\n"
        "try:\n    rc = main(json.loads(sys.argv[1]))\nexcept SystemExit as e:\n    rc = e.code\n"
        "sys.stderr.write('\\nMODULES ' + json.dumps(sorted(sys.modules)))\nsys.exit(rc)"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run(
        [sys.executable, "-c", code, json.dumps(list(argv))], cwd=str(ROOT), env=env, capture_output=True, text=True
    )
    lines = [x for x in r.stderr.splitlines() if x.startswith("MODULES ")]
    assert lines, r.stdout + r.stderr[-3000:]
    return r, set(json.loads(lines[-1][len("MODULES ") :]))


def run_cli(*args: str, env: dict | None = None, timeout: int = 600, python_args: tuple[str, ...] = ()):
    """Run `python [PYTHON_ARGS] -m sciga ...` from the repository root (works installed or
    not); ``python_args`` e.g. ``("-m", "cProfile", "-o", path)``."""
    import subprocess

    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    if env:
        e.update(env)
    return subprocess.run(
        [sys.executable, *python_args, "-m", "sciga", *args],
        cwd=str(ROOT),
        env=e,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@contextlib.contextmanager
def scoped_environ(env: dict):
    """``env`` set in this process's environment for the block, then put back as it was
    (for code that reads the environment itself, in-process CLI runs and session fixtures,
    where pytest's function-scoped ``monkeypatch`` does not reach)."""
    from sciga.transforms.common.environ import restore_environ

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
    return [
        "--input",
        inputs["html"],
        "--metadata",
        inputs["meta"],
        "--tex-input",
        inputs["tex"],
        "--output",
        output,
        "--workers",
        "1",
        "--quiet",
    ]


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
from dask_fixtures import dask_cluster  # noqa: E402, F401 - a fixture, exported to every test module
from quality_fixtures import build_copy, sample_build  # noqa: E402, F401 - fixtures, exported to every test module


@pytest.fixture
def stored_reads(monkeypatch) -> list:
    """The keys of the results whose tables are read back from a result store (in this
    process) while the test runs; clear it to count from a later point."""
    from sciga.transforms.common.result_store import TABLES, ResultStore

    reads: list = []
    real, real_table = ResultStore.read, ResultStore.read_table
    monkeypatch.setattr(
        ResultStore, "read", lambda self, key, tables=TABLES: reads.append(key) or real(self, key, tables)
    )
    monkeypatch.setattr(
        ResultStore, "read_table", lambda self, key, name: reads.append(key) or real_table(self, key, name)
    )
    return reads
