"""`sciga browse OUT`: a static HTML report of a build (``explore/browse.py``)."""
from __future__ import annotations

import argparse

from sciga.explore.browse import DEFAULT_PAPERS, BrowseOptions, browse


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("out", metavar="OUT", help="build folder written by `sciga build` (local, gs://, hf://...)")
    ap.add_argument("--output", metavar="DIR", help="where the site goes (default: OUT/browse; ./browse for hf:// builds)")
    ap.add_argument("--papers", type=int, default=DEFAULT_PAPERS, metavar="N",
                    help=f"pages for the first N papers by id (default {DEFAULT_PAPERS}; 0: every paper)")
    ap.add_argument("--paper", action="append", default=[], metavar="ID",
                    help="a page for this paper (repeatable; instead of --papers)")


def run(args, rest=None) -> int:
    import sys

    if args.papers < 0:
        print("sciga browse: --papers must be 0 (every paper) or more.", file=sys.stderr)
        return 2
    result = browse(BrowseOptions(out=args.out, output=args.output, papers=args.papers, paper_ids=tuple(args.paper)))
    print(result.summary())
    if result.missing_ids:
        print(f"sciga browse: {len(result.missing_ids)} of the --paper ids are not in {args.out}: "
              f"{', '.join(result.missing_ids)}; check the ids with `sciga sql {args.out} \"SELECT id FROM papers\"`.",
              file=sys.stderr)
        return 1
    return 0
