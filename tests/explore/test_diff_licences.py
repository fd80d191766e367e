"""`sciga diff` and the changelog name the papers the licence policy withheld or released
between two builds of the same pages (here: the sample built under ``all``, then under
``redistributable``)."""

from __future__ import annotations

import json
import shutil

import pytest

from sciga.explore.diff import diff_builds
from sciga.pipelines.cli import main
from sciga.publish.changelog import card_section

pytestmark = pytest.mark.e2e
# The sample papers ``redistributable`` withholds: CC BY-NC-ND, arXiv's licence, no licence.
WITHHELD = {
    "2511.99002": "http://creativecommons.org/licenses/by-nc-nd/4.0/",
    "2511.99003": "http://arxiv.org/licenses/nonexclusive-distrib/1.0/",
    "q-bio/0601999": "unknown",
}


def test_diff_and_changelog_list_papers_withheld_and_released(sample_build, tmp_path, capsys):
    old, new = sample_build, tmp_path / "redistributable"
    shutil.copytree(old, new, ignore=shutil.ignore_patterns("quality"))
    assert main(["build", "--sample", "--output", str(new), "--licences", "redistributable"]) == 0
    capsys.readouterr()

    assert main(["diff", str(old), str(new)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.strip().startswith("withheld"))
    assert all(f"{pid} ({lic})" in line for pid, lic in WITHHELD.items())

    assert main(["diff", str(new), str(old), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["papers"]["released"] == 3 and report["papers"]["withheld"] == 0
    assert {r["id"]: r["licence"] for r in report["released_papers"]} == WITHHELD

    with diff_builds(str(old), str(new)) as d:
        section = card_section(d, "v1.0.0", "v1.1.0", "changes/v1.1.0")
    assert "- Withheld for their licence: " in section and "`2511.99003` (" in section
