"""`sciga train <method>`: the training jobs, one module per method.

To add a method, add one line to ``TRAIN_METHODS``: its name on the command line and the
module that implements it. The module must define

* ``HELP``: one line for ``sciga train --help``;
* ``add_arguments(parser)``: its options;
* ``run(args) -> int``: the job (exit code).

Keep the module's top-level imports light (import torch inside functions): every method
module is imported to build the parser.
"""
from __future__ import annotations

import importlib

TRAIN_METHODS: dict[str, str] = {
    "medical-filter": "sciga.training.medical_filter",
}


def _runner(module):
    def run(args, rest):
        return module.run(args)

    return run


def add_train_parser(sub):
    """Add ``sciga train`` and its registered methods; returns the method subparsers so
    other method groups (the GA baselines of training/cli.py) can join them."""
    t = sub.add_parser("train", help="training jobs: " + ", ".join(TRAIN_METHODS) + ", ga-bc, abs2fig, abs2fig-cap")
    t.set_defaults(func=lambda args, rest: (t.print_help(), 2)[1])
    methods = t.add_subparsers(dest="method", metavar="METHOD")
    for name, path in TRAIN_METHODS.items():
        module = importlib.import_module(path)
        p = methods.add_parser(name, help=module.HELP, description=(module.__doc__ or "").strip().split("\n\n")[0])
        module.add_arguments(p)
        p.set_defaults(func=_runner(module))
    return methods
