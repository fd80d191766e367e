"""Task view parameters are settable (connect(..., params=...), `sciga sql --param`), with
PaperBanana's [1.5, 2.5] as method_diagrams' default; the embedded sample fills every view."""

from __future__ import annotations

import re

import pytest

from sciga.explore.views import connect, task_views
from sciga.pipelines.cli import main


def ids(con, sql="SELECT figure_id FROM method_diagrams ORDER BY figure_id"):
    return [r[0] for r in con.execute(sql).fetchall()]


def test_every_task_view_has_rows_on_the_embedded_sample(sample_build):
    con = connect(str(sample_build))
    counts = {view: con.execute(f"SELECT count(*) FROM {view}").fetchone()[0] for view in task_views()}
    assert set(counts) >= {"caption_context", "method_diagrams", "subfigure_subcaption", "ga_candidates"}
    assert all(n > 0 for n in counts.values()), counts


def test_method_diagrams_default_window_and_parameters(sample_build):
    out = str(sample_build)
    assert ids(connect(out)) == ["2511.99001_F2"]  # the overview diagram, 640x300 = 2.13
    assert ids(connect(out, params={"method_diagrams.max_ratio": 2.0})) == []
    assert ids(connect(out, params={"min_ratio": "2.2", "max_ratio": "3"}, view="method_diagrams")) == []
    assert ids(connect(out, params={"method_diagrams.min_ratio": 2.1})) == ["2511.99001_F2"]


def test_parameter_errors_are_one_sentence(sample_build):
    from sciga.explore.views import ViewParamError, resolve_param

    with pytest.raises(
        ViewParamError,
        match="'ratio' is not a parameter of view method_diagrams; parameters: method_diagrams.min_ratio",
    ):
        connect(str(sample_build), params={"ratio": 1}, view="method_diagrams")
    with pytest.raises(ViewParamError, match="method_diagrams.min_ratio takes a double, not 'wide'"):
        resolve_param("method_diagrams.min_ratio").literal("wide")
    with pytest.raises(ViewParamError, match="there is no task view 'nope'"):
        resolve_param("nope.min_ratio")


def test_declared_defaults_are_the_sql_defaults():
    from sciga.explore.views import view_parameters

    params = view_parameters()
    assert [(p.name, p.type, p.default) for p in params["method_diagrams"]] == [
        ("min_ratio", "DOUBLE", "1.5"),
        ("max_ratio", "DOUBLE", "2.5"),
    ]
    for view, ps in params.items():
        for p in ps:
            assert re.search(
                rf"coalesce\(getvariable\('{p.variable}'\), {re.escape(p.default)}\)", task_views()[view]
            ), p


def test_sql_cli_param(sample_build, capsys):
    out = str(sample_build)
    assert main(["sql", out, "--view", "method_diagrams", "--format", "csv"]) == 0
    assert "2511.99001_F2" in capsys.readouterr().out
    assert main(["sql", out, "--view", "method_diagrams", "--param", "max_ratio=2.0", "--format", "csv"]) == 0
    assert "2511.99001_F2" not in capsys.readouterr().out
    assert main(["sql", out, "--view", "method_diagrams", "--param", "min_ratio"]) == 2
    assert "--param takes NAME=VALUE" in capsys.readouterr().err
    assert main(["sql", out, "--list-params"]) == 0
    listed = capsys.readouterr().out
    assert "method_diagrams.min_ratio\tdouble\tdefault 1.5" in listed
    assert main(["sql", "--list-params"]) == 0  # no build needed to read the views' parameters
    assert capsys.readouterr().out == listed
    assert main(["sql"]) == 2
    assert "give the build folder" in capsys.readouterr().err
