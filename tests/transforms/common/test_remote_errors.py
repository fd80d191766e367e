"""A remote build that cannot be read is one sentence, never a traceback (issue 41, item 7),
driven as a user meets it: every command that takes a remote build, in a subprocess, with
the Hub or the bucket's server out of reach (a closed port on 127.0.0.1), and against the
loopback Hub with a repo or a revision that does not exist."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from gcs_fixtures import gcs_env, write_adc
from hub_fixtures import FakeHub

from conftest import ROOT

TOKEN = "hf_sciga_TEST_token_remote_errors_3c9a"


def _closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"  # nothing listens once it is closed


def _sciga(args, env, cwd):
    full = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "STORAGE_EMULATOR"))}
    full.update(env, PYTHONPATH=str(ROOT), HF_HUB_DISABLE_XET="1", HF_HUB_DISABLE_TELEMETRY="1")
    return subprocess.run(
        [sys.executable, "-m", "sciga", *args], env=full, cwd=cwd, capture_output=True, text=True, timeout=300
    )


def _one_sentence(r, *names, codes=(2,)):
    err = r.stderr.strip()
    assert r.returncode in codes, (r.returncode, err[-2000:])
    assert "Traceback" not in err and err.count("\n") == 0, err[-2000:]
    assert all(n in err for n in names), err
    return err


COMMANDS = [
    ("validate", "{b}"),
    ("stats", "{b}"),
    ("browse", "{b}"),
    ("show", "2511.99001", "--build", "{b}"),
    ("sql", "{b}", "SELECT count(*) FROM papers"),
    ("diff", "{b}", "{b}"),
]


def test_hub_out_of_reach_is_one_sentence_for_every_command(tmp_path):
    endpoint = _closed_port()
    env = {"HF_ENDPOINT": endpoint, "HF_HOME": str(tmp_path / "hf"), "HF_TOKEN": TOKEN}
    build = "hf://datasets/me/sample@v1.0.0"
    for cmd in COMMANDS:
        r = _sciga([a.format(b=build) for a in cmd], env, tmp_path)
        err = _one_sentence(r, endpoint, "cannot reach the Hub")
        assert err.startswith(f"sciga {cmd[0]}: "), err


def test_a_missing_repo_or_revision_names_it(tmp_path):
    from huggingface_hub import HfApi

    hub = FakeHub(TOKEN).start()
    try:
        api = HfApi(endpoint=hub.url, token=TOKEN)
        api.create_repo("me/sample", repo_type="dataset")
        api.create_tag("me/sample", tag="v1.0.0", repo_type="dataset")
        env = {"HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "hf"), "HF_TOKEN": TOKEN}
        for cmd in COMMANDS:
            r = _sciga([a.format(b="hf://datasets/me/sample@v9.9.9") for a in cmd], env, tmp_path)
            _one_sentence(r, "me/sample", "'v9.9.9'", "no revision")
        for cmd in (COMMANDS[0], COMMANDS[4]):
            r = _sciga([a.format(b="hf://datasets/me/nothing-here") for a in cmd], env, tmp_path)
            _one_sentence(r, "no dataset repo me/nothing-here", hub.url)
        # The repo and the tag exist, but hold no build: that one is "not a build folder".
        r = _sciga(["validate", "hf://datasets/me/sample@v1.0.0"], env, tmp_path)
        _one_sentence(r, "is not a build folder")
    finally:
        hub.stop()


@pytest.mark.e2e
def test_bucket_out_of_reach_is_one_sentence(tmp_path):
    endpoint = _closed_port()
    env = gcs_env(endpoint, write_adc(tmp_path / "adc.json"))
    for args in (["validate", "gs://sciga-bucket/out"], ["build", "--sample", "--output", "gs://sciga-bucket/out"]):
        r = _sciga(args, env, tmp_path)
        # build says "--output ...: " first and exits 1, as for its other storage problems
        err = _one_sentence(r, "cannot reach Google Cloud Storage", endpoint, "gs://sciga-bucket/out", codes=(1, 2))
        assert "ERROR gcsfs" not in err
