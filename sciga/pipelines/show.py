"""`sciga show ID [--build OUT] [--json]`: one paper's record (``explore/show.py``)."""

from __future__ import annotations

import argparse
import json
import sys


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "paper_id", metavar="ID", help="a paper id of the build (2401.13641, or a local id from a file name)"
    )
    ap.add_argument(
        "--build",
        metavar="OUT",
        default=None,
        help="build folder, local or remote (default: $SCIGA_BUILD, else out/sample in this folder or one above it)",
    )
    ap.add_argument(
        "--json", action="store_true", help="the record as JSON (image bytes left out: their size stands in)"
    )


def run(args: argparse.Namespace, rest=None) -> int:
    from sciga.explore.build_folder import check_is_build, notebook_build
    from sciga.explore.show import paper_record, render_text
    from sciga.explore.views import connect
    from sciga.transforms.common.errors import UserError

    out = args.build or notebook_build()
    check_is_build(out)
    con = connect(out)
    try:
        record = paper_record(con, args.paper_id)
    except LookupError as e:
        raise UserError(f'{e}; list the ids with `sciga sql {out} "SELECT id FROM papers"`.') from None
    finally:
        con.close()
    if args.json:
        json.dump(record.to_json(), sys.stdout, indent=2, sort_keys=True, default=str, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        print(render_text(record))
    return 0
