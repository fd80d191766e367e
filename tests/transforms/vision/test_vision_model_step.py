"""The model steps without Beam (``model_step.py``), the zero-cost ``null`` model, and the
machine's shared model in a process of its own (``shared_model.py``): the null model and a
real one (tiny, built here) give the same keys and the same failure rows through the
stage, on Beam and without it."""

from __future__ import annotations

import logging
import os

import apache_beam as beam
import numpy as np
import pytest
import torch
from vision_fixtures import ROOT, SVG, bomb_png, copy_sample, read_rows, run_build, save_tiny_classifier

import sciga  # noqa: F401 - puts the checkout on sciga's path
from sciga.transforms.common.steps import Tagged
from sciga.transforms.vision.figure_model import LoadedFigureModel, load_figure_model
from sciga.transforms.vision.inference import ClassifyImages, InferenceOptions, image_to_model_input, read_image_file
from sciga.transforms.vision.medical import DOCFIGURE_LABELS
from sciga.transforms.vision.model_step import FAILED, ClassifyStep, FigureModelStep
from sciga.transforms.vision.models import CheckpointMeta, build_model, normalise, read_meta, save_checkpoint
from sciga.transforms.vision.shared_model import SharedFigureModel

# e2e: runs the classifier in Beam pipelines, builds and model server processes
pytestmark = pytest.mark.e2e

FIGS = sorted((ROOT / "samples" / "html").glob("*/figs/*.png"))


def save_null_classifier(path, input_size: int = 32) -> str:
    torch.manual_seed(0)
    save_checkpoint(
        str(path),
        build_model("null", len(DOCFIGURE_LABELS)),
        CheckpointMeta(arch="null", labels=list(DOCFIGURE_LABELS), input_size=input_size),
    )
    return str(path)


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    d = tmp_path_factory.mktemp("w")
    return {"null": save_null_classifier(d / "null.pt"), "tiny": save_tiny_classifier(d / "tiny.pt")}


@pytest.fixture(scope="module")
def items(tmp_path_factory):
    """(key, path) pairs: five real figures, and four with no usable pixels."""
    d = tmp_path_factory.mktemp("img")
    (d / "bomb.png").write_bytes(bomb_png())
    (d / "broken.png").write_bytes(FIGS[0].read_bytes()[:200])
    (d / "drawing.svg").write_bytes(SVG)
    good = [(f"ok{i}", str(p)) for i, p in enumerate(FIGS[:5])]
    bad = [(k, str(d / f)) for k, f in (("bomb", "bomb.png"), ("broken", "broken.png"), ("svg", "drawing.svg"))]
    return good + bad + [("missing", str(d / "nope.png"))]


def _classify_on_beam(weights, items, options, folder):
    """ClassifyImages on the DirectRunner: ({key: probabilities}, {key: reason})."""
    import pickle

    def keep(name):
        def write(rows, path=str(folder / name)):
            with open(path, "wb") as f:
                pickle.dump(dict(rows), f)

        return write

    folder.mkdir(parents=True, exist_ok=True)
    with beam.Pipeline("DirectRunner") as p:
        res = p | beam.Create(items) | ClassifyImages(weights, options, load_bytes=read_image_file)
        for name in ("probabilities", "failed"):
            getattr(res, name) | f"All{name}" >> beam.combiners.ToList() | f"Keep{name}" >> beam.Map(keep(name))
    with open(folder / "probabilities", "rb") as f, open(folder / "failed", "rb") as g:
        return pickle.load(f), pickle.load(g)


def _classify_without_beam(weights, items, options):
    step = ClassifyStep(
        FigureModelStep.from_options(weights, "classify", options),
        read_meta(weights).input_size,
        load_bytes=read_image_file,
        max_batch_size=options.max_batch_size,
    )
    probs, failed = {}, {}
    for out in step.run(items):
        if isinstance(out, Tagged):
            assert out.tag == FAILED
            failed[out.value[0]] = out.value[1]
        else:
            probs[out[0]] = out[1]
    return probs, failed


def test_null_and_real_models_give_the_same_keys_and_failure_rows(weights, items, tmp_path):
    """ClassifyImages on Beam with the zero-cost model and with a real (tiny) ResNet-18:
    the same keys classified, the same failure rows; and ClassifyStep without Beam gives
    exactly what Beam gives, probabilities included."""
    options = InferenceOptions(max_batch_size=3)
    null_probs, null_failed = _classify_on_beam(weights["null"], items, options, tmp_path / "null")
    real_probs, real_failed = _classify_on_beam(weights["tiny"], items, options, tmp_path / "tiny")
    assert sorted(null_probs) == sorted(real_probs) == [f"ok{i}" for i in range(5)]
    assert null_failed == real_failed and sorted(real_failed) == ["bomb", "broken", "missing", "svg"]
    assert real_failed["bomb"].startswith("decompression_bomb: ") and real_failed["missing"].startswith("unreadable: ")
    # the null model's probabilities are fixed: the same for every image, a distribution
    rows = np.stack(list(null_probs.values()))
    assert rows.shape == (5, 28) and np.allclose(rows, rows[0]) and np.isclose(rows[0].sum(), 1, atol=1e-5)
    assert len(np.unique(rows[0])) > 1  # not uniform: a top-K has an order
    for name, (probs, failed) in (("null", (null_probs, null_failed)), ("tiny", (real_probs, real_failed))):
        step_probs, step_failed = _classify_without_beam(weights[name], items, options)
        assert step_failed == failed and sorted(step_probs) == sorted(probs)
        for k, v in probs.items():
            np.testing.assert_allclose(step_probs[k], v, rtol=0, atol=1e-6)
    # and the real model's probabilities are those of one in-process call on the images
    meta = read_meta(weights["tiny"])
    x = np.stack([image_to_model_input(p.read_bytes(), meta.input_size) for p in FIGS[:5]])
    want = load_figure_model(weights["tiny"], max_chunk=8)(x)
    for i in range(5):
        np.testing.assert_allclose(real_probs[f"ok{i}"], want[i], rtol=0, atol=1e-6)


def test_a_build_with_the_null_model_has_the_real_models_rows_and_dead_letters(weights, tmp_path):
    """The whole vision stage of a build (measure, keyword stage, classifier, write): with
    the null model (on 2 worker processes and the machine's shared model server) and with
    the real one (in this process), every figure row, image error, classifier_run and dead
    letter is the same; only the scores differ."""
    src = tmp_path / "in"
    page = copy_sample(src, edit=("Overview of Glimpse.", "Overview of Glimpse on an MRI scan."))
    (page / "figs" / "res_curve.png").write_bytes((page / "figs" / "res_curve.png").read_bytes()[:300])  # corrupt
    builds = {}
    # the null model on 2 worker processes sharing one model server; the real one in this process
    for name, how in (("null", ["--workers", "2", "--vision-share-model"]), ("tiny", ["--workers", "1"])):
        out = tmp_path / name
        argv = ["--input", str(src), "--output", str(out), "--medical-weights", weights[name], *how]
        assert run_build([*argv, "--medical-classify", "all", "--vision-batch-size", "2"]) == 0
        builds[name] = out

    def facts(out):
        figures = {
            r["id"]: (
                r["image_status"],
                r["image_error"],
                r["medical"]["classifier_run"],
                tuple(r["medical"]["keyword_hits"]),
                len(r["medical"]["topk_labels"]),
            )
            for r in read_rows(out, "figures")
        }
        dead = sorted((r["paper_id"], r["stage"], r["error_type"], r["message"]) for r in read_rows(out, "dead_letter"))
        return figures, dead

    null, real = facts(builds["null"]), facts(builds["tiny"])
    assert null == real
    figures, _ = real
    assert figures["2511.99001_F2"][3] == ("MRI", "scan")
    broken = [f for f in figures.values() if f[1]]
    assert len(broken) == 1 and broken[0][2] is False  # the corrupt figure: its error, not classified
    assert all(f[2] == (f[0] == "embedded") for f in figures.values())  # every figure with an image classified
    assert sum(f[2] for f in figures.values()) == 4


def test_shared_model_runs_in_its_own_process_from_mapped_batches(weights, tmp_path):
    """The machine's shared model: a server process of its own (not this one), batches
    handed over in a memory-mapped file that is gone once the server has mapped it, the
    same numbers as the model in this process, and a batch of torch tensors or a stacked
    array alike."""
    meta = read_meta(weights["tiny"])
    x = np.stack([image_to_model_input(p.read_bytes(), meta.input_size) for p in FIGS[:7]])
    want = load_figure_model(weights["tiny"])(x)
    step = FigureModelStep.from_options(weights["tiny"], "classify", InferenceOptions(share_model=True))
    model = SharedFigureModel(step.load_local, step.tag, folder=str(tmp_path / "batches")).connect()
    assert model.describe()["pid"] != os.getpid() and model.device.type == "cpu"
    np.testing.assert_allclose(model(list(x)), want, rtol=0, atol=1e-6)
    np.testing.assert_allclose(model(x[:3]), want[:3], rtol=0, atol=1e-6)
    np.testing.assert_allclose(model([torch.from_numpy(a) for a in x[3:]]), want[3:], rtol=0, atol=1e-6)
    assert list((tmp_path / "batches").iterdir()) == []  # mapped by the server, unlinked: nothing left behind
    with pytest.raises(TypeError, match="uint8 images or float32"):
        model(np.zeros((1, 3, 32, 32), dtype=np.float64))
    # a second client of the same run (another SDK process would do the same) finds the server
    again = FigureModelStep(step.load_local, shared=True, tag=step.tag).load()
    assert again.describe()["pid"] == model.describe()["pid"]
    np.testing.assert_allclose(again(x), want, rtol=0, atol=1e-6)


def test_shared_model_falls_back_to_the_proxy_when_the_server_cannot_open_the_file(
    weights, tmp_path, monkeypatch, caplog
):
    """Processes that do not see the same files (say, containers without a shared temp
    folder): the server cannot open the batch file, so the batch goes through the proxy,
    with one warning, and the results are the same."""
    from sciga.transforms.vision import shared_model

    meta = read_meta(weights["tiny"])
    x = np.stack([image_to_model_input(p.read_bytes(), meta.input_size) for p in FIGS[:4]])
    want = load_figure_model(weights["tiny"])(x)

    class UnseenBatchFile(shared_model._BatchFile):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.unlink()  # still mapped here; the server will not find it

    monkeypatch.setattr(shared_model, "_BatchFile", UnseenBatchFile)
    step = FigureModelStep.from_options(weights["tiny"], "classify", InferenceOptions(share_model=True))
    model = SharedFigureModel(step.load_local, step.tag, folder=str(tmp_path / "batches")).connect()
    with caplog.at_level(logging.WARNING):
        np.testing.assert_allclose(model(x), want, rtol=0, atol=1e-6)
        np.testing.assert_allclose(model(x[:2]), want[:2], rtol=0, atol=1e-6)
    assert caplog.text.count("sending batches through its proxy instead") == 1


def test_normalise_gives_the_numbers_of_the_plain_expression_in_either_layout():
    """The in-place normalisation (3x faster on a CPU) is the plain expression's arithmetic,
    element by element, NCHW or channels_last."""
    rng = np.random.default_rng(0)
    batch = torch.from_numpy(rng.integers(0, 256, (3, 17, 19, 3), dtype=np.uint8))
    mean = torch.tensor((0.485, 0.456, 0.406)).view(1, 3, 1, 1)
    std = torch.tensor((0.229, 0.224, 0.225)).view(1, 3, 1, 1)
    plain = (batch.permute(0, 3, 1, 2).to(torch.float32) * (1.0 / 255.0) - mean) / std
    nchw = normalise(batch, mean, std)
    nhwc = normalise(batch, mean, std, channels_last=True)
    assert torch.equal(nchw, plain) and torch.equal(nhwc, plain)
    assert nchw.is_contiguous() and nhwc.is_contiguous(memory_format=torch.channels_last)


def test_the_null_model_reads_no_pixel_and_embeds_too(weights):
    net, meta = build_model("null", 28), read_meta(weights["null"])
    assert meta.arch == "null" and net.reads_pixels is False
    m = load_figure_model(weights["null"])
    assert isinstance(m, LoadedFigureModel) and m.reads_pixels is False
    a = m(np.zeros((2, 32, 32, 3), dtype=np.uint8))
    b = m(np.full((2, 32, 32, 3), 255, dtype=np.uint8))
    assert np.array_equal(a, b) and a.shape == (2, 28)
    e = load_figure_model(weights["null"], "embed")(np.zeros((3, 32, 32, 3), dtype=np.uint8))
    assert e.shape == (3, 16) and np.allclose(np.linalg.norm(e, axis=1), 1, atol=1e-6)


def test_shared_model_connects_again_when_its_server_dies(weights, tmp_path, caplog):
    """A server that died (the process that started it ended) is started again by the
    next call, which gets its result; a warning says so."""
    import signal
    import time

    meta = read_meta(weights["tiny"])
    x = np.stack([image_to_model_input(p.read_bytes(), meta.input_size) for p in FIGS[:3]])
    want = load_figure_model(weights["tiny"])(x)
    step = FigureModelStep.from_options(weights["tiny"], "classify", InferenceOptions(share_model=True))
    model = SharedFigureModel(step.load_local, step.tag, folder=str(tmp_path / "batches")).connect()
    first = model.describe()["pid"]
    np.testing.assert_allclose(model(x), want, rtol=0, atol=1e-6)
    os.kill(first, signal.SIGKILL)
    deadline = time.time() + 10
    while time.time() < deadline and _alive(first):
        time.sleep(0.05)
    with caplog.at_level(logging.WARNING):
        np.testing.assert_allclose(model(x), want, rtol=0, atol=1e-6)
    assert "connecting again" in caplog.text
    assert model.describe()["pid"] not in (first, os.getpid())
    assert list((tmp_path / "batches").iterdir()) == []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
