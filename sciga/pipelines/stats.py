"""`sciga stats OUT`: SciGA Appendix B statistics of a build (``explore/stats.py``).

The tables and plots go to OUT/stats for a local build and to ./stats in the working folder
for a build on hf://, gs:// or s3:// (a checking command never writes to a remote build);
``--output`` chooses another place."""

from __future__ import annotations

import argparse

STATS_DIR = "stats"


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("out", metavar="OUT", help="build folder written by `sciga build`")
    ap.add_argument(
        "--output",
        metavar="DIR",
        help="where tables and plots go (default: OUT/stats; ./stats for a build on hf://, gs:// or s3://)",
    )
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
    from sciga.transforms.common.storage import is_remote

    check_is_build(args.out)
    # A remote build is only read: its stats go to the working folder, never back to the remote.
    output = args.output or (STATS_DIR if is_remote(args.out) else posixpath.join(args.out.rstrip("/"), STATS_DIR))
    if args.output:
        check_output_folder(args.output, "--output")
    else:
        check_output_folder(output, "the stats folder", advice="give --output DIR where you can write")
    md, written = write_stats(args.out, output, args.level, plots=not args.no_plots)
    print(md)
    print("written: " + ", ".join(written))
    return 0
