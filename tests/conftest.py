"""Shared test fixtures: repository paths, the shared corpus, the embedded sample."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _corpus_dir() -> Path:
    """``$SCIGA_CORPUS``, else ``../shared/corpus`` beside the checkout (as CI lays it out),
    else the development machine's copy. The one place tests look for the corpus."""
    for cand in (os.environ.get("SCIGA_CORPUS"), ROOT.parent / "shared" / "corpus", Path("/work/shared/corpus")):
        if cand and Path(cand).is_dir():
            return Path(cand)
    return ROOT.parent / "shared" / "corpus"


CORPUS = _corpus_dir()
SAMPLES = ROOT / "samples"


def pytest_collection_modifyitems(config, items):
    """Tests marked ``gpu`` skip, saying so, where torch sees no CUDA device (CI has none).
    torch is imported only when such a test was collected."""
    gpu_tests = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_tests:
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="no CUDA device")
    for item in gpu_tests:
        item.add_marker(skip)


@pytest.fixture(scope="session")
def corpus() -> Path:
    assert CORPUS.is_dir(), f"the shared corpus is expected at {CORPUS} (set SCIGA_CORPUS)"
    return CORPUS


@pytest.fixture(scope="session")
def samples() -> Path:
    return SAMPLES


def run_cli(*args: str, env: dict | None = None, timeout: int = 600):
    """Run `python -m sciga ...` from the repository root (works installed or not)."""
    import subprocess

    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    if env:
        e.update(env)
    return subprocess.run([sys.executable, "-m", "sciga", *args], cwd=str(ROOT), env=e, capture_output=True,
                          text=True, timeout=timeout)
