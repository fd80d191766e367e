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


def test_explore_notebook_runs_headless_as_the_docs_say_on_a_build_without_images(tmp_path):
    """Issue 41: on a build without image bytes (the usual first outcome) the notebook stopped
    with an IndexError, and the docs' way to run it (`jupyter nbconvert --execute`, from the
    notebooks extra) was not installed. Run as the docs say, from another folder."""
    import os
    import subprocess
    import sys

    build = tmp_path / "no_images"
    r = subprocess.run(
        [sys.executable, "-m", "sciga", "build", "--sample", "--no-images", "--output", str(build), "--quiet"],
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    env = dict(os.environ, PYTHONPATH=str(ROOT), SCIGA_BUILD=str(build))
    r = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute"]
        + [str(ROOT / "notebooks" / "explore.ipynb"), "--output-dir", str(tmp_path / "ran")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    nb = nbformat.read(tmp_path / "ran" / "explore.ipynb", as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    text = json.dumps([o.get("data", {}).get("text/plain", "") or o.get("text", "") for o in outputs])
    assert "no figure in this build has image bytes" in text and "no_images_flag" in text
