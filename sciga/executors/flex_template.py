"""`sciga build` as a Dataflow Flex Template: the launcher's entry point and the template spec.

Dataflow starts the launcher image (``docker/flex-template.Dockerfile``), which runs
``docker/flex-template/launch.py`` with the template's parameters as ``--name=value`` (the
ones ``docker/flex-template/metadata.json`` declares) and Dataflow's own options
(``--runner``, ``--project``, ``--region``, ``--temp_location``, ``--sdk_container_image``
...). ``build_argv`` turns the parameters into the `sciga build` command line (``tex_input``
-> ``--tex-input``, ``build_flags`` split as a shell would), passes every other option to
Apache Beam unchanged, and adds two things a template needs: ``--finalize-in-job`` (the
launcher exits once the job is submitted, so the job itself writes the shards, manifest and
card when its last part is written) and ``--no_wait_until_finish`` (a Flex Template launcher
must not wait for its job). The job graph is then exactly `sciga build`'s with those flags.

``template_spec`` is the spec file ``gcloud dataflow flex-template build`` writes from the
metadata (image, SDK, metadata, default environment); ``docker/flex-template/spec.schema.json``
is its JSON Schema, written from Google's documented ``ContainerSpec`` (Dataflow API v1b3).
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Sequence
from typing import Optional

TEMPLATE_DIR = os.path.join("docker", "flex-template")
LIST_PARAMETERS = ("input", "tex_input")  # comma-separated: several --input / --tex-input values


def load_metadata(path: Optional[str] = None) -> dict:
    """The template's metadata: ``path``, else ``docker/flex-template/metadata.json`` of the
    checkout (the launcher image keeps it beside ``launch.py``, which passes its path)."""
    if path is None:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # sciga/executors/..
        path = os.path.join(root, TEMPLATE_DIR, "metadata.json")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _split(argv: Sequence[str]) -> list[tuple[str, Optional[str]]]:
    """``--name=value`` / ``--name value`` / ``--flag`` -> (name, value or None)."""
    out, i, argv = [], 0, list(argv)
    while i < len(argv):
        a = argv[i]
        if not a.startswith("--"):
            raise SystemExit(f"sciga flex template: unexpected argument {a!r}; parameters are --name=value.")
        if "=" in a:
            name, value = a[2:].split("=", 1)
        elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            name, value = a[2:], argv[i + 1]
            i += 1
        else:
            name, value = a[2:], None
        out.append((name, value))
        i += 1
    return out


def build_argv(argv: Sequence[str], metadata: Optional[dict] = None) -> list[str]:
    """The `sciga build` command line (build flags, then Beam's) for the launcher's argv."""
    names = {p["name"] for p in (metadata or load_metadata())["parameters"]}
    build: list[str] = []
    beam: list[str] = []
    for name, value in _split(argv):
        if name not in names:
            beam.append(f"--{name}" if value is None else f"--{name}={value}")
            continue
        if value is None or value == "":
            continue  # an optional parameter left empty
        if name == "build_flags":
            build += shlex.split(value)
        elif name in LIST_PARAMETERS:
            flag = "--" + name.replace("_", "-")
            build += [flag, *[v.strip() for v in value.split(",") if v.strip()]]
        else:
            build += ["--" + name.replace("_", "-"), value]
    if "--finalize-in-job" not in build:
        build.append("--finalize-in-job")
    if not any(a.split("=", 1)[0] == "--no_wait_until_finish" for a in beam):
        beam.append("--no_wait_until_finish")
    return build + beam


def template_spec(
    image: str,
    metadata: Optional[dict] = None,
    *,
    worker_image: Optional[str] = None,
    temp_location: Optional[str] = None,
) -> dict:
    """The Flex Template spec file (what ``gcloud dataflow flex-template build`` writes):
    the launcher image, the Python SDK, the metadata, and default environment values."""
    import apache_beam

    env = {}
    if worker_image:
        env["sdkContainerImage"] = worker_image  # the workers run the worker image (docker/dataflow-worker)
    if temp_location:
        env["tempLocation"] = temp_location
    spec = {
        "image": image,
        "sdkInfo": {"language": "PYTHON", "version": apache_beam.__version__},
        "metadata": metadata or load_metadata(),
    }
    if env:
        spec["defaultEnvironment"] = env
    return spec
