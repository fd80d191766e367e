"""The docs: the README's promises, the generated reference pages, and the strict site build.

Generated pages (scripts/docs_gen.py) cannot drift from the code they are made from; these
tests keep the hand-written sources they read complete: every column has a description
(schemas/column_docs.py), every error type the code can emit has a troubleshooting entry
(schemas/dead_letters.py), every command and flag is in the CLI reference, and
``mkdocs build --strict`` passes (a broken link, anchor or stale path fails it).
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pytest

from conftest import ROOT, SAMPLES

_spec = importlib.util.spec_from_file_location("docs_gen", ROOT / "scripts" / "docs_gen.py")
docs_gen = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("docs_gen", docs_gen)
_spec.loader.exec_module(docs_gen)

README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = ROOT / "docs"


def _fenced_blocks(markdown: str) -> list[tuple[str, str]]:
    """(info string, body) of every fenced code block."""
    return re.findall(r"^```(\w*)\n(.*?)^```", markdown, re.S | re.M)


# ------------------------------------------------------------------ the README


def test_readme_two_commands_are_unchanged():
    section = README.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    assert _fenced_blocks(section)[0] == (
        "bash",
        (
            "# 1. set up (system tools + .venv with the project) and run the main job on the embedded sample\n"
            "bash scripts/setup.sh && source .venv/bin/activate && sciga build --sample --output out/sample\n"
            "\n"
            "# 2. run the tests (what CI runs, in the activated .venv; CI also runs `bash scripts/lint.sh`)\n"
            "python -m pytest -q -n 2\n"
        ),
    )


def test_readme_sidecar_is_the_real_sample_file():
    """The quickstart shows a real `<id>.meta.json`: byte for byte the sample's."""
    shown = [body for info, body in _fenced_blocks(README) if info == "json"]
    assert shown == [(SAMPLES / "meta" / "2511.99001.meta.json").read_text(encoding="utf-8")]
    assert "samples/meta/2511.99001.meta.json" in README


def test_readme_links_into_the_docs_exist():
    for target in re.findall(r"\]\((docs/[^)#]+)", README):
        assert (ROOT / target).is_file(), f"README links to {target}, which does not exist"


@pytest.mark.e2e
def test_readme_quickstart_layout_builds_with_images_and_sidecar(tmp_path):
    """The quickstart as a user follows it: a page in its folder, images where its <img src>
    points, the sidecar beside it; `sciga build` from the user's own working directory."""
    import duckdb

    page_dir = tmp_path / "my-pages" / "2511.99001"
    shutil.copytree(SAMPLES / "html" / "2511.99001", page_dir)
    shutil.copy(SAMPLES / "meta" / "2511.99001.meta.json", page_dir / "2511.99001.meta.json")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(
        [sys.executable, "-m", "sciga", "build", "--input", "my-pages/", "--output", "out/mine", "--quiet"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out" / "mine"
    con = duckdb.connect()
    title, venue = con.execute(f"SELECT title, conference.venue FROM '{out}/data/papers/*.parquet'").fetchone()
    assert title.startswith("Glimpse") and venue == "CVPR"  # from the sidecar (its comment names the venue)
    rows = con.execute(
        f"SELECT image.path, image.bytes IS NOT NULL FROM '{out}/data/figures/*.parquet' WHERE image.path IS NOT NULL"
    ).fetchall()
    assert rows and all(embedded for _, embedded in rows), rows  # every image found relative to the page


# ------------------------------------------------------------------ the data reference


def _all_paths():
    from sciga.schemas.arrow import SCHEMAS
    from sciga.schemas.column_docs import SHARED_STRUCTS, column_paths

    found = {config: [p.path for p in column_paths(schema)] for config, schema in SCHEMAS.items()}
    for name, st in SHARED_STRUCTS.items():
        found[name] = [p.path for p in column_paths(pa.schema(list(st)))]
    return found


def test_every_column_has_a_description():
    from sciga.schemas.column_docs import COLUMNS, SHARED_FIELDS

    described = {**COLUMNS, **SHARED_FIELDS}
    missing = [
        f"{config}.{path}"
        for config, paths in _all_paths().items()
        for path in paths
        if not described.get(config, {}).get(path, "").strip()
    ]
    assert not missing, f"add descriptions to schemas/column_docs.py for: {', '.join(missing)}"


def test_no_description_names_a_missing_column():
    from sciga.schemas.column_docs import COLUMNS, SHARED_FIELDS

    paths = _all_paths()
    stale = [
        f"{config}.{key}"
        for config, keys in {**COLUMNS, **SHARED_FIELDS}.items()
        for key in keys
        if key and key not in paths.get(config, [])
    ]
    assert not stale, f"schemas/column_docs.py describes columns the schemas do not have: {', '.join(stale)}"


def test_data_reference_shows_every_column_with_its_arrow_type():
    from sciga.schemas.arrow import SCHEMAS

    page = docs_gen.data_reference()
    for config, schema in SCHEMAS.items():
        assert f"## `{config}`" in page
        for field in schema:
            assert f"| `{field.name}` |" in page
    assert "| `image` | struct&lt;bytes: binary, path: string&gt; (`datasets` Image) |" in page
    assert "| `sections.paragraphs.ref_spans` | list&lt;[ref_span](#ref_span)&gt; |" in page


# ------------------------------------------------------------------ dead-letter reasons

PACKAGE_DIRS = ("schemas", "transforms", "explore", "quality", "training", "publish", "pipelines")


def _literals(node) -> list[str]:
    """The string values an expression can take, as far as the source says: a literal, an
    f-string (its fields as ``<>``), either side of ``or`` / ``if-else``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return ["".join(v.value if isinstance(v, ast.Constant) else "<>" for v in node.values)]
    if isinstance(node, ast.BoolOp):
        return [x for v in node.values for x in _literals(v)]
    if isinstance(node, ast.IfExp):
        return _literals(node.body) + _literals(node.orelse)
    return []


def _class_name(node) -> str | None:
    """``OutsideRootError`` for ``OutsideRootError`` and ``input_files.OutsideRootError``."""
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def _kind_values(node, kind_classes: dict[str, str], caught: dict[int, list[str]]) -> list[str]:
    """The error types ``X.kind`` can be, for exception classes that name their error type in a
    class attribute (``class OutsideRootError(OSError): kind = "outside_input"``): the class's
    own for ``OutsideRootError.kind``; for ``e.kind`` those of the classes ``except (A, B) as e``
    catches, or, for an ``e`` passed in as a parameter, every such class's (over, never under)."""
    if not (isinstance(node, ast.Attribute) and node.attr == "kind" and isinstance(node.value, ast.Name)):
        return []
    if node.value.id in kind_classes:
        return [kind_classes[node.value.id]]
    if id(node) in caught:
        return [kind_classes[c] for c in caught[id(node)] if c in kind_classes]
    return sorted(set(kind_classes.values()))


def emitted_error_types() -> dict[str, set]:
    """``_emitted_error_types`` of the tree at ROOT (read once per tree and run: three tests ask)."""
    return _emitted_error_types(ROOT, PACKAGE_DIRS)


@functools.cache
def _emitted_error_types(root, package_dirs) -> dict[str, set]:
    """error type -> {(stage or None, "file:line")} for every place the code sets one: calls
    of a class or function with an ``error_type`` parameter (``StageError``, ``ParseError``,
    ``ArxivApiError``, helpers) and of ``FetchError`` (its ``kind``), ``DeadLetter(...)``,
    assignments to ``.error_type``, the ``(error_type, why)`` tuples returned by the
    ``*_problem`` functions, and the ``kind`` class attribute of an exception passed as the
    error type (``StageError("read", OutsideRootError.kind, ...)``, ``e.kind``)."""
    trees = {p: ast.parse(p.read_text(encoding="utf-8")) for d in package_dirs for p in (root / d).rglob("*.py")}
    position: dict[str, int] = {}
    kind_classes: dict[str, str] = {}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                init = next((b for b in node.body if isinstance(b, ast.FunctionDef) and b.name == "__init__"), None)
                names = [a.arg for a in init.args.args][1:] if init else []
                key = "kind" if node.name == "FetchError" else "error_type"
                if key in names:
                    position[node.name] = names.index(key)
                for b in node.body:
                    if (
                        isinstance(b, ast.Assign)
                        and isinstance(b.value, ast.Constant)
                        and isinstance(b.value.value, str)
                        and any(isinstance(t, ast.Name) and t.id == "kind" for t in b.targets)
                    ):
                        kind_classes[node.name] = b.value.value
            elif isinstance(node, ast.FunctionDef) and not node.name.startswith("__"):
                # (an ``__init__`` is its class's, above: ``super().__init__(errno, message)`` of an
                # OSError subclass is no call of StageError's ``__init__``)
                names = [a.arg for a in node.args.args]
                names = names[1:] if names[:1] == ["self"] else names
                if "error_type" in names:
                    position.setdefault(node.name, names.index("error_type"))
    assert {"StageError", "ParseError", "FetchError", "ArxivApiError"} <= set(position), position
    found: dict[str, set] = defaultdict(set)
    for path, tree in trees.items():
        where = path.relative_to(root).as_posix()
        constants = {
            t.id: n.value.value
            for n in tree.body
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        caught: dict[int, list[str]] = {}  # id of an ``e.kind`` node -> the classes ``except ... as e`` catches
        for handler in ast.walk(tree):
            if isinstance(handler, ast.ExceptHandler) and handler.name and handler.type is not None:
                types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
                classes = [c for c in map(_class_name, types) if c]
                for n in (n for stmt in handler.body for n in ast.walk(stmt)):
                    if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == handler.name:
                        caught[id(n)] = classes

        def values(node, caught=caught):
            return _literals(node) + _kind_values(node, kind_classes, caught)

        def stage_of(node, constants=constants):
            if isinstance(node, ast.Constant):
                return node.value
            return constants.get(node.id) if isinstance(node, ast.Name) else None

        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                kw = {k.arg: k.value for k in node.keywords}
                if name == "DeadLetter" and "error_type" in kw:
                    for v in values(kw["error_type"]):
                        found[v].add((stage_of(kw["stage"]) if "stage" in kw else None, f"{where}:{node.lineno}"))
                elif name in position:
                    i = position[name]
                    arg = (
                        node.args[i] if len(node.args) > i else kw.get("kind" if name == "FetchError" else "error_type")
                    )
                    stage = None
                    if name == "StageError" and node.args:
                        stage = stage_of(node.args[0])
                    elif name == "ParseError":
                        stage = stage_of(kw["stage"]) if "stage" in kw else "parse"
                    for v in values(arg) if arg is not None else []:
                        found[v].add((stage, f"{where}:{node.lineno}"))
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    pairs = [(target, node.value)]
                    if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                        pairs = list(zip(target.elts, node.value.elts))
                    for t, value in pairs:
                        if isinstance(t, ast.Attribute) and t.attr == "error_type":
                            for v in _literals(value):
                                found[v].add((None, f"{where}:{node.lineno}"))
            elif isinstance(node, ast.FunctionDef) and node.name.endswith("problem"):
                for r in ast.walk(node):
                    if isinstance(r, ast.Return) and isinstance(r.value, ast.Tuple) and r.value.elts:
                        for v in _literals(r.value.elts[0]):
                            found[v].add((None, f"{where}:{r.lineno}"))
    return found


def _registered() -> dict[str, set]:
    from sciga.schemas.dead_letters import REASONS

    out: dict[str, set] = defaultdict(set)
    for r in REASONS:
        for t in r.error_types:
            out[re.sub(r"<[^>]*>", "<>", t)] |= set(r.stages)
    return out


def test_every_emitted_error_type_is_documented():
    registered = _registered()
    missing = {t: sorted(w for _, w in sites) for t, sites in emitted_error_types().items() if t not in registered}
    assert not missing, (
        "these error types are emitted but have no entry in schemas/dead_letters.py (what it means, "
        f"what to do): {missing}"
    )


def test_documented_stages_match_the_code():
    registered = _registered()
    wrong = {
        (stage, t): w
        for t, sites in emitted_error_types().items()
        for stage, w in sites
        if stage and t in registered and stage not in registered[t]
    }
    assert not wrong, f"schemas/dead_letters.py lacks these (stage, error type) pairs the code emits: {wrong}"


def test_no_documented_error_type_is_stale():
    emitted = emitted_error_types()
    stale = [t for t in _registered() if t not in emitted]
    assert not stale, f"schemas/dead_letters.py documents error types nothing emits any more: {stale}"


def _module_constants() -> dict[str, dict[str, str]]:
    """module name -> its module-level string constants, names imported from another of our
    modules (``from sciga.transforms.link.link_paper import STAGE``) resolved."""
    trees = {}
    for d in PACKAGE_DIRS:
        for path in (ROOT / d).rglob("*.py"):
            module = "sciga." + ".".join(path.relative_to(ROOT).with_suffix("").parts)
            trees[module.removesuffix(".__init__")] = ast.parse(path.read_text(encoding="utf-8"))
    consts = {
        m: {
            t.id: n.value.value
            for n in tree.body
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        for m, tree in trees.items()
    }
    for m, tree in trees.items():
        for n in tree.body:
            if isinstance(n, ast.ImportFrom) and n.module in consts:
                for alias in n.names:
                    if alias.name in consts[n.module]:
                        consts[m].setdefault(alias.asname or alias.name, consts[n.module][alias.name])
    return {m: {**c, "__tree__": trees[m]} for m, c in consts.items()}


def test_internal_errors_are_documented_for_every_per_paper_stage():
    """Every step that turns an unexpected exception into an ``internal`` dead letter (a
    PaperStep's STAGE, or ``dead_letter_from(e, STAGE, ...)``) is listed for ``internal``."""
    from sciga.schemas.dead_letters import PER_PAPER_STAGES

    def value(v, constants):
        return v.value if isinstance(v, ast.Constant) else constants.get(getattr(v, "id", None))

    stages = set()
    for constants in _module_constants().values():
        for node in ast.walk(constants["__tree__"]):
            if isinstance(node, ast.ClassDef) and node.name != "PaperStep":
                for b in node.body:
                    if isinstance(b, ast.Assign) and any(
                        isinstance(t, ast.Name) and t.id == "STAGE" for t in b.targets
                    ):
                        stages.add(value(b.value, constants))
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "dead_letter_from"
                and len(node.args) > 1
            ):
                arg = node.args[1]
                if not (isinstance(arg, ast.Name) and arg.id.islower()):  # a parameter passed through (mark_dead)
                    stages.add(value(arg, constants))
    assert None not in stages, "a STAGE the test cannot resolve: name it with a string constant"
    assert stages == set(PER_PAPER_STAGES)


def test_troubleshooting_page_lists_every_reason_with_an_anchor():
    from sciga.schemas.dead_letters import REASONS

    page = docs_gen.dead_letter_reference()
    for r in REASONS:
        for stage in r.stages:
            assert f"### `{stage}`" in page
            for t in r.error_types:
                assert f'<span id="{docs_gen.dead_letter_anchor(stage, t)}"></span>`{t}`' in page


def test_the_scan_finds_a_new_error_type(tmp_path, monkeypatch):
    """The completeness test above would fail for a reason added without docs."""
    pkg = tmp_path / "transforms"
    pkg.mkdir()
    (pkg / "new_stage.py").write_text(
        'STAGE = "new"\n\ndef f():\n    raise StageError(STAGE, "brand_new_reason", "x")\n'
    )
    (pkg / "errors.py").write_text(
        "class StageError(Exception):\n    def __init__(self, stage, error_type, message):\n"
        "        pass\nclass ParseError(StageError):\n    def __init__(self, error_type, m):\n"
        "        pass\nclass FetchError(Exception):\n    def __init__(self, kind, m):\n"
        "        pass\nclass ArxivApiError(Exception):\n    def __init__(self, error_type, m):\n"
        "        pass\n"
    )
    (pkg / "refusals.py").write_text(
        'class Linked(OSError):\n    kind = "linked_out"\n\n    def __init__(self, path):\n'
        '        super().__init__(13, f"{path} links out")\n\n'
        'class Piped(OSError):\n    kind = "piped"\n\n'
        'def g(path):\n    raise StageError("read", Linked.kind, "x")\n\n'
        'def h(path):\n    try:\n        pass\n    except (Piped,) as e:\n        raise StageError("read", e.kind, "x")\n'
    )
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE_DIRS", ("transforms",))
    found = emitted_error_types()
    assert found["brand_new_reason"] == {("new", "transforms/new_stage.py:4")}
    # an exception class that names its error type in ``kind``, by name or caught as ``e``
    assert found["linked_out"] == {("read", "transforms/refusals.py:11")}
    assert found["piped"] == {("read", "transforms/refusals.py:17")}
    assert not any("links out" in t for t in found)  # OSError's own __init__ is no StageError


# ------------------------------------------------------------------ the CLI reference


def _all_parsers(parser):
    yield parser
    for sub in docs_gen._subparsers(parser).values():
        yield from _all_parsers(sub)


def test_cli_reference_has_every_command_method_and_flag():
    for name in docs_gen.command_names():
        page = docs_gen.command_reference(name)
        parser = docs_gen._subparsers(docs_gen.root_parser())[name]
        for p in _all_parsers(parser):
            assert p.prog in page or p is parser, p.prog
            for action in p._actions:
                for flag in action.option_strings:
                    if flag not in ("-h", "--help"):
                        assert f"`{flag}" in page or f", {flag}" in page, f"{p.prog} {flag} is not in the reference"


def test_cli_reference_names_no_machine():
    """Help texts that say this machine's core count ("every core, 2 here") do not put it in the docs."""
    page = "\n".join(docs_gen.command_reference(n) for n in docs_gen.command_names())
    assert str(docs_gen._CORES) not in page
    assert f"{os.cpu_count()} here" not in page


def test_a_command_without_a_section_gets_one():
    page = docs_gen.cli_page("# Command line reference\n\n## `sciga build`\n\n<!-- sciga:cli build -->\n")
    for name in docs_gen.command_names():
        assert f"<!-- sciga:cli {name} -->" in page
    assert page.count("<!-- sciga:cli build -->") == 1
    with pytest.raises(docs_gen.DocsError, match="nosuch"):
        docs_gen.command_reference("nosuch")


def test_a_new_command_appears_in_the_reference_by_itself(monkeypatch):
    """A command another change adds to ``COMMANDS`` (say `sciga peek`) is in the generated
    CLI page, with its flags, without anyone editing the docs."""
    import types

    from sciga.pipelines import cli

    assert "peek" not in docs_gen.command_names()  # a command no change has added (yet)
    module = types.ModuleType("fake_peek")
    module.add_arguments = lambda p: (
        p.add_argument("id", metavar="ID", help="the paper to peek at"),
        p.add_argument("--build", metavar="OUT", help="the build folder"),
    )
    module.run = lambda args, rest: 0
    monkeypatch.setitem(sys.modules, "fake_peek", module)
    monkeypatch.setattr(cli, "COMMANDS", cli.COMMANDS + (cli.Command("peek", "fake_peek", "a glance at one paper"),))
    monkeypatch.setattr(docs_gen, "_PARSER_CACHE", {})
    page = docs_gen.expand_markers(docs_gen.cli_page((DOCS / "reference" / "cli.md").read_text(encoding="utf-8")))
    section = page.split("## `sciga peek`", 1)[1]
    assert "a glance at one paper." in section and "| `--build OUT` |" in section and "the build folder" in section
    assert "[`sciga peek`](#sciga-peek)" in page  # listed with the other commands


def test_cli_page_has_a_section_per_command():
    """Hand-written examples sit under each command's heading (a new command still appears,
    appended, but should get examples)."""
    page = (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")
    named = {m.group(2) for m in docs_gen.MARKER_RE.finditer(page) if m.group(1) == "cli" and m.group(2)}
    assert named <= set(docs_gen.command_names()), named - set(docs_gen.command_names())


# ------------------------------------------------------------------ numbers and paths


def test_gate_expectation_counts_are_generated():
    """No page states the gate's number of expectations by hand (the README once said 45 when
    it was 47): they come from <!-- sciga:gate count -->."""
    from sciga.quality.suites import flat_tables

    n = sum(len(t.expectations(docs_gen.gate_defaults())) for t in flat_tables())
    assert docs_gen.gate_reference("count") == str(n)
    texts = [README] + [p.read_text(encoding="utf-8") for p in DOCS.rglob("*.md")]
    literal = [
        m.group(0)
        for text in texts
        for m in re.finditer(r"\b\d+ (?:of \d+ )?(?:Great Expectations )?expectations", text)
        if "when this was measured" not in text[max(0, m.start() - 60) : m.end() + 40]
    ]
    assert not literal, literal


@pytest.mark.e2e  # runs `python -m sciga --version` as a subprocess
def test_version_marker_is_what_sciga_version_prints():
    from conftest import run_cli

    done = run_cli("--version")
    assert done.returncode == 0 and done.stdout.strip() == docs_gen.expand_markers("<!-- sciga:version -->")


def test_stale_repository_paths_are_found():
    from importlib.util import module_from_spec, spec_from_file_location

    spec = spec_from_file_location("docs_hooks", ROOT / "scripts" / "docs_hooks.py")
    hooks = module_from_spec(spec)
    spec.loader.exec_module(hooks)
    page = "See `transforms/vision/decode.py`, `tests/pipelines/test_gcs_*.py` and `transforms/nowhere/gone.py`.\n"
    assert hooks.stale_paths(page) == ["transforms/nowhere/gone.py"]
    assert hooks.stale_paths("```\ntransforms/nowhere/gone.py\n```\n") == []


def test_code_map_diagram_names_real_folders_and_files():
    """The hand-drawn map on the contributor page names folders and modules that exist."""
    page = (DOCS / "contributing.md").read_text(encoding="utf-8")
    diagram = page.split("## A map of the code", 1)[1]
    block = _fenced_blocks(diagram)[0][1]
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    tree = set(files) | {str(parent) for f in files for parent in Path(f).parents if str(parent) != "."}
    names = {Path(p).name for p in tree}
    for folder in re.findall(r"\b([a-z_]+(?:/[a-z_]+)*)/", block):
        assert any(p == folder or p.endswith("/" + folder) for p in tree), f"the code map names {folder}/"
    for module in re.findall(r"\b([a-z_]+\.py)\b", block):
        assert module in names, f"the code map names {module}"


def test_code_map_covers_every_package_and_module_with_its_docstring():
    """The code map is made of docstrings: every package and module has one."""
    page = docs_gen.code_map()
    for _, folder in docs_gen.packages():
        assert f"`{folder.relative_to(ROOT).as_posix()}/`" in page
        for module in folder.glob("*.py"):
            assert docs_gen._docstring(module), f"{module.relative_to(ROOT)} has no docstring (the code map shows it)"


# ------------------------------------------------------------------ the site


@pytest.mark.e2e
def test_mkdocs_strict_build(tmp_path):
    """The site builds with --strict: no broken link or anchor, no page left out of the nav,
    no stale generated part or repository path (scripts/docs_hooks.py warns, strict fails)."""
    # mkdocs comes with the `docs` extra (in `all`): fail, saying so, rather than skip without it
    assert importlib.util.find_spec("mkdocs") and importlib.util.find_spec("material"), (
        'mkdocs / mkdocs-material are not installed: pip install ".[docs]" (scripts/setup.sh installs every extra)'
    )
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    home = (site / "index.html").read_text(encoding="utf-8")
    assert "Quickstart on your own pages" in home and "2511.99001.meta.json" in home
    cli = (site / "reference" / "cli.html").read_text(encoding="utf-8")
    assert "--figures-per-shard" in cli and "sciga train ga-bc" in cli
    gate = (site / "reference" / "quality-gate.html").read_text(encoding="utf-8")
    assert f"<strong>{docs_gen.gate_reference('count')} expectations</strong>" in gate
    data = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    assert any("dead_letter" in d["location"] or "dead_letter" in d["text"] for d in data["docs"])
