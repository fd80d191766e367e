"""The Dataflow path without a cloud: the job `sciga build --runner DataflowRunner` builds from
the options a user passes (setup file, worker image, GPU service options), on inputs and an
output in a real GCS API (fake-gcs-server on 127.0.0.1).

* ``--dry_run True --no_auth``: Beam's DataflowRunner builds the Runner v2 job (the portable
  pipeline proto, with the sdist that --setup_file makes) and submits nothing. The stages
  are the build's, every DoFn unpickles in a fresh process with Beam's pickler (as a
  Dataflow worker does), and the build reports the dry run instead of a summary of zero
  papers: nothing in OUT changes.
* ``--template_location gs://...``: the template and the staged artifacts (the sdist, the
  pipeline) are really written to the emulator; the job description in the template has
  Runner v2, the worker image, the GPU service option and the machine type.
* The worker image in docker/ agrees with setup.py (Beam version, Python, extras).
"""

from __future__ import annotations

import ast
import io
import json
import re
import subprocess
import sys
import tarfile

import pytest
from gcs_fixtures import gcs

from conftest import ROOT, sample_build_args

WORKER_IMAGE = "us-central1-docker.pkg.dev/sciga-test/sciga/worker:0.1.0"
GPU_OPTION = "worker_accelerator=type:nvidia-tesla-t4;count:1;install-nvidia-driver"
STAGES = [
    "Inputs",
    "NonEmpty",
    "Decode",
    "Spread",
    "Plan",
    "Parse",
    "RecoverFromTex",
    "Link",
    "Vision",
    "AllFailed",
    "AllReused",
    "Write",
]


def dataflow_flags(bucket: str, *extra: str) -> list[str]:
    """The Beam flags of the Dataflow command in docs/how-to/google-cloud.md."""
    return [
        "--runner",
        "DataflowRunner",
        "--project",
        "sciga-test",
        "--region",
        "us-central1",
        "--temp_location",
        f"gs://{bucket}/tmp",
        "--setup_file",
        str(ROOT / "setup.py"),
        "--sdk_container_image",
        WORKER_IMAGE,
        "--machine_type",
        "n1-standard-8",
        "--dataflow_service_options",
        GPU_OPTION,
        "--no_auth",
        *extra,
    ]


def snapshot(prefix: str) -> dict:
    """path -> md5 of every object under a gs:// prefix."""
    fs = gcs()
    return {p: fs.info(p)["md5Hash"] for p in fs.find(prefix.removeprefix("gs://"))}


# ------------------------------------------------------------------ the worker image


def _setup_requirements() -> tuple[list[str], dict]:
    tree = ast.parse((ROOT / "setup.py").read_text())
    found = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id in ("CORE", "EXTRAS")
        ):
            found[node.targets[0].id] = ast.literal_eval(node.value)
    return found["CORE"], found["EXTRAS"]


def test_worker_image_agrees_with_setup_py():
    import apache_beam
    from packaging.requirements import Requirement

    core, extras = _setup_requirements()
    text = (ROOT / "docker" / "dataflow-worker.Dockerfile").read_text()
    m = re.search(r"^FROM apache/beam_python(\d+\.\d+)_sdk:(\S+)$", text, re.M)
    assert m, "the worker image starts from Apache Beam's own SDK image"
    py, beam = m.groups()
    # The SDK in the image is the launcher's: the version setup.py allows, the one installed here.
    beam_specs = [Requirement(r).specifier for r in core + extras["dataflow"] if Requirement(r).name == "apache-beam"]
    assert beam_specs and all(s.contains(beam) for s in beam_specs), (beam, beam_specs)
    assert beam == apache_beam.__version__
    assert py == f"{sys.version_info.major}.{sys.version_info.minor}", "workers unpickle the launcher's code"
    # The package is installed with the cloud extras, from setup.py's own pins.
    (install,) = re.findall(r'pip install "\.\[([a-z,]+)\]"', text)
    assert {"dataflow", "vision"} <= set(install.split(",")) <= set(extras)
    for name in ("gcsfs", "build"):
        assert any(Requirement(r).name == name for r in extras["dataflow"]), f"{name} is in the dataflow extra"
    # Nothing pinned by hand that setup.py pins otherwise.
    pinned = dict(re.findall(r"\b([A-Za-z0-9_.\-]+)==([0-9][\w.]*)", text))
    reqs = {Requirement(r).name.lower(): Requirement(r).specifier for v in [core, *extras.values()] for r in v}
    for name, version in pinned.items():
        assert name.lower() not in reqs or reqs[name.lower()].contains(version), (name, version)
    # Every folder the package is made of is copied into the image, and none is ignored.
    # the package is sciga/ (the top-level folders are links into it): copying sciga copies it all
    top = sorted(p.name for p in ROOT.iterdir() if p.is_symlink() and str(p.readlink()).startswith("sciga/"))
    assert top
    copied = set(re.findall(r"^COPY (\S+) ", text, re.M))
    assert {"setup.py", "sciga"} <= copied | {"setup.py"} and "setup.py" in text
    ignored = (ROOT / "docker" / "dataflow-worker.Dockerfile.dockerignore").read_text().split()
    assert not set(ignored) & {"sciga", *top}


# ------------------------------------------------------------------ dry run


@pytest.fixture(scope="module")
def dry_run(gs_sample_inputs, gs_sample_build):
    """A dry run into the existing gs:// sample build, through the CLI (as a user runs it)."""
    from contextlib import redirect_stdout

    import sciga.pipelines.build as build_module
    from sciga.pipelines.cli import main

    before = snapshot(gs_sample_build)
    captured = []
    real = build_module.run_build
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, redirect_stdout(out):
        mp.setattr(build_module, "run_build", lambda *a: captured.append(real(*a)) or captured[-1])
        rc = main(
            [
                "build",
                *sample_build_args(gs_sample_inputs, gs_sample_build),
                *dataflow_flags("sciga-sample"),
                "--dry_run",
                "True",
            ]
        )
    return {
        "rc": rc,
        "stdout": out.getvalue(),
        "result": captured[0],
        "before": before,
        "after": snapshot(gs_sample_build),
        "out": gs_sample_build,
    }


@pytest.mark.e2e
def test_dry_run_is_reported_and_changes_nothing(dry_run):
    assert dry_run["rc"] == 0
    text = dry_run["stdout"]
    assert "dry run on DataflowRunner" in text and "not submitted" in text and "beamapp-" in text
    assert "papers" not in text and "reconciled" not in text, "no summary of zero papers"
    assert len(text.strip().splitlines()) == 1
    # Not finalized, nothing pruned, no staging left: the earlier build is exactly as it was.
    assert dry_run["after"] == dry_run["before"]
    outcome = dry_run["result"].outcome
    assert (outcome.kind, outcome.completed) == ("dry_run", False)


@pytest.mark.e2e
def test_dry_run_builds_the_build_stages_for_runner_v2(dry_run):
    from apache_beam.runners.dataflow.internal import apiclient

    job = dry_run["result"].outcome.job
    pp = job.proto_pipeline
    (root,) = pp.root_transform_ids
    assert [pp.components.transforms[t].unique_name for t in pp.components.transforms[root].subtransforms] == STAGES
    # The worker image the user named, with the sdist of --setup_file staged beside the pipeline.
    from apache_beam.portability.api import beam_runner_api_pb2 as rp

    (env,) = pp.components.environments.values()
    assert rp.DockerPayload.FromString(env.payload).container_image == WORKER_IMAGE
    staged = [rp.ArtifactStagingToRolePayload.FromString(d.role_payload).staged_name for d in env.dependencies]
    assert "workflow.tar.gz" in staged
    # The job description Dataflow would get: Runner v2, the GPU service option, the machine type.
    desc = apiclient.Environment(
        packages=[],
        options=job.options,
        environment_version="8",
        proto_pipeline_staged_url="gs://sciga-sample/tmp/pipeline.pb",
        proto_pipeline=pp,
    ).proto
    assert {"use_runner_v2", "use_unified_worker", "beam_fn_api"} <= set(desc.experiments)
    assert GPU_OPTION in list(desc.service_options)
    assert desc.worker_pools[0].machine_type == "n1-standard-8"
    assert "/sciga-sample/tmp/" in desc.temp_storage_prefix  # temporary files under --temp_location


@pytest.mark.e2e
def test_every_dofn_unpickles_in_a_fresh_process(dry_run, tmp_path):
    """What a Dataflow worker does with the job: read the pipeline proto and unpickle each
    DoFn and CombineFn with Beam's pickler (the library the options name), in a process that
    never saw the launcher (no test module, no __main__ state)."""
    from apache_beam.options.pipeline_options import SetupOptions

    job = dry_run["result"].outcome.job
    proto = tmp_path / "pipeline.pb"
    proto.write_bytes(job.proto_pipeline.SerializeToString())
    library = job.options.view_as(SetupOptions).pickle_library
    script = r"""
import sys
from apache_beam.internal import pickler
from apache_beam.portability import common_urns, python_urns
from apache_beam.portability.api import beam_runner_api_pb2 as rp

pickler.set_library(sys.argv[2])
p = rp.Pipeline.FromString(open(sys.argv[1], "rb").read())
combine = {common_urns.composites.COMBINE_PER_KEY.urn, common_urns.composites.COMBINE_GLOBALLY.urn}
n = 0
for t in p.components.transforms.values():
    if t.spec.urn == common_urns.primitives.PAR_DO.urn:
        fn = rp.ParDoPayload.FromString(t.spec.payload).do_fn
    elif t.spec.urn in combine:
        fn = rp.CombinePayload.FromString(t.spec.payload).combine_fn
    else:
        continue
    if fn.urn in (python_urns.PICKLED_DOFN_INFO, python_urns.PICKLED_COMBINE_FN):
        pickler.loads(fn.payload)
        n += 1
        print(t.unique_name)
print("unpickled", n)
"""
    import os

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    res = subprocess.run(
        [sys.executable, "-c", script, str(proto), library],
        cwd=str(tmp_path),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    names = res.stdout.splitlines()[:-1]
    # Every user function of the graph, counted here from the same proto.
    from apache_beam.portability import common_urns, python_urns
    from apache_beam.portability.api import beam_runner_api_pb2 as rp

    expected = set()
    for t in job.proto_pipeline.components.transforms.values():
        if t.spec.urn == common_urns.primitives.PAR_DO.urn:
            if rp.ParDoPayload.FromString(t.spec.payload).do_fn.urn == python_urns.PICKLED_DOFN_INFO:
                expected.add(t.unique_name)
    assert expected and expected <= set(names), sorted(expected - set(names))
    for stage in ("Plan/", "Parse/", "RecoverFromTex/", "Link/", "Vision/", "Write/"):
        assert any(name.startswith(stage) for name in names), stage


# ------------------------------------------------------------------ template


@pytest.mark.e2e
def test_template_is_staged_on_gcs_and_reported(gs_sample_inputs, capsys):
    from sciga.pipelines.cli import main

    fs = gcs()
    fs.mkdir("sciga-template")
    out = "gs://sciga-template/build"
    template = "gs://sciga-template/templates/sciga-sample"
    rc = main(
        [
            "build",
            *sample_build_args(gs_sample_inputs, out),
            *dataflow_flags("sciga-template"),
            "--template_location",
            template,
        ]
    )
    text = capsys.readouterr().out
    assert rc == 0
    assert f"wrote the template {template}" in text and "no job ran" in text and "papers " not in text
    # The job description in the template: Runner v2, the worker image, the GPU and machine type.
    job = json.loads(gcs().cat_file(template.removeprefix("gs://")))
    env = job["environment"]
    assert "use_runner_v2" in env["experiments"] and GPU_OPTION in env["serviceOptions"]
    assert env["workerPools"][0]["machineType"] == "n1-standard-8"
    assert [i["containerImage"] for i in env["workerPools"][0]["sdkHarnessContainerImages"]] == [WORKER_IMAGE]
    # The staged sdist (python -m build, from --setup_file) is there and carries the package's data.
    (sdist,) = [p for p in fs.find("sciga-template/tmp") if p.endswith("workflow.tar.gz")]
    with tarfile.open(fileobj=io.BytesIO(fs.cat_file(sdist))) as tf:
        names = tf.getnames()
    for needed in (
        "setup.py",
        "explore/sql/caption_context.sql",
        "samples/html/2511.99001/2511.99001.html",
        "transforms/common/storage.py",
    ):
        assert any(n.endswith("/" + needed) for n in names), needed
    # Nothing finalized: no shards, no manifest; the staging folder the template reads is kept.
    built = [p.removeprefix("sciga-template/build/") for p in fs.find("sciga-template/build")]
    assert not [p for p in built if not p.startswith(".staging/")]
    assert any(p.endswith("/inputs.jsonl") for p in built)


# ------------------------------------------------------------------ remote paths


def test_a_remote_runner_gets_no_local_path(tmp_path, capsys):
    from sciga.pipelines.cli import main

    with pytest.raises(SystemExit) as e:
        main(
            [
                "build",
                "--sample",
                "--output",
                "gs://sciga-sample/x",
                "--runner",
                "DataflowRunner",
                "--project",
                "p",
                "--region",
                "r",
                "--temp_location",
                "gs://sciga-sample/tmp",
            ]
        )
    msg = str(e.value)
    assert "--input" in msg and "is a local path" in msg and "workers cannot read" in msg and "\n" not in msg


def test_outcomes_of_jobs_the_runner_did_not_finish():
    """A job submitted without waiting, and one that stopped: said with the job id, never finalized."""
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.runners.runner import PipelineResult, PipelineState

    from sciga.executors.remote_run import run_outcome

    class Submitted(PipelineResult):
        def job_id(self):
            return "2026-11-23_04_05_06-1234567890"

    opts = PipelineOptions(["--project", "p", "--region", "europe-west4", "--no_wait_until_finish"])
    running = run_outcome(Submitted(PipelineState.RUNNING), opts, "DataflowRunner", staging="gs://b/o/.staging/r1")
    assert (running.kind, running.completed, running.failed) == ("running", False, False)
    msg = running.message("gs://b/o")
    assert "2026-11-23_04_05_06-1234567890" in msg and "europe-west4/2026-11-23_04_05_06-1234567890?project=p" in msg
    assert "without --no_wait_until_finish" in msg
    stopped = run_outcome(Submitted(PipelineState.CANCELLED), PipelineOptions([]), "DataflowRunner")
    assert (stopped.kind, stopped.completed, stopped.failed) == ("ended", False, True)
    assert "CANCELLED" in stopped.message("gs://b/o")
    done = run_outcome(PipelineResult(PipelineState.DONE), PipelineOptions([]), "DirectRunner")
    assert done.completed
