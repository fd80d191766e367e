"""The Dataflow Flex Template of `sciga build` without a cloud: the template spec validates
against its JSON Schema (docker/flex-template/spec.schema.json, written from Google's
documented ContainerSpec), the launcher's entry point builds the same job graph as `sciga
build` (a Beam dry run against fake-gcs-server, as tests/executors/test_dataflow_job.py does), the
job's own finalization gives the same build as the launcher's, and the launcher image
agrees with setup.py."""

from __future__ import annotations

import io
import json
import re
import runpy
import shutil
import sys
from contextlib import redirect_stdout

import jsonschema
import pytest
from gcs_fixtures import gcs

from conftest import ROOT, sample_build_args

TEMPLATE = ROOT / "docker" / "flex-template"
LAUNCHER_IMAGE = "us-central1-docker.pkg.dev/sciga-test/sciga/launcher:0.1.0"
WORKER_IMAGE = "us-central1-docker.pkg.dev/sciga-test/sciga/worker:0.1.0"


def schema() -> dict:
    return json.loads((TEMPLATE / "spec.schema.json").read_text())


def metadata() -> dict:
    return json.loads((TEMPLATE / "metadata.json").read_text())


def test_the_spec_validates_against_its_schema_and_the_schema_has_teeth():
    from sciga.executors.flex_template import template_spec

    validator = jsonschema.Draft202012Validator(schema())
    jsonschema.Draft202012Validator.check_schema(schema())
    spec = template_spec(LAUNCHER_IMAGE, worker_image=WORKER_IMAGE, temp_location="gs://sciga-test/tmp")
    validator.validate(spec)
    assert spec["sdkInfo"]["language"] == "PYTHON" and spec["defaultEnvironment"]["sdkContainerImage"] == WORKER_IMAGE

    def errors(s: dict) -> list[str]:
        return [e.message for e in validator.iter_errors(s)]

    broken = json.loads(json.dumps(spec))
    broken["metadata"]["parameters"][0].pop("helpText")
    assert any("helpText" in e for e in errors(broken))
    broken = json.loads(json.dumps(spec))
    broken["metadata"]["parameters"][0]["paramType"] = "GCS_FOLDER"  # not a documented ParameterType
    assert errors(broken)
    broken = json.loads(json.dumps(spec))
    broken["defaultEnvironment"]["sdkContainerImages"] = WORKER_IMAGE  # a typo of a field name
    assert errors(broken)
    broken = json.loads(json.dumps(spec))
    next(p for p in broken["metadata"]["parameters"] if p.get("paramType") == "ENUM").pop("enumOptions")
    assert any("enumOptions" in e for e in errors(broken))
    assert errors({**spec, "sdkInfo": {"language": "RUST"}})


def test_parameters_are_build_flags_and_their_regexes_say_what_they_take():
    import argparse

    from sciga.pipelines.build import add_arguments

    ap = argparse.ArgumentParser()
    add_arguments(ap)
    flags = {s for a in ap._actions for s in a.option_strings}
    params = metadata()["parameters"]
    for p in params:
        if p["name"] != "build_flags":
            assert "--" + p["name"].replace("_", "-") in flags, p["name"]
        for rx in p.get("regexes", []):
            re.compile(rx)
        example = re.search(r"Example: (.+)$", p["helpText"])
        if example and p.get("regexes"):
            assert all(re.fullmatch(rx, example.group(1)) for rx in p["regexes"]), (p["name"], example.group(1))
        if p["name"] in ("input", "output", "metadata", "medical_weights"):
            assert not any(re.fullmatch(rx, "/home/me/build") for rx in p["regexes"]), "a local path is refused"
    assert {p["name"] for p in params if not p.get("isOptional")} == {"input", "output"}
    html_from = next(a for a in ap._actions if "--html-from" in a.option_strings)
    assert [o["value"] for o in next(p for p in params if p["name"] == "html_from")["enumOptions"]] == sorted(
        html_from.choices, key=["ar5iv", "auto", "latexml"].index
    )


def test_build_argv_maps_parameters_and_passes_beam_options_on():
    from sciga.executors.flex_template import build_argv

    argv = build_argv(
        [
            "--input=gs://b/pages,gs://b/more",
            "--output=gs://b/out",
            "--tex_input=gs://b/tex",
            "--html_from=auto",
            "--metadata=",
            "--build_flags=--no-tex --figures-per-shard 500",
            "--runner=DataflowRunner",
            "--project=p",
            "--region=us-central1",
            "--temp_location=gs://b/tmp",
            "--sdk_container_image=" + WORKER_IMAGE,
        ]
    )
    assert argv == [
        "--input",
        "gs://b/pages",
        "gs://b/more",
        "--output",
        "gs://b/out",
        "--tex-input",
        "gs://b/tex",
        "--html-from",
        "auto",
        "--no-tex",
        "--figures-per-shard",
        "500",
        "--finalize-in-job",
        "--runner=DataflowRunner",
        "--project=p",
        "--region=us-central1",
        "--temp_location=gs://b/tmp",
        "--sdk_container_image=" + WORKER_IMAGE,
        "--no_wait_until_finish",
    ]


# ------------------------------------------------------------------ the job graph


def _names(job) -> set[str]:
    return {t.unique_name for t in job.proto_pipeline.components.transforms.values()}


def _top(job) -> list[str]:
    pp = job.proto_pipeline
    (root,) = pp.root_transform_ids
    return [pp.components.transforms[t].unique_name for t in pp.components.transforms[root].subtransforms]


def _beam_flags(bucket: str) -> list[str]:
    return [
        "--runner",
        "DataflowRunner",
        "--project",
        "sciga-test",
        "--region",
        "us-central1",
        "--temp_location",
        f"gs://{bucket}/tmp",
        "--sdk_container_image",
        WORKER_IMAGE,
        "--no_auth",
    ]


@pytest.mark.e2e
def test_the_launcher_builds_the_same_job_graph_as_sciga_build(gs_sample_inputs):
    import sciga.pipelines.build as build_module
    from sciga.pipelines.cli import main

    gcs().mkdir("sciga-flex")
    out = "gs://sciga-flex/build"
    jobs = {}
    real = build_module.run_build

    def dry(name: str, call) -> None:
        captured = []
        with pytest.MonkeyPatch.context() as mp, redirect_stdout(io.StringIO()) as text:
            mp.setattr(build_module, "run_build", lambda *a: captured.append(real(*a)) or captured[-1])
            rc = call()
        outcome = captured[0].outcome
        assert rc in (0, None) and outcome.kind == "dry_run", (name, text.getvalue())
        jobs[name] = outcome.job

    # The launcher, as Dataflow runs it: the template's parameters as --name=value, its own options.
    params = [
        f"--input={gs_sample_inputs['html']}",
        f"--output={out}",
        f"--metadata={gs_sample_inputs['meta']}",
        f"--tex_input={gs_sample_inputs['tex']}",
        "--html_from=ar5iv",
        "--build_flags=--workers 1 --quiet",
    ]
    beam = [
        "--runner=DataflowRunner",
        "--project=sciga-test",
        "--region=us-central1",
        "--temp_location=gs://sciga-flex/tmp",
        f"--sdk_container_image={WORKER_IMAGE}",
        "--no_auth",
        "--dry_run=True",
    ]
    argv = params + beam

    def launch():
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(sys, "argv", [str(TEMPLATE / "launch.py"), *argv])
            try:
                runpy.run_path(str(TEMPLATE / "launch.py"), run_name="__main__")
            except SystemExit as e:
                return e.code
        return 0

    dry("launcher", launch)
    build = ["build", *sample_build_args(gs_sample_inputs, out), *_beam_flags("sciga-flex"), "--dry_run", "True"]
    dry("sciga build --finalize-in-job", lambda: main(build + ["--finalize-in-job", "--no_wait_until_finish"]))
    dry("sciga build", lambda: main(build))

    assert _names(jobs["launcher"]) == _names(jobs["sciga build --finalize-in-job"])
    extra = _names(jobs["launcher"]) - _names(jobs["sciga build"])
    assert extra and all(n.split("/")[0] in ("PartsWritten", "Finalize") for n in extra), sorted(extra)
    assert _names(jobs["sciga build"]) <= _names(jobs["launcher"])
    assert _top(jobs["launcher"]) == _top(jobs["sciga build"]) + ["PartsWritten", "Finalize"]
    from apache_beam.portability.api import beam_runner_api_pb2 as rp

    (env,) = jobs["launcher"].proto_pipeline.components.environments.values()
    assert rp.DockerPayload.FromString(env.payload).container_image == WORKER_IMAGE
    # Nothing was written by a dry run.
    assert not [p for p in gcs().find("sciga-flex/build") if not p.startswith("sciga-flex/build/.staging")]


@pytest.mark.e2e
def test_a_build_the_job_finalizes_equals_one_the_launcher_finalizes(sample_build, tmp_path):
    """--finalize-in-job, on the DirectRunner with two worker processes: the job's last step
    writes the same shards, card and manifest (all but the run's facts) as the launcher."""
    from sciga.pipelines.cli import main

    out = tmp_path / "build"
    with redirect_stdout(io.StringIO()) as text:
        rc = main(["build", "--sample", "--output", str(out), "--finalize-in-job", "--workers", "2", "--quiet"])
    assert rc == 0, text.getvalue()
    assert "papers                 4" in text.getvalue() and "reconciled" in text.getvalue()
    for p in sorted((sample_build / "data").rglob("*.parquet")):
        assert (out / p.relative_to(sample_build)).read_bytes() == p.read_bytes(), p.name
    assert (out / "README.md").read_bytes() == (sample_build / "README.md").read_bytes()
    a, b = (json.loads((d / "manifest.json").read_text()) for d in (sample_build, out))
    for m in (a, b):
        m.pop("run")
        m["options"].pop("workers", None)
    assert a == b
    assert not (out / ".staging").exists(), "the job removed its staging folder (and .staging, empty)"
    shutil.rmtree(out)


# ------------------------------------------------------------------ the launcher image


def test_the_launcher_image_agrees_with_setup_py_and_the_worker_image():
    text = (ROOT / "docker" / "flex-template.Dockerfile").read_text()
    worker = (ROOT / "docker" / "dataflow-worker.Dockerfile").read_text()
    m = re.search(r"^FROM gcr\.io/dataflow-templates-base/python(\d)(\d+)-template-launcher-base\S*$", text, re.M)
    assert m, "Google's Python Flex Template launcher base image"
    assert f"{m.group(1)}.{m.group(2)}" == f"{sys.version_info.major}.{sys.version_info.minor}"
    assert re.search(r"beam_python" + m.group(1) + r"\." + m.group(2) + r"_sdk", worker), "same Python as the workers"
    py_file = re.search(r"FLEX_TEMPLATE_PYTHON_PY_FILE=(\S+)", text).group(1)
    # launch.py finds metadata.json beside itself: both are copied into the work dir it runs from.
    assert py_file == "/template/launch.py" and re.search(r"^WORKDIR /template$", text, re.M)
    assert re.search(r"^COPY docker/flex-template/metadata\.json docker/flex-template/launch\.py \./$", text, re.M)
    assert "load_metadata('/template/metadata.json')" in text
    (install,) = re.findall(r'pip install "\.\[([a-z,]+)\]"', text)
    assert "dataflow" in install.split(",")
    # the package is sciga/ (the top-level folders are links into it): copying sciga copies it all
    top = sorted(p.name for p in ROOT.iterdir() if p.is_symlink() and str(p.readlink()).startswith("sciga/"))
    assert top
    copied = set(re.findall(r"^COPY (\S+) ", text, re.M))
    assert "sciga" in copied
    ignored = (ROOT / "docker" / "flex-template.Dockerfile.dockerignore").read_text().split()
    assert not set(ignored) & {"sciga", "docker", *top}
