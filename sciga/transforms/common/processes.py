"""Child processes we start and stop ourselves (the warm worker process, test servers)."""

from __future__ import annotations

import subprocess


def stop_process(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """Ask ``proc`` to end (SIGTERM); after ``grace`` seconds, kill it. Returns once it
    has ended (and is reaped); a process that has already ended is only reaped."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
    proc.wait()
