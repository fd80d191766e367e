"""`sciga train <method>` and `sciga evaluate <method>`: composition of the pieces in
``training/`` into runnable baselines. Options are typed objects (``training/options.py``):
the command line builds them from its flags (``pipelines/train.py``, ``pipelines/evaluate.py``),
a script or a notebook builds them by hand.
"""

from __future__ import annotations

import json
import logging
import os
import random

import numpy as np
import torch

from sciga.training import abs2cap, abs2fig, ga_bc, metrics, results
from sciga.training.data import data_version, load_examples
from sciga.training.images import square_transform
from sciga.training.loop import (
    ImageStats,
    batched,
    decoded_examples,
    load_state,
    optimise,
    read_card,
    save_model,
    shuffled,
)
from sciga.training.losses import class_weights
from sciga.training.models.classifier import build_classifier
from sciga.training.models.dual_encoder import build_dual_encoder, make_spec
from sciga.training.options import EvalOptions, TrainOptions
from sciga.training.runtime import pick_device, seed_everything

log = logging.getLogger("sciga.training")

METHODS = ("abs2cap", "ga-bc", "abs2fig", "abs2fig-cap", "random")
TRAINABLE = ("ga-bc", "abs2fig", "abs2fig-cap")
TASKS = ("intra", "inter")


class JobError(Exception):
    """A job cannot run as asked; the message says what to do."""


class NothingToEvaluate(JobError):
    """The split has no query to score. The results row was still written, every metric
    n/a with ``reason``, so a table never shows 0.000 for something that was not measured."""

    def __init__(self, reason: str, row: dict):
        super().__init__(reason)
        self.reason = reason
        self.row = row


def _require(opts, cls) -> None:
    if not isinstance(opts, cls):
        raise TypeError(
            f"options must be a {cls.__name__} (sciga.training.options), not {type(opts).__name__}; "
            f"build one with options_from({cls.__name__}, namespace) or by hand."
        )


INTRA_METRICS = ("R@1", "R@2", "R@3", "MRR", "CAR@5", "CAR@5>0.5")


def _why_no_queries(args, what: str) -> str:
    """One sentence on why the split gave no query: no paper falls in it, or none of its
    papers qualifies (a (de-facto) GA and --min-candidates figures)."""
    from sciga.training.data import iter_rows
    from sciga.training.splits import split_of

    ids = [r["id"] for r in iter_rows(args.data, "papers", ["id"]) if r.get("id")]
    in_split = sum(1 for pid in ids if split_of(pid, salt=args.split_salt) == args.split)
    if not in_split:
        return (
            f"the {args.split} split holds none of the build's {len(ids)} papers (papers go to train/val/test "
            f"8:1:1 by a hash of their id), so there is no {what}; evaluate another --split or build more papers"
        )
    field = f" of category {args.category_prefix}*" if args.category_prefix else ""
    missing, rows, reasons = _missing_images_of(
        args, in_split_ids={pid for pid in ids if split_of(pid, salt=args.split_salt) == args.split}
    )
    if missing:
        # A figure without an image is no candidate: the papers may well qualify, their images did not come.
        return (
            f"none of the {in_split} {args.split} papers{field} has a (de-facto) graphical abstract and "
            f"{args.min_candidates}+ figures with an image, because {missing} of their {rows} figures rows have "
            f"no image ({reasons}; see figures.image_status), so there is no {what}; put each page's images where "
            "its img src points, relative to the page, and build again"
        )
    return (
        f"none of the {in_split} {args.split} papers{field} has a (de-facto) graphical abstract and "
        f"{args.min_candidates}+ figures, so there is no {what}; lower --min-candidates or build more papers"
    )


def _missing_images_of(args, in_split_ids: set) -> tuple[int, int, str]:
    """(figures rows without an image, rows that should have one, "not_found 91, svg_only 4")
    over the papers of the split."""
    from sciga.schemas.images import BY_DESIGN, counts_as_missing
    from sciga.training.data import iter_rows

    by: dict = {}
    for r in iter_rows(args.data, "figures", ["paper_id", "image_status"]):
        st = r.get("image_status")
        if r.get("paper_id") in in_split_ids and st is not None and st not in BY_DESIGN:
            by[st] = by.get(st, 0) + 1
    missing = {k: v for k, v in by.items() if counts_as_missing(k)}
    reasons = ", ".join(f"{k} {v}" for k, v in sorted(missing.items(), key=lambda kv: (-kv[1], kv[0])))
    return sum(missing.values()), sum(by.values()), reasons


def _examples(args, splits) -> list:
    return load_examples(
        args.data,
        splits=splits,
        min_candidates=args.min_candidates,
        category_prefix=args.category_prefix,
        salt=args.split_salt,
    )


def _card_base(method: str, args) -> dict:
    return {
        "method": method,
        "seed": args.seed,
        "data": os.path.abspath(args.data) if "://" not in args.data else args.data,
        "data_version": data_version(args.data),
        "split_salt": args.split_salt,
        "min_candidates": args.min_candidates,
        "category_prefix": args.category_prefix,
    }


# ---------------------------------------------------------------------------------------
# train


def train(method: str, args: TrainOptions) -> dict:
    _require(args, TrainOptions)
    if method not in TRAINABLE:
        raise JobError(f"{method} has nothing to train; run `sciga evaluate {method} --data {args.data}` directly.")
    seed_everything(args.seed)
    device = pick_device(args.device)
    train_ex = _examples(args, ["train"])
    if not train_ex:
        raise JobError(
            f"{args.data} has no training papers with a (de-facto) GA and {args.min_candidates}+ figures; "
            "build more papers or lower --min-candidates."
        )
    if method == "ga-bc":
        model, card, res = _train_ga_bc(train_ex, args, device)
    else:
        model, card, res = _train_abs2fig(method, train_ex, args, device)
    card.update(
        {
            "train": {
                "papers": len(train_ex),
                "steps": res.steps,
                "epochs": args.epochs,
                "lr": args.lr,
                "batch_size": args.batch_size,
                "initial_loss": res.initial_loss,
                "final_loss": res.final_loss,
                "last_losses": res.losses[-10:],
                "seconds": round(res.seconds, 2),
                "device": device.type,
            },
        }
    )
    save_model(args.output, model, card)
    log.info("saved %s to %s", method, args.output)
    return card


def _train_ga_bc(train_ex, args, device):
    transform = square_transform(args.image_size)
    model = build_classifier(args.arch, args.weights)
    labels = torch.tensor(ga_bc.unit_labels(train_ex))
    weights = class_weights(labels)
    loss_fn = ga_bc.make_loss(weights, device)

    def epoch_batches(epoch: int):
        rng = random.Random(args.seed * 1000 + epoch)
        items = ga_bc.unit_items(decoded_examples(args.data, train_ex), transform)
        return (ga_bc.collate(b) for b in batched(shuffled(items, args.shuffle_buffer, rng), args.batch_size))

    def check_batches():
        items = ga_bc.unit_items(decoded_examples(args.data, train_ex), transform)
        return [ga_bc.collate(b) for _, b in zip(range(args.check_batches), batched(items, args.batch_size))]

    if not check_batches():
        raise JobError(f"no figure image of {args.data} could be read (a --no-images build?); rebuild with images.")
    res = optimise(
        model,
        epoch_batches,
        lambda m, b: loss_fn(m, b),
        epochs=args.epochs,
        max_steps=args.max_steps,
        lr=args.lr,
        weight_decay=args.weight_decay,
        device=device,
        amp=args.amp,
        check_batches=check_batches,
    )
    card = _card_base("ga-bc", args)
    card.update(
        {
            "task": "intra",
            "backbone": args.arch,
            "arch": args.arch,
            "weights": args.weights,
            "image_size": args.image_size,
            "class_weights": [float(w) for w in weights],
        }
    )
    return model, card, res


def _train_abs2fig(method, train_ex, args, device):
    use_captions = method == "abs2fig-cap"
    spec = make_spec(
        args.backbone,
        args.checkpoint,
        args.model_config,
        {"image_size": args.image_size} if args.backbone == "tiny" else None,
    )
    model = build_dual_encoder(spec)
    task = args.task or "intra"

    if task == "intra":

        def items(rng):
            for ex, images in decoded_examples(args.data, train_ex):
                it = abs2fig.sample_intra_item(ex, images, args.figures_per_paper, rng, args.max_units)
                if it is not None:
                    yield it

        def collate(b):
            return abs2fig.intra_batch(b, model, use_captions)

        def loss(m, b):
            return abs2fig.intra_loss(m, b, device)
    else:

        def items(rng):
            for ex, images in decoded_examples(args.data, train_ex):
                it = abs2fig.inter_item(ex, images, args.max_units)
                if it is not None:
                    yield it

        def collate(b):
            return abs2fig.inter_batch(b, model, use_captions)

        def loss(m, b):
            return abs2fig.inter_loss(m, b, device)

    def epoch_batches(epoch: int):
        rng = random.Random(args.seed * 1000 + epoch)
        stream = shuffled(items(rng), args.shuffle_buffer, rng)
        # Inter-GA needs >= 2 pairs per batch for in-batch negatives.
        return (collate(b) for b in batched(stream, args.batch_size) if task == "intra" or len(b) > 1)

    def check_batches():
        rng = random.Random(12345)
        out = []
        for b in batched(items(rng), args.batch_size):
            if task == "inter" and len(b) < 2:
                continue
            out.append(collate(b))
            if len(out) >= args.check_batches:
                break
        return out

    if not check_batches():
        raise JobError(
            f"no training batch could be formed from {args.data}: GA images unreadable (a --no-images "
            "build?) or, for --task inter, fewer than 2 training papers."
        )
    res = optimise(
        model,
        epoch_batches,
        loss,
        epochs=args.epochs,
        max_steps=args.max_steps,
        lr=args.lr,
        weight_decay=args.weight_decay,
        device=device,
        amp=args.amp,
        check_batches=check_batches,
    )
    card = _card_base(method, args)
    card.update(
        {
            "task": task,
            "backbone": _backbone_label(spec),
            "spec": spec,
            "captions": use_captions,
            "figures_per_paper": args.figures_per_paper,
            "max_units": args.max_units,
        }
    )
    return model, card, res


def _backbone_label(spec: dict) -> str:
    if spec["kind"] == "tiny":
        return "tiny dual encoder"
    if spec["kind"] == "open_clip":
        return f"OpenCLIP {spec['name']}"
    return f"HF CLIP {os.path.basename(os.path.normpath(spec['path']))}"


def load_trained(model_dir: str):
    card = read_card(model_dir)
    if card["method"] == "ga-bc":
        model = build_classifier(card["arch"], None)
    else:
        model = build_dual_encoder(card["spec"], load_weights=False)
    return load_state(model, model_dir), card


# ---------------------------------------------------------------------------------------
# evaluate


def evaluate(method: str, args: EvalOptions) -> dict:
    _require(args, EvalOptions)
    if method not in METHODS:
        raise JobError(f"unknown method {method!r}: use one of {', '.join(METHODS)}.")
    seed_everything(args.seed)
    device = pick_device(args.device)
    model = card = None
    if method in TRAINABLE:
        if not args.model:
            raise JobError(f"give --model DIR (the folder `sciga train {method}` wrote).")
        model, card = load_trained(args.model)
        if card["method"] != method:
            raise JobError(f"{args.model} holds a {card['method']} model, not {method}.")
        model.to(device)
    task = args.task or (card or {}).get("task") or "intra"
    if method == "ga-bc" and task == "inter":
        raise JobError("GA-BC classifies single figures and has no query: it applies to intra only (SciGA Sec. 4.2).")
    if task == "intra":
        row = _evaluate_intra(method, args, model, card, device)
    else:
        row = _evaluate_inter(method, args, model, card, device)
    jpath, mpath = results.upsert(args.results, task, row)
    log.info("results in %s and %s", jpath, mpath)
    return row


def _row(method, backbone, metrics_: dict, args, card, notes=()) -> dict:
    return {
        "method": method,
        "backbone": backbone,
        "metrics": metrics_,
        "seed": args.seed,
        "data_version": data_version(args.data),
        "split": args.split,
        "model": os.path.abspath(args.model) if args.model else None,
        "trained_on": (card or {}).get("data_version"),
        "notes": list(notes),
    }


def _write_predictions(args, method: str, task: str, rows: list[dict]) -> None:
    os.makedirs(args.results, exist_ok=True)
    # One file per split: evaluating on val, then test, keeps both.
    path = os.path.join(args.results, f"predictions_{args.split}_{task}_{method}.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, sort_keys=True) + "\n")


def _check_images(stats: ImageStats, args) -> None:
    if stats.papers and stats.papers_without_images == stats.papers:
        raise JobError(
            f"no figure image of {args.data} could be read (a --no-images build?); "
            "rebuild with images to run image-based methods."
        )


def _nothing_to_evaluate(method: str, task: str, backbone: str, args, card, reason: str, keys) -> NothingToEvaluate:
    """Write the n/a row (JSON + Markdown) and return the error the CLI reports."""
    metrics_ = {"queries": 0, **{k: None for k in keys}}
    row = _row(method, backbone, metrics_, args, card, [f"nothing to evaluate: {reason}"])
    row["nothing_to_evaluate"] = reason
    results.upsert(args.results, task, row)
    return NothingToEvaluate(reason, row)


def _backbone(method: str, args, card) -> str:
    if method == "random":
        return "-"
    if method == "abs2cap":
        return {"bm25": "BM25", "rouge-l": "ROUGE-L"}[args.scorer]
    return (card or {}).get("backbone") or method


def _evaluate_intra(method, args, model, card, device) -> dict:
    examples = _examples(args, [args.split])
    if not examples:
        raise _nothing_to_evaluate(
            method, "intra", _backbone(method, args, card), args, card, _why_no_queries(args, "query"), INTRA_METRICS
        )
    stats = ImageStats()
    if method == "abs2cap":
        scored = abs2cap.score_intra(examples, args.scorer)
        backbone = {"bm25": "BM25", "rouge-l": "ROUGE-L"}[args.scorer]
    elif method == "random":
        rng = np.random.default_rng(args.seed)
        scored = ((ex, list(rng.random(len(ex.candidates)))) for ex in examples)
        backbone = "-"
    elif method == "ga-bc":
        scored = ga_bc.score_intra(
            model,
            decoded_examples(args.data, examples, stats=stats),
            square_transform(card["image_size"]),
            device,
            args.amp,
        )
        backbone = card["backbone"]
    else:
        scored = abs2fig.score_intra(
            model, decoded_examples(args.data, examples, stats=stats), card["captions"], device, args.amp
        )
        backbone = card["backbone"]
    score_lists, gts, preds = [], [], []
    for ex, scores in scored:
        score_lists.append(scores)
        gts.append(ex.gt)
        order = metrics.ranking(scores)
        preds.append(
            {
                "paper_id": ex.paper_id,
                "ranked": [ex.candidates[i].figure_id for i in order],
                "scores": [round(scores[i], 6) for i in order],
                "gt": [ex.candidates[i].figure_id for i in ex.gt],
                "ga_source": ex.ga_source,
                "CAR@5": metrics.car_at_k(scores, ex.gt, 5, args.alpha),
            }
        )
    _check_images(stats, args)
    if not score_lists:
        raise _nothing_to_evaluate(
            method,
            "intra",
            backbone,
            args,
            card,
            f"none of the {len(examples)} {args.split} papers had a readable image to score",
            INTRA_METRICS,
        )
    summary = metrics.intra_summary(score_lists, gts, alpha=args.alpha)
    _write_predictions(args, method, "intra", preds)
    notes = []
    if stats.units_unreadable:
        notes.append(f"{stats.units_unreadable} of {stats.units} figure images unreadable (ranked last)")
    if len(score_lists) < len(examples):
        notes.append(
            f"{len(examples) - len(score_lists)} {args.split} papers had no readable image and were not scored"
        )
    return _row(method, backbone, summary, args, card, notes)


def _ga_image_embeddings(encoder, args, examples, device) -> np.ndarray:
    """GA2GA CLIP-S: one image embedding per example's GA from the metric encoder
    (--clip-backbone); zeros when the GA has no readable image."""
    ids, embs = abs2fig.embed_gas(encoder, decoded_examples(args.data, examples), False, device, args.amp)
    if not ids:
        return np.zeros((len(examples), 1), dtype=np.float32)
    pos = {pid: i for i, pid in enumerate(ids)}
    out = np.zeros((len(examples), embs.shape[1]), dtype=np.float32)
    for i, ex in enumerate(examples):
        if ex.paper_id in pos:
            out[i] = embs[pos[ex.paper_id]].numpy()
    return out


def _evaluate_inter(method, args, model, card, device) -> dict:
    queries = _examples(args, [args.split])
    if not queries:
        keys = [f"{m}@{k}" for k in args.inter_k for m in ("Field-P", "SBERT", "CLIP-S")]
        raise _nothing_to_evaluate(
            method, "inter", _backbone(method, args, card), args, card, _why_no_queries(args, "query abstract"), keys
        )
    gallery = _examples(args, ["train"])
    if not gallery:
        raise JobError("the training split has no GA to retrieve; Inter-GA needs training papers with a (de-facto) GA.")
    notes = []
    if method == "random":
        rng = np.random.default_rng(args.seed)
        scores = rng.random((len(queries), len(gallery)))  # top-k of iid scores = k GAs sampled without replacement
        backbone = "-"
    elif method == "abs2cap":
        scores = abs2cap.score_inter(queries, gallery, args.scorer)
        backbone = {"bm25": "BM25", "rouge-l": "ROUGE-L"}[args.scorer]
    elif method in ("abs2fig", "abs2fig-cap"):
        q = abs2fig.embed_abstracts(model, queries, device, args.amp).numpy()
        ids, g = abs2fig.embed_gas(model, decoded_examples(args.data, gallery), card["captions"], device, args.amp)
        keep = {pid for pid in ids}
        if len(keep) < len(gallery):
            notes.append(f"{len(gallery) - len(keep)} training GAs without a readable image left out of the gallery")
            gallery = [e for e in gallery if e.paper_id in keep]
        scores = q @ g.numpy().T if len(gallery) else np.zeros((len(queries), 0))
        backbone = card["backbone"]
    else:
        raise JobError(f"{method} does not apply to Inter-GA recommendation.")
    ks = tuple(args.inter_k)
    ranked = metrics.top_k_indices(scores, max(ks)) if len(queries) else np.zeros((0, max(ks)), dtype=int)
    field_ids: dict[str, int] = {}

    def fid(e):
        return -1 if not e.field else field_ids.setdefault(e.field, len(field_ids))

    qf = np.array([fid(e) for e in queries], dtype=np.int64)
    gf = np.array([fid(e) for e in gallery], dtype=np.int64)
    qt = gt_ = qi = gi = None
    if args.sbert_model != "none":
        try:
            sbert = metrics.load_sbert(args.sbert_model, device=str(device))
            qt = metrics.sbert_embed([e.abstract for e in queries], sbert)
            gt_ = metrics.sbert_embed([e.abstract for e in gallery], sbert)
        except FileNotFoundError as e:
            notes.append(f"Abs2Abs SBERT@k not computed: {e}")
    if args.clip_backbone:
        encoder = build_dual_encoder(make_spec(args.clip_backbone, args.clip_checkpoint, args.clip_model_config)).to(
            device
        )
        qi = _ga_image_embeddings(encoder, args, queries, device)
        gi = _ga_image_embeddings(encoder, args, gallery, device)
    else:
        notes.append("GA2GA CLIP-S@k needs --clip-backbone (a local CLIP checkpoint); not computed")
    summary = metrics.inter_summary(ranked, qf, gf, qt, gt_, qi, gi, ks=ks)
    preds = [
        {"paper_id": q.paper_id, "retrieved": [gallery[j].paper_id for j in ranked[i]]} for i, q in enumerate(queries)
    ]
    _write_predictions(args, method, "inter", preds)
    return _row(method, backbone, summary, args, card, notes)
