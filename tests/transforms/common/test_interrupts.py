"""Ctrl-C and SIGTERM remembered as well as raised (``common/interrupts.py``): one that a
finalizer swallows is raised again where the work next asks. The build that stops for one
is in ``tests/e2e/test_first_hour.py``."""

from __future__ import annotations

import subprocess
import sys

import pytest
from quality_fixtures import ROOT

SWALLOWED = """
import os, signal, sys
from sciga.transforms.common import interrupts

interrupts.install()


class SignalledWhenFreed:
    def __del__(self):
        signal.raise_signal(signal.{name})


SignalledWhenFreed()  # Python prints "Exception ignored" and goes on
print("went on", interrupts.received() == signal.{name}, flush=True)
pid = os.fork()
if pid == 0:  # a forked worker inherits the flag's value, not the signal
    os._exit(0 if interrupts.received() is None else 1)
print("child", os.waitpid(pid, 0)[1] == 0, flush=True)
try:
    interrupts.raise_if_received()
except interrupts.Terminated:
    print("raised Terminated")
except KeyboardInterrupt:
    print("raised KeyboardInterrupt")
interrupts.clear()
interrupts.raise_if_received()
print("cleared")
"""


@pytest.mark.parametrize("name, raised", [("SIGINT", "KeyboardInterrupt"), ("SIGTERM", "Terminated")])
def test_a_signal_a_finalizer_swallowed_is_raised_again_where_asked(name, raised):
    r = subprocess.run(
        [sys.executable, "-c", SWALLOWED.format(name=name)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert r.returncode == 0, r.stderr
    assert "Exception ignored" in r.stderr
    assert r.stdout.split("\n")[:4] == ["went on True", "child True", f"raised {raised}", "cleared"], r.stdout
