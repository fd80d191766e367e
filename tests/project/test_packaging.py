"""Installing from a clean checkout: the wheel builds without a single packaging warning from
our setup.py, and it holds every tracked file of the folders it ships (code and data)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile

import pytest
from quality_fixtures import ROOT

SHIPPED = (
    "pipelines",
    "executors",
    "transforms",
    "schemas",
    "quality",
    "training",
    "explore",
    "publish",
    "samples",
    "sciga",
)


def _tracked() -> list[str]:
    """What a clean checkout holds: tracked files plus new files git does not ignore."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    return sorted(p for p in out.decode().split("\0") if p)


def _checkout_files() -> list[str]:
    return [p for p in _tracked() if os.path.isfile(ROOT / p) and not os.path.islink(ROOT / p)]


def _checkout_links() -> list[str]:
    """The committed links ``<folder> -> sciga/<folder>`` (sciga/__init__.py says why)."""
    return [p for p in _tracked() if os.path.islink(ROOT / p)]


def test_the_top_level_folders_are_committed_links_into_the_package():
    links = {p: os.readlink(ROOT / p) for p in _checkout_links()}
    assert links == {d: f"sciga/{d}" for d in SHIPPED if d != "sciga"}
    assert all((ROOT / "sciga" / d / "__init__.py").is_file() and not (ROOT / "sciga" / d).is_symlink() for d in links)


@pytest.mark.e2e  # builds the wheel in a subprocess
def test_wheel_builds_without_warnings_and_ships_every_data_file(tmp_path):
    src = tmp_path / "checkout"
    files = _checkout_files()
    for rel in files:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, src / rel)
    for rel in _checkout_links():
        os.symlink(os.readlink(ROOT / rel), src / rel)
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INDEX="1", PYTHONWARNINGS="default")
    res = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", ".", "-w", str(tmp_path / "wheel")],
        cwd=src,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    warnings = [line for line in out.splitlines() if "warning" in line.lower()]
    assert warnings == [], "\n".join(warnings)

    (wheel,) = (tmp_path / "wheel").glob("sciga_builder-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = [rel for rel in files if rel.split("/")[0] in SHIPPED and not os.path.basename(rel).startswith(".")]
    as_installed = [rel if rel.startswith("sciga/") else f"sciga/{rel}" for rel in expected]
    assert [p for p in as_installed if p not in names] == []
    assert "sciga/samples/html/2511.99001/figs/teaser.png" in names and "sciga/explore/sql/caption_context.sql" in names
