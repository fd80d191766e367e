"""`sciga publish` and the licence policy, on a Hub-compatible server on 127.0.0.1: a build
under ``--licences all`` that holds papers a third party may not redistribute is refused for
a public repository (one sentence naming the rebuild), taken by a private one, and the same
build rebuilt under ``redistributable`` (recomputing nothing) is published publicly."""

from __future__ import annotations

import json

import pytest
from hub_fixtures import served_hub

from sciga.explore.dataset_card import read_front_matter
from sciga.pipelines.cli import main

pytestmark = pytest.mark.e2e
TOKEN = "hf_sciga_TEST_token_licences_0a1b2c"


@pytest.fixture
def hub(monkeypatch, tmp_path):
    with served_hub(monkeypatch, tmp_path, TOKEN) as server:
        yield server


def publish(build, repo, hub, *extra):
    return main(["publish", str(build), "--repo-id", repo, "--version", "v1.0.0", "--endpoint", hub.url, *extra])


def test_a_public_repo_refuses_an_all_build_and_takes_it_rebuilt_redistributable(hub, build_copy, capsys):
    assert json.loads((build_copy / "manifest.json").read_text())["options"]["licences"] == "all"
    assert publish(build_copy, "sciga-org/public", hub) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("sciga publish: ") and err.count("\n") == 0 and "Traceback" not in err
    assert "--licences all" in err and "is public" in err
    assert f"sciga build --output {build_copy} --licences redistributable" in err
    assert "nonexclusive-distrib" in err  # names what may not be redistributed
    assert hub.writes() == [] and hub.repos == {}

    assert publish(build_copy, "sciga-org/public", hub, "--dry-run") == 1  # a dry run says so too
    capsys.readouterr()

    # A private repository takes any build.
    assert publish(build_copy, "sciga-org/private", hub, "--private") == 0
    assert hub.repos[("dataset", "sciga-org/private")].private

    # Rebuilt under the policy: nothing is recomputed, and the public repository takes it.
    assert main(["build", "--sample", "--output", str(build_copy), "--licences", "redistributable"]) == 0
    manifest = json.loads((build_copy / "manifest.json").read_text())
    assert manifest["incremental"]["recomputed"] == 0 and manifest["withheld"]
    capsys.readouterr()
    assert publish(build_copy, "sciga-org/public", hub) == 0
    card = hub.files_at("sciga-org/public", "v1.0.0")["README.md"].decode()
    assert read_front_matter(card)["license"] == "cc-by-4.0"  # only CC BY papers are in full
    assert "papers were withheld" in card


def test_allow_any_licence_is_the_explicit_override(hub, build_copy, capsys):
    assert publish(build_copy, "sciga-org/public", hub, "--allow-any-licence") == 0
    assert not hub.repos[("dataset", "sciga-org/public")].private
