"""An evaluation with 0 queries says there is nothing to evaluate, why, and exits non-zero:
every metric is n/a (null) in the printed table and in results.json, never 0.000."""

from __future__ import annotations

import json

import pytest
from training_fixtures import tiny_build

from sciga.pipelines.cli import main
from sciga.training import metrics

NOTHING_TO_EVALUATE = 3  # sciga.pipelines.evaluate.NOTHING_TO_EVALUATE: the exit status of an empty split


def test_exit_status_constant():
    from sciga.pipelines.evaluate import NOTHING_TO_EVALUATE as status

    assert status == NOTHING_TO_EVALUATE


def _results(path):
    return json.loads((path / "results.json").read_text()), (path / "results.md").read_text()


def test_sample_build_inter_random_has_no_test_query(sample_build, tmp_path, capsys):
    """The embedded sample's 4 papers all hash into train/val: the test split is empty.
    (This crashed in training/metrics.py's einsum before.)"""
    res = tmp_path / "res"
    rc = main(["evaluate", "random", "--task", "inter", "--data", str(sample_build), "--results", str(res)])
    err = capsys.readouterr().err
    assert rc == NOTHING_TO_EVALUATE != 0
    assert "nothing to evaluate: the test split holds none of the build's 4 papers" in err
    data, md = _results(res)
    (row,) = data["inter"]
    assert row["metrics"]["queries"] == 0 and row["nothing_to_evaluate"].startswith("the test split holds none")
    assert all(v is None for k, v in row["metrics"].items() if k != "queries")
    assert "0.000" not in md and "| n/a | n/a |" in md and "nothing to evaluate: the test split" in md


@pytest.mark.parametrize("method", ["random", "abs2cap"])
def test_intra_with_no_qualifying_paper(tmp_path, capsys, method):
    build = tiny_build(tmp_path / "build", {"train": 3, "val": 1, "test": 2})
    res = tmp_path / "res"
    rc = main(["evaluate", method, "--data", build, "--results", str(res), "--min-candidates", "99"])
    err = capsys.readouterr().err
    assert rc == NOTHING_TO_EVALUATE
    assert "none of the" in err and "test papers has a (de-facto) graphical abstract and 99+ figures" in err
    data, md = _results(res)
    (row,) = data["intra"]
    assert row["metrics"] == {
        "queries": 0,
        "R@1": None,
        "R@2": None,
        "R@3": None,
        "MRR": None,
        "CAR@5": None,
        "CAR@5>0.5": None,
    }
    table = [ln for ln in md.splitlines() if ln.startswith("| (")]
    assert table and "0.000" not in md and table[0].count("n/a") == 6


def test_a_later_real_evaluation_replaces_the_na_row(tmp_path, capsys):
    build = tiny_build(tmp_path / "build", {"train": 3, "val": 1, "test": 2})
    res = tmp_path / "res"
    assert main(["evaluate", "random", "--data", build, "--results", str(res), "--min-candidates", "99"]) == 3
    assert main(["evaluate", "random", "--data", build, "--results", str(res)]) == 0
    out = capsys.readouterr().out
    data, _ = _results(res)
    (row,) = data["intra"]
    assert row["metrics"]["queries"] == 2 and "nothing_to_evaluate" not in row and "n/a" not in out


def test_summaries_of_no_query_are_na_not_zero():
    s = metrics.intra_summary([], [])
    assert s["queries"] == 0 and all(v is None for k, v in s.items() if k != "queries")
    import numpy as np

    s = metrics.inter_summary(np.zeros((0, 5), dtype=int), np.zeros(0), np.zeros(3), np.zeros((0,)), np.ones((3, 4)))
    assert s == {
        "queries": 0,
        "Field-P@5": None,
        "SBERT@5": None,
        "SBERT@5_std": None,
        "Field-P@10": None,
        "SBERT@10": None,
        "SBERT@10_std": None,
    }
