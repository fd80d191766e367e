"""The `sciga` command line: every command is one row of ``COMMANDS`` and one module in
pipelines/ (flags in, typed options out, then composition); unknown flags of `build` are
handed to Apache Beam (``--runner DataflowRunner ...``)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
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
    forwards_to: Optional[str] = None  # unknown flags may be this command's (update passes them to build)


COMMANDS = (
    Command(
        "fetch",
        "sciga.pipelines.fetch",
        "arXiv ids, a query or bulk metadata (snapshot, OAI-PMH) -> metadata, "
        "HTML and TeX sources in a resumable local cache; --plan first",
    ),
    Command(
        "build",
        "sciga.pipelines.build",
        "LaTeXML HTML -> Parquet shards + dead letters + manifest (Apache Beam)",
        beam_flags=True,
    ),
    Command(
        "validate",
        "sciga.pipelines.validate",
        "quality gate (Great Expectations) over a build; non-zero exit on failure",
    ),
    Command(
        "stats", "sciga.pipelines.stats", "SciGA Appendix B statistics of a build: tables (Markdown, CSV) and PNG plots"
    ),
    Command(
        "sql",
        "sciga.pipelines.sql_shell",
        "DuckDB SQL over a build (configs and task views registered); shell without a query",
    ),
    Command(
        "browse", "sciga.pipelines.browse", "a static HTML report of a build: papers, figures, captions, mentions, GA"
    ),
    Command(
        "diff",
        "sciga.pipelines.diff",
        "what changed between two builds or published versions: papers added, "
        "removed and changed (which fields), rows, schema, dead letters; --json, --markdown",
    ),
    Command(
        "show",
        "sciga.pipelines.show",
        "one paper's record: its papers row, figures with their panels and image "
        "status, mentions, dead letters (text or --json)",
    ),
    Command(
        "publish",
        "sciga.pipelines.publish",
        "gate, then upload a build to the Hugging Face Hub as one commit + version tag",
    ),
    Command(
        "update",
        "sciga.pipelines.update",
        "harvest, fetch, build, validate and publish the next version of a "
        "dataset from its saved corpus definition; nothing when nothing is new",
        beam_flags=True,
        forwards_to="build",
    ),
    Command("train", "sciga.pipelines.train", "training jobs: medical-filter, ga-bc, abs2fig, abs2fig-cap"),
    Command(
        "evaluate",
        "sciga.pipelines.evaluate",
        "score a GA recommendation baseline; writes results.json + results.md (SciGA Tables 2/3)",
    ),
)


# The exit statuses, for the docs' CLI page (scripts/docs_gen.py ``exit-codes``): the ones
# every command shares, then what 1 (and any other status) means per command.
EXIT_STATUSES_ALL = {
    0: "done (or nothing to do)",
    2: "a mistake in the command line or its inputs, said in one sentence (`sciga COMMAND: ...`): "
    "an unknown flag, a bad value, a path that is not there or cannot be written",
    130: "interrupted (Ctrl-C); run the same command again to resume where that applies",
    143: "stopped by SIGTERM (`kill`, a scheduler), as 130",
}
EXIT_STATUSES = {
    "build": {1: "every input failed, the counts do not reconcile, or a started job failed"},
    "fetch": {1: "some ids failed for good (they are listed); the others are in the cache"},
    "validate": {1: "the quality gate failed"},
    "publish": {1: "the quality gate failed, or the Hub refused or could not be reached (one sentence)"},
    "update": {1: "a step failed: the harvest stopped, the gate failed, or publishing failed"},
    "diff": {1: "with --exit-code: the builds differ"},
    "browse": {1: "some --paper ids are not in the build (they are listed)"},
    "evaluate": {3: "the split has no query to evaluate; the results row says n/a and why"},
}


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """`--help` shows each option's default after its help ("(default: 16)"), except where
    there is none to show (no value, a switch, a required option) or the help names it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        d = action.default
        if (
            not action.option_strings
            or action.required
            or action.nargs == 0
            or d is None
            or d is False
            or d == []
            or d is argparse.SUPPRESS
            or "default" in text
        ):
            return text
        return text + " (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error: ``sciga build: argument --workers: 0 is not allowed;
    give 1 or more; see `sciga build --help`.`` (not the usage block, which for `sciga build`
    is a screen long and buries the one line that matters), and defaults in `--help`."""

    command_parsers: dict[str, argparse.ArgumentParser]  # `sciga`'s own: each command's parser

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message}; see `{self.prog} --help`.\n")


def make_parser(argv: Optional[Sequence[str]] = None) -> Parser:
    """The parser, from ``COMMANDS``. Given the command line, only the named command's module
    is imported and its options defined (`sciga --help` imports none: it lists names and one
    line of help each), so that every command starts without loading the libraries of the
    others. Without a command line (the docs' CLI reference), every command is defined."""
    import importlib

    from sciga.schemas.version import BUILDER_VERSION, SCHEMA_VERSION

    command = next((a for a in argv if not a.startswith("-")), None) if argv is not None else None
    ap = Parser(
        prog="sciga", description="Build, check and publish SciGA-style datasets of scientific figures in context."
    )
    ap.add_argument(
        "--version",
        action="version",
        version=f"sciga-builder {BUILDER_VERSION} (schema {SCHEMA_VERSION})",
        help="print the builder and data schema versions and exit",
    )
    ap.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    ap.command_parsers = {}
    for c in COMMANDS:
        p = sub.add_parser(c.name, help=c.help)
        ap.command_parsers[c.name] = p
        if argv is not None and command != c.name:
            continue  # not this command: its options are not needed to parse the line
        module = importlib.import_module(c.module)
        module.add_arguments(p)
        p.set_defaults(func=module.run, beam_flags=c.beam_flags, module=c.module, forwards_to=c.forwards_to)
        add_verbose_flag(p)
    return ap


VERBOSE_HELP = "log progress (INFO); before or after the command"


def add_verbose_flag(parser: argparse.ArgumentParser) -> None:
    """``-v/--verbose`` after the command too (``sciga build ... -v``); a command with
    subcommands of its own adds it to each (``sciga train medical-filter -v``). Its default
    is SUPPRESS, so a command line without it keeps what the top-level flag set."""
    parser.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP)


def forwarded_parser(command: str, target: str) -> argparse.ArgumentParser:
    """The flags of command ``target`` that ``command`` passes on to it, as a parser whose
    errors name ``command`` (a bad value is found before anything runs)."""
    import importlib

    spec = next(c for c in COMMANDS if c.name == target)
    p = Parser(prog=f"sciga {command}", add_help=False, allow_abbrev=False)
    importlib.import_module(spec.module).add_arguments(p)
    return p


def forwarded_unknown(command: str, target: str, rest: Sequence[str]) -> tuple[list[str], list[str]]:
    """(what is left of ``rest`` once the flags of ``target`` are taken out, those flags'
    names for suggestions)."""
    p = forwarded_parser(command, target)
    # --output is the one required flag of build; the forwarding command sets it itself
    return p.parse_known_args(["--output", "-", *rest])[1], flag_names(p)


def _beam_parser() -> argparse.ArgumentParser:
    """A parser of every flag Apache Beam's pipeline options know (``--runner``, ``--project``,
    ...), collected the way Beam itself collects them (``PipelineOptions.get_all_options``)."""
    from apache_beam.options.pipeline_options import PipelineOptions

    parser = argparse.ArgumentParser(allow_abbrev=False, add_help=False)
    classes: dict = {}
    for cls in PipelineOptions.__subclasses__():
        classes.setdefault(str(cls), cls)
    for cls in classes.values():
        cls._add_argparse_args(parser)  # Beam's own hook for its flags
    return parser


def flag_names(parser: argparse.ArgumentParser) -> list[str]:
    """The long flags a parser knows, from its usage line (argparse's public face: every
    flag that is not hidden is in it, argument groups included)."""
    import re

    return sorted(set(re.findall(r"(?<![\w-])--[A-Za-z0-9][\w-]*", parser.format_usage())))


def beam_flag_names() -> list[str]:
    return flag_names(_beam_parser())


def unknown_arguments(rest: Sequence[str], beam: bool) -> list[str]:
    """The arguments nobody will read: for a command that hands unknown flags to Beam, those
    that no Beam pipeline options class knows either (Beam would drop them silently)."""
    if not rest or not beam:
        return list(rest)
    return _beam_parser().parse_known_args(list(rest))[1]


def _suggest(flag: str, own: Sequence[str], beam: Sequence[str]) -> Optional[str]:
    """The known flag closest to ``flag`` (sciga's first when equally close), or None."""
    import difflib

    name = flag.split("=", 1)[0]
    best, best_score = None, 0.6
    for pool in (own, beam):
        for known in pool:
            if known.startswith("--"):
                score = difflib.SequenceMatcher(None, name, known).ratio()
                if score > best_score:
                    best, best_score = known, score
    return best


def unknown_arguments_sentence(command: str, unknown: Sequence[str], own: Sequence[str], beam: bool) -> str:
    """One sentence for arguments nobody reads, each flag with the closest known one."""
    beam_names = beam_flag_names() if beam else []
    shown, i = [], 0
    while i < len(unknown):
        arg = unknown[i]
        if arg.startswith("-"):
            hint = _suggest(arg, own, beam_names)
            shown.append(arg.split("=", 1)[0] + (f" (did you mean {hint}?)" if hint else ""))
            # its value, if it had one, is not a second mistake
            if "=" not in arg and i + 1 < len(unknown) and not unknown[i + 1].startswith("-"):
                i += 1
        else:
            shown.append(repr(arg))
        i += 1
    noun, it = ("argument", "it") if len(shown) == 1 else ("arguments", "them")
    who = (
        f"neither `sciga {command}` nor Apache Beam's pipeline options know {it}"
        if beam
        else f"`sciga {command}` does not know {it}"
    )
    return f"unknown {noun} {', '.join(shown)}: {who}; see `sciga {command} --help`."


def main(argv: Optional[Sequence[str]] = None) -> int:
    from sciga.pipelines.cli_logging import configure_logging
    from sciga.transforms.common import interrupts
    from sciga.transforms.common.errors import UserError

    started = process_started() if argv is None else time.time()
    argv = list(sys.argv[1:] if argv is None else argv)
    configure_logging()  # before make_parser imports any library that logs on import
    ap = make_parser(argv)
    args, rest = ap.parse_known_args(argv)
    configure_logging(verbose=args.verbose)
    if not getattr(args, "func", None):
        ap.print_help()
        return 2
    beam = bool(getattr(args, "beam_flags", False))
    forwarded_flags: list[str] = []
    if rest and getattr(args, "forwards_to", None):
        rest_left, forwarded_flags = forwarded_unknown(args.command, args.forwards_to, rest)
    else:
        rest_left = rest
    unknown = unknown_arguments(rest_left, beam)
    if unknown:
        own = sorted(set(flag_names(ap.command_parsers[args.command])) | set(forwarded_flags))
        print(f"sciga {args.command}: {unknown_arguments_sentence(args.command, unknown, own, beam)}", file=sys.stderr)
        return 2
    args.started = started
    try:
        with bars_only_on_a_terminal():
            code = int(args.func(args, rest) or 0)
            if code == 0:  # an interrupt a finalizer swallowed (one the command handled made it non-zero)
                interrupts.raise_if_received()
        sys.stdout.flush()  # here, where a reader that went away (`| head`) is caught, not at exit
        return code
    except UserError as e:
        print(f"sciga {args.command}: {e}", file=sys.stderr)
        return 2
    except FileNotFoundError as e:
        print(f"sciga {args.command}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        print(f"sciga {args.command}: {interrupted_sentence(args)}", file=sys.stderr)
        return 143 if isinstance(e, interrupts.Terminated) else 130
    except BrokenPipeError:
        return _closed_stdout()
    except Exception as e:
        if was_interrupted(e):  # Beam re-raises a worker's KeyboardInterrupt as RuntimeError("KeyboardInterrupt [...]")
            print(f"sciga {args.command}: {interrupted_sentence(args)}", file=sys.stderr)
            return 130
        from sciga.transforms.common.storage import StorageError, storage_error_message

        remote = next(
            (u for u in (getattr(args, k, None) for k in ("out", "build", "output")) if isinstance(u, str)), None
        )
        msg = str(e) if isinstance(e, StorageError) else (storage_error_message(e, remote) or _path_error_sentence(e))
        if msg is None:
            raise
        print(f"sciga {args.command}: {msg}", file=sys.stderr)
        return 2


# tqdm (fetch, evaluate, model and dataset libraries) and huggingface_hub (publish's uploads)
# read these; tqdm's TQDM_* variables set its defaults, so a bar a caller asks for explicitly
# still shows.
NO_BARS_ENV = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}


@contextlib.contextmanager
def bars_only_on_a_terminal(stream=None):
    """No progress bars while the command runs when its stderr is not a terminal (a log file,
    a pipe, CI): a bar redrawn with carriage returns is noise in a log. The variables are set
    for the run (its worker processes inherit them) and restored after it."""
    stream = sys.stderr if stream is None else stream
    if bool(getattr(stream, "isatty", lambda: False)()):
        yield
        return
    saved = {k: os.environ.get(k) for k in NO_BARS_ENV}
    for k, v in NO_BARS_ENV.items():
        os.environ.setdefault(k, v)
    try:
        yield
    finally:
        for k, before in saved.items():
            if before is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = before


def run() -> None:
    """The ``sciga`` command: ``main``, then the process ends without the interpreter's
    slow teardown (``quick_exit.exit_now``). Tests call ``main`` itself."""
    from sciga.transforms.common import interrupts
    from sciga.transforms.common.quick_exit import exit_now

    interrupts.install()  # Ctrl-C and SIGTERM raised, and remembered where a finalizer swallows them
    try:
        code = main()
    except SystemExit as e:  # what the interpreter would print and return for it
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:  # a command's one-sentence refusal of its options: a usage mistake, as UserError
            print(e.code, file=sys.stderr)
            code = 2
    exit_now(code)


def was_interrupted(e: Optional[BaseException]) -> bool:
    """Ctrl-C, possibly wrapped on its way out of a pipeline."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, KeyboardInterrupt) or str(e).startswith("KeyboardInterrupt"):
            return True
        e = e.__cause__ or e.__context__
    return False


def process_started() -> float:
    """When this process started, as wall-clock time (Linux ``/proc``; elsewhere: now), so that
    a command's "took" includes the interpreter's and the libraries' start-up."""
    import os

    try:
        with open("/proc/self/stat") as f:
            after_name = f.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        start_ticks = int(after_name[19])  # field 22 of stat: start time in clock ticks since boot
        return time.time() - (uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.time()


def interrupted_sentence(args: argparse.Namespace) -> str:
    """What Ctrl-C leaves behind and how to go on: a command module may say it
    (``interrupted(args) -> str``), else the plain fact."""
    import importlib

    module = importlib.import_module(args.module)
    say = getattr(module, "interrupted", None)
    if say is not None:
        try:
            return say(args)
        except Exception:  # noqa: BLE001 - counting what was kept must not hide the interruption
            pass
    return "interrupted."


def _path_error_sentence(e: BaseException) -> Optional[str]:
    """An operating-system error about a path the user gave (a file where a folder belongs,
    a folder that may not be written) as one sentence; None for anything else."""
    import errno

    if not isinstance(e, OSError) or not e.filename:
        return None
    path = e.filename
    if e.errno == errno.ENOTDIR:
        return f"{path}: a part of this path is a file, not a folder; give a folder path."
    if e.errno == errno.EISDIR:
        return f"{path} is a folder where a file was expected; give a file path."
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"{path} may not be written or read ({e.strerror}); give a path you can write to, or change its permissions."
    if e.errno == errno.ENOSPC:
        return f"no space left to write {path}; free some space or give another path."
    return None


def _closed_stdout() -> int:
    """The reader of our output went away (``sciga sql ... | head``): not an error of ours.
    Point stdout at /dev/null so that the interpreter's final flush does not complain."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
