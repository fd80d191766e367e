"""The `sciga` command line. Each subcommand is one module in pipelines/ (composition
only); unknown flags are handed to Apache Beam (``--runner DataflowRunner ...``)."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Optional


def _build(args, rest):
    from sciga.pipelines.build import run_build
    from sciga.transforms.write import manifest as mf

    result = run_build(args, rest)
    if result.outcome is not None and not result.outcome.completed:
        # Dry run, template, a job still running: say so, with the job or template id; no summary.
        print(result.outcome.message(result.out_dir))
        return 1 if result.outcome.failed else 0
    print(mf.summary_text(result.counts, result.out_dir, result.seconds))
    return 0 if result.counts.reconciled else 1


def _fetch(args, rest):
    from sciga.pipelines.fetch import run_fetch

    summary = run_fetch(args)  # a fetch summary, a bulk metadata import report or a plan
    print(summary.text())
    return summary.exit_code


# Commands whose module offers add_<name>_arguments(parser) and run_<name>(args) -> exit code.
_SIMPLE_COMMANDS = (
    ("validate", "sciga.pipelines.validate", "quality gate (Great Expectations) over a build; non-zero exit on failure"),
    ("stats", "sciga.pipelines.stats", "SciGA Appendix B statistics of a build: tables (Markdown, CSV) and PNG plots"),
    ("sql", "sciga.pipelines.sql_shell", "DuckDB SQL over a build (configs and task views registered); shell without a query"),
    ("publish", "sciga.pipelines.publish", "gate, then upload a build to the Hugging Face Hub as one commit + version tag"),
    ("browse", "sciga.pipelines.browse", "a static HTML report of a build: papers, figures, captions, mentions, GA"),
)


def _add_simple_command(sub, name: str, module_path: str, help_text: str) -> None:
    import importlib

    module = importlib.import_module(module_path)
    p = sub.add_parser(name, help=help_text)
    getattr(module, f"add_{name}_arguments")(p)
    run = getattr(module, f"run_{name}")
    p.set_defaults(func=lambda args, rest: run(args))


def make_parser(argv: Optional[Sequence[str]] = None) -> argparse.ArgumentParser:
    """The full parser. Given the command line, the `build` options (which import Apache
    Beam, ~2.5 s) are only defined when the command is `build`, so that `sciga sql`,
    `validate`, `fetch`... start fast."""
    from sciga.schemas.version import BUILDER_VERSION, SCHEMA_VERSION

    command = next((a for a in argv if not a.startswith("-")), None) if argv is not None else "build"
    ap = argparse.ArgumentParser(prog="sciga", description="Build, check and publish SciGA-style datasets of scientific figures in context.")
    ap.add_argument("--version", action="version", version=f"sciga-builder {BUILDER_VERSION} (schema {SCHEMA_VERSION})",
                    help="print the builder and data schema versions and exit")
    ap.add_argument("-v", "--verbose", action="store_true", help="log progress (INFO)")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    b = sub.add_parser("build", help="LaTeXML HTML -> Parquet shards + dead letters + manifest (Apache Beam)")
    if command == "build":
        from sciga.pipelines.build import add_build_arguments

        add_build_arguments(b)
    b.set_defaults(func=_build, beam_flags=True)

    # `sciga train <method>`: the medical filter (pipelines/train.py registry) and the GA
    # recommendation baselines (training/cli.py); `sciga evaluate <method>`.
    from sciga.pipelines.train import add_train_parser
    from sciga.training.cli import add_evaluate_command, add_train_methods

    add_train_methods(add_train_parser(sub))
    add_evaluate_command(sub)

    from sciga.pipelines.fetch import add_fetch_arguments

    f = sub.add_parser("fetch", help="arXiv ids, a query or bulk metadata (snapshot, OAI-PMH) -> metadata, HTML and TeX sources in a resumable local cache; --plan first")
    add_fetch_arguments(f)
    f.set_defaults(func=_fetch)
    for name, module_path, help_text in _SIMPLE_COMMANDS:
        _add_simple_command(sub, name, module_path, help_text)
    return ap


def main(argv: Optional[Sequence[str]] = None) -> int:
    from sciga.pipelines.cli_logging import configure_logging

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
