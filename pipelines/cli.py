"""The `sciga` command line. Each subcommand is one module in pipelines/ (composition
only); unknown flags are handed to Apache Beam (``--runner DataflowRunner ...``)."""
from __future__ import annotations

import argparse
import logging
import sys
from typing import Optional, Sequence


def _build(args, rest):
    from sciga.pipelines import manifest as mf
    from sciga.pipelines.build import run_build

    result = run_build(args, rest)
    print(mf.summary_text(result.counts, result.out_dir, result.seconds))
    return 0 if result.counts.reconciled else 1


def _fetch(args, rest):
    from sciga.pipelines.fetch import run_fetch

    summary = run_fetch(args)
    print(summary.text())
    return 130 if summary.interrupted else 0


def _validate(args, rest):
    from sciga.pipelines.validate import run_validate

    return run_validate(args)


def _stats(args, rest):
    from sciga.pipelines.stats import run_stats

    return run_stats(args)


def _sql(args, rest):
    from sciga.pipelines.sql_shell import run_sql

    return run_sql(args)


def _publish(args, rest):
    from sciga.pipelines.publish import run_publish

    return run_publish(args)


def make_parser(argv: Optional[Sequence[str]] = None) -> argparse.ArgumentParser:
    """The full parser. Given the command line, the `build` options (which import Apache
    Beam, ~2.5 s) are only defined when the command is `build`, so that `sciga sql`,
    `validate`, `fetch`... start fast."""
    from sciga import __version__

    command = next((a for a in argv if not a.startswith("-")), None) if argv is not None else "build"
    ap = argparse.ArgumentParser(prog="sciga", description="Build, check and publish SciGA-style datasets of scientific figures in context.")
    ap.add_argument("--version", action="version", version=f"sciga-builder {__version__}")
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

    f = sub.add_parser("fetch", help="arXiv ids or a query -> metadata, HTML and TeX sources in a resumable local cache")
    add_fetch_arguments(f)
    f.set_defaults(func=_fetch)
    from sciga.pipelines.validate import add_validate_arguments  # issue 6: quality gate

    v = sub.add_parser("validate", help="quality gate (Great Expectations) over a build; non-zero exit on failure")
    add_validate_arguments(v)
    v.set_defaults(func=_validate)
    from sciga.pipelines.stats import add_stats_arguments  # issue 6: SciGA Appendix B statistics

    st = sub.add_parser("stats", help="SciGA Appendix B statistics of a build: tables (Markdown, CSV) and PNG plots")
    add_stats_arguments(st)
    st.set_defaults(func=_stats)
    from sciga.pipelines.sql_shell import add_sql_arguments  # issue 6: DuckDB over a build

    q = sub.add_parser("sql", help="DuckDB SQL over a build (configs and task views registered); shell without a query")
    add_sql_arguments(q)
    q.set_defaults(func=_sql)
    from sciga.pipelines.publish import add_publish_arguments  # issue 6: Hub publishing

    pb = sub.add_parser("publish", help="gate, then upload a build to the Hugging Face Hub as one commit + version tag")
    add_publish_arguments(pb)
    pb.set_defaults(func=_publish)
    return ap


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = make_parser(argv)
    args, rest = ap.parse_known_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
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


if __name__ == "__main__":
    raise SystemExit(main())
