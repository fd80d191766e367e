"""Checking a published dataset (issue 41, items 3 and 4), driven as a user: `sciga validate`
and `sciga stats` on hf:// in a subprocess against the loopback Hub (tests/hub_fixtures.py).

- A checking command never writes where it reads: the repo has the same commits, files and
  tags after `validate` and `stats` as before, and no write request reached the Hub; the
  reports land in a local folder (./quality-report, ./stats) or where --report / --output say.
- A published version passes the gate: publish uploads what the gate needs (manifest.json),
  and the gate's verdict on the published version is the verdict publish gated on.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hub_fixtures import hub_subprocess_env, served_hub
from quality_fixtures import ROOT

from sciga.pipelines.cli import main

TOKEN = "hf_sciga_TEST_token_checking_7d1e"
REPO = "sciga-org/checked"


@pytest.fixture
def hub(monkeypatch, tmp_path):
    with served_hub(monkeypatch, tmp_path, TOKEN) as server:
        yield server


def _env(hub, tmp_path) -> dict:
    # The token can write: a checking command must not, even when it could.
    return hub_subprocess_env(hub, TOKEN, tmp_path, ROOT)


def _publish(build, version: str, hub) -> int:
    # the sample's papers carry mixed licences: a public repo takes them only on the user's word
    return main(
        ["publish", str(build), "--repo-id", REPO, "--version", version, "--endpoint", hub.url, "--allow-any-licence"]
    )


def _snapshot(hub) -> tuple:
    repo = hub.repos[("dataset", REPO)]
    return (
        [c.oid for c in hub.commits(REPO)],
        dict(repo.branches),
        dict(repo.tags),
        {p: b.sha256 for p, b in repo.resolve("main").files.items()},
    )


def test_validate_and_stats_on_the_hub_write_nothing_there_and_a_published_version_passes(hub, build_copy, tmp_path):
    assert _publish(build_copy, "v1.0.0", hub) == 0
    published = hub.files_at(REPO, "v1.0.0")
    assert "manifest.json" in published  # what the gate needs travels with the data
    before, n_requests = _snapshot(hub), len(hub.requests)
    work = tmp_path / "work"
    work.mkdir()

    def cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "sciga", *args],
            cwd=work,
            env=_env(hub, tmp_path),
            capture_output=True,
            text=True,
            timeout=600,
        )

    # The tagged version: passes, reports in ./quality-report (the default for a remote build).
    r = cli("validate", f"hf://datasets/{REPO}@v1.0.0", "--image-workers", "1")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "PASSED" in r.stdout
    report = json.loads((work / "quality-report" / "report.json").read_text())
    assert report["success"] is True
    assert "report: quality-report/report.md" in r.stdout

    # main, with --report choosing the folder; stats to ./stats.
    r = cli("validate", f"hf://datasets/{REPO}", "--report", str(tmp_path / "mine"), "--image-check", "header")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert (tmp_path / "mine" / "report.html").is_file()
    r = cli("stats", f"hf://datasets/{REPO}@v1.0.0", "--no-plots")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert (work / "stats" / "stats.md").is_file()

    assert _snapshot(hub) == before
    writes = [(m, p) for m, p in hub.requests[n_requests:] if m not in ("GET", "HEAD")]
    assert writes == [], writes
    assert TOKEN not in r.stdout + r.stderr


def test_the_published_manifest_names_no_machine_path_and_changes_only_with_the_data(hub, build_copy):
    """The manifest that travels keeps the build's facts about the data and leaves out the
    run's (seconds, timestamps, runner) and the machine's (absolute paths of option files):
    a rebuild of the same data publishes the same bytes, so a new version is only a tag."""
    assert _publish(build_copy, "v1.0.0", hub) == 0
    text = hub.files_at(REPO, "v1.0.0")["manifest.json"].decode()
    published = json.loads(text)
    local = json.loads((build_copy / "manifest.json").read_text())
    assert published["files"] == local["files"] and published["counts"] == local["counts"]
    assert "run" not in published and "incremental" not in published
    assert str(ROOT) not in text and str(build_copy) not in text and "/home/" not in text
    assert published["options"]["metadata"] == "meta"  # the sample's metadata folder, by name

    def rerun(m):
        m["run"]["seconds"] = 99.0
        m["run"]["finished_unix"] += 3600
        m["incremental"] = {"recomputed": 0, "reused": 4}

    from quality_fixtures import edit_manifest

    edit_manifest(build_copy, rerun)
    assert _publish(build_copy, "v1.1.0", hub) == 0
    repo = hub.repos[("dataset", REPO)]
    assert repo.tags["v1.1.0"][0] == repo.tags["v1.0.0"][0]  # only a tag: nothing that travels changed
