"""The `sciga` command line: every command is one row of ``COMMANDS`` and one module in
pipelines/ (flags in, typed options out, then composition); unknown flags of `build` are
handed to Apache Beam (``--runner DataflowRunner ...``)."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Command:
    """One `sciga` command: its module defines ``add_arguments(parser)`` and
    ``run(args, rest) -> exit code``."""

    name: str
    module: str
    help: str
    beam_flags: bool = False  # unknown flags are Apache Beam pipeline options (--runner ...)
    heavy: bool = False  # its options import Apache Beam (~2.5 s): defined only when it is the command


COMMANDS = (
    Command("fetch", "sciga.pipelines.fetch", "arXiv ids, a query or bulk metadata (snapshot, OAI-PMH) -> metadata, "
            "HTML and TeX sources in a resumable local cache; --plan first"),
    Command("build", "sciga.pipelines.build", "LaTeXML HTML -> Parquet shards + dead letters + manifest (Apache Beam)",
            beam_flags=True, heavy=True),
    Command("validate", "sciga.pipelines.validate", "quality gate (Great Expectations) over a build; non-zero exit on failure"),
    Command("stats", "sciga.pipelines.stats", "SciGA Appendix B statistics of a build: tables (Markdown, CSV) and PNG plots"),
    Command("sql", "sciga.pipelines.sql_shell", "DuckDB SQL over a build (configs and task views registered); shell without a query"),
    Command("browse", "sciga.pipelines.browse", "a static HTML report of a build: papers, figures, captions, mentions, GA"),
    Command("diff", "sciga.pipelines.diff", "what changed between two builds or published versions: papers added, "
            "removed and changed (which fields), rows, schema, dead letters; --json, --markdown"),
    Command("publish", "sciga.pipelines.publish", "gate, then upload a build to the Hugging Face Hub as one commit + version tag"),
    Command("update", "sciga.pipelines.update", "harvest, fetch, build, validate and publish the next version of a "
            "dataset from its saved corpus definition; nothing when nothing is new", beam_flags=True),
    Command("train", "sciga.pipelines.train", "training jobs: medical-filter, ga-bc, abs2fig, abs2fig-cap"),
    Command("evaluate", "sciga.pipelines.evaluate", "score a GA recommendation baseline; writes results.json + results.md "
            "(SciGA Tables 2/3)"),
)


def make_parser(argv: Optional[Sequence[str]] = None) -> argparse.ArgumentParser:
    """The full parser, from ``COMMANDS``. Given the command line, a heavy command's options
    are only defined when it is the command, so that `sciga sql`, `validate`, `fetch`...
    start fast."""
    import importlib

    from sciga.schemas.version import BUILDER_VERSION, SCHEMA_VERSION

    command = next((a for a in argv if not a.startswith("-")), None) if argv is not None else None
    ap = argparse.ArgumentParser(prog="sciga", description="Build, check and publish SciGA-style datasets of scientific figures in context.")
    ap.add_argument("--version", action="version", version=f"sciga-builder {BUILDER_VERSION} (schema {SCHEMA_VERSION})",
                    help="print the builder and data schema versions and exit")
    ap.add_argument("-v", "--verbose", action="store_true", help="log progress (INFO)")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    for c in COMMANDS:
        p = sub.add_parser(c.name, help=c.help)
        if c.heavy and argv is not None and command != c.name:
            continue  # not this command: its options are not needed to parse the line
        module = importlib.import_module(c.module)
        module.add_arguments(p)
        p.set_defaults(func=module.run, beam_flags=c.beam_flags)
    return ap


def main(argv: Optional[Sequence[str]] = None) -> int:
    from sciga.pipelines.cli_logging import configure_logging
    from sciga.transforms.common.errors import UserError

    argv = list(sys.argv[1:] if argv is None else argv)
    configure_logging()  # before make_parser imports any library that logs on import
    ap = make_parser(argv)
    args, rest = ap.parse_known_args(argv)
    configure_logging(verbose=args.verbose)
    if not getattr(args, "func", None):
        ap.print_help()
        return 2
    if rest and not getattr(args, "beam_flags", False):
        ap.error(f"unrecognized arguments: {' '.join(rest)}")
    try:
        return int(args.func(args, rest) or 0)
    except UserError as e:
        print(f"sciga {args.command}: {e}", file=sys.stderr)
        return 2
    except FileNotFoundError as e:
        print(f"sciga {args.command}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"sciga {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        from sciga.transforms.common.storage import StorageError, storage_error_message

        msg = str(e) if isinstance(e, StorageError) else storage_error_message(e)
        if msg is None:
            raise
        print(f"sciga {args.command}: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
