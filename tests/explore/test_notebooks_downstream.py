"""The notebooks for the people downstream run top to bottom on the sample build (nbclient,
real kernel) and show images inline: caption evaluation (caption_context), diagram
generation (method_diagrams, with and without rows in the default aspect-ratio range),
medical subfigure-subcaption pairs, and GA candidates per paper."""

from __future__ import annotations

import json

import nbformat
import pytest
from nbclient import NotebookClient
from quality_fixtures import ROOT, rewrite_shard


def run_notebook(name: str, build, monkeypatch) -> tuple[list, str]:
    monkeypatch.setenv("SCIGA_BUILD", str(build))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    # iopub_timeout: outputs that arrive after the cell's reply are kept, not dropped after nbclient's
    # default 4 s (which happens on a loaded machine); raise if even 60 s is not enough.
    NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        iopub_timeout=60,
        raise_on_iopub_timeout=True,
        resources={"metadata": {"path": str(ROOT)}},
    ).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    errors = [f"{o['ename']}: {o['evalue']}" for o in outputs if o.output_type == "error"]
    assert errors == []
    text = json.dumps(
        [
            o.get("text", "") or o.get("data", {}).get("text/markdown", "") or o.get("data", {}).get("text/plain", "")
            for o in outputs
        ]
    )
    return outputs, text


def images(outputs) -> int:
    return sum(1 for o in outputs if "image/png" in o.get("data", {}))


@pytest.mark.parametrize(
    "name, expected",
    [
        ("caption_context", ["2511.99001_F3", "figures exported; first: 2511.99001_F1"]),
        ("subfigure_subcaption", ["2511.99003_F1.1", "Axial brain MRI", "pairs written to"]),
        ("ga_candidates", ["2511.99001_F1", " **GA**", "first_figure_is_ga"]),
    ],
)
def test_notebook_runs_with_images(name, expected, sample_build, monkeypatch):
    outputs, text = run_notebook(name, sample_build, monkeypatch)
    assert images(outputs) >= 2, f"{name}: images not shown inline"
    for s in expected:
        assert s in text, (name, s)


def _method_notebook(build, monkeypatch, in_range: int) -> None:
    outputs, text = run_notebook("method_diagrams", build, monkeypatch)
    assert "aspect ratio kept: [1.5, 2.5]" in text
    assert f"{in_range} method diagrams with w:h in [1.5, 2.5]" in text
    assert ("showing the default result" if in_range else "showing the candidates (the default cut kept none)") in text
    assert "2511.99001_F2" in text and "**C (caption):**" in text  # the sample's method figure, either way
    # Paper text reaches Markdown escaped: SciGA's tokens show instead of being taken for HTML tags.
    assert (
        "&lt;MATH&gt; N &lt;/MATH&gt;" in text and "<MATH>" not in text.replace("\\u003c", "<").split("**S (method")[1]
    )
    assert images(outputs) >= 1


def test_method_diagrams_notebook_on_the_sample(sample_build, monkeypatch):
    from sciga.explore.views import connect

    in_range = connect(str(sample_build)).execute("SELECT count(*) FROM method_diagrams").fetchall()[0][0]
    _method_notebook(sample_build, monkeypatch, in_range)


def test_method_diagrams_notebook_with_and_without_rows_in_the_default_range(build_copy, monkeypatch):
    """Both branches, whatever the sample holds: the method figure's size set to 2:1 (kept by
    the default cut), then to 4:1 (only a candidate)."""

    def sized(w, h):
        def change(rows):
            for r in rows:
                if r["id"] == "2511.99001_F2":
                    r["width"], r["height"] = w, h
            return rows

        return change

    rewrite_shard(build_copy, "figures", sized(420, 210))
    _method_notebook(build_copy, monkeypatch, 1)
    rewrite_shard(build_copy, "figures", sized(840, 210))
    _method_notebook(build_copy, monkeypatch, 0)


def test_notebook_pictures(sample_build):
    from sciga.explore.notebook_images import figure_picture, side_by_side, thumbnail
    from sciga.explore.views import connect

    con = connect(str(sample_build))
    assert (
        thumbnail(None) is None
        and thumbnail(b"not an image") is None
        and thumbnail({"bytes": None, "path": "x.png"}) is None
    )
    own = figure_picture(con, "2511.99001_F2")  # a single-image figure: its thumbnail
    assert own is not None and own.width <= 480 and own.height <= 240
    panels = figure_picture(con, "2511.99001_F3")  # compound: its three panels side by side
    assert panels is not None and panels.width > 2 * panels.height
    svg = figure_picture(con, "2511.99002_F5")  # an SVG drawing: its PNG rasterized by the build (issue 44)
    assert svg is not None and svg.width > svg.height
    strip = side_by_side([own, None], height=100, frame=[True, False])
    assert strip.height == 100 and strip.getpixel((0, 0)) != (255, 255, 255)  # framed
