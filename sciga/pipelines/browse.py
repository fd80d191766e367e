"""`sciga browse OUT`: a static HTML report of a build (``explore/browse.py``)."""

from __future__ import annotations

import argparse

from sciga.explore.browse import DEFAULT_PAPERS, BrowseOptions, browse
from sciga.pipelines.arg_types import non_negative_int


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("out", metavar="OUT", help="build folder written by `sciga build` (local, gs://, hf://...)")
    ap.add_argument(
        "--output", metavar="DIR", help="where the site goes (default: OUT/browse; ./browse for hf:// builds)"
    )
    ap.add_argument(
        "--papers",
        type=non_negative_int,
        default=DEFAULT_PAPERS,
        metavar="N",
        help=f"pages for the first N papers by id (default {DEFAULT_PAPERS}; 0: every paper)",
    )
    ap.add_argument(
        "--paper",
        action="append",
        default=[],
        metavar="ID",
        help="a page for this paper (repeatable; instead of --papers)",
    )


def run(args, rest=None) -> int:
    import sys

    from sciga.explore.build_folder import check_is_build
    from sciga.pipelines.paths import check_output_folder

    options = BrowseOptions(out=args.out, output=args.output, papers=args.papers, paper_ids=tuple(args.paper))
    check_is_build(args.out)
    if args.output:
        check_output_folder(args.output, "--output")
    else:
        check_output_folder(options.folder, "the browse folder", advice="give --output DIR where you can write")
    result = browse(options)
    print(result.summary())
    if result.missing_ids:
        print(
            f"sciga browse: {len(result.missing_ids)} of the --paper ids are not in {args.out}: "
            f'{", ".join(result.missing_ids)}; check the ids with `sciga sql {args.out} "SELECT id FROM papers"`.',
            file=sys.stderr,
        )
        return 1
    return 0
