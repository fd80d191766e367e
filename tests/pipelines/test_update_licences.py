"""`sciga update`'s licence policy: the one its saved build flags name, else
``redistributable`` when it publishes to a public repository and ``all`` otherwise; and the
recorded arXiv API responses read as papers without a licence (the API gives none), which
``redistributable`` withholds as ``unknown``."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from sciga.pipelines.update import UpdateOptions, build_run_options, default_update_policy
from sciga.schemas.licences import withheld_reason
from sciga.transforms.metadata.corpus_definition import CorpusDefinition

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "arxiv_api"


def policy_of(tmp_path, build_args=(), run_args=(), **definition) -> tuple[str, dict]:
    d = CorpusDefinition(cache=str(tmp_path / "cache"), build_args=tuple(build_args), **definition)
    o = UpdateOptions(out=str(tmp_path / "out"), definition=d, run_build_args=tuple(run_args))
    opts, _ = build_run_options(o, SimpleNamespace(selected=[]))
    return opts.licences, opts.recorded


def test_update_defaults_to_redistributable_for_a_public_repo(tmp_path):
    assert policy_of(tmp_path, repo_id="org/public")[0] == "redistributable"
    assert policy_of(tmp_path, repo_id="org/private", private=True)[0] == "all"
    assert policy_of(tmp_path)[0] == "all"  # builds and validates, publishes nothing
    assert policy_of(tmp_path, repo_id="org/public")[1]["licences"] == "redistributable"  # recorded as applied


def test_the_definitions_build_flags_name_the_policy(tmp_path):
    saved = ["--licences", "redistributable-nc"]
    assert policy_of(tmp_path, saved, repo_id="org/public")[0] == "redistributable-nc"
    assert policy_of(tmp_path, saved, ["--licences", "all"], repo_id="org/x")[0] == "all"  # this run's flag wins
    assert default_update_policy(CorpusDefinition(cache="c", repo_id="o/n")) == "redistributable"


def test_recorded_arxiv_api_responses_carry_no_licence_so_redistributable_withholds_them():
    if not CORPUS.is_dir():
        pytest.skip("needs the shared corpus")
    import json
    import xml.etree.ElementTree as ET

    from sciga.transforms.fetch.arxiv_api import _extras

    licences = []
    for f in [*sorted(CORPUS.glob("recorded/*.json")), *sorted(CORPUS.glob("**/*.xml"))]:
        body = json.loads(f.read_text())["body"] if f.suffix == ".json" else f.read_text()
        if "<entry>" in body:
            licences += [ex.license for ex in _extras(ET.fromstring(body.encode())).values()]
    assert len(licences) > 10 and all(lic is None for lic in licences)
    assert {withheld_reason("redistributable", lic) for lic in licences} == {"unknown"}
    assert {withheld_reason("all", lic) for lic in licences} == {None}
