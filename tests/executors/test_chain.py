"""The build's chain of steps is declared once (``executors/chain.py: build_chain``), and every
executor runs the object it makes: the in-process one, Beam's (each DoFn wraps one of its
step objects) and Dask's; the three write the same bytes."""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

import pytest

from sciga.executors import chain as chain_module
from sciga.executors.chain import BuildChain, build_chain
from sciga.executors.options import BuildOptions
from sciga.transforms.link.options import LinkOptions
from sciga.transforms.parse.options import ParseOptions
from sciga.transforms.tex_recovery.options import TexOptions
from sciga.transforms.vision.options import VisionOptions, resolve_vision
from sciga.transforms.write.layout import layout_for

from conftest import ROOT, _build

STEP_CLASSES = (
    "PlanStep",
    "ParseStep",
    "RecoverStep",
    "LinkStep",
    "MeasureStep",
    "StoreStep",
    "CollectStep",
    "CutStep",
    "WritePartStep",
)


def _chain(tmp_path: Path, tex_enabled: bool = True) -> BuildChain:
    opts = BuildOptions(
        output=str(tmp_path / "o"),
        parse=ParseOptions(),
        tex=TexOptions(enabled=tex_enabled),
        link=LinkOptions(),
        vision=VisionOptions(),
    )
    return build_chain(
        opts,
        resolve_vision(opts.vision, str(tmp_path / "staging")),
        fingerprint="fp",
        store_root=str(tmp_path / "store"),
        parts_root=str(tmp_path / "parts"),
        layout=layout_for(10, 2000, 1000),
        progress_dir=None,
        previous_parts=None,
    )


def test_the_chain_lists_the_build_steps_in_order(tmp_path):
    chain = _chain(tmp_path)
    assert [type(s).__name__ for s in chain.steps] == list(STEP_CLASSES)
    assert [label for label, _ in chain.labelled_per_paper()] == ["Parse", "RecoverFromTex", "Link", "Vision"]
    assert chain.measure is chain.per_paper[-1]
    without_tex = _chain(tmp_path, tex_enabled=False)
    assert "RecoverStep" not in [type(s).__name__ for s in without_tex.steps]


def test_no_module_but_the_chain_declares_the_build_steps():
    """Only chain.py makes the steps of a build (a stage's transform may make its own step
    when it is used on its own, outside a build: the vision stage's MeasureFigures)."""
    makers = {}
    for path in sorted((ROOT / "sciga").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in STEP_CLASSES:
                makers.setdefault(node.func.id, set()).add(path.relative_to(ROOT / "sciga").as_posix())
    assert makers == {name: {"executors/chain.py"} for name in STEP_CLASSES if name != "MeasureStep"} | {
        "MeasureStep": {"executors/chain.py", "transforms/vision/stage.py"}
    }


def _digests(out: Path) -> dict:
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.glob("data/*/*"))}


@pytest.mark.e2e  # three builds of the sample: in-process, Beam's DirectRunner, a Dask cluster
def test_every_executor_runs_the_chain_build_chain_made(tmp_path, monkeypatch, dask_cluster):
    from sciga.executors import beam_executor, dask_executor, in_process
    from sciga.transforms.common import stage_fn

    made: list[BuildChain] = []
    ran: dict[str, BuildChain] = {}
    wrapped: list = []

    def recording_build_chain(*a, **k):
        made.append(build_chain(*a, **k))
        return made[-1]

    def spy(name: str, real, at: int = 0):
        def run(*a, **k):
            ran[name] = a[at]  # the chain
            return real(*a, **k)

        return run

    real_init = stage_fn.StepDoFn.__init__

    def step_dofn_init(self, step):
        wrapped.append(step)
        real_init(self, step)

    monkeypatch.setattr(chain_module, "build_chain", recording_build_chain)
    monkeypatch.setattr(in_process, "run_in_process", spy("in_process", in_process.run_in_process))
    monkeypatch.setattr(beam_executor, "build_pipeline", spy("beam", beam_executor.build_pipeline, at=1))
    monkeypatch.setattr(dask_executor, "run_on_dask", spy("dask", dask_executor.run_on_dask))
    monkeypatch.setattr(stage_fn.StepDoFn, "__init__", step_dofn_init)

    outs = {}
    for name, extra in (
        ("in_process", ["--workers", "1"]),
        ("beam", ["--executor", "beam", "--workers", "1"]),
        ("dask", ["--executor", "dask", "--dask-address", dask_cluster.scheduler_address]),
    ):
        outs[name] = tmp_path / name
        r = _build("--sample", "--output", str(outs[name]), "--quiet", *extra)
        assert r.counts.papers == 4 and r.counts.reconciled, name
        assert r.manifest is not None and r.manifest.run["runner"] == {"beam": "DirectRunner"}.get(name, name)
    assert set(ran) == {"in_process", "beam", "dask"}
    for name, chain in ran.items():
        assert any(chain is m for m in made), f"the {name} executor ran a chain build_chain did not make"
    beam_chain = ran["beam"]
    # Beam ran every step of that object through the one adapter (the measure step in Vision).
    assert all(any(s is w for w in wrapped) for s in beam_chain.steps), [type(s).__name__ for s in beam_chain.steps]
    assert _digests(outs["in_process"]) == _digests(outs["beam"]) == _digests(outs["dask"])
