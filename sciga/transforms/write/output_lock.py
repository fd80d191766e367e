"""One build at a time in an output folder: the lock ``<out>/.sciga/build.lock``.

Two builds into one folder used to race: one deleted the other's staging folder, or both
finished and the folder silently held the second one's shards. A build now takes a lock on
its output folder before it writes anything there, and gives it back at the end:

* **Created atomically.** Locally with ``O_CREAT | O_EXCL`` (the open fails if the file
  exists), on ``gs://`` with ``ifGenerationMatch=0`` (gcsfs ``mode="create"``: the upload
  fails if the object exists). Other object stores get the same call when their fsspec
  filesystem supports it, else a check-then-write (documented as not atomic).
* **Says who holds it.** The lock is JSON: run id, host, process id (and the process's start
  time, so a reused pid is not mistaken for the build), when it started, its last
  heartbeat. A second build is refused with one sentence naming all of that and how to take
  the lock over (``LockHeldError``).
* **Taken over only when stale.** The holder rewrites its heartbeat every
  ``HEARTBEAT_SECONDS``; a lock is stale when its process is gone (same host: no such pid,
  or a pid started at another time) or its heartbeat is older than ``STALE_AFTER_SECONDS``
  (any host: a machine that died). A stale lock is replaced under a short takeover lock
  (``build.lock.takeover``, also created atomically) and only if it is still the one judged
  stale, so two builds that find the same stale lock cannot both take it.
"""

from __future__ import annotations

import errno
import json
import os
import posixpath
import socket
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Optional

import fsspec

from sciga.transforms.common.errors import UserError

LOCK_NAME = "build.lock"
HEARTBEAT_SECONDS = 30.0
STALE_AFTER_SECONDS = 600.0  # twenty missed heartbeats: the holder is gone
TAKEOVER_STALE_SECONDS = 60.0  # a takeover takes milliseconds; an older takeover lock is a crash's leftover


@dataclass(frozen=True)
class LockInfo:
    run_id: str
    host: str
    pid: int
    pid_start: Optional[int]  # the process's start time (clock ticks since boot), Linux
    started: float  # unix time
    heartbeat: float  # unix time of the last heartbeat

    def describe(self, now: Optional[float] = None) -> str:
        now = time.time() if now is None else now
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.started))
        return (
            f"run {self.run_id[:12]}, host {self.host}, pid {self.pid}, since {since}, "
            f"last heartbeat {max(0, int(now - self.heartbeat))} s ago"
        )


class LockHeldError(UserError):
    """Another build holds the output folder."""

    def __init__(self, out_dir: str, holder: LockInfo, lock_uri: str):
        rm = f"gcloud storage rm {lock_uri}" if lock_uri.startswith("gs://") else f"rm {lock_uri}"
        super().__init__(
            f"{out_dir} is being built by another build ({holder.describe()}); wait for it to finish, "
            f"or if that build is gone (a crashed machine), take the folder over by deleting its lock "
            f"(`{rm}`) and run again."
        )
        self.holder = holder


def _process_start(pid: int) -> Optional[int]:
    """Start time of process ``pid`` in clock ticks since boot (Linux ``/proc``), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return None
    try:  # the command name (field 2) may hold spaces and parentheses: split after its last ")"
        return int(stat[stat.rindex(")") + 2 :].split()[19])
    except (ValueError, IndexError):
        return None


def _process_alive(pid: int, start: Optional[int]) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        pass
    if start is not None:
        now_start = _process_start(pid)
        if now_start is not None and now_start != start:
            return False  # the pid was reused by another process
    return True


def is_stale(holder: LockInfo, now: Optional[float] = None, stale_after: float = STALE_AFTER_SECONDS) -> bool:
    """The holder is gone: its process on this host is not running, or its heartbeat stopped."""
    now = time.time() if now is None else now
    if holder.host == socket.gethostname() and not _process_alive(holder.pid, holder.pid_start):
        return True
    return now - holder.heartbeat > stale_after


class OutputLock:
    """The lock of one output folder (local or any fsspec store). Use as a context manager,
    or ``acquire()`` / ``release()``."""

    def __init__(
        self,
        out_dir: str,
        run_id: Optional[str] = None,
        *,
        heartbeat_seconds: float = HEARTBEAT_SECONDS,
        stale_after: float = STALE_AFTER_SECONDS,
    ):
        self.out_dir = out_dir.rstrip("/") or out_dir
        self.run_id = run_id or uuid.uuid4().hex
        self.uri = posixpath.join(self.out_dir, ".sciga", LOCK_NAME)
        self.fs, self.path = fsspec.core.url_to_fs(self.uri)
        self.local = "file" in (
            self.fs.protocol if isinstance(self.fs.protocol, (tuple, list)) else (self.fs.protocol,)
        )
        self.heartbeat_seconds = heartbeat_seconds
        self.stale_after = stale_after
        self.took_over: Optional[LockInfo] = None  # the stale lock this build replaced, if any
        self._stop = threading.Event()
        self._beat: Optional[threading.Thread] = None
        self.held = False

    # ------------------------------------------------------------------ the file
    def _info(self) -> LockInfo:
        now = time.time()
        pid = os.getpid()
        return LockInfo(
            run_id=self.run_id,
            host=socket.gethostname(),
            pid=pid,
            pid_start=_process_start(pid),
            started=now,
            heartbeat=now,
        )

    def _create(self, path: str, data: bytes) -> bool:
        """Create ``path`` holding ``data`` if nothing is there; False if something is."""
        self.fs.makedirs(posixpath.dirname(path), exist_ok=True)
        if self.local:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
            except FileExistsError:
                return False
            try:
                os.write(fd, data)
                os.fsync(fd)
            except BaseException:
                os.close(fd)
                os.unlink(path)
                raise
            os.close(fd)
            return True
        try:
            self.fs.pipe_file(path, data, mode="create")  # gcsfs: ifGenerationMatch=0
        except FileExistsError:
            return False
        except TypeError:  # this store's fsspec cannot create exclusively: check, then write
            if self.fs.exists(path):
                return False
            self.fs.pipe_file(path, data)
        except OSError as e:
            if getattr(e, "errno", None) == errno.EEXIST or "412" in str(e) or "Precondition" in str(e):
                return False
            raise
        return True

    def _read(self, path: str) -> Optional[LockInfo]:
        try:
            with self.fs.open(path, "rb") as f:
                d = json.loads(f.read().decode("utf-8"))
            info = LockInfo(
                run_id=str(d["run_id"]),
                host=str(d["host"]),
                pid=int(d["pid"]),
                pid_start=None if d.get("pid_start") is None else int(d["pid_start"]),
                started=float(d["started"]),
                heartbeat=float(d["heartbeat"]),
            )
            return info
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError, KeyError, AttributeError, UnicodeDecodeError):
            # Torn (a crash between create and write) or not ours: judged by its age alone.
            return LockInfo(
                run_id="(unreadable lock)", host="?", pid=-1, pid_start=None, started=0.0, heartbeat=self._mtime(path)
            )

    def _mtime(self, path: str) -> float:
        try:
            info = self.fs.info(path)
        except (FileNotFoundError, OSError):
            return 0.0
        m = info.get("mtime") or info.get("updated") or info.get("LastModified")
        if isinstance(m, (int, float)):
            return float(m)
        try:
            from datetime import datetime

            return datetime.fromisoformat(str(m).replace("Z", "+00:00")).timestamp()
        except ValueError:
            return 0.0

    def _rm(self, path: str) -> None:
        try:
            self.fs.rm(path)
        except FileNotFoundError:
            pass

    # ------------------------------------------------------------------ taking and giving back
    def acquire(self) -> OutputLock:
        info = self._info()
        data = json.dumps(asdict(info), sort_keys=True).encode()
        for _ in range(5):
            if self._create(self.path, data):
                self.held = True
                self._start_heartbeat(info)
                return self
            holder = self._read(self.path)
            if holder is None:
                continue  # given back between our try and the read: try again
            if not is_stale(holder, stale_after=self.stale_after):
                raise LockHeldError(self.out_dir, holder, self.uri)
            self._take_over(holder)
        holder = self._read(self.path)
        raise LockHeldError(self.out_dir, holder or self._info(), self.uri)

    def _take_over(self, stale: LockInfo) -> None:
        """Remove the stale lock ``stale``, under the takeover lock, if it is still that one."""
        guard = self.path + ".takeover"
        mine = json.dumps({"run_id": self.run_id, "at": time.time()}).encode()
        if not self._create(guard, mine):
            if time.time() - self._mtime(guard) <= TAKEOVER_STALE_SECONDS:
                time.sleep(0.2)  # another build is taking it over right now; the next round sees the result
                return
            self._rm(guard)  # left by a build that died mid-takeover
            if not self._create(guard, mine):
                return
        try:
            now = self._read(self.path)
            if now is not None and now.run_id == stale.run_id and now.heartbeat == stale.heartbeat:
                self._rm(self.path)
                self.took_over = stale
        finally:
            self._rm(guard)

    def _start_heartbeat(self, info: LockInfo) -> None:
        if self.heartbeat_seconds <= 0:
            return
        started = info.started

        def beat():
            while not self._stop.wait(self.heartbeat_seconds):
                try:
                    now = self._read(self.path)
                    if now is None or now.run_id != self.run_id:
                        return  # taken over (we were judged gone): never overwrite the new holder
                    fresh = LockInfo(**{**asdict(info), "started": started, "heartbeat": time.time()})
                    data = json.dumps(asdict(fresh), sort_keys=True).encode()
                    if self.local:
                        tmp = f"{self.path}.{self.run_id}.tmp"
                        with open(tmp, "wb") as f:
                            f.write(data)
                        os.replace(tmp, self.path)
                    else:
                        self.fs.pipe_file(self.path, data)
                except OSError:
                    continue  # a full disk, a network hiccup: try again at the next beat

        self._beat = threading.Thread(target=beat, name="sciga-output-lock", daemon=True)
        self._beat.start()

    def release(self) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=5)
        if not self.held:
            return
        self.held = False
        try:
            now = self._read(self.path)
            if now is not None and now.run_id == self.run_id:
                self._rm(self.path)
        except OSError:
            pass  # the next build finds the lock stale (this process is gone by then)

    def __enter__(self) -> OutputLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
