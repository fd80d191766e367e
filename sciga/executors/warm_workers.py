"""Warm worker processes for a local multi-process build (issue 26: both cores).

A Beam worker process of the DirectRunner spends ~3 s of CPU before its first paper:
importing Apache Beam and our stages, and loading the sentencizer. The launcher, meanwhile,
spends its first ~3 s importing Beam and building the job on one core, while the other
core idles. So the launcher starts one *warm process* (``serve``) before it imports Beam:
on the idle core it imports what a worker needs, then waits. Beam's command line for a
worker is a tiny client (``warm_worker_client.py``, standard library only) that hands its
environment, working folder and standard streams to the warm process, which forks a worker
that starts already warm; the client waits for the worker and exits with its status.

The worker is the same code as Beam's own (``sdk_worker_main.main``), in the environment
Beam gave the client, so its output is the same bytes (tests/executors/test_warm_workers.py).
Whatever goes wrong with the warm process (it cannot start, its socket path is too long, it
died), the client runs Beam's own worker command instead: slower to start, never a failure.

Processes: the warm process and its forks are in the launcher's process group (Ctrl-C
reaches the workers as before; the warm process and the clients ignore it); the warm
process ends when the launcher stops it or exits, and a worker whose client is gone
(Beam killed it) is terminated.
"""

from __future__ import annotations

import json
import os
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional

from sciga.executors.warm_worker_client import FORKED, HEADER, STATUS
from sciga.transforms.common.processes import stop_process

# Set to 0 to start workers the way Beam does (the escape hatch; also the tests' baseline).
WARM_ENV = "SCIGA_WARM_WORKERS"
CLIENT = Path(__file__).with_name("warm_worker_client.py")
_MAX_MESSAGE = 64 << 20
_PREFIX = "sciga-warm-"
_SOCKET_PATH_MAX = 100  # sockaddr_un holds 108 bytes on Linux, 104 on macOS


def available(beam_args) -> bool:
    """Warm workers for a local build with no Beam flags (a flag may pick another runner
    or running mode), unless the user said no."""
    return (
        not beam_args
        and os.environ.get(WARM_ENV, "1") != "0"
        and sys.platform.startswith("linux")  # fork after macOS's system frameworks load is unsafe
    )


def wanted(workers: int, beam_args) -> bool:
    """Warm workers for a build of several worker processes where they are available."""
    return workers > 1 and available(beam_args)


class WarmWorkers:
    """The launcher's side: ``start()`` the warm process (before importing Beam), give
    Beam ``command`` as the worker command line, ``stop()`` at the end. ``env`` is what
    the workers' environment will add to this process's (allocator settings that must be
    there when a process starts)."""

    def __init__(self, sentencizer: str, env: Optional[dict] = None, quiet: bool = True):
        self.sentencizer = sentencizer
        self.env = env or {}
        self.quiet = quiet  # the warm process's own output (its workers write to Beam's streams)
        self.proc: Optional[subprocess.Popen] = None
        self.folder: Optional[str] = None
        self.socket_path = ""
        self.forked = 0  # workers the warm process started (known once stopped)

    def start(self) -> WarmWorkers:
        _remove_stale_folders()
        # 0700: only this user connects. The launcher's pid in the name: a later build removes
        # the folder of one that was killed (SIGKILL leaves it).
        self.folder = tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-")
        self.socket_path = os.path.join(self.folder, "s")
        if len(self.socket_path.encode()) > _SOCKET_PATH_MAX:
            self.stop()  # TMPDIR too deep for a socket: Beam's own worker start
            return self
        env = {**os.environ, **{k: v for k, v in self.env.items() if k not in os.environ}}
        # Listening from here on: a worker Beam starts while the warm process is still
        # starting or warming up waits in the backlog instead of starting cold.
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
            server.bind(self.socket_path)
            server.listen(64)
            fd = server.fileno()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "sciga.executors.warm_workers", str(fd), self.socket_path, self.sentencizer]
                + [str(os.getpid())],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL if self.quiet else None,
                stderr=subprocess.DEVNULL if self.quiet else None,
                pass_fds=(fd,),
            )
        return self

    @property
    def command(self) -> Optional[str]:
        """The worker command line for Beam (run by ``sh -c``), None when not started."""
        if self.proc is None:
            return None
        return "exec " + " ".join(shlex.quote(a) for a in (sys.executable, str(CLIENT), self.socket_path))

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None
            try:
                self.forked = int(Path(self.socket_path + ".forked").read_text())
            except (OSError, ValueError):
                pass
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def __enter__(self) -> WarmWorkers:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _remove_stale_folders() -> None:
    for folder in Path(tempfile.gettempdir()).glob(f"{_PREFIX}*-*"):
        try:
            pid = int(folder.name[len(_PREFIX) :].split("-", 1)[0])
            os.kill(pid, 0)
        except ValueError:
            continue
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except OSError:  # another user's process: not ours to judge
            continue


# ------------------------------------------------------------------ the warm process


def warm_up(sentencizer: str) -> None:
    """Import what a build's worker imports, and load its sentencizer once (the modules
    stay; each worker builds its own pipeline from them)."""
    import apache_beam.runners.worker.sdk_worker_main  # noqa: F401 - imported to be warm, not used here

    import sciga.executors.beam_write
    import sciga.executors.chain
    import sciga.transforms.inputs.plan_step
    import sciga.transforms.link.step
    import sciga.transforms.parse.step
    import sciga.transforms.tex_recovery.step
    import sciga.transforms.vision.stage  # noqa: F401 - imported to be warm, not used here
    from sciga.transforms.link.sentences import load_pipeline

    try:
        load_pipeline(sentencizer)
    except ValueError:  # not installed: the worker says so itself
        pass


def serve(server_fd: int, socket_path: str, sentencizer: str, launcher_pid: int) -> None:
    """Warm up, then fork a worker for each client of the listening socket ``server_fd``
    until the launcher stops this process (SIGTERM) or is gone. One thread throughout: a
    fork never copies a lock held elsewhere."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the launcher and the workers
    signal.signal(signal.SIGTERM, lambda *_: _stop_serving())
    server = socket.socket(fileno=server_fd)
    try:
        warm_up(sentencizer)
    except BaseException:  # noqa: BLE001 - the clients waiting get no "forked": they start Beam's worker
        os._exit(0)
    children: dict[socket.socket, int] = {}  # client connection -> its worker's pid
    forked = 0
    # A worker's end wakes the loop at once (its client, and Beam, wait for the status).
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    try:
        while os.getppid() == launcher_pid:
            watched: list[Any] = [server, wake_r, *children]
            ready, _, _ = select.select(watched, [], [], 0.5)
            if wake_r in ready:
                os.read(wake_r, 512)
            _reap(children)
            for conn in ready:
                if conn == wake_r:
                    continue
                if conn is server:
                    forked += _accept(server, children)
                elif conn in children and not _peek(conn):  # the client is gone: so is its worker
                    _signal(children[conn], signal.SIGTERM)
    except _Stop:
        pass
    finally:
        for pid in children.values():
            _signal(pid, signal.SIGTERM)
        server.close()
        try:
            Path(socket_path + ".forked").write_text(str(forked))
        except OSError:
            pass
    os._exit(0)


class _Stop(Exception):
    pass


def _stop_serving() -> None:
    raise _Stop


def _peek(conn: socket.socket) -> bool:
    try:
        return bool(conn.recv(1, socket.MSG_PEEK))
    except OSError:
        return False


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def _reap(children: dict) -> None:
    """Tell each client whose worker has ended the worker's exit status."""
    for conn, pid in list(children.items()):
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done, status = pid, 1 << 8
        if not done:
            continue
        code = os.waitstatus_to_exitcode(status)
        try:
            conn.sendall(STATUS.pack(code if code >= 0 else 128 - code))
        except OSError:
            pass
        conn.close()
        del children[conn]


def _accept(server: socket.socket, children: dict) -> int:
    """Fork a worker for the next client: 1, or 0 when the client's message was not whole."""
    conn, _ = server.accept()
    try:
        head, fds, _, _ = socket.recv_fds(conn, HEADER.size, 3)
        if len(head) != HEADER.size or len(fds) != 3:
            raise OSError("a client sent no streams")
        (n,) = HEADER.unpack(head)
        if n > _MAX_MESSAGE:
            raise OSError("a client's message is too long")
        body = bytearray()
        while len(body) < n:
            chunk = conn.recv(n - len(body))
            if not chunk:
                raise OSError("a client left mid-message")
            body += chunk
        message = json.loads(body)
    except (OSError, ValueError):
        conn.close()
        return 0
    pid = os.fork()
    if pid == 0:
        try:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            server.close()
            for other in children:
                other.close()
            conn.close()
        finally:
            _run_worker(fds, message)  # never returns
    for fd in fds:
        os.close(fd)
    children[conn] = pid
    try:
        conn.sendall(FORKED)
    except OSError:
        pass  # the client is gone: the next select sees it and stops the worker
    return 1


def _run_worker(fds: list[int], message: dict) -> None:
    """In the forked child: become the worker Beam asked for, in the client's place."""
    status = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.chdir(message["cwd"])
        os.environ.clear()
        os.environ.update(message["env"])
        tempfile.tempdir = None  # TMPDIR as the client has it
        from apache_beam.runners.worker import sdk_worker_main

        sys.argv = [sdk_worker_main.__file__]
        sdk_worker_main.main(sys.argv)
        status = 0
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001 - the worker's own failure, reported as Beam's would be
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(status)


if __name__ == "__main__":
    serve(int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]))
