"""One figure model per machine, in a process of its own, fed through memory-mapped batches.

``--vision-share-model`` (or ``--vision-model-copies N``) puts the model of a machine in a
server process that only runs the model; every process that runs batches (Beam's SDK
processes) holds a ``SharedFigureModel``, which writes its batch into a memory-mapped file
and sends the server only the file's name, the shape and the dtype. The server maps the
same pages, runs its ``figure_model.LoadedFigureModel`` on them and sends back the (N, K)
result. Nothing but those few bytes is pickled, and no decoding process is slowed by the
model's work.

Why not Beam's ``large_model`` (``multi_process_shared`` with the model inside the first
SDK process that asked for it), which this replaced: measured with the zero-cost model on 2
SDK processes (``bench/vision.py --arch null``), each process waited on the proxy about as
long as it spent decoding. Every call pickled its 64 x 150 KB batch through a socket into a
thread of that SDK process, and the socket's many reads each had to win the interpreter
lock back from the process's own decoding thread. On the H200 (issue 28) 15 SDK processes
fed 11 % of the model's rate that way.

The server is started with Beam's ``multi_process_shared`` (``spawn_process=True``: a fresh
process, the same lock and address files Beam's own model manager uses, so the same
machines share it); the first process that needs it starts it and loads the model there,
the others connect. A copy's file is unlinked once every server copy has mapped it, so
nothing is left behind however the processes end. Where the server cannot open the file
(processes that see different file systems), the batches are pickled through the proxy
instead, which is slower but works; it is said once in the log.
"""

from __future__ import annotations

import itertools
import logging
import mmap
import os
import tempfile
import threading
import uuid
from collections.abc import Callable
from typing import Any, Optional

import numpy as np

from sciga.transforms.vision.figure_model import check_batch, host_arrays

log = logging.getLogger("sciga.vision")

BATCH_FOLDER = "sciga-model-batches"


class ModelServer:
    """What runs in the server process: the model, loaded once, and the batch files it has
    mapped (by path; a path is never reused)."""

    def __init__(self, load: Callable[[], Any]):
        self.model = load()
        self._maps: dict[str, mmap.mmap] = {}
        self._lock = threading.Lock()

    def describe(self) -> dict:
        return {"pid": os.getpid(), "device": str(getattr(self.model, "device", "cpu"))}

    def run_mapped(self, path: str, shape: tuple, dtype: str) -> np.ndarray:
        """The model's output for the batch of ``shape``/``dtype`` in the file at ``path``."""
        batch: np.ndarray = np.ndarray(tuple(shape), dtype=np.dtype(dtype), buffer=self._mapping(path))
        try:
            return self.model(batch)
        finally:
            del batch

    def run_pickled(self, batch: np.ndarray) -> np.ndarray:
        return self.model(batch)

    def forget(self, path: str) -> None:
        """Unmaps a batch file its owner has replaced."""
        with self._lock:
            m = self._maps.pop(path, None)
        if m is not None:
            try:
                m.close()
            except BufferError:  # pragma: no cover - a batch still being read; the mapping goes with the process
                pass

    def _mapping(self, path: str) -> mmap.mmap:
        with self._lock:
            m = self._maps.get(path)
            if m is None:
                with open(path, "r+b") as f:
                    m = self._maps[path] = mmap.mmap(f.fileno(), 0)
            return m


class _ServerFactory:
    """Builds the ``ModelServer`` in the spawned process. Picklable with the standard
    pickler (what a spawned process is given); the loader travels cloudpickled, as Beam
    ships it, so a loader Beam could ship can be given here."""

    def __init__(self, load: Callable[[], Any]):
        import cloudpickle  # a Beam dependency

        self.load = cloudpickle.dumps(load)

    def __call__(self) -> ModelServer:
        import cloudpickle

        return ModelServer(cloudpickle.loads(self.load))


class _BatchFile:
    """A memory-mapped file that one thread of one process writes its batches into."""

    def __init__(self, folder: str, tag: str, size: int):
        os.makedirs(folder, exist_ok=True)
        self.path = os.path.join(folder, f"{tag}-{os.getpid()}-{threading.get_ident()}-{uuid.uuid4().hex[:8]}")
        self.size = size
        with open(self.path, "w+b") as f:
            f.truncate(size)
            self.map = mmap.mmap(f.fileno(), size)
        self.seen: set[int] = set()  # the server copies that have mapped it
        self.linked = True
        self.generation = 0  # of the servers it was made for

    def unlink(self) -> None:
        if self.linked:
            self.linked = False
            try:
                os.unlink(self.path)
            except OSError:
                pass


class SharedFigureModel:
    """The machine's shared model, as the processes that run batches see it:
    ``model(batch) -> numpy (N, K) float32``, like a ``LoadedFigureModel``.

    ``load`` builds the ``LoadedFigureModel`` (it runs in the server process); ``tag``
    names the servers of one model (the same in every process of a run, another in the
    next run); ``copies`` servers are started, and calls take them in turn."""

    def __init__(self, load: Callable[[], Any], tag: str, copies: int = 1, folder: Optional[str] = None):
        self.load, self.tag, self.copies = load, tag, max(1, int(copies))
        self.folder = folder or os.path.join(tempfile.gettempdir(), BATCH_FOLDER)
        self._servers: list = []
        self._turn = itertools.count()
        self._local = threading.local()
        self._mapped = True
        self._described: Optional[dict] = None
        self._generation = 0  # bumped when the servers are connected again

    def connect(self) -> SharedFigureModel:
        """Connects to the servers, starting (and loading the model in) those not running yet."""
        if not self._servers:
            from apache_beam.utils.multi_process_shared import MultiProcessShared

            factory = _ServerFactory(self.load)
            self._servers = [
                MultiProcessShared(factory, tag=f"{self.tag}-{i}", always_proxy=True, spawn_process=True).acquire()
                for i in range(self.copies)
            ]
        return self

    @property
    def device(self):
        """The device of the first server's model."""
        import torch

        return torch.device(self.describe()["device"])

    def describe(self) -> dict:
        """The first server's process id and device."""
        if self._described is None:
            self.connect()
            self._described = dict(self._servers[0].describe())
        return self._described

    def __call__(self, batch) -> np.ndarray:
        try:
            return self._call(batch)
        except (ConnectionError, EOFError) as e:
            # The server is gone (the process that started it ended, say): start or find
            # another, once; batch files made for the old one are not reused.
            log.warning("vision model server %s: %s; connecting again", self.tag, e)
            self._servers, self._described = [], None
            self._generation += 1
            return self._call(batch)

    def _call(self, batch) -> np.ndarray:
        self.connect()
        arrays = None if isinstance(batch, np.ndarray) else host_arrays(batch)
        first = batch if arrays is None else (arrays[0] if arrays else np.zeros((0,), np.uint8))
        n = len(batch)
        shape = (n, *(batch.shape[1:] if arrays is None else first.shape))
        dtype = np.dtype(first.dtype)
        check_batch(np.empty((0, *shape[1:]), dtype=dtype))
        i = next(self._turn) % self.copies
        server = self._servers[i]
        if not self._mapped or n == 0:
            return server.run_pickled(
                batch if arrays is None else np.stack(arrays) if arrays else np.empty(shape, dtype)
            )
        buf = self._buffer(n * int(np.prod(shape[1:])) * dtype.itemsize)
        view: np.ndarray = np.ndarray(shape, dtype=dtype, buffer=buf.map)
        if arrays is None:
            view[...] = batch
        else:
            np.stack(arrays, out=view)
        del view
        try:
            out = server.run_mapped(buf.path, shape, dtype.str)
        except OSError as e:
            if i in buf.seen:
                raise
            log.warning(
                "vision model server (pid %s) cannot open %s (%s); sending batches through its proxy instead",
                self.describe().get("pid"),
                buf.path,
                e,
            )
            self._mapped = False
            return self._call(batch)
        buf.seen.add(i)
        if len(buf.seen) == self.copies:
            buf.unlink()  # every server has it mapped: nothing to leave behind
        return out

    def _buffer(self, nbytes: int) -> _BatchFile:
        buf: Optional[_BatchFile] = getattr(self._local, "buf", None)
        if buf is not None and buf.size >= nbytes and buf.generation == self._generation:
            return buf
        size = nbytes
        if buf is not None:
            if buf.generation == self._generation:
                for i in buf.seen:
                    self._servers[i].forget(buf.path)
                size = max(nbytes, 2 * buf.size)
            buf.unlink()
            buf.map.close()
        self._local.buf = buf = _BatchFile(self.folder, self.tag, size)
        buf.generation = self._generation
        return buf
