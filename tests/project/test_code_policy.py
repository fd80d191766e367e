"""Rules of the codebase that a linter does not check for us.

- A ``# noqa`` says why, next to it (``# noqa: BLE001 - every failure becomes a dead letter``).
- No module reaches into another module's private names (``from x import _name``,
  ``obj._name`` on an object that is not ``self`` / ``cls`` / ``super()``): modules meet at
  public functions and methods. The few exceptions are listed with their reason.
The import layers themselves are import-linter contracts (pyproject.toml, scripts/lint.sh).
"""

from __future__ import annotations

import ast
import re

from conftest import ROOT

PACKAGES = (
    "schemas",
    "transforms",
    "quality",
    "training",
    "explore",
    "executors",
    "publish",
    "pipelines",
    "sciga",
    "samples",
)
NOQA = re.compile(r"#\s*" + "noqa" + r"(?P<rest>.*)$")
# (file, expression): why this private access is right.
ALLOWED_PRIVATE = {
    ("transforms/link/sentences.py", "re._MAXCACHE"): "the stdlib's regex cache size, raised for the sentence splitter",
    ("transforms/vision/ga_match.py", "m._canvas"): "MatchImage is defined in the same module",
    ("transforms/fetch/cost_estimate.py", "planner._row"): "_Planner is defined in the same module",
    ("transforms/fetch/cost_estimate.py", "pl._cached"): "_Planner is defined in the same module",
    ("transforms/common/quick_exit.py", "os._exit"): "the documented way to end a process without teardown",
    (
        "executors/warm_workers.py",
        "os._exit",
    ): "a forked child and the forking process end without the parent's teardown",
    (
        "transforms/common/quick_exit.py",
        "atexit._run_exitfuncs",
    ): "the stdlib's one way to run atexit handlers before os._exit",
    (
        "samples/make_figures.py",
        "d._image",
    ): "Pillow's ImageDraw gives its image no other way; the sample figures use it",
}


def python_files(roots=PACKAGES + ("tests", "bench")):
    for root in roots:
        # sciga/'s folders are the top-level ones (links into it): read each file once, by its top-level path
        found = (ROOT / root).glob("*.py") if root == "sciga" else (ROOT / root).rglob("*.py")
        for p in sorted(found):
            if "/samples/html/" not in str(p):
                yield p


def test_every_noqa_says_why():
    missing = []
    for p in python_files():
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            m = NOQA.search(line)
            if not m:
                continue
            rest = m.group("rest")
            # "noqa: CODE[, CODE] - why" (or "(why)"): a reason after the codes.
            reason = re.sub(r"^:\s*[A-Z]+[0-9]+(\s*,\s*[A-Z]+[0-9]+)*", "", rest).strip(" -—()")
            if len(reason) < 4:
                missing.append(f"{p.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not missing, "noqa without a reason:\n" + "\n".join(missing)


def test_no_module_uses_another_modules_private_names():
    found = []
    for p in python_files(PACKAGES):
        rel = str(p.relative_to(ROOT))
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sciga"):
                for a in node.names:
                    if a.name.startswith("_") and not a.name.startswith("__"):
                        found.append(f"{rel}:{node.lineno}: from {node.module} import {a.name}")
            elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                base = node.value
                if isinstance(base, ast.Name) and base.id in ("self", "cls"):
                    continue
                if isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super":
                    continue
                expr = f"{ast.unparse(base)}.{node.attr}"
                if (rel, expr) not in ALLOWED_PRIVATE:
                    found.append(f"{rel}:{node.lineno}: {expr}")
    assert not found, "private names used across modules (add a public method or function):\n" + "\n".join(found)


def test_tests_mirror_the_package_and_share_fixture_modules():
    """Test modules live in tests/<folder>/ (mirroring the package's folders, tests/e2e/ for
    user journeys); the shared fixture modules stay in tests/ and are imported by name, so a
    test module's basename must be unique across the folders (pytest imports it by name)."""
    tests = ROOT / "tests"
    assert not sorted(p.name for p in tests.glob("test_*.py")), "test modules belong in tests/<folder>/"
    names: dict[str, list[str]] = {}
    for p in tests.rglob("test_*.py"):
        if "pages" not in p.relative_to(tests).parts:
            names.setdefault(p.name, []).append(str(p.relative_to(ROOT)))
    dupes = {n: ps for n, ps in names.items() if len(ps) > 1}
    assert not dupes, f"test module names used twice: {dupes}"
    package_folders = set(PACKAGES) | {"e2e", "project"}
    for p in tests.rglob("test_*.py"):
        top = p.relative_to(tests).parts[0]
        assert top in package_folders, f"{p.relative_to(ROOT)}: tests/{top}/ mirrors no package folder"


def test_test_fixtures_name_no_machine_path():
    """The tests run from any checkout: the corpus is $SCIGA_CORPUS or ../shared/corpus, and
    no fixture module names a path of the machine it was written on."""
    found = []
    for p in sorted((ROOT / "tests").glob("*.py")):
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"[\"'](/work|/tmp|/opt|/root|/home)(/|[\"'])", line):
                found.append(f"{p.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not found, "machine paths in the test fixtures:\n" + "\n".join(found)


def test_no_function_of_the_commands_or_the_executors_is_over_100_lines():
    """pipelines/ holds the commands and executors/ the ways a build runs: small functions,
    each one thing (issue 42: _run_build was 205 lines, four argparse builders 83 to 154)."""
    long = []
    for folder in ("pipelines", "executors"):
        for path in sorted((ROOT / "sciga" / folder).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    n = node.end_lineno - node.lineno + 1
                    if n > 100:
                        long.append(f"{folder}/{path.name}: {node.name} ({n} lines)")
    assert not long, long
