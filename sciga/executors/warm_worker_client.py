"""Beam's worker command line in a local multi-process build with warm workers
(``warm_workers.py`` says why): hand this process's environment, working folder and
standard streams to the warm process, wait for the worker it forks, exit with its status.

Run by path, standard library only: it starts in ~20 ms. When the warm process cannot
take the worker (not listening, gone before it forked one), this process becomes Beam's
own worker (``python -m apache_beam.runners.worker.sdk_worker_main``): slower to start,
the same work.
"""

import json
import os
import signal
import socket
import struct
import sys

# The protocol, here alone (warm_workers.py imports it): the client sends its three
# standard streams with HEADER (the length of the JSON message that follows), then the
# message; the warm process answers FORKED once its worker runs, then the worker's STATUS.
HEADER = struct.Struct("!Q")
FORKED = b"F"
STATUS = struct.Struct("!i")


def _beam_worker() -> None:
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.execv(sys.executable, [sys.executable, "-m", "apache_beam.runners.worker.sdk_worker_main"])


def _recv_exactly(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        try:
            chunk = conn.recv(n - len(data))
        except OSError:
            return data
        if not chunk:
            return data
        data += chunk
    return data


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the worker itself
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(sys.argv[1])
        body = json.dumps({"env": dict(os.environ), "cwd": os.getcwd()}).encode()
        socket.send_fds(conn, [HEADER.pack(len(body))], [0, 1, 2])
        conn.sendall(body)
    except OSError:
        conn.close()
        _beam_worker()
    if _recv_exactly(conn, 1) != FORKED:
        conn.close()
        _beam_worker()
    status = _recv_exactly(conn, STATUS.size)
    # No status: the warm process ended under its worker (it was stopped): a failure.
    sys.exit(STATUS.unpack(status)[0] if len(status) == STATUS.size else 1)


if __name__ == "__main__":
    main()
