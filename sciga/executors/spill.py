"""Grouping a build's references and cutting its part jobs on disk, so that the launcher's
memory does not grow with the corpus (issue 47).

To cut the part files the launcher needs every paper's reference, grouped by paper id, and
then every write item, grouped by (config, shard group). Held in lists and dicts, that was
~5 KB of resident memory per paper: ~0.8 GB of a 145,000-paper build's launcher, and a
copy in every worker forked from it. Here both groupings are external sorts: items are
kept in runs of at most ``RUN_ITEMS``, each run is sorted and written to a file, and the
runs are merged back in key order, one record of each run in memory. The part jobs are
written to one file as they are cut; the launcher keeps each job's place and size
(``JobRef``), and the process that writes a part reads its job back (``load_job``).

The order is the one the lists gave: a key's items come back in the order they were added
(records sort by key, then by arrival), so a build cut here writes the same bytes as one
cut in memory, as earlier builds did (``tests/executors/test_spill.py``).
"""

from __future__ import annotations

import heapq
import itertools
import os
import pickle
from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Optional

# Items held before a run is sorted and written: ~10 MB of references; 145,000 papers make
# ~35 runs of references and ~110 of write items, merged with one open file each.
RUN_ITEMS = 4096
_PROTOCOL = pickle.HIGHEST_PROTOCOL
_BUFFER = 1 << 16  # writing a run, or the jobs
# Reading: one buffer per run is open while the runs are merged (~110 runs at 145,000 papers).
_READ_BUFFER = 1 << 13


class SortedRuns:
    """Pairs (key, item) added in any order, read back once, grouped by key in key order
    (``grouped``), at most ``run_items`` of them in memory while adding and one per run
    while reading. The files live in ``folder`` and are removed as they are read."""

    def __init__(self, folder: str, name: str, run_items: Optional[int] = None):
        self.folder = folder
        self.name = name
        self.run_items = max(1, run_items or RUN_ITEMS)
        self._buffer: list[tuple[Any, int, Any]] = []
        self._runs: list[str] = []
        self._seq = 0

    def __len__(self) -> int:
        return self._seq

    def add(self, key: Hashable, item: Any) -> None:
        self._buffer.append((key, self._seq, item))
        self._seq += 1
        if len(self._buffer) >= self.run_items:
            self._spill()

    def _spill(self) -> None:
        self._buffer.sort(key=_key_of)  # stable: a key's items stay in arrival order
        path = os.path.join(self.folder, f"{self.name}-{len(self._runs):05d}.pickle")
        with open(path, "wb", buffering=_BUFFER) as f:
            for record in self._buffer:
                pickle.dump(record, f, _PROTOCOL)
        self._runs.append(path)
        self._buffer = []

    def grouped(self) -> Iterator[tuple[Any, list]]:
        """(key, its items in the order they were added), keys in ascending order."""
        if self._runs:
            if self._buffer:
                self._spill()
            records: Iterable[tuple[Any, int, Any]] = heapq.merge(*map(_read_run, self._runs), key=_key_and_seq)
        else:  # one run's worth: no file at all
            self._buffer.sort(key=_key_of)
            records, self._buffer = self._buffer, []
        for key, run in itertools.groupby(records, key=_key_of):
            yield key, [item for _, _, item in run]


def _key_of(record: tuple) -> Any:
    return record[0]


def _key_and_seq(record: tuple) -> tuple:
    return record[0], record[1]


def _read_run(path: str) -> Iterator[tuple[Any, int, Any]]:
    try:
        with open(path, "rb", buffering=_READ_BUFFER) as f:
            while True:
                try:
                    yield pickle.load(f)
                except EOFError:
                    return
    finally:
        try:
            os.remove(path)
        except OSError:
            pass


@dataclass(frozen=True)
class JobRef:
    """Where one part job lies in the jobs file, and what it will write (``job_bytes``)."""

    path: str
    offset: int
    length: int
    nbytes: int
    group: tuple = ()  # (config, shard group) of the part: counted before any job is read back
    taken_over: Optional[bool] = None  # the previous build's part file, as it is (when asked at the cut)


class JobFile:
    """Part jobs written to one file as they are cut; ``refs`` gives their places, largest
    part first (jobs of one size in the order they were added)."""

    def __init__(self, folder: str, name: str = "jobs"):
        self.path = os.path.join(folder, f"{name}.pickle")
        self._file: Optional[Any] = open(self.path, "wb", buffering=_BUFFER)
        self._refs: list[JobRef] = []

    def add(self, job: Any, nbytes: int, taken_over: Optional[bool] = None) -> None:
        assert self._file is not None, "JobFile.add after refs()"
        blob = pickle.dumps(job, _PROTOCOL)
        group = (getattr(job, "config", ""), getattr(job, "group", 0))
        self._refs.append(JobRef(self.path, self._file.tell(), len(blob), nbytes, group, taken_over))
        self._file.write(blob)

    def refs(self) -> list[JobRef]:
        if self._file is not None:
            self._file.close()
            self._file = None
        return sorted(self._refs, key=lambda r: r.nbytes, reverse=True)


def load_job(ref: JobRef) -> Any:
    """The part job ``ref`` points at (in the launcher or in a worker on the same disk)."""
    with open(ref.path, "rb") as f:
        f.seek(ref.offset)
        blob = f.read(ref.length)
    if len(blob) != ref.length:
        raise OSError(f"{ref.path}: a part job is cut short at byte {ref.offset}")
    return pickle.loads(blob)
