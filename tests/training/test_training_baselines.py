"""Losses, figure sampling, and every baseline training for a few steps on a tiny build
made from the sample corpus's figures (its training loss must go down)."""

import json
import math
import random

import pytest
import torch
import torch.nn.functional as F
from PIL import Image as PILImage
from training_fixtures import tiny_build

from sciga.pipelines.cli import make_parser
from sciga.training import abs2cap
from sciga.training.abs2fig import sample_intra_item
from sciga.training.data import load_examples
from sciga.training.jobs import JobError, evaluate, train
from sciga.training.losses import class_weights, inter_info_nce, intra_info_nce, units_to_candidates
from sciga.training.models.dual_encoder import build_dual_encoder, fuse_caption, make_spec
from sciga.training.options import EvalOptions, TrainOptions, options_from
from sciga.training.runtime import autocast, pick_device

# e2e: trains and evaluates the baselines end to end
pytestmark = pytest.mark.e2e

torch.set_num_threads(2)


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    return tiny_build(tmp_path_factory.mktemp("tiny"), {"train": 12, "val": 1, "test": 3})


def _train_args(*argv):
    return options_from(TrainOptions, make_parser().parse_args(["train", *argv]))


def _eval_args(*argv):
    return options_from(EvalOptions, make_parser().parse_args(["evaluate", *argv]))


# ------------------------------------------------------------------------------- losses


def test_intra_loss_masks_padding():
    q = F.normalize(torch.randn(1, 8), dim=-1)
    cands = F.normalize(torch.randn(3, 8), dim=-1)
    logits = (cands @ q[0]) * 10
    real = intra_info_nce(logits[None], torch.ones(1, 3, dtype=torch.bool), torch.tensor([0]))
    assert float(real) == pytest.approx(float(-torch.log_softmax(logits, 0)[0]))
    # pad to 6 slots with zero images: masked, the loss is unchanged ...
    padded = torch.cat([logits, torch.zeros(3)])[None]
    mask = torch.tensor([[True, True, True, False, False, False]])
    assert float(intra_info_nce(padded, mask, torch.tensor([0]))) == pytest.approx(float(real))
    # ... while scoring the padding as negatives (the official code) changes it
    assert float(intra_info_nce(padded, torch.ones_like(mask), torch.tensor([0]))) != pytest.approx(float(real))


def test_units_pool_to_their_candidate_by_max():
    logits = torch.tensor([0.1, 0.7, 0.3, 0.2, 0.9])
    batch = torch.tensor([0, 0, 0, 1, 1])
    slot = torch.tensor([0, 1, 1, 0, 0])
    cand = units_to_candidates(logits, batch, slot, 2, 3)
    assert cand[0, :2].tolist() == pytest.approx([0.1, 0.7])
    assert cand[1, 0].item() == pytest.approx(0.9)
    assert math.isinf(cand[0, 2].item()) and math.isinf(cand[1, 1].item())


def test_inter_loss_is_symmetric_infonce():
    t, g = torch.randn(4, 6), torch.randn(4, 6)
    scale = torch.tensor(math.log(5.0))
    logits = 5.0 * F.normalize(t, dim=-1) @ F.normalize(g, dim=-1).T
    y = torch.arange(4)
    expected = 0.5 * (F.cross_entropy(logits, y) + F.cross_entropy(logits.T, y))
    assert float(inter_info_nce(t, g, scale)) == pytest.approx(float(expected), rel=1e-5)


def test_class_weights_and_caption_fusion():
    assert class_weights(torch.tensor([1, 0, 0, 0])).tolist() == pytest.approx([4 / 6, 2.0])
    a, b = torch.tensor([[1.0, 2.0, 0.5]]), torch.tensor([[3.0, -1.0, 2.0]])
    fused = fuse_caption(a, b)
    assert fused.tolist()[0] == pytest.approx((torch.tensor([3.0, -2.0, 1.0]) / math.sqrt(14)).tolist())


def test_sampled_figures_keep_their_ids(build):
    """Each sampled image must be reported under its own figure id (the official loader
    does not guarantee this)."""
    examples = load_examples(build, splits=["train"])
    for ex in examples:
        # one distinct solid image per unit, so an image tells which unit it is
        images = {
            u.id: PILImage.new("RGB", (4, 4), (i, 0, 0))
            for i, u in enumerate(u for c in ex.candidates for u in c.units)
        }
        for seed in range(20):
            item = sample_intra_item(ex, images, m=3, rng=random.Random(seed))
            assert item.candidate_ids[0] == ex.candidates[ex.ga_index].figure_id
            assert len(item.candidate_ids) == min(3, 1 + len([j for j in range(len(ex.candidates)) if j not in ex.gt]))
            gt_ids = {ex.candidates[i].figure_id for i in ex.gt}
            assert not gt_ids & set(item.candidate_ids[1:])  # other GT figures are no negatives
            owner = {u.id: c.figure_id for c in ex.candidates for u in c.units}
            for uid, slot, im in zip(item.unit_ids, item.unit_slot, item.unit_images):
                assert im is images[uid]
                assert owner[uid] == item.candidate_ids[slot]


def test_abs2cap_bm25_per_paper_index():
    s = abs2cap.bm25_scores(
        "keyframe routing for video segmentation",
        ["accuracy against compute", "keyframe routing overview", "video results"],
    )
    assert s.argmax() == 1 and s[0] == 0.0
    assert abs2cap.bm25_scores("anything", []).size == 0
    assert abs2cap.bm25_scores("", ["a caption"]).tolist() == [0.0]
    r = abs2cap.rouge_l_scores("keyframe routing for video", ["keyframe routing", "unrelated words"])
    assert r[0] > r[1] == 0.0


# ---------------------------------------------------------------- training, a few steps


def _assert_improved(card):
    t = card["train"]
    assert t["steps"] > 0
    assert t["final_loss"] < t["initial_loss"], t


def test_ga_bc_trains_and_evaluates(build, tmp_path):
    args = _train_args(
        "ga-bc",
        "--data",
        build,
        "--output",
        str(tmp_path / "m"),
        "--arch",
        "shufflenet_v2_x0_5",
        "--image-size",
        "48",
        "--epochs",
        "2",
        "--batch-size",
        "16",
        "--lr",
        "3e-3",
        "--check-batches",
        "2",
    )
    card = train("ga-bc", args)
    _assert_improved(card)
    assert card["class_weights"][1] > card["class_weights"][0]  # GAs are the rare class
    row = evaluate(
        "ga-bc", _eval_args("ga-bc", "--data", build, "--model", str(tmp_path / "m"), "--results", str(tmp_path / "r"))
    )
    assert row["metrics"]["queries"] == 3 and 0.0 <= row["metrics"]["CAR@5"] <= 1.0
    with pytest.raises(JobError, match="intra only"):
        evaluate(
            "ga-bc",
            _eval_args(
                "ga-bc",
                "--task",
                "inter",
                "--data",
                build,
                "--model",
                str(tmp_path / "m"),
                "--results",
                str(tmp_path / "r"),
            ),
        )


@pytest.mark.parametrize("method,task", [("abs2fig", "intra"), ("abs2fig-cap", "intra"), ("abs2fig-cap", "inter")])
def test_abs2fig_tiny_dual_encoder_trains(build, tmp_path, method, task):
    args = _train_args(
        method,
        "--data",
        build,
        "--output",
        str(tmp_path / "m"),
        "--task",
        task,
        "--image-size",
        "32",
        "--epochs",
        "3",
        "--batch-size",
        "6",
        "--lr",
        "3e-3",
        "--figures-per-paper",
        "3",
        "--check-batches",
        "2",
    )
    card = train(method, args)
    _assert_improved(card)
    assert card["task"] == task and card["captions"] == (method == "abs2fig-cap")
    row = evaluate(
        method,
        _eval_args(
            method,
            "--data",
            build,
            "--model",
            str(tmp_path / "m"),
            "--results",
            str(tmp_path / "r"),
            "--sbert-model",
            "none",
        ),
    )
    assert row["metrics"]["queries"] == 3


def _tiny_open_clip(tmp_path):
    import open_clip

    cfg = {
        "embed_dim": 32,
        "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "patch_size": 8, "head_width": 16},
        "text_cfg": {"context_length": 32, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1},
    }
    config = tmp_path / "tiny-test-clip.json"
    config.write_text(json.dumps(cfg))
    open_clip.add_model_config(str(config))
    torch.manual_seed(0)
    model = open_clip.create_model("tiny-test-clip")
    ckpt = tmp_path / "tiny-test-clip.pt"
    torch.save(model.state_dict(), ckpt)
    return str(config), str(ckpt), model


def test_open_clip_checkpoint_is_loaded_from_disk_and_fine_tuned(build, tmp_path):
    config, ckpt, original = _tiny_open_clip(tmp_path)
    enc = build_dual_encoder(make_spec("open_clip:tiny-test-clip", ckpt, config))
    for k, v in original.state_dict().items():
        assert torch.equal(enc.model.state_dict()[k], v)  # the weights are the file's
    args = _train_args(
        "abs2fig",
        "--data",
        build,
        "--output",
        str(tmp_path / "m"),
        "--backbone",
        "open_clip:tiny-test-clip",
        "--checkpoint",
        ckpt,
        "--model-config",
        config,
        "--epochs",
        "2",
        "--batch-size",
        "6",
        "--lr",
        "1e-3",
        "--figures-per-paper",
        "3",
        "--check-batches",
        "2",
    )
    card = train("abs2fig", args)
    _assert_improved(card)
    row = evaluate(
        "abs2fig",
        _eval_args("abs2fig", "--data", build, "--model", str(tmp_path / "m"), "--results", str(tmp_path / "r")),
    )
    assert row["backbone"] == "OpenCLIP tiny-test-clip"
    with pytest.raises(FileNotFoundError, match="never downloaded"):
        build_dual_encoder(make_spec("open_clip:tiny-test-clip", str(tmp_path / "missing.pt"), config))


def test_device_falls_back_to_cpu_and_amp_is_a_noop_there():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert pick_device("cuda").type == "cpu"
    assert pick_device("auto").type == "cpu"
    with autocast(torch.device("cpu")):
        assert (torch.ones(2) * 2).dtype == torch.float32


def _tiny_hf_clip(path):
    import transformers  # noqa: F401 - the Hugging Face CLIP path needs it (installed by the train extra)
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, PreTrainedTokenizerFast

    words = sorted(
        {
            w.strip(".,").lower()
            for w in "We study video segmentation keyframe routing tokens haptic sculpting stylus force feedback image "
            "restoration diffusion denoising user study interaction technique overview method improves results "
            "accuracy against compute mean task completion time ablation qualitative".split()
        }
    )
    vocab = {"[PAD]": 0, "[UNK]": 1, "[EOS]": 2, **{w: i + 3 for i, w in enumerate(words)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", model_max_length=32
    ).save_pretrained(path)
    torch.manual_seed(0)
    cfg = CLIPConfig(
        text_config=dict(
            vocab_size=len(vocab),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            max_position_embeddings=32,
            bos_token_id=0,
            eos_token_id=2,
            pad_token_id=0,
        ),
        vision_config=dict(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            image_size=32,
            patch_size=8,
        ),
        projection_dim=16,
    )
    CLIPModel(cfg).save_pretrained(path)
    CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}).save_pretrained(path)
    return str(path)


def test_hugging_face_clip_folder_is_loaded_locally_and_fine_tuned(build, tmp_path):
    hf = _tiny_hf_clip(tmp_path / "hf-clip")
    args = _train_args(
        "abs2fig-cap",
        "--data",
        build,
        "--output",
        str(tmp_path / "m"),
        "--backbone",
        f"hf:{hf}",
        "--epochs",
        "2",
        "--batch-size",
        "6",
        "--lr",
        "1e-3",
        "--figures-per-paper",
        "3",
        "--check-batches",
        "2",
    )
    card = train("abs2fig-cap", args)
    _assert_improved(card)
    row = evaluate(
        "abs2fig-cap",
        _eval_args("abs2fig-cap", "--data", build, "--model", str(tmp_path / "m"), "--results", str(tmp_path / "r")),
    )
    assert row["backbone"] == "HF CLIP hf-clip" and row["metrics"]["queries"] == 3


def _png_header(width, height) -> bytes:
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


def test_builds_without_readable_images_fail_with_one_clear_sentence(tmp_path):
    from training_fixtures import make_papers, paper_ids, write_build

    papers, blobs = make_papers(paper_ids({"train": 6, "val": 0, "test": 2}))
    no_images = write_build(tmp_path / "noimg", papers, {}, ga_images=False)
    with pytest.raises(JobError, match="no training batch"):
        train(
            "abs2fig",
            _train_args("abs2fig", "--data", no_images, "--output", str(tmp_path / "m"), "--image-size", "32"),
        )
    # text-only Abs2Cap still runs on it
    row = evaluate("abs2cap", _eval_args("abs2cap", "--data", no_images, "--results", str(tmp_path / "r")))
    assert row["metrics"]["queries"] == 2

    # one corrupt image and one decompression bomb header: skipped and counted, not a crash
    bad = dict(blobs)
    test_paper = next(p for p in papers if p.id == sorted(p.id for p in papers)[-1])
    paths = [f.images[0].path for f in test_paper.figures if f.images and not f.subfigures]
    bad[paths[0]] = b"\x89PNG\r\n\x1a\n garbage"
    bad[paths[1]] = _png_header(30000, 30000)  # claims 900 Mpx
    build = write_build(tmp_path / "bad", papers, bad)
    args = _train_args(
        "abs2fig",
        "--data",
        build,
        "--output",
        str(tmp_path / "m2"),
        "--image-size",
        "32",
        "--epochs",
        "1",
        "--batch-size",
        "4",
        "--check-batches",
        "1",
    )
    train("abs2fig", args)
    row = evaluate(
        "abs2fig",
        _eval_args(
            "abs2fig",
            "--data",
            build,
            "--model",
            str(tmp_path / "m2"),
            "--results",
            str(tmp_path / "r2"),
            "--split",
            "test",
        ),
    )
    assert row["metrics"]["queries"] == 2
    assert any("unreadable" in n for n in row["notes"])


# ------------------------------------------------------------------------- typed options


def test_jobs_take_typed_options_built_by_hand(build, tmp_path):
    """A script or notebook runs a job without a command line; a namespace is refused with
    a sentence saying what to pass instead."""
    import argparse

    row = evaluate("random", EvalOptions(data=build, results=str(tmp_path / "r"), split="test"))
    assert row["metrics"]["queries"] > 0 and row["split"] == "test"
    with pytest.raises(TypeError, match="EvalOptions"):
        evaluate("random", argparse.Namespace(**vars(EvalOptions(data=build, results=str(tmp_path / "r")))))
    with pytest.raises(TypeError, match="TrainOptions"):
        train("ga-bc", argparse.Namespace(data=build, output=str(tmp_path / "m")))
    # The command line's defaults are the options' defaults.
    parsed = options_from(
        TrainOptions, make_parser().parse_args(["train", "abs2fig", "--data", build, "--output", "m"])
    )
    assert parsed == TrainOptions(data=build, output="m")
    parsed = options_from(
        EvalOptions, make_parser().parse_args(["evaluate", "abs2cap", "--data", build, "--results", "r"])
    )
    assert parsed == EvalOptions(data=build, results="r")
