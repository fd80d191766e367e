"""`sciga train <method>`: the training jobs.

- ``medical-filter``: the DocFigure classifier of the medical filter
  (``training/medical_filter.py``; to add such a method, add one line to ``TRAIN_METHODS``:
  its module defines ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``);
- ``ga-bc``, ``abs2fig``, ``abs2fig-cap``: the GA recommendation baselines of SciGA Sec. 4
  (``training/jobs.py``).

Nothing heavy is imported until a method runs (torch is imported inside the jobs).
"""

from __future__ import annotations

import argparse
import importlib
import sys

TRAIN_METHODS: dict[str, str] = {
    "medical-filter": "sciga.training.medical_filter",
}
TRAIN_HELP = {
    "ga-bc": "GA-BC: torchvision classifier GA / not GA per figure (Intra-GA)",
    "abs2fig": "Abs2Fig: CLIP-style dual encoder, abstract -> figure (Intra- or Inter-GA)",
    "abs2fig-cap": "Abs2Fig w/cap: as abs2fig, figure embedding ⊙ caption embedding",
}


def add_common_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--data", required=True, metavar="BUILD_DIR", help="output folder of `sciga build` (data/<config>/*.parquet)"
    )
    p.add_argument("--device", default="auto", help="auto (cuda when present), cpu, cuda, cuda:1 ...")
    p.add_argument("--no-amp", dest="amp", action="store_false", help="disable mixed precision on GPU")
    p.add_argument("--seed", type=int, default=0, help="random seed (split shuffling, initialisation, batches)")
    p.add_argument("--split-salt", default="sciga-split-v1", help="salt of the hash-based 8:1:1 split")
    p.add_argument("--min-candidates", type=int, default=2, help="papers need this many figures to be a query")
    p.add_argument(
        "--category-prefix", default=None, help="keep papers of one field, e.g. cs. (SciGA used computer science)"
    )


def add_dual_encoder_options(p: argparse.ArgumentParser, prefix: str = "") -> None:
    p.add_argument(
        f"--{prefix}backbone",
        default="tiny" if not prefix else None,
        help="tiny | open_clip:<ARCH> (with --checkpoint) | hf:<DIR>"
        if not prefix
        else "metric encoder for GA2GA CLIP-S@k: open_clip:<ARCH> | hf:<DIR> | tiny",
    )
    p.add_argument(f"--{prefix}checkpoint", default=None, help="local open_clip weights file (never downloaded)")
    p.add_argument(
        f"--{prefix}model-config", default=None, help="open_clip architecture JSON not shipped with open_clip"
    )


def add_verbose_flag(p: argparse.ArgumentParser) -> None:
    from sciga.pipelines.cli import add_verbose_flag as add

    add(p)  # `sciga train METHOD ... -v`


def add_arguments(ap: argparse.ArgumentParser) -> None:
    methods = ap.add_subparsers(dest="method", metavar="METHOD")
    for name, path in TRAIN_METHODS.items():
        module = importlib.import_module(path)
        p = methods.add_parser(name, help=module.HELP, description=(module.__doc__ or "").strip().split("\n\n")[0])
        module.add_arguments(p)
        p.set_defaults(train_run=module.run)
        add_verbose_flag(p)
    _add_baselines(methods)
    ap.set_defaults(train_help=ap.format_help)


def _add_baselines(train_sub) -> None:
    for method, help_text in TRAIN_HELP.items():
        p = train_sub.add_parser(method, help=help_text)
        add_verbose_flag(p)
        add_common_options(p)
        p.add_argument("--output", required=True, metavar="MODEL_DIR", help="folder for model.pt and model.json")
        p.add_argument("--epochs", type=int, default=1, help="passes over the training split")
        p.add_argument("--max-steps", type=int, default=None, help="stop after this many optimiser steps")
        p.add_argument("--batch-size", type=int, default=16, help="items per optimiser step")
        p.add_argument("--lr", type=float, default=1e-4, help="AdamW learning rate")
        p.add_argument("--weight-decay", type=float, default=0.01, help="AdamW weight decay")
        p.add_argument("--image-size", type=int, default=224, help="images are resized to this many pixels square")
        p.add_argument("--shuffle-buffer", type=int, default=512, help="streaming shuffle buffer (items)")
        p.add_argument(
            "--check-batches", type=int, default=4, help="batches scored before/after training in the model card"
        )
        if method == "ga-bc":
            p.add_argument("--arch", default="efficientnet_v2_s", help="torchvision architecture with a linear head")
            p.add_argument(
                "--weights", default=None, help="local torchvision state-dict file (ImageNet); random init without"
            )
        else:
            add_dual_encoder_options(p)
            p.add_argument(
                "--task", choices=("intra", "inter"), default="intra", help="loss: Eq. 4 (intra) or Eq. 5 (inter)"
            )
            p.add_argument("--figures-per-paper", type=int, default=8, help="m: GA + sampled other figures per paper")
            p.add_argument("--max-units", type=int, default=8, help="subfigure images per figure at most (sampled)")
        p.set_defaults(train_run=_run_baseline, method=method)


def run(args: argparse.Namespace, rest=None) -> int:
    if not getattr(args, "train_run", None):  # `sciga train` with no method
        print(args.train_help())
        return 2
    return int(args.train_run(args) or 0)


def report_error(command: str, e: Exception) -> int:
    print(f"sciga {command}: {e}", file=sys.stderr)
    return 2


def _run_baseline(args) -> int:
    from sciga.training.data import DataError
    from sciga.training.jobs import JobError, train
    from sciga.training.options import TrainOptions, options_from

    try:
        card = train(args.method, options_from(TrainOptions, args))
    except (JobError, DataError, ValueError) as e:
        return report_error("train", e)
    t = card["train"]
    print(
        f"sciga train {args.method} -> {args.output}\n"
        f"  papers {t['papers']}  steps {t['steps']}  device {t['device']}\n"
        f"  loss on the check batches: {t['initial_loss']:.4f} before, {t['final_loss']:.4f} after"
    )
    return 0
