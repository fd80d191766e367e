"""notebooks/explore.ipynb runs top to bottom on a fresh sample build (nbclient, real kernel)."""

from __future__ import annotations

import json

import nbformat
from nbclient import NotebookClient
from quality_fixtures import ROOT, build_sample


def test_explore_notebook_runs_on_the_sample_build(tmp_path, monkeypatch):
    build = build_sample(tmp_path / "sample")  # `sciga build --sample --output <tmp>`
    monkeypatch.setenv("SCIGA_BUILD", str(build))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    nb = nbformat.read(ROOT / "notebooks" / "explore.ipynb", as_version=4)
    # Outputs arriving after a cell's reply are kept (nbclient drops them after 4 s by default).
    NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        iopub_timeout=60,
        raise_on_iopub_timeout=True,
        resources={"metadata": {"path": str(ROOT)}},
    ).execute()

    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    text = json.dumps([o.get("data", {}).get("text/plain", "") or o.get("text", "") for o in outputs])
    manifest = json.loads((build / "manifest.json").read_text())
    assert f"schema {manifest['schema_version']}" in text
    assert "2511.99001_F1" in text  # a figure id from the sample, shown by the unnest cell
    assert any("image/png" in o.get("data", {}) for o in outputs)  # the thumbnail and the plot rendered
