"""Warm worker processes (issue 26, both cores): a local build on Beam's runner with several
workers (one that runs a model, or ``SCIGA_IN_PROCESS=0``) starts one warm process before it
imports Beam; Beam's worker command hands each worker to it.
As a user meets it: the same bytes as Beam's own worker start, nothing left running or
lying in TMPDIR, and a warm process that is gone costs speed, never the build."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

import sciga  # noqa: F401 - puts the checkout on sciga's path
from sciga.executors import choice, warm_workers
from sciga.executors.warm_workers import CLIENT, WarmWorkers
from sciga.pipelines.cli import main

from conftest import ROOT, run_cli

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="warm workers are Linux-only")


def _data(out: Path) -> dict:
    # the shards (the hidden manifest and card of the generation carry run facts: not compared)
    return {
        str(p.relative_to(out)): p.read_bytes()
        for p in sorted((out / "data").rglob("*"))
        if p.is_file() and not p.name.startswith(".")
    }


def _warm_processes(tmp: Path) -> list:
    return [
        p
        for p in psutil.process_iter(["cmdline"])
        if "sciga.executors.warm_workers" in " ".join(p.info["cmdline"] or [])
        and str(tmp) in " ".join(p.info["cmdline"])
    ]


@pytest.fixture
def short_tmp():
    """A TMPDIR with a short path: the warm process's socket lives in it, and a socket path
    must fit sockaddr_un (pytest's tmp_path under xdist, ``.../popen-gw1/<test name>/``, is
    too long, and the build then starts Beam's workers cold, as it should)."""
    import shutil

    folder = Path(tempfile.mkdtemp(prefix="ww-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_a_two_worker_build_starts_its_workers_warm_and_writes_the_same_bytes(tmp_path, short_tmp):
    tmp = short_tmp
    runs = {}
    for name, env in (("warm", {}), ("beam", {warm_workers.WARM_ENV: "0"})):
        out = tmp_path / name
        r = run_cli(
            "build",
            "--sample",
            "--output",
            str(out),
            "--workers",
            "2",
            "--quiet",
            env={"TMPDIR": str(tmp), choice.ENV: "0", **env},
        )
        assert r.returncode == 0, r.stderr[-3000:]
        assert "Traceback" not in r.stderr
        runs[name] = (json.loads((out / "manifest.json").read_text())["run"], _data(out))
    assert runs["warm"][0]["workers_started_warm"] == 2, "both workers came from the warm process"
    assert "workers_started_warm" not in runs["beam"][0]
    assert runs["warm"][1] == runs["beam"][1], "warm workers write the same bytes as Beam's own"
    assert not list(tmp.iterdir()), "the warm process's folder is removed"
    assert not _warm_processes(tmp), "the warm process ended with the build"


def test_a_warm_process_that_is_gone_costs_speed_not_the_build(tmp_path, monkeypatch):
    """The warm process dies before Beam starts the workers: each worker's client finds
    nobody listening and becomes Beam's own worker."""
    real_start = WarmWorkers.start

    def start_then_lose(self):
        real_start(self)
        self.proc.kill()
        self.proc.wait()
        return self

    monkeypatch.setattr(WarmWorkers, "start", start_then_lose)
    monkeypatch.setenv(choice.ENV, "0")  # Beam's runner
    out = tmp_path / "out"
    assert main(["build", "--sample", "--output", str(out), "--workers", "2", "--quiet"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["reconciled"] and manifest["run"]["workers_started_warm"] == 0
    assert manifest["counts"]["papers"] > 0


def test_a_warm_worker_gets_the_clients_streams_and_gives_back_its_status(tmp_path):
    """A worker Beam's runner did not set up (no control address in its environment) fails
    as Beam's own would: the traceback on the client's stderr (the streams were handed
    over), the failure as the client's exit status."""
    with WarmWorkers("none") as warm:
        env = {k: v for k, v in os.environ.items() if "API_SERVICE_DESCRIPTOR" not in k}
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        r = subprocess.run(
            [sys.executable, str(CLIENT), warm.socket_path], env=env, capture_output=True, text=True, timeout=120
        )
    assert r.returncode != 0
    assert "Traceback" in r.stderr and "sdk_worker_main" in r.stderr, r.stderr[-2000:]
    assert warm.forked == 1, "the warm process forked the worker (not Beam's command)"


def test_a_client_with_no_warm_process_becomes_beams_worker(tmp_path):
    env = {k: v for k, v in os.environ.items() if "API_SERVICE_DESCRIPTOR" not in k}
    r = subprocess.run(
        [sys.executable, str(CLIENT), str(tmp_path / "nobody-listens")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode != 0
    assert "sdk_worker_main" in r.stderr, r.stderr[-2000:]


def test_the_warm_process_ends_with_its_launcher_and_a_later_build_clears_its_folder(short_tmp):
    """A launcher killed outright (SIGKILL: no cleanup runs) leaves no warm process behind
    for long; the folder it leaves in TMPDIR is removed by the next build's warm process."""
    tmp = short_tmp
    code = (
        "import sys, time; from sciga.executors.warm_workers import WarmWorkers; "
        "w = WarmWorkers('none').start(); print(w.proc.pid, flush=True); time.sleep(600)"
    )
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    launcher = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    warm_pid = int(launcher.stdout.readline())
    assert psutil.pid_exists(warm_pid)
    launcher.send_signal(signal.SIGKILL)
    launcher.wait()
    deadline = time.time() + 60
    while time.time() < deadline and psutil.pid_exists(warm_pid) and psutil.Process(warm_pid).status() != "zombie":
        time.sleep(0.2)
    assert not psutil.pid_exists(warm_pid) or psutil.Process(warm_pid).status() == "zombie"
    (left,) = list(tmp.iterdir())
    assert left.name.startswith("sciga-warm-")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tempfile, "tempdir", str(tmp))
        with WarmWorkers("none") as again:
            assert [p.name for p in tmp.iterdir()] == [Path(again.folder).name], "the stale folder is gone"
    assert not list(tmp.iterdir())
