"""Ending a process without tearing its interpreter down.

A build's processes import Apache Beam, spaCy and sometimes PyTorch. When such a process
ends, CPython frees every module and object one at a time, and that takes a while:
measured here, a Beam worker process takes about 0.85 s to exit after its last bundle, a
launcher 0.6 to 0.8 s, and a bare `import spacy` adds 0.7 s. The DirectRunner also stops
its worker processes one after another. Nobody needs that work, because the process ends
anyway.

``exit_now`` keeps the parts of a normal exit that matter: threads that are not daemons
finish, ``atexit`` handlers run (logging flushes its files, temporary folders go), and
stdout and stderr are flushed. Then it ends the process with ``os._exit``. The ``sciga``
command ends this way. A local build's worker processes end this way too, once their
harness returns: the launcher sets ``SCIGA_QUICK_EXIT=1`` for them, and the first stage
set up in a worker arms it (``arm_quick_exit``).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn

QUICK_EXIT_ENV = "SCIGA_QUICK_EXIT"

_armed = False
_ending = False  # exit_now is running: the armed handler must not end the process with its own status


def exit_now(code: int) -> NoReturn:
    """End the process with ``code`` once its threads, atexit handlers and output are done,
    skipping the interpreter's teardown. Under a profiler or tracer (``python -m cProfile``,
    a debugger), which writes its results as the interpreter ends, it exits the usual way."""
    global _ending
    if sys.getprofile() is not None or sys.gettrace() is not None:
        raise SystemExit(code)
    _ending = True
    try:
        me = threading.current_thread()
        for t in threading.enumerate():
            if t is not me and not t.daemon and t.is_alive():
                t.join()  # what a normal exit waits for too
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                if stream is not None:
                    stream.flush()
            except (OSError, ValueError):  # a reader that went away, a closed stream
                pass
        os._exit(code)


def arm_quick_exit() -> None:
    """In a process the launcher marked (``SCIGA_QUICK_EXIT=1``): when the process ends, its
    other atexit handlers still run, then it ends at once. The exit status stays what it
    would have been: 1 after an uncaught exception, else 0. (A Beam worker's harness never
    calls ``sys.exit`` with another status.)"""
    global _armed
    if _armed or os.environ.get(QUICK_EXIT_ENV) != "1":
        return
    _armed = True
    atexit.register(_end_worker)


def _end_worker() -> None:
    atexit.unregister(_end_worker)
    if _ending:  # exit_now, which runs this handler, ends the process with the status it was given
        return
    failed = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    exit_now(1 if failed is not None else 0)
