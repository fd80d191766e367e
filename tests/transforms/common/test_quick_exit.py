"""Ending a process without the interpreter's teardown keeps what a normal exit promises:
the status, flushed output, atexit handlers, threads that are not daemons; and a marked
worker process keeps its status after an uncaught exception."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import ROOT, run_cli

PRELUDE = "import sys\nsys.path.insert(0, sys.argv[1])\nfrom sciga.transforms.common.quick_exit import *\n"


def _python(code: str, env: dict | None = None) -> subprocess.CompletedProcess:
    e = dict(os.environ, **(env or {}))
    return subprocess.run(
        [sys.executable, "-c", PRELUDE + code, str(ROOT)], env=e, capture_output=True, text=True, timeout=120
    )


def test_exit_now_keeps_status_output_handlers_and_threads(tmp_path):
    done = tmp_path / "thread-done"
    handler = tmp_path / "atexit-ran"
    r = _python(
        "import atexit, threading, time\n"
        f"atexit.register(lambda: open({str(handler)!r}, 'w').write('yes'))\n"
        f"threading.Thread(target=lambda: (time.sleep(0.3), open({str(done)!r}, 'w').write('yes'))).start()\n"
        "sys.stdout.write('no newline, still buffered')\n"
        "exit_now(3)\n"
    )
    assert r.returncode == 3
    assert r.stdout == "no newline, still buffered"
    assert handler.read_text() == "yes"
    assert done.read_text() == "yes"


def test_a_marked_process_keeps_its_status(tmp_path):
    handler = tmp_path / "atexit-ran"
    body = f"import atexit\natexit.register(lambda: open({str(handler)!r}, 'w').write('yes'))\narm_quick_exit()\n"
    ok = _python(body + "print('fine')\n", env={"SCIGA_QUICK_EXIT": "1"})
    assert (ok.returncode, ok.stdout) == (0, "fine\n")
    assert handler.read_text() == "yes"  # registered before the quick exit: still runs
    failed = _python(body + "raise RuntimeError('a bundle failed')\n", env={"SCIGA_QUICK_EXIT": "1"})
    assert failed.returncode == 1
    assert "RuntimeError: a bundle failed" in failed.stderr
    # Marked and ended through exit_now (a launcher started with the variable set): the
    # status given to exit_now stands, the armed handler does not replace it with 0.
    both = _python(body + "exit_now(3)\n", env={"SCIGA_QUICK_EXIT": "1"})
    assert both.returncode == 3
    # Not marked: arming does nothing, the process ends the ordinary way.
    plain = _python(
        "import atexit\narm_quick_exit()\nimport sciga.transforms.common.quick_exit as q\nprint(q._armed)\n"
    )
    assert (plain.returncode, plain.stdout) == (0, "False\n")


def test_the_command_keeps_its_status_and_messages(tmp_path):
    """`python -m sciga` ends through ``run``: the usage error's status and sentence, a
    SystemExit's sentence from inside a command, and a help text cut by a closed pipe."""
    r = run_cli("build", "--output", str(tmp_path / "o"), "--wokers", "2")
    assert r.returncode == 2
    assert "unknown argument --wokers" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("build", "--ouput", str(tmp_path / "o"))  # argparse's own SystemExit(2)
    assert r.returncode == 2 and "--output" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("build", "--input", str(tmp_path / "nothing-here"), "--output", str(tmp_path / "o"))
    assert r.returncode != 0 and "Traceback" not in r.stderr
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.Popen(
        [sys.executable, "-m", "sciga", "build", "--help"],
        cwd=str(ROOT),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert p.stdout is not None and p.stderr is not None
    p.stdout.read(10)
    p.stdout.close()  # `sciga build --help | head -c 10`
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) in (0, 141) and "Traceback" not in err and "BrokenPipe" not in err


def test_the_launcher_marks_only_its_worker_processes(monkeypatch):
    """A local multi-process build marks the processes it starts (they inherit the
    environment) and leaves the environment as it found it; a one-process build marks nothing
    (the launcher ends through ``run`` anyway)."""
    from sciga.executors.local_run import QuickWorkerExit

    monkeypatch.delenv("SCIGA_QUICK_EXIT", raising=False)
    with QuickWorkerExit(True):
        assert os.environ["SCIGA_QUICK_EXIT"] == "1"
    assert "SCIGA_QUICK_EXIT" not in os.environ
    with QuickWorkerExit(False):
        assert "SCIGA_QUICK_EXIT" not in os.environ
    monkeypatch.setenv("SCIGA_QUICK_EXIT", "1")  # set where the command was started
    with QuickWorkerExit(False):
        assert "SCIGA_QUICK_EXIT" not in os.environ  # the launcher's own stages do not arm it
    assert os.environ["SCIGA_QUICK_EXIT"] == "1"


def test_a_profiled_command_still_writes_its_profile(tmp_path):
    """`python -m cProfile -o F -m sciga ...` writes F as the interpreter ends: under a
    profiler the command exits the usual way."""
    out = tmp_path / "help.prof"
    r = run_cli("--help", timeout=120, python_args=("-m", "cProfile", "-o", str(out)))
    assert r.returncode == 0, r.stderr[-2000:]
    assert out.stat().st_size > 0
