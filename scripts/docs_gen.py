"""The generated parts of the docs site, as Markdown, from the code itself.

scripts/docs_hooks.py (the MkDocs hooks named in mkdocs.yml) replaces each marker
``<!-- sciga:NAME ARG -->`` of a page with what ``MARKERS[NAME](ARG)`` returns, so these
parts are made from the real objects every time the site is built and cannot drift:

- ``cli NAME``: one command's reference from the real argparse parser
  (``sciga.pipelines.cli.make_parser`` and each command's ``add_arguments``);
- ``data``: every config and column with its Arrow type, from ``schemas.arrow.SCHEMAS`` and
  the descriptions in ``schemas/column_docs.py``;
- ``gate``: every expectation of the quality gate (``quality.suites.flat_tables``) and
  their number;
- ``dead-letters``: every dead-letter reason, from ``schemas/dead_letters.py``;
- ``image-statuses``: every value of ``figures.image_status``, from ``schemas/images.py``;
- ``code-map``: the packages and modules of the tree with their docstrings, and the import
  layers of pyproject.toml;
- ``readme``: the repository's README.md, its links made relative to the site;
- ``version [builder|schema]``: `sciga --version`'s line, or one of its numbers;
- ``exit-codes``: every command's exit statuses (``sciga.pipelines.cli.EXIT_STATUSES``).

Plain functions, importable by the tests (tests/project/test_docs.py) without MkDocs.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import inspect
import os
import re
import warnings
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The package folders of the distribution, as setup.py installs them (``sciga.<folder>``).
TOP_LEVEL = ("schemas", "transforms", "explore", "quality", "training", "executors", "publish", "pipelines", "samples")
MARKER_RE = re.compile(r"<!--\s*sciga:([a-z-]+)(?:\s+([^\s>]+))?\s*-->")
_CORES = 987_654_321  # stands for os.cpu_count() while the parsers are made (no machine's number in the docs)


class DocsError(Exception):
    """A generated part cannot be made: the docs are stale or a marker is wrong."""


# ------------------------------------------------------------------ Markdown helpers


def _escape(text: str) -> str:
    """Text for a Markdown table cell: HTML and table syntax escaped outside `code spans`."""
    parts = re.split(r"(`[^`]*`)", text)
    out = []
    for i, part in enumerate(parts):
        if i % 2:
            out.append(part)  # a pipe inside a code span does not split a table cell
        else:
            out.append(
                part.replace("&", "&amp;")
                .replace("<", "&lt;")
                .replace(">", "&gt;")
                .replace("|", "\\|")
                .replace("*", "\\*")
            )
    return "".join(out)


def _code(text: str) -> str:
    return f"`{text}`" if "`" not in text else f"`` {text} ``"


# ------------------------------------------------------------------ the command line


@contextlib.contextmanager
def _fixed_machine() -> Iterator[None]:
    """Help texts that name this machine's core count or terminal width say neither."""
    saved_count, saved_columns = os.cpu_count, os.environ.get("COLUMNS")
    os.cpu_count = lambda: _CORES  # type: ignore[assignment]
    os.environ["COLUMNS"] = "90"
    try:
        yield
    finally:
        os.cpu_count = saved_count  # type: ignore[assignment]
        if saved_columns is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = saved_columns


def _machine_free(text: str) -> str:
    return text.replace(f", {_CORES} here", "").replace(str(_CORES), "the number of cores")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _subparser_help(parser: argparse.ArgumentParser) -> dict[str, str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {a.dest: a.help or "" for a in action._choices_actions}
    return {}


_PARSER_CACHE: dict[str, argparse.ArgumentParser] = {}


def root_parser() -> argparse.ArgumentParser:
    """`sciga`'s full parser: every command with all of its options (heavy ones included)."""
    if "sciga" not in _PARSER_CACHE:
        from sciga.pipelines.cli import make_parser

        with _fixed_machine():
            _PARSER_CACHE["sciga"] = make_parser()
    return _PARSER_CACHE["sciga"]


def command_names() -> list[str]:
    """Every `sciga` command, in the order of ``COMMANDS``."""
    return list(_subparsers(root_parser()))


def _flag(action: argparse.Action, formatter: argparse.HelpFormatter) -> str:
    if not action.option_strings:
        return formatter._format_args(action, action.dest)  # a positional: its metavar
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    args = formatter._format_args(action, action.dest.upper())
    return ", ".join(action.option_strings) + " " + args


def _default(action: argparse.Action, help_text: str) -> str:
    d = action.default
    if not action.option_strings:
        return ""  # a positional argument: always given
    if action.required:
        return "required"
    if d is None or d is False or d == [] or d is argparse.SUPPRESS or action.nargs == 0 or "default" in help_text:
        return ""
    return _code(_machine_free(str(d)))


def _options_tables(parser: argparse.ArgumentParser) -> list[str]:
    with _fixed_machine():
        formatter = parser._get_formatter()
    lines: list[str] = []
    for group in parser._action_groups:
        actions = [
            a
            for a in group._group_actions
            if a.help is not argparse.SUPPRESS and not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
        ]
        if not actions:
            continue
        title = group.title if group.title not in ("options", "optional arguments") else "options"
        lines += ["", f"**{_escape(title)}**", "", "| option | default | what it does |", "|---|---|---|"]
        for a in actions:
            help_text = _machine_free(formatter._expand_help(a)) if a.help else ""
            lines.append(f"| {_code(_flag(a, formatter))} | {_default(a, help_text)} | {_escape(help_text)} |")
    return lines


def _usage(parser: argparse.ArgumentParser) -> str:
    with _fixed_machine():
        usage = parser.format_usage().strip()
    return _machine_free(usage.removeprefix("usage: "))


def _parser_markdown(parser: argparse.ArgumentParser, level: int) -> list[str]:
    lines = ["", "```text", _usage(parser), "```"]
    if parser.description:
        lines += ["", _escape(" ".join(parser.description.split()))]
    lines += _options_tables(parser)
    subs = _subparsers(parser)
    if subs:
        helps = _subparser_help(parser)
        lines += ["", "| method | what it does |", "|---|---|"]
        lines += [
            f"| [{_code(name)}](#{_anchor(parser.prog + ' ' + name)}) | {_escape(helps.get(name, ''))} |"
            for name in subs
        ]
        for sub in subs.values():
            lines += ["", f"{'#' * level} {_code(sub.prog)} {{ #{_anchor(sub.prog)} }}"]
            lines += _parser_markdown(sub, level + 1)
    return lines


def _anchor(text: str) -> str:
    return re.sub(r"[^a-z0-9_]+", "-", text.lower()).strip("-")


def command_reference(name: str, level: int = 3) -> str:
    """The generated reference of `sciga NAME`: usage, what it does, every option with its
    default, and its methods (`sciga train ga-bc`, ...) when it has some."""
    subs = _subparsers(root_parser())
    if name not in subs:
        raise DocsError(
            f"the docs name `sciga {name}`, which is not a command (commands: {', '.join(subs)}); "
            "remove or rename its section in docs/reference/cli.md"
        )
    helps = _subparser_help(root_parser())
    lines = [_escape(helps.get(name, "")).rstrip(".") + "."]
    lines += _parser_markdown(subs[name], level)
    return "\n".join(lines).strip() + "\n"


def global_options() -> str:
    """The options of `sciga` itself (`--version`, `-v`) and its list of commands."""
    ap = root_parser()
    lines = ["```text", _usage(ap), "```"] + _options_tables(ap)
    lines += ["", "| command | what it does |", "|---|---|"]
    helps = _subparser_help(ap)
    lines += [
        f"| [{_code('sciga ' + n)}](#{_anchor('sciga ' + n)}) | {_escape(helps.get(n, ''))} |" for n in command_names()
    ]
    return "\n".join(lines).strip() + "\n"


def cli_page(markdown: str) -> str:
    """docs/reference/cli.md with every ``<!-- sciga:cli NAME -->`` replaced by that command's
    reference, and a section appended for each command the page has no section for yet (a
    command added to ``COMMANDS`` appears in the reference without anyone writing it)."""
    named = [m.group(2) for m in MARKER_RE.finditer(markdown) if m.group(1) == "cli" and m.group(2)]
    missing = [n for n in command_names() if n not in named]
    if missing:
        markdown = markdown.rstrip() + "\n"
        for n in missing:
            markdown += (
                f"\n## `sciga {n}` {{ #{_anchor('sciga ' + n)} }}\n\n<!-- sciga:cli {n} -->\n\n"
                "*No hand-written examples yet: add them under this command's heading in "
                "docs/reference/cli.md.*\n"
            )
    return markdown


# ------------------------------------------------------------------ the data reference


def _type_label(t) -> str:
    """The Arrow type as Markdown: lists spelled out, shared structs linked to their table."""
    import pyarrow as pa

    from sciga.schemas.column_docs import shared_name
    from sciga.schemas.hf_features import is_image_struct

    if pa.types.is_list(t):
        return f"list&lt;{_type_label(t.value_type)}&gt;"
    shared = shared_name(t)
    if shared:
        return f"[{shared}](#{shared})"
    if is_image_struct(t):
        return "struct&lt;bytes: binary, path: string&gt; (`datasets` Image)"
    if pa.types.is_struct(t):
        return "struct"
    return str(t)


def _columns_table(paths, descriptions: dict[str, str], prefix: str = "") -> list[str]:
    lines = ["| column | Arrow type | description |", "|---|---|---|"]
    for p in paths:
        text = descriptions.get(p.path)
        if text is None:
            raise DocsError(f"{prefix}{p.path} has no description; add one to schemas/column_docs.py")
        lines.append(f"| {_code(p.path)} | {_type_label(p.type)} | {_escape(text)} |")
    return lines


def data_reference() -> str:
    """Every config, its shard path and every column with its Arrow type and description."""
    import pyarrow as pa

    from sciga.schemas.arrow import SCHEMAS
    from sciga.schemas.column_docs import COLUMNS, CONFIG_ROWS, SHARED_FIELDS, SHARED_STRUCTS, column_paths
    from sciga.schemas.version import SCHEMA_VERSION

    lines = [
        f"Schema version **{SCHEMA_VERSION}** (`sciga.schemas.version.SCHEMA_VERSION`; every shard's Arrow "
        "metadata and every paper's `provenance.schema_version` carry it).",
        "",
    ]
    lines += ["| config | one row per | shards |", "|---|---|---|"]
    for config in SCHEMAS:
        lines.append(
            f"| [{_code(config)}](#{config}) | {_escape(CONFIG_ROWS[config])} | "
            f"`data/{config}/train-NNNNN-of-MMMMM.parquet` |"
        )
    for config, schema in SCHEMAS.items():
        lines += ["", f"## `{config}` {{ #{config} }}", "", f"One row per {_escape(CONFIG_ROWS[config])}.", ""]
        lines += _columns_table(list(column_paths(schema)), COLUMNS[config], f"{config}.")
    lines += ["", "## Struct types used in several columns", ""]
    for name, st in SHARED_STRUCTS.items():
        fields = SHARED_FIELDS[name]
        lines += ["", f"### `{name}` {{ #{name} }}", "", _escape(fields[""][0].upper() + fields[""][1:]) + ".", ""]
        paths = list(column_paths(pa.schema(list(st))))
        lines += _columns_table(paths, fields, f"{name}.")
    return "\n".join(lines).strip() + "\n"


# ------------------------------------------------------------------ the quality gate


def gate_defaults() -> dict:
    """The options the gate runs with when no flag is given (``run_gate``'s defaults)."""
    from sciga.quality.gate import run_gate
    from sciga.transforms.vision.decode import DEFAULT_MAX_PIXELS

    options = {
        name: p.default
        for name, p in inspect.signature(run_gate).parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    options["max_pixels"] = options.get("max_pixels") or DEFAULT_MAX_PIXELS
    options.setdefault("max_pixels_source", "default")
    return options


def gate_expectations() -> list[tuple[str, str, str, str]]:
    """(flat table, config, what the table holds, expectation) for every expectation the gate
    checks with its default options."""
    from sciga.quality.suites import flat_tables

    options = gate_defaults()
    rows = []
    for table in flat_tables():
        try:
            expectations = table.expectations(options)
        except KeyError as e:
            raise DocsError(
                f"the gate's suite {table.name!r} needs the option {e}, which run_gate has no default "
                "for; give it one in scripts/docs_gen.py gate_defaults()"
            ) from None
        rows += [(table.name, table.config, table.what, e.description) for e in expectations]
    return rows


def gate_reference(arg: str | None = None) -> str:
    rows = gate_expectations()
    if arg == "count":
        return str(len(rows))
    if arg == "count-1":  # the example of a failed gate: one expectation failed
        return str(len(rows) - 1)
    if arg:
        raise DocsError(f"unknown argument {arg!r} of sciga:gate (count, count-1, or none for the table)")
    lines = [
        f"With its default options the gate checks **{len(rows)} expectations** over "
        f"{len({r[0] for r in rows})} flat tables:",
        "",
        "| flat table | config | expectation |",
        "|---|---|---|",
    ]
    lines += [f"| {_code(t)} | {_code(c)} | {_escape(d)} |" for t, c, _, d in rows]
    return "\n".join(lines).strip() + "\n"


# ------------------------------------------------------------------ image statuses


def image_status_anchor(status: str) -> str:
    return _anchor(f"image-status {status}")


def image_status_reference(arg: str | None = None) -> str:
    """Every value of ``figures.image_status`` with what it means and what to do, from
    ``sciga.schemas.images.IMAGE_STATUSES``, and whether it counts as a figure without an image."""
    from sciga.schemas.images import BY_DESIGN, EMBEDDED, IMAGE_STATUSES, ON_REQUEST, counts_as_missing

    if arg:
        raise DocsError(f"unknown argument {arg!r} of sciga:image-statuses (none expected)")

    def counted(status: str) -> str:
        if status in BY_DESIGN:
            return "no (not counted at all)"
        return "yes" if counts_as_missing(status) else "no"

    lines = [
        f"{len(IMAGE_STATUSES)} values (`sciga.schemas.images.IMAGE_STATUSES`). **Figures without an image** "
        "(the build summary, the dataset card, the quality gate's missing-image rate, `sciga evaluate`) are the "
        f"rows whose status is none of {', '.join(_code(s) for s in (EMBEDDED, *sorted(ON_REQUEST), *sorted(BY_DESIGN)))}, "
        f"out of the rows that are not {', '.join(_code(s) for s in sorted(BY_DESIGN))}.",
        "",
        "| image_status | a figure without an image | what it means and what to do |",
        "|---|---|---|",
    ]
    for status, meaning in IMAGE_STATUSES.items():
        lines.append(
            f'| <span id="{image_status_anchor(status)}"></span>{_code(status)} | {counted(status)} | '
            f"{_escape(meaning)} |"
        )
    return "\n".join(lines).strip() + "\n"


# ------------------------------------------------------------------ dead letters

STAGE_TITLES = {
    "read": "reading an input",
    "parse": "parsing a page",
    "dedupe": "two inputs for one paper",
    "tex_source": "e-prints and TeX sources (per paper and from bulk tars)",
    "eprint_bulk": "opening the bulk e-print tars (`--eprints-bulk`)",
    "latexml": "our own LaTeXML conversion (`--html-from latexml|auto`)",
    "metadata": "fetching metadata from the arXiv API",
    "fetch_html": "fetching LaTeXML pages",
    "fetch_source": "fetching e-prints",
    "rasterize": "figure files from TeX (per image)",
    "link": "linking mentions",
    "vision": "the vision stage",
}


def dead_letter_anchor(stage: str, error_type: str) -> str:
    return _anchor(f"{stage} {error_type}")


def dead_letter_reference() -> str:
    """Every (stage, error type) the builder emits, grouped by stage, with what to do."""
    from sciga.schemas.dead_letters import REASONS

    stages: list[str] = []
    for r in REASONS:
        stages += [s for s in r.stages if s not in stages]
    order = list(STAGE_TITLES) + [s for s in stages if s not in STAGE_TITLES]
    lines = [
        f"{sum(len(r.error_types) * len(r.stages) for r in REASONS)} (stage, error type) pairs in "
        f"{len([s for s in order if s in stages])} stages.",
        "",
    ]
    for stage in order:
        rows = [(t, r) for r in REASONS if stage in r.stages for t in r.error_types]
        if not rows:
            continue
        title = STAGE_TITLES.get(stage, stage)
        lines += [
            "",
            f"### `{stage}`: {_escape(title)} {{ #stage-{_anchor(stage)} }}",
            "",
            "| error_type | shown in | what it means | what to do |",
            "|---|---|---|---|",
        ]
        for t, r in sorted(rows, key=lambda x: x[0]):
            anchor = dead_letter_anchor(stage, t)
            lines.append(
                f'| <span id="{anchor}"></span>{_code(t)} | {_escape(", ".join(r.shown_in))} | '
                f"{_escape(r.meaning)} | {_escape(r.what_to_do)} |"
            )
    return "\n".join(lines).strip() + "\n"


# ------------------------------------------------------------------ the code map


def _docstring(path: Path) -> str:
    with warnings.catch_warnings():  # a module's own invalid escapes are not the docs' business
        warnings.simplefilter("ignore")
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return " ".join(doc.strip().split("\n\n")[0].split())


def packages() -> list[tuple[str, Path]]:
    """(dotted name, folder) of every package of the tree, as setup.py finds them."""
    found = [("sciga", ROOT / "sciga")]
    for top in TOP_LEVEL:
        for folder, subdirs, files in os.walk(ROOT / top):
            subdirs[:] = sorted(d for d in subdirs if not d.startswith((".", "__")))
            if "__init__.py" in files:
                rel = Path(folder).relative_to(ROOT)
                found.append(("sciga." + ".".join(rel.parts), Path(folder)))
    return found


def import_layers() -> list[list[str]]:
    """The import-linter layers of pyproject.toml, top (may import everything below) first."""
    import tomllib  # Python 3.11+, as the docs build runs (CI, scripts/setup.sh)

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    for contract in config["tool"]["importlinter"]["contracts"]:
        if contract.get("type") == "layers":
            return [[p.strip() for p in layer.split("|")] for layer in contract["layers"]]
    return []


def _flow_rank(package: str, layers: list[list[str]]) -> float:
    """Where a package sits in the data flow: 0 for the lowest layer (schemas), a folder that
    only holds layers (``sciga.transforms``) just before its lowest one, and packages outside
    the layers (``sciga``, ``sciga.samples``) last."""
    best, rank = -1, None
    for i, layer in enumerate(layers):
        for name in layer:
            if (package == name or package.startswith(name + ".")) and len(name) > best:
                best, rank = len(name), len(layers) - 1 - i
    if rank is not None:
        return rank
    if "." not in package:  # the root package: after everything it holds
        return len(layers) + 2
    children = [
        len(layers) - 1 - i for i, layer in enumerate(layers) for name in layer if name.startswith(package + ".")
    ]
    return min(children) - 0.5 if children else len(layers) + 1


def code_map() -> str:
    layers = import_layers()
    lines = [
        "### Import layers",
        "",
        "From `pyproject.toml` (the import-linter contract `scripts/lint.sh` checks), top first: a package may "
        "import the layers below its own, never those above; packages in one layer are independent of each "
        "other.",
        "",
        "| layer | packages | may import |",
        "|---|---|---|",
    ]
    for i, layer in enumerate(layers):
        below = (
            "nothing of ours"
            if i == len(layers) - 1
            else f"layers {i + 2}-{len(layers)}"
            if i < len(layers) - 2
            else f"layer {len(layers)}"
        )
        lines.append(f"| {i + 1} | {', '.join(_code(n) for n in layer)} | {below} |")
    pkgs = sorted(packages(), key=lambda p: (_flow_rank(p[0], layers), p[0]))
    lines += [
        "",
        "### Packages and modules",
        "",
        "Lowest layer first, in the order data flows. Each line is the first paragraph of the package's or "
        "module's docstring.",
    ]
    for name, folder in pkgs:
        rel = folder.relative_to(ROOT).as_posix()
        init = folder / "__init__.py"
        lines += ["", f"#### `{rel}/` ({_code(name)})", "", _escape(_docstring(init)) if init.exists() else ""]
        modules = sorted(p for p in folder.glob("*.py") if p.name != "__init__.py")
        if modules:
            lines += ["", "| module | what it is |", "|---|---|"]
            lines += [f"| {_code(m.name)} | {_escape(_docstring(m))} |" for m in modules]
    return "\n".join(lines).strip() + "\n"


# ------------------------------------------------------------------ the README as the home page


def readme_for_site(arg: str | None = None) -> str:
    """README.md without its title, its links into docs/ made relative to the site root."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    text = re.sub(r"\A# [^\n]*\n", "", text)
    return re.sub(r"\]\(docs/", "](", text)


def versions(arg: str | None = None) -> str:
    """``sciga --version``'s line, or one of its numbers (``builder``, ``schema``)."""
    from sciga.schemas.version import BUILDER_VERSION, SCHEMA_VERSION

    if arg is None:
        return f"sciga-builder {BUILDER_VERSION} (schema {SCHEMA_VERSION})"
    found = {"builder": BUILDER_VERSION, "schema": SCHEMA_VERSION}
    if arg not in found:
        raise DocsError(f"unknown argument {arg!r} of sciga:version (builder, schema, or none)")
    return found[arg]


def exit_codes(arg: str | None = None) -> str:
    """Every command's exit statuses, from ``sciga.pipelines.cli.EXIT_STATUSES``."""
    from sciga.pipelines.cli import COMMANDS, EXIT_STATUSES, EXIT_STATUSES_ALL

    lines = ["| command | status | means |", "|---|---:|---|"]
    for code, text in sorted(EXIT_STATUSES_ALL.items()):
        lines.append(f"| every command | {code} | {_escape(text)} |")
    for c in COMMANDS:
        for code, text in sorted(EXIT_STATUSES.get(c.name, {}).items()):
            lines.append(f"| `sciga {c.name}` | {code} | {_escape(text)} |")
    unknown = set(EXIT_STATUSES) - {c.name for c in COMMANDS}
    if unknown:
        raise DocsError(f"EXIT_STATUSES names commands that do not exist: {', '.join(sorted(unknown))}")
    return "\n".join(lines)


MARKERS = {
    "exit-codes": exit_codes,
    "version": versions,
    "cli": lambda arg: command_reference(arg) if arg else global_options(),
    "data": lambda arg: data_reference(),
    "gate": gate_reference,
    "dead-letters": lambda arg: dead_letter_reference(),
    "image-statuses": image_status_reference,
    "code-map": lambda arg: code_map(),
    "readme": readme_for_site,
}


def expand_markers(markdown: str) -> str:
    """Every ``<!-- sciga:NAME ARG -->`` of a page replaced by its generated Markdown."""

    def one(m: re.Match) -> str:
        name, arg = m.group(1), m.group(2)
        if name not in MARKERS:
            raise DocsError(f"unknown docs marker sciga:{name} (known: {', '.join(MARKERS)})")
        return MARKERS[name](arg)

    return MARKER_RE.sub(one, markdown)
