"""`sciga diff OLD NEW`: what changed between two builds (``explore/diff.py``), as a summary,
``--json`` or ``--markdown``."""

from __future__ import annotations

import argparse
import sys

FORMATS = ("text", "json", "markdown")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "old",
        metavar="OLD",
        help="the earlier build: a folder, gs://..., or a published version hf://datasets/ORG/NAME@vX.Y.Z",
    )
    ap.add_argument("new", metavar="NEW", help="the later build (same forms as OLD)")
    fmt = ap.add_mutually_exclusive_group()
    fmt.add_argument(
        "--json",
        dest="format",
        action="store_const",
        const="json",
        help="the whole diff as one JSON object (every paper listed)",
    )
    fmt.add_argument(
        "--markdown",
        dest="format",
        action="store_const",
        const="markdown",
        help="the whole diff as Markdown (every paper listed)",
    )
    ap.set_defaults(format="text")
    ap.add_argument(
        "--output",
        metavar="FILE",
        default=None,
        help="write the diff here (any fsspec path) instead of standard output",
    )
    ap.add_argument(
        "--no-image-bytes",
        dest="image_bytes",
        action="store_false",
        help="compare images by path, size and perceptual hash only: reads no image bytes (for builds "
        "on the Hub or a bucket)",
    )
    ap.add_argument(
        "--max-listed",
        type=int,
        default=20,
        metavar="N",
        help="papers of each kind named by the summary (default 20; --json and --markdown name all)",
    )
    ap.add_argument(
        "--memory-limit",
        default="1GB",
        metavar="SIZE",
        help="DuckDB's memory limit; beyond it, it spills to a temporary folder (default 1GB)",
    )
    ap.add_argument("--exit-code", action="store_true", help="exit 1 when the builds differ, 0 when they do not")


def run(args, rest=None) -> int:
    import fsspec

    from sciga.explore.diff import DiffOptions, diff_builds
    from sciga.transforms.common.errors import UserError

    if args.max_listed < 0:
        raise UserError(f"--max-listed {args.max_listed} is negative; give 0 or more papers to name.")
    options = DiffOptions(image_bytes=args.image_bytes, memory_limit=args.memory_limit)
    with diff_builds(args.old, args.new, options) as d:
        if args.output:
            with fsspec.open(args.output, "w", encoding="utf-8") as f:
                _write(d, args, f)
        else:
            _write(d, args, sys.stdout)
        differs = not d.empty
    if args.output:
        print(f"sciga diff: wrote {args.output}", file=sys.stderr)
    return 1 if (args.exit_code and differs) else 0


def _write(d, args, out) -> None:
    from sciga.explore.diff_report import markdown, summary_text, write_json

    if args.format == "json":
        write_json(d, out)
    elif args.format == "markdown":
        out.write(markdown(d))
    else:
        out.write(summary_text(d, args.max_listed) + "\n")
