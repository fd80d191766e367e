"""`sciga train medical-filter`: data layouts, the training job on a tiny generated set, the
report, and the checkpoint the build loads."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from PIL import Image, ImageDraw

import sciga  # noqa: F401 - puts the checkout on sciga's path
from sciga.pipelines.cli import main
from sciga.training.medical_filter import load_dataset, medical_rule_metrics, per_class_f1, stratified_split
from sciga.transforms.vision.handlers import FigureModelHandler
from sciga.transforms.vision.models import preprocess, read_meta


def _draw(kind: str, rng: random.Random) -> Image.Image:
    if kind == "Medical image":  # a dark scan with a bright organ-like blob
        im = Image.new("L", (64, 64), rng.randint(0, 30))
        d = ImageDraw.Draw(im)
        x, y = rng.randint(10, 30), rng.randint(10, 30)
        d.ellipse((x, y, x + rng.randint(20, 30), y + rng.randint(20, 30)), fill=rng.randint(150, 255))
        return im.convert("RGB")
    im = Image.new("RGB", (64, 64), "white")
    d = ImageDraw.Draw(im)
    if kind == "Line graph":
        pts = [(x, rng.randint(8, 56)) for x in range(4, 64, 10)]
        d.line(pts, fill=(0, 0, 255), width=2)
    else:  # Bar plot
        for x in range(6, 60, 12):
            d.rectangle((x, rng.randint(10, 50), x + 7, 60), fill=(255, 128, 0))
    return im


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("docfig")
    rng = random.Random(0)
    for cls in ("Line graph", "Bar plot", "Medical image"):
        (root / cls).mkdir()
        for i in range(10):
            _draw(cls, rng).save(root / cls / f"{i:02d}.png")
    return root


def test_list_file_layout(tmp_path):
    (tmp_path / "images").mkdir()
    (tmp_path / "annotation").mkdir()
    rng = random.Random(1)
    lines = {"train": [], "test": []}
    for split, n in (("train", 4), ("test", 2)):
        for cls, name in (("Medical images", "med"), ("Bar plots", "bar"), ("15", "hist")):
            for i in range(n):
                f = f"{split}_{name}_{i}.png"
                _draw("Bar plot", rng).save(tmp_path / "images" / f)
                lines[split].append(f"{f}, {cls}")
    for split in lines:
        (tmp_path / "annotation" / f"{split}.txt").write_text("\n".join(lines[split]) + "\n")
    ds = load_dataset(str(tmp_path))
    assert ds.labels == ["Bar plot", "Medical image", "Histogram"]  # DocFigure's order, names normalised
    assert len(ds.train) == 12 and len(ds.test) == 6
    (tmp_path / "annotation" / "train.txt").write_text("missing.png, Table\n")
    with pytest.raises(FileNotFoundError, match="missing.png not found"):
        load_dataset(str(tmp_path))


def test_stratified_split_and_metrics():
    items = [(f"{y}-{i}", y) for y in range(3) for i in range(10)] + [("lonely", 3)]
    keep, out = stratified_split(items, 0.2, 0)
    assert sorted(keep + out) == sorted(items) and ("lonely", 3) in keep
    assert sorted(y for _, y in out) == [0, 0, 1, 1, 2, 2]
    assert stratified_split(items, 0.2, 0) == (keep, out)
    f1 = per_class_f1([0, 0, 1, 1], [0, 1, 1, 1], ["a", "b"])
    assert f1["a"] == {"precision": 1.0, "recall": 0.5, "f1": 0.6667, "support": 2}
    probs = np.array([[0.1, 0.6, 0.3], [0.5, 0.3, 0.2], [0.2, 0.3, 0.5]])
    m = medical_rule_metrics([2, 0, 1], probs, medical=2, ks=(1, 2))
    assert m["1"] == {"precision": 0.0, "recall": 0.0, "predicted": 1, "positives": 1}
    assert m["2"]["recall"] == 1.0 and m["2"]["predicted"] == 2


@pytest.mark.e2e  # trains a checkpoint end to end
def test_train_writes_the_checkpoint_the_build_loads(folder, tmp_path, capsys):
    out, report = tmp_path / "med.pt", tmp_path / "report.json"
    rc = main(
        [
            "train",
            "medical-filter",
            "--data",
            str(folder),
            "--output",
            str(out),
            "--arch",
            "resnet18",
            "--epochs",
            "2",
            "--batch-size",
            "8",
            "--input-size",
            "32",
            "--lr",
            "1e-3",
            "--patience",
            "2",
            "--report",
            str(report),
        ]
    )
    text = capsys.readouterr().out
    assert rc == 0 and "per-class F1" in text and "K=4" in text and "--medical-weights" in text
    rep = json.loads(report.read_text())
    assert set(rep["test_per_class"]) == {"Line graph", "Bar plot", "Medical image"}
    assert rep["images"]["test"] >= 6 and 1 <= rep["epochs_run"] <= 2
    assert set(rep["medical_rule"]) == {"1", "2", "3", "4", "5"}
    assert rep["medical_rule"]["3"]["recall"] == 1.0  # 3 classes: Medical is always in the top 3
    meta = read_meta(str(out))
    assert (
        meta.arch == "resnet18" and meta.labels == ["Line graph", "Bar plot", "Medical image"] and meta.input_size == 32
    )
    assert meta.metrics["test_accuracy"] == rep["test_accuracy"]
    h = FigureModelHandler(str(out), "classify")
    model = h.load_model()
    x = preprocess(Image.open(folder / "Medical image" / "00.png"), 32, meta.mean, meta.std)
    probs = next(iter(h.run_inference([x], model))).inference
    assert probs.shape == (3,) and abs(float(probs.sum()) - 1) < 1e-5


@pytest.mark.e2e  # builds and loads a torch model
def test_imagenet_initialisation_only_from_a_file_the_user_gives(tmp_path):
    import torch
    import torchvision

    from sciga.transforms.vision.models import WeightsError, build_model

    ref = torchvision.models.resnet18(weights=None)
    torch.save(ref.state_dict(), tmp_path / "resnet18-imagenet.pth")  # stands in for the downloaded file
    m = build_model("resnet18", 3, 0.1, init_weights=str(tmp_path / "resnet18-imagenet.pth"))
    assert torch.equal(m.conv1.weight, ref.conv1.weight)
    assert isinstance(m.fc[0], torch.nn.Dropout) and m.fc[0].p == 0.1 and m.fc[1].out_features == 3
    torch.save(torchvision.models.mobilenet_v3_small(weights=None).state_dict(), tmp_path / "other.pth")
    with pytest.raises(WeightsError, match="does not fit resnet18"):
        build_model("resnet18", 3, 0.1, init_weights=str(tmp_path / "other.pth"))


def test_train_errors_are_one_sentence(tmp_path, capsys):
    (tmp_path / "Line graph").mkdir()
    Image.new("RGB", (8, 8)).save(tmp_path / "Line graph" / "a.png")
    rc = main(
        ["train", "medical-filter", "--data", str(tmp_path), "--output", str(tmp_path / "w.pt"), "--arch", "resnet18"]
    )
    assert rc == 2 and "no 'Medical' class" in capsys.readouterr().out
    assert main(["train", "medical-filter", "--data", str(tmp_path / "absent"), "--output", "w.pt"]) == 2


def test_medical_filter_options_are_the_command_line_defaults():
    from sciga.pipelines.cli import make_parser
    from sciga.training.options import MedicalFilterOptions, options_from

    ns = make_parser().parse_args(["train", "medical-filter", "--data", "d", "--output", "w.pt"])
    assert options_from(MedicalFilterOptions, ns) == MedicalFilterOptions(data="d", output="w.pt")
