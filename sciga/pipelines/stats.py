"""`sciga stats OUT`: SciGA Appendix B statistics of a build (``explore/stats.py``)."""

from __future__ import annotations

import argparse


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("out", metavar="OUT", help="build folder written by `sciga build`")
    ap.add_argument("--output", metavar="DIR", help="where tables and plots go (default: OUT/stats)")
    ap.add_argument(
        "--level",
        choices=("group", "archive"),
        default="group",
        help="top-level category: arXiv's eight groups (default) or the archive before the dot",
    )
    ap.add_argument("--no-plots", action="store_true", help="tables only")


def run(args, rest=None) -> int:
    import posixpath

    from sciga.explore.build_folder import check_is_build
    from sciga.explore.stats import write_stats
    from sciga.pipelines.paths import check_output_folder

    check_is_build(args.out)
    if args.output:
        check_output_folder(args.output, "--output")
    else:
        check_output_folder(
            posixpath.join(args.out.rstrip("/"), "stats"),
            "the stats folder",
            advice="give --output DIR where you can write",
        )
    md, written = write_stats(args.out, args.output, args.level, plots=not args.no_plots)
    print(md)
    print("written: " + ", ".join(written))
    return 0
