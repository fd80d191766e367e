"""`sciga build --executor dask` (``executors/dask_executor.py``): on a Dask cluster of 2 worker
processes it writes the bytes the in-process executor and Beam's DirectRunner write (the
sample, the corpus pages, gs:// -> gs://); a worker killed mid-build is replaced and its
batch run again, with no paper lost or doubled; a build killed mid-way resumes from what it
stored; Ctrl-C is one sentence; a scheduler that does not answer is one sentence."""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from sciga.samples.scale_corpus import make_image_rich_corpus

from conftest import CORPUS, ROOT, _build

SHARDS = ("--papers-per-shard", "7", "--figures-per-shard", "9")  # several shard groups and parts


def digests(out) -> dict:
    import fsspec

    fs, root = fsspec.core.url_to_fs(str(out))
    return {
        p.rsplit("/data/", 1)[1]: hashlib.sha256(fs.cat_file(p)).hexdigest()
        for p in sorted(fs.glob(f"{root}/data/*/*.parquet"))
    }


def paper_ids(out: Path) -> list[str]:
    return [i for p in sorted((out / "data" / "papers").glob("*.parquet")) for i in pq.read_table(p)["id"].to_pylist()]


@pytest.mark.e2e  # builds of the corpus pages with three executors
def test_dask_writes_the_bytes_of_the_in_process_executor_and_beam_on_the_corpus(tmp_path, dask_cluster):
    inputs = ["--input", str(CORPUS / "html"), "--input", str(CORPUS / "latexml")]
    outs = {}
    for name, extra in (
        ("in_process", ["--workers", "1"]),
        ("beam", ["--executor", "beam", "--workers", "2"]),
        ("dask", ["--executor", "dask", "--dask-address", dask_cluster.scheduler_address]),
    ):
        outs[name] = tmp_path / name
        r = _build(*inputs, "--output", str(outs[name]), "--quiet", *SHARDS, *extra)
        assert r.counts.reconciled and r.counts.papers >= 8, name
    assert digests(outs["in_process"]) == digests(outs["beam"]) == digests(outs["dask"])


@pytest.mark.e2e
def test_a_worker_killed_mid_build_is_replaced_and_no_paper_is_lost_or_doubled(tmp_path, monkeypatch, dask_cluster):
    from sciga.executors import dask_executor

    pages = tmp_path / "pages"
    make_image_rich_corpus(pages, 40, n_figures=2, image_kb=4, distinct_images=2)
    clean = tmp_path / "clean"
    assert (
        _build("--input", str(pages), "--output", str(clean), "--quiet", "--workers", "1", *SHARDS).counts.papers == 40
    )

    killed: list[int] = []
    count_items = dask_executor._count_items

    def kill_a_worker_after_the_first_batch(progress, batch):
        if not killed:  # the other worker is computing a batch now: this one is killed while it does too
            nanny = next(iter(dask_cluster.workers.values()))
            killed.append(nanny.process.pid)
            os.kill(nanny.process.pid, signal.SIGKILL)
        count_items(progress, batch)

    monkeypatch.setattr(dask_executor, "_count_items", kill_a_worker_after_the_first_batch)
    out = tmp_path / "out"
    address = dask_cluster.scheduler_address
    r = _build(
        "--input", str(pages), "--output", str(out), "--quiet", "--executor", "dask", "--dask-address", address, *SHARDS
    )
    assert killed and r.counts.papers == 40 and r.counts.dead_letter == 0 and r.counts.reconciled
    ids = paper_ids(out)
    assert len(ids) == len(set(ids)) == 40
    assert digests(out) == digests(clean)
    from distributed import Client

    with Client(dask_cluster, set_as_default=False) as client:
        client.wait_for_workers(2, timeout=60)  # the nanny started a new worker in its place
        assert killed[0] not in client.run(os.getpid).values()


def _start_build(pages: Path, out: Path, *extra: str) -> subprocess.Popen:
    argv = [sys.executable, "-m", "sciga", "build", "--input", str(pages), "--output", str(out), *SHARDS]
    argv += ["--executor", "dask", "--workers", "2", "--progress-interval", "0.5", *extra]
    return subprocess.Popen(
        argv,
        cwd=str(out.parent),
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _wait_for_progress(p: subprocess.Popen, total: int) -> list[str]:
    err = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        line = p.stderr.readline()
        err.append(line)
        if re.search(rf"inputs ([1-9]\d*)/{total}", line) or not line:
            break
    return err


@pytest.mark.e2e  # `sciga build` in new processes, stopped mid-way
def test_ctrl_c_is_one_sentence_and_a_killed_build_resumes(tmp_path, dask_cluster):
    pages = tmp_path / "pages"
    make_image_rich_corpus(pages, 240, n_figures=2, image_kb=4, distinct_images=2)
    out = tmp_path / "out"

    p = _start_build(pages, out)
    err = _wait_for_progress(p, 240)
    os.killpg(p.pid, signal.SIGINT)  # Ctrl-C reaches the whole process group: the launcher and the cluster
    _, rest = p.communicate(timeout=120)
    stderr = "".join(err) + rest
    assert p.returncode == 130, stderr[-3000:]
    assert "Traceback" not in stderr
    last = stderr.strip().splitlines()[-1]
    assert re.match(
        r"sciga build: interrupted: the results of \d+ inputs are kept in .*; run the same command", last
    ), last

    p = _start_build(pages, out)
    _wait_for_progress(p, 240)
    os.killpg(p.pid, signal.SIGKILL)  # the launcher and its local cluster die at once
    p.communicate(timeout=60)

    r = _build(
        "--input",
        str(pages),
        "--output",
        str(out),
        "--quiet",
        "--executor",
        "dask",
        "--dask-address",
        dask_cluster.scheduler_address,
        *SHARDS,
    )
    assert r.counts.reused > 0 and r.counts.papers == 240 and r.counts.reconciled
    clean = tmp_path / "clean"
    _build("--input", str(pages), "--output", str(clean), "--quiet", *SHARDS)
    assert digests(out) == digests(clean)


@pytest.mark.e2e
def test_a_gs_build_on_dask_writes_what_the_in_process_gs_build_writes(gs_sample_inputs, gs_sample_build):
    from conftest import sample_build_args

    out = "gs://sciga-sample/dask-build"
    # No address: a local cluster started by the build, its workers in this environment (the emulator's).
    args = [a for a in sample_build_args(gs_sample_inputs, out) if a not in ("--workers", "1")]
    r = _build(*args, "--executor", "dask", "--workers", "2")
    assert r.counts.papers == 4 and r.counts.reconciled and r.manifest.run["runner"] == "dask"
    assert digests(out) == digests(gs_sample_build)


@pytest.mark.e2e  # the build's options are checked, then the scheduler is asked
def test_a_scheduler_that_does_not_answer_is_one_sentence(tmp_path, monkeypatch, capsys):
    import socket

    from sciga.executors import dask_executor
    from sciga.pipelines.cli import main

    monkeypatch.setattr(dask_executor, "CONNECT_TIMEOUT", 2)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "o"
    rc = main(
        ["build", "--sample", "--output", str(out), "--executor", "dask", "--dask-address", f"tcp://127.0.0.1:{port}"]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and "Traceback" not in "\n".join(err)
    assert err[-1].startswith(f"sciga build: --dask-address tcp://127.0.0.1:{port}: no Dask scheduler answered there")
    with pytest.raises(SystemExit, match="give it with --executor dask"):
        main(["build", "--sample", "--output", str(out), "--dask-address", f"tcp://127.0.0.1:{port}"])


def test_tasks_are_sent_a_window_at_a_time_and_every_answer_comes_back(dask_cluster):
    """``_answers`` with a window: a batch is taken from the generator only when fewer than
    ``window`` tasks are out, and every batch's answer comes back once."""
    from distributed import Client

    from sciga.executors.dask_executor import _answers

    taken: list[tuple[int, int]] = []  # (batch, answers used when it was taken)
    answers: list = []

    def batches():
        for i in range(25):
            taken.append((i, len(answers)))
            yield [("batch", i)]

    with Client(dask_cluster.scheduler_address, set_as_default=False) as client:
        # dict(pairs, token=..., blob=...): a function every worker can unpickle by name
        for got in _answers(client, dict, batches(), "t", b"", "tests", window=3):
            answers.append(got["batch"])
        assert sorted(answers) == list(range(25))
        # +1: the task just finished, whose answer is used after the next batch is sent
        assert all(i < used + 1 + 3 for i, used in taken), taken
        everything = list(_answers(client, dict, [[("batch", i)] for i in range(7)], "t", b"", "tests"))
        assert sorted(a["batch"] for a in everything) == list(range(7))


def test_an_interrupt_a_finalizer_swallowed_stops_the_launcher_at_the_next_answer(dask_cluster, monkeypatch):
    """Ctrl-C that landed in a finalizer while the launcher waited on the cluster is raised
    again as the next answer comes back (``common/interrupts.py``); no task is left running."""
    import os
    import signal

    from distributed import Client

    from sciga.executors.dask_executor import _answers
    from sciga.transforms.common import interrupts

    monkeypatch.setattr(interrupts, "_owner", os.getpid())
    with Client(dask_cluster.scheduler_address, set_as_default=False) as client:
        got = []
        with pytest.raises(KeyboardInterrupt):
            for answer in _answers(client, dict, [[("batch", i)] for i in range(9)], "t", b"", "tests", window=2):
                got.append(answer)
                if len(got) == 2:
                    monkeypatch.setattr(interrupts, "_received", signal.SIGINT)  # as the handler leaves it
        assert len(got) == 2


@pytest.mark.e2e
def test_the_launcher_reads_part_jobs_back_a_window_at_a_time(tmp_path, monkeypatch, dask_cluster):
    """A Dask build never holds every part job: each is read back from disk when its batch
    is sent, and at most a window of batches is out (the build still writes every paper)."""
    from sciga.executors import dask_executor, spill

    loaded: list = []
    written: list = []
    real_load, real_answers = spill.load_job, dask_executor._answers
    monkeypatch.setattr(spill, "load_job", lambda ref: loaded.append(ref) or real_load(ref))
    monkeypatch.setattr(dask_executor, "WINDOW_PER_SLOT", 1)
    monkeypatch.setattr(dask_executor, "MAX_BATCH", 1)

    def counting_answers(client, fn, batches, *args, **kw):
        for answer in real_answers(client, fn, batches, *args, **kw):
            if fn is dask_executor._write_task:
                written.append(len(loaded))
            yield answer

    monkeypatch.setattr(dask_executor, "_answers", counting_answers)
    pages = tmp_path / "pages"
    make_image_rich_corpus(pages, 12, n_figures=2, image_kb=4, distinct_images=1)
    out = tmp_path / "out"
    r = _build(
        "--input", str(pages), "--output", str(out), "--quiet", "--papers-per-shard", "1", "--figures-per-shard", "2",
        "--executor", "dask", "--dask-address", dask_cluster.scheduler_address,
    )  # fmt: skip
    assert r.counts.papers == 12 and len(paper_ids(out)) == 12
    slots = 2  # the cluster's worker threads
    assert len(written) >= 12 and len(loaded) == len(written)
    # when the k-th batch's answer was used, at most k + 1 + window batches had been read back
    assert all(n <= k + 1 + slots for k, n in enumerate(written, start=1)), written
