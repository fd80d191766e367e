"""Loading a model puts the Hugging Face libraries offline only while it loads: the variables
were left set for the rest of the process (and every process it started), which put later Hub
calls of the same session, such as `sciga publish` run from a test or a notebook, offline."""

from __future__ import annotations

import os

import pytest

from sciga.training.offline import OFFLINE_VARIABLES, hub_offline


@pytest.mark.parametrize("before", [None, "0"])
def test_hub_offline_sets_the_variables_and_puts_them_back(monkeypatch, before):
    for k in OFFLINE_VARIABLES:
        if before is None:
            monkeypatch.delenv(k, raising=False)
        else:
            monkeypatch.setenv(k, before)
    with hub_offline():
        assert all(os.environ[k] == "1" for k in OFFLINE_VARIABLES)
    assert all(os.environ.get(k) == before for k in OFFLINE_VARIABLES)


def test_a_failed_model_load_leaves_the_environment_as_it_was(monkeypatch, tmp_path):
    pytest.importorskip("torch")
    from sciga.training.models.dual_encoder import build_dual_encoder

    for k in OFFLINE_VARIABLES:
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(FileNotFoundError, match="must be on disk"):
        build_dual_encoder({"kind": "hf", "path": str(tmp_path / "no-such-model")})
    assert not [k for k in OFFLINE_VARIABLES if k in os.environ]
