"""Ctrl-C and SIGTERM for the ``sciga`` command, remembered as well as raised.

Python raises ``KeyboardInterrupt`` wherever the main thread is when the signal's handler
runs. When that is a finalizer (an object's ``__del__``, a weakref callback, run by the
garbage collector in the middle of anything), the interpreter prints "Exception ignored"
and goes on: the signal is lost. Measured: a one-process build of 200 sample pages, sent
Ctrl-C 4.5 s in, lost it in ``ZipFile.__del__`` and ran to the end with exit status 0.

So the command's handler remembers the signal before it raises, and the long loops ask
(``raise_if_received``) between their units of work: a lost interrupt is raised again at
the next page or part file, and a command that still returns normally after one says it was
interrupted (``pipelines/cli.py``).
"""

from __future__ import annotations

import os
import signal
from typing import Optional

__all__ = ["Terminated", "clear", "install", "raise_if_received", "received"]


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill PID``, a scheduler stopping the job): handled as Ctrl-C is, so a
    build stops its workers, keeps its finished results, says so in one sentence and
    resumes; the exit status is 143 (128 + SIGTERM)."""


_received: Optional[int] = None  # the signal this process received and has not acted on
_owner = 0  # the process that installed the handler (forked workers inherit it)


def install() -> None:
    """Ctrl-C and SIGTERM raise ``KeyboardInterrupt`` / ``Terminated`` in this process, and
    are remembered (``received``). Call it from the main thread."""
    global _owner
    _owner = os.getpid()
    clear()
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)


def clear() -> None:
    global _received
    _received = None


def received() -> Optional[int]:
    """The signal (SIGINT or SIGTERM) this process received since ``install``/``clear``."""
    return _received if os.getpid() == _owner else None


def raise_if_received() -> None:
    """Raise the interrupt again if one was received: a finalizer may have swallowed it."""
    got = received()
    if got is not None:
        raise _exception_for(got)


def _exception_for(signum: int) -> KeyboardInterrupt:
    return Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def _on_signal(signum, frame) -> None:
    global _received
    if os.getpid() != _owner:  # a forked worker that kept the handler: as without it
        if signum == signal.SIGTERM:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        raise KeyboardInterrupt
    _received = signum
    raise _exception_for(signum)
