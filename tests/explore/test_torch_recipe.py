"""The torch recipe of docs/how-to/explore.md, run as a user runs it (issue 41): the block as
written, in a new interpreter, from another working folder, on the embedded sample's build.
`with_format("torch")` alone gave palette-index tensors for mode P and L PNGs, and
`DataLoader` failed on rows without an image; the recipe must give RGB batches of one size
with every row that has an image, and no other."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from conftest import ROOT

RECIPE_MARK = "<!-- sciga:recipe torch-figures"


def recipe() -> str:
    text = (ROOT / "docs" / "how-to" / "explore.md").read_text(encoding="utf-8")
    after = text.split(RECIPE_MARK, 1)[1]
    return re.search(r"^```python\n(.*?)^```", after, re.S | re.M).group(1)


def test_the_recipe_is_in_the_docs_and_reads_the_sample_build():
    code = recipe()
    assert 'load_dataset("out/sample", "figures"' in code and "DataLoader" in code


# Runs the recipe, then walks the whole loader once and prints what it saw.
CHECK = """
seen, shapes, dtypes = [], set(), set()
for b in DataLoader(figures, batch_size=8):
    seen += list(b["id"])
    shapes.add(tuple(b["pixel_values"].shape[1:]))
    dtypes.add(str(b["pixel_values"].dtype))
print("RESULT " + json.dumps({"first": list(batch["pixel_values"].shape), "seen": sorted(seen),
                              "shapes": sorted(shapes), "dtypes": sorted(dtypes)}))
"""


@pytest.mark.e2e  # a new interpreter loads the build with datasets and torch
def test_the_torch_recipe_gives_rgb_batches_of_the_rows_with_an_image(sample_build, tmp_path):
    code = "import json\n" + recipe().replace('"out/sample"', repr(str(sample_build))) + CHECK
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf_home"), PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(next(ln for ln in r.stdout.splitlines() if ln.startswith("RESULT "))[len("RESULT ") :])
    rows = [
        row
        for f in sorted((sample_build / "data" / "figures").glob("*.parquet"))
        for row in pq.read_table(f, columns=["id", "image_status"]).to_pylist()
    ]
    with_image = sorted(row["id"] for row in rows if row["image_status"] == "embedded")
    assert len(with_image) < len(rows)  # the sample has rows without an image: they are left out
    assert got["seen"] == with_image
    assert got["first"] == [8, 3, 224, 224]
    assert got["shapes"] == [[3, 224, 224]] and got["dtypes"] == ["torch.float32"]
