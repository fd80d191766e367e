"""The classifier core (``transforms/vision/inference.py``) and the model process
(``figure_model.LoadedFigureModel``): compact uint8 images normalised next to the model, the
shared model in a real multi-process DirectRunner, the memory-adaptive batch, bf16.

Tests marked ``gpu`` run where torch sees a CUDA device and skip elsewhere."""

from __future__ import annotations

import argparse
import json
import os

import apache_beam as beam
import numpy as np
import pytest
import torch
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that
from PIL import Image
from vision_fixtures import (
    ROOT,
    SVG,
    bomb_png,
    figure_variants,
    recording_handler,
    save_tiny_classifier,
    save_trained_head_classifier,
)

import sciga  # noqa: F401 - puts the checkout on sciga's path
from sciga.transforms.vision.decode import decode_image
from sciga.transforms.vision.handlers import FigureModelHandler, LoadedFigureModel, claim_cuda_device
from sciga.transforms.vision.inference import (
    ClassifyImages,
    DecodeForModel,
    InferenceOptions,
    image_to_model_input,
    read_image_file,
)
from sciga.transforms.vision.models import load_model, preprocess, read_meta, resize_for_model

# e2e: runs the classifier in Beam pipelines and worker processes end to end
pytestmark = pytest.mark.e2e

FIGS = sorted((ROOT / "samples" / "html").glob("*/figs/*.png"))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return save_tiny_classifier(tmp_path_factory.mktemp("w") / "tiny.pt")


def _expected(weights, paths, device="cpu"):
    """Probabilities from one in-process handler call on all images (the reference)."""
    meta = read_meta(weights)
    h = FigureModelHandler(weights, "classify", device, max_batch_size=len(paths))
    x = np.stack([image_to_model_input(p.read_bytes(), meta.input_size) for p in paths])
    return h.load_model()(x)


def test_uint8_images_normalised_next_to_the_model_give_the_float32_results(tiny):
    meta = read_meta(tiny)
    h = FigureModelHandler(tiny, "classify", "cpu", max_batch_size=32)
    model = h.load_model()
    floats = [preprocess(Image.open(p), meta.input_size, meta.mean, meta.std) for p in FIGS]  # the former path
    compact = [resize_for_model(Image.open(p).convert("RGB"), meta.input_size) for p in FIGS]
    assert compact[0].dtype == np.uint8 and compact[0].shape == (32, 32, 3)
    assert compact[0].nbytes * 4 == floats[0].numel() * floats[0].element_size()  # a quarter of the float tensor
    old = np.stack([r.inference for r in h.run_inference(floats, model)])
    new = np.stack([r.inference for r in h.run_inference(compact, model)])
    assert old.shape == (len(FIGS), 28)
    assert (old.argmax(1) == new.argmax(1)).all()
    np.testing.assert_allclose(new, old, rtol=0, atol=1e-6)
    # the same on the embedding task, and from bytes (JPEG draft decode included)
    e = FigureModelHandler(tiny, "embed")
    em = e.load_model()
    np.testing.assert_allclose(
        np.stack([r.inference for r in e.run_inference(compact, em)]),
        np.stack([r.inference for r in e.run_inference(floats, em)]),
        rtol=0,
        atol=1e-6,
    )
    assert np.array_equal(image_to_model_input(FIGS[0].read_bytes(), 32), compact[0])
    with pytest.raises(TypeError, match="uint8 images or float32"):
        model(np.zeros((1, 3, 32, 32), dtype=np.float64))


def test_classify_images_reads_references_and_every_key_comes_out_once(tiny, tmp_path):
    (tmp_path / "bomb.png").write_bytes(bomb_png())
    (tmp_path / "broken.png").write_bytes(FIGS[0].read_bytes()[:200])
    (tmp_path / "drawing.svg").write_bytes(SVG)
    good = FIGS[:5]
    items = [(f"ok{i}", str(p)) for i, p in enumerate(good)] + [
        ("bomb", str(tmp_path / "bomb.png")),
        ("broken", str(tmp_path / "broken.png")),
        ("svg", str(tmp_path / "drawing.svg")),
        ("missing", str(tmp_path / "nope.png")),
    ]
    expected = {f"ok{i}": v for i, v in enumerate(_expected(tiny, good))}

    def check_probs(out):
        got = dict(out)
        assert sorted(got) == sorted(expected) and len(out) == len(expected)
        for k, v in got.items():
            assert v.dtype == np.float32 and v.shape == (28,)
            np.testing.assert_allclose(v, expected[k], rtol=0, atol=1e-6)

    def check_failed(out):
        got = dict(out)
        assert sorted(got) == ["bomb", "broken", "missing", "svg"] and len(out) == 4
        assert got["bomb"].startswith("decompression_bomb: ") and got["broken"].startswith("corrupt: ")
        assert got["svg"].startswith("svg_only: ") and got["missing"].startswith("unreadable: ")
        assert "nope.png" in got["missing"]

    with beam.Pipeline("DirectRunner") as p:
        res = (
            p
            | beam.Create(items)
            | ClassifyImages(tiny, InferenceOptions(max_batch_size=3), load_bytes=read_image_file)
        )
        assert_that(res.probabilities, check_probs, label="probabilities")
        assert_that(res.failed, check_failed, label="failed")


def _classify_in_two_processes(weights, paths, check, monkeypatch, record, precision="fp32", batch=4):
    """ClassifyImages with share_model=True and --device cuda on a 2-process DirectRunner,
    through a handler that records what its model process receives; the record's lines."""
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])
    )
    handler = recording_handler(
        weights, "classify", "cuda", max_batch_size=batch, share_model=True, precision=precision, record=str(record)
    )
    options = InferenceOptions(
        device="cuda", max_batch_size=batch, share_model=True, precision=precision, torch_threads=1
    )
    opts = PipelineOptions(["--direct_num_workers", "2", "--direct_running_mode", "multi_processing"])
    with beam.Pipeline("DirectRunner", options=opts) as p:
        res = (
            p
            | beam.Create([(q.name, str(q)) for q in paths])
            | ClassifyImages(handler=handler, options=options, load_bytes=read_image_file)
        )
        assert_that(res.probabilities, check)
    return [json.loads(x) for x in record.read_text().splitlines()]


def _check_the_model_process(lines, n, size, want_device):
    loads = [x for x in lines if x["what"] == "load"]
    calls = [x for x in lines if x["what"] == "model_call"]
    callers = [x for x in lines if x["what"] == "caller"]
    assert len(loads) == 1, loads  # one model for the machine
    assert loads[0]["device"] == want_device
    assert {c["pid"] for c in calls} == {loads[0]["pid"]}  # every batch runs in the model's process
    # ... a process of its own: no SDK process that decodes shares its interpreter with the model
    assert loads[0]["pid"] not in {c["pid"] for c in callers}
    assert sum(c["shape"][0] for c in calls) == n
    for c in calls:  # what crossed the process boundary: uint8 images in host memory
        assert c["type"] == "numpy.ndarray" and c["dtype"] == "uint8" and c["shape"][1:] == [size, size, 3], c
        assert c["device"] == want_device
    assert callers and all(c["threads"] == 1 for c in callers)  # decode workers: one torch thread


def test_shared_model_in_two_processes_receives_uint8_batches_on_the_cpu(tiny, tmp_path, monkeypatch):
    """share_model=True with --device cuda, 2 SDK processes. The callers never touch a
    device: batches reach the model's process as numpy uint8 images in host memory, one
    model is loaded, and results are those of the in-process handler. (Before the fix the
    caller moved its batch to cuda: a crash on GPUs, 'no NVIDIA driver' here.) On a machine
    with a GPU the model process runs on it."""
    paths = FIGS[:12]
    expected = {p.name: v for p, v in zip(paths, _expected(tiny, paths, "cuda"))}
    atol = 2e-3 if torch.cuda.is_available() else 1e-6  # cuda: TF32 convolutions, kernels chosen per batch size

    def check(out):
        got = dict(out)
        assert sorted(got) == sorted(expected)
        for k, v in got.items():
            assert int(v.argmax()) == int(expected[k].argmax()), k
            np.testing.assert_allclose(v, expected[k], rtol=0, atol=atol)

    lines = _classify_in_two_processes(tiny, paths, check, monkeypatch, tmp_path / "record.jsonl")
    _check_the_model_process(lines, len(paths), 32, "cuda:0" if torch.cuda.is_available() else "cpu")


def test_out_of_memory_halves_the_batch_retries_and_remembers(tiny, caplog):
    net, meta = load_model(tiny)
    calls = []

    class SmallMemory(torch.nn.Module):
        """The real network behind a device that holds at most 3 images at a time."""

        def __init__(self):
            super().__init__()
            self.net = net

        def forward(self, x):
            calls.append(len(x))
            if len(x) > 3:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (injected)")
            return self.net(x)

    x = np.stack([resize_for_model(Image.open(p).convert("RGB"), 32) for p in FIGS[:10]])
    want = LoadedFigureModel(net, meta, max_chunk=16)(x)
    m = LoadedFigureModel(SmallMemory(), meta, max_chunk=16)
    got = m(x)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    assert m.chunk == 2 and calls == [10, 5, 2, 2, 2, 2, 2]  # halved until it fits, the failed chunk retried
    assert "out of memory at a batch of 10; using 5 from now on" in caplog.text
    calls.clear()
    m(x)
    assert calls == [2] * 5  # remembered: no more failed attempts

    class NoMemory(torch.nn.Module):
        def forward(self, x):
            raise torch.OutOfMemoryError("CUDA out of memory (injected)")

    with pytest.raises(torch.OutOfMemoryError):  # not even one image fits: the error is not hidden
        LoadedFigureModel(NoMemory(), meta, max_chunk=4)(x[:3])


@pytest.fixture(scope="module")
def confident(tmp_path_factory):
    images = figure_variants(64)
    return save_trained_head_classifier(tmp_path_factory.mktemp("w") / "confident.pt", images, input_size=64), np.stack(
        images
    )


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_bf16_top1_labels_agree_with_fp32_on_the_sample_figures(confident, device):
    weights, x = confident
    fp32 = FigureModelHandler(weights, "classify", device, max_batch_size=64)
    bf16 = FigureModelHandler(weights, "classify", device, max_batch_size=64, precision="bf16")
    m16 = bf16.load_model()
    assert m16.device.type == device and m16.precision == "bf16"
    p32 = fp32.load_model()(x)
    p16 = m16(x)
    assert len(x) >= 140 and len(np.unique(p32.argmax(1))) >= 4  # varied labels, not one class for all
    agree = float((p32.argmax(1) == p16.argmax(1)).mean())
    assert agree >= 0.99, agree
    assert np.abs(p32 - p16).max() < 0.05
    assert p16.dtype == np.float32 and np.allclose(p16.sum(1), 1, atol=1e-4)


@pytest.mark.gpu
def test_cuda_and_cpu_give_the_same_top1_labels(confident):
    weights, x = confident
    cpu = FigureModelHandler(weights, "classify", "cpu").load_model()(x)
    cuda = FigureModelHandler(weights, "classify", "cuda", max_batch_size=64).load_model()(x)
    assert float((cpu.argmax(1) == cuda.argmax(1)).mean()) >= 0.99
    np.testing.assert_allclose(cuda, cpu, rtol=0, atol=1e-2)  # TF32 convolutions on the GPU


@pytest.mark.gpu
def test_shared_model_on_the_gpu_in_bf16_keeps_the_cpu_fp32_labels(confident, tmp_path, monkeypatch):
    """The shared model on cuda, bf16, fed by 2 SDK processes: top-1 labels as on CPU fp32."""
    weights, x = confident
    paths = []
    for i, a in enumerate(x):  # lossless files of the 64 px variants: what the workers read is x
        paths.append(tmp_path / f"v{i:03d}.png")
        Image.fromarray(a).save(paths[-1])
    want = {
        p.name: int(v.argmax()) for p, v in zip(paths, FigureModelHandler(weights, "classify", "cpu").load_model()(x))
    }

    def check(out):
        got = dict(out)
        assert sorted(got) == sorted(want)
        agree = float(np.mean([int(v.argmax()) == want[k] for k, v in got.items()]))
        assert agree >= 0.99, agree

    lines = _classify_in_two_processes(weights, paths, check, monkeypatch, tmp_path / "record.jsonl", "bf16", batch=64)
    _check_the_model_process(lines, len(paths), 64, "cuda:0")


def test_inference_options_map_the_flags_and_record_the_precision():
    from sciga.pipelines.vision import add_vision_arguments, inference_options_from_args

    ap = argparse.ArgumentParser()
    add_vision_arguments(ap)
    o = inference_options_from_args(ap.parse_args([]))
    assert o == InferenceOptions() and o.precision == "fp32" and not o.shared
    o = inference_options_from_args(
        ap.parse_args(
            [
                "--device",
                "cuda",
                "--vision-batch-size",
                "256",
                "--vision-min-batch-size",
                "8",
                "--vision-model-copies",
                "2",
                "--vision-precision",
                "bf16",
            ]
        )
    )
    assert (o.device, o.max_batch_size, o.min_batch_size, o.model_copies, o.precision) == ("cuda", 256, 8, 2, "bf16")
    assert o.shared and not o.share_model  # copies imply sharing
    assert o.provenance()["vision_precision"] == "bf16" and o.provenance()["vision_device"] == "cuda"
    with pytest.raises(SystemExit):
        ap.parse_args(["--vision-precision", "fp16"])
    with pytest.raises(ValueError, match="--vision-precision must be fp32 or bf16"):
        InferenceOptions(precision="fp16")
    with pytest.raises(ValueError, match="--vision-batch-size"):
        InferenceOptions(max_batch_size=4, min_batch_size=8)
    # torch threads per SDK process: 1 on GPU workers, torch's default on CPU, or as asked
    assert InferenceOptions(device="cuda").sdk_torch_threads(cuda_available=True) == 1
    assert InferenceOptions(device="cuda").sdk_torch_threads(cuda_available=False) is None
    assert InferenceOptions().sdk_torch_threads(cuda_available=True) is None
    assert InferenceOptions(torch_threads=3).sdk_torch_threads(cuda_available=False) == 3
    handler = FigureModelHandler.from_options("w.pt", "classify", o)
    assert handler.options == o
    step = handler.model_step()  # the sharing is the step's (a model server of its own), not Beam's large_model
    assert step.shared and step.copies == 2 and step.tag == handler.share_tag
    assert not handler.share_model_across_processes() and handler.model_copies() == 1


def test_model_copies_take_the_gpus_in_turn(monkeypatch, tmp_path):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the turn file of this test only
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert claim_cuda_device() == "cuda:0"
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert [claim_cuda_device() for _ in range(4)] == ["cuda:0", "cuda:1", "cuda:0", "cuda:1"]


def test_decode_worker_sets_its_torch_threads(tiny):
    before = torch.get_num_threads()
    try:
        DecodeForModel(32, options=InferenceOptions(torch_threads=1)).setup()
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    data = FIGS[0].read_bytes()
    img = decode_image(data).image
    assert np.array_equal(image_to_model_input(data, 32), resize_for_model(img, 32))
