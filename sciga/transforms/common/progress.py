"""Build progress: counted where the work happens, shown where the person is.

Steps call ``Progress.add(inputs=1, images=12, ...)``. Every count is a Beam metric
(``sciga`` namespace, ``counters.py``), which is what Dataflow shows. A local build also gives the steps a
folder (``progress_dir``): each worker process writes its running totals there as a small
JSON file, at most twice a second, so the launching process can sum them while the pipeline
runs (Beam's local runners report metrics only at the end). ``ProgressMonitor`` is that
launching side: a live line on a terminal, a plain line every few seconds otherwise.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import uuid
from typing import Optional, TextIO

from sciga.transforms.common.counters import Counter

FIELDS = ("inputs", "reused", "papers", "dead", "images", "groups", "parts", "parts_done")
_FLUSH_EVERY = 0.5
_state_lock = threading.Lock()
_states: dict[str, _ProcessTotals] = {}
# Held while the progress line is written. A build forks its workers (executors/in_process.py)
# while the monitor's thread may be writing: a fork in the middle of a write would leave the
# child a stream whose lock no thread will ever release, and its first write would hang. So no
# fork happens while the line is written.
_write_lock = threading.Lock()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_write_lock.acquire, after_in_parent=_write_lock.release, after_in_child=_write_lock.release
    )


class _ProcessTotals:
    """One file per process and progress folder; all DoFn instances of the process add here."""

    def __init__(self, folder: str):
        self.folder = folder
        self.pid = os.getpid()
        self.path = os.path.join(folder, f"{self.pid}-{uuid.uuid4().hex[:8]}.json")
        self.totals = dict.fromkeys(FIELDS, 0)
        self.last = 0.0
        self.lock = threading.Lock()

    def add(self, counts: dict) -> None:
        with self.lock:
            for k, v in counts.items():
                self.totals[k] = self.totals.get(k, 0) + v
            now = time.monotonic()
            if now - self.last >= _FLUSH_EVERY:
                self._flush(now)

    def flush(self) -> None:
        with self.lock:
            self._flush(time.monotonic())

    def _flush(self, now: float) -> None:
        self.last = now
        tmp = self.path + ".tmp"
        try:
            with open(tmp, "w") as f:
                f.write(json.dumps(self.totals))
            os.replace(tmp, self.path)
        except OSError:
            pass  # progress is a courtesy; never fail a build over it


def _totals_for(folder: str) -> _ProcessTotals:
    with _state_lock:
        st = _states.get(folder)
        if st is None or st.pid != os.getpid():  # a forked worker starts its own file
            st = _states[folder] = _ProcessTotals(folder)
        return st


class Progress:
    """Counters for one step. Picklable (it is built on the launcher and shipped with the
    DoFn); the metric objects and files are made lazily where it runs."""

    def __init__(self, folder: Optional[str] = None):
        self.folder = folder
        self._metrics: Optional[dict] = None

    def __getstate__(self):
        return {"folder": self.folder, "_metrics": None}

    def add(self, **counts: int) -> None:
        counts = {k: v for k, v in counts.items() if v}
        if not counts:
            return
        if self._metrics is None:
            self._metrics = {}
        for k, v in counts.items():
            m = self._metrics.get(k)
            if m is None:
                m = self._metrics[k] = Counter(f"progress_{k}")
            m.inc(v)
        if self.folder:
            _totals_for(self.folder).add(counts)

    def flush(self) -> None:
        if self.folder:
            _totals_for(self.folder).flush()


def read_totals(folder: str) -> dict:
    out = dict.fromkeys(FIELDS, 0)
    try:
        names = os.listdir(folder)
    except OSError:
        return out
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(folder, name)) as f:
                d = json.load(f)
        except (OSError, ValueError):
            continue
        for k, v in d.items():
            out[k] = out.get(k, 0) + int(v)
    return out


def _fmt_duration(s: float) -> str:
    s = int(max(0, s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{sec:02d}s" if m else f"{sec}s")


def progress_line(
    t: dict,
    total: int,
    groups: int,
    elapsed: float,
    *,
    workers: Optional[int] = None,
    since_first: Optional[tuple[float, dict]] = None,
) -> str:
    """One line of a build's progress. ``since_first``: (seconds elapsed, totals) when inputs
    were first seen done; rates and the ETA are measured from there, so the workers'
    start-up does not make the first ETA minutes too long (no rate until a second reading)."""
    done = t.get("inputs", 0)
    if not any(t.get(k, 0) for k in FIELDS):
        who = f"starting {workers} worker{'s' if workers != 1 else ''}" if workers else "starting"
        return f"sciga build: {who} for {total} inputs, elapsed {_fmt_duration(elapsed)}"
    t_first, first = since_first if since_first else (0.0, {})
    span = elapsed - t_first

    def per_second(field: str) -> float:
        if span > 0 and t.get("inputs", 0) > first.get("inputs", 0):
            return (t.get(field, 0) - first.get(field, 0)) / span
        return t.get(field, 0) / elapsed if elapsed > 0 else 0.0  # no second reading yet: the plain average

    # for the ETA: only once measured after start-up
    rate = per_second("inputs") if span > 0 and done > first.get("inputs", 0) else 0.0
    parts = [f"inputs {done}/{total}", f"{per_second('inputs'):.1f} papers/s", f"{per_second('images'):.0f} images/s"]
    if t.get("reused"):
        parts.insert(1, f"reused {t['reused']}")
    parts.append(f"dead letters {t.get('dead', 0)}")
    if done >= total:
        if t.get("groups", 0) >= groups:
            parts.append(f"writing shards: {t.get('parts_done', 0)} of {t.get('parts', 0)} files written")
        else:
            parts.append(f"writing shards: {t.get('parts_done', 0)} files written")
    elif rate > 0:
        parts.append(f"ETA {_fmt_duration((total - done) / rate)}")
    parts.append(f"elapsed {_fmt_duration(elapsed)}")
    return "sciga build: " + ", ".join(parts)


class ProgressMonitor:
    """Prints the build's progress from the folder the workers write to, while it runs."""

    def __init__(
        self,
        folder: str,
        total: int,
        groups: int,
        *,
        stream: Optional[TextIO] = None,
        quiet: bool = False,
        interval: float = 10.0,
        workers: Optional[int] = None,
    ):
        self.folder = folder
        self.total = total
        self.groups = groups
        self.workers = workers
        self.first: Optional[tuple[float, dict]] = None  # (elapsed, totals) when inputs were first seen done
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = 0.5 if self.tty else max(0.5, interval)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.t0 = time.monotonic()
        self._printed = False

    def __enter__(self):
        if not self.quiet:
            self._thread = threading.Thread(target=self._run, name="sciga-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._emit(final=True)
        return False

    def _run(self):
        while not self._stop.wait(self.interval):
            self._emit()

    def _emit(self, final: bool = False) -> None:
        totals, elapsed = read_totals(self.folder), time.monotonic() - self.t0
        if self.first is None and totals.get("inputs", 0):
            self.first = (elapsed, dict(totals))
        line = progress_line(totals, self.total, self.groups, elapsed, workers=self.workers, since_first=self.first)
        try:
            with _write_lock:
                if self.tty:
                    self.stream.write("\r\x1b[2K" + line + ("\n" if final else ""))
                else:
                    self.stream.write(line + "\n")
                self.stream.flush()
        except (OSError, ValueError):
            pass
        self._printed = True
