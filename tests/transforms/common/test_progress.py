"""The progress line and forked workers: a build forks its workers while the monitor's thread
may be writing the line (``executors/in_process.py``); a fork in the middle of that write
would give the child a stream whose lock no thread releases, and the child's first write
would hang the build. A real fork, a stream that holds its lock while it writes."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from sciga.transforms.common.progress import ProgressMonitor


class SlowStream:
    """A stream with a lock held through each write, as Python's buffered streams have."""

    def __init__(self):
        self.lock = threading.Lock()
        self.writing = threading.Event()

    def write(self, s: str) -> int:
        with self.lock:
            self.writing.set()
            time.sleep(0.3)
        return len(s)

    def flush(self) -> None:
        pass


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX-only")
def test_no_fork_happens_while_the_progress_line_is_written(tmp_path):
    stream = SlowStream()
    with ProgressMonitor(str(tmp_path), 10, 1, stream=stream, interval=0.5):  # type: ignore[arg-type]
        assert stream.writing.wait(10), "the monitor wrote a line"
        pid = os.fork()  # the monitor's thread is in the middle of a write
        if pid == 0:
            got = stream.lock.acquire(timeout=2)
            sys.stdout.flush()
            os._exit(0 if got else 1)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child could write to the stream"
