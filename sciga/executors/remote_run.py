"""`sciga build` on a remote runner (Dataflow): where its files may lie, and what the launcher
does when the runner did not run the job to completion.

* ``check_build_locations``: before anything is listed or written, every bucket the build
  reads or writes exists and may be listed (one sentence otherwise), and on a remote runner
  no path is local: a worker cannot see the launcher's disk, so OUT (with its result store,
  its staging folder ``OUT/.staging/<run>`` holding the input list and the staged GA
  manifest), the inputs, sidecars, TeX sources and the fetch cache must be on shared storage.
* ``run_outcome``: Beam reports a dry run (``--dry_run True``) and a template
  (``--template_location``) as state DONE, and a job submitted without waiting
  (``--no_wait_until_finish``) as RUNNING. None of them wrote shards, so the build must not
  read part files, finalize, prune the result store or print a summary of zero papers; it
  says what happened, with the job or template id, and what to run next.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

LOCAL_RUNNERS = (
    "DirectRunner",
    "BundleBasedDirectRunner",
    "SwitchingDirectRunner",
    "PortableRunner",
    "FnApiRunner",
    "PrismRunner",
)


def runner_of(beam_args: Optional[Sequence[str]]) -> str:
    """The runner the Beam flags name (DirectRunner when none)."""
    if not beam_args:
        return "DirectRunner"  # without importing Apache Beam (~3 s)
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

    name = PipelineOptions(list(beam_args or [])).view_as(StandardOptions).runner
    if not name:
        return "DirectRunner"
    return name if isinstance(name, str) else type(name).__name__


def check_build_locations(places: Sequence[tuple[str, str]], runner: str) -> None:
    """SystemExit with one sentence when a bucket is missing or forbidden, or when a remote
    runner's workers would be handed a local path. ``places``: (flag, path) of every place
    the build reads or writes, as given."""
    from sciga.transforms.common.storage import StorageError, check_location, is_remote

    if runner not in LOCAL_RUNNERS:
        local = [(flag, path) for flag, path in places if path and not is_remote(path)]
        if local:
            flag, path = local[0]
            raise SystemExit(
                f"sciga build: {flag} {path} is a local path, but {runner} workers cannot read the "
                "launcher's disk; put it on shared storage (e.g. gs://BUCKET/...) and pass that path."
            )
    seen = set()
    for flag, path in places:
        # arXiv's bulk bucket is requester-pays: a plain listing is refused; BulkEprints checks it.
        if not path or not is_remote(path) or flag == "--eprints-bulk":
            continue
        try:
            from sciga.transforms.common.storage import bucket_of

            key = bucket_of(path) or path
            if key in seen:
                continue
            seen.add(key)
            check_location(path)
        except StorageError as e:
            raise SystemExit(f"sciga build: {flag} {path}: {e}") from None


@dataclass(frozen=True)
class RunOutcome:
    """What the runner did with the job."""

    runner: str
    completed: bool  # the job ran to completion here: its part files are there to finalize
    kind: str  # "completed" | "dry_run" | "template" | "running" | "ended"
    state: str = "DONE"
    job_id: Optional[str] = None
    job_name: Optional[str] = None
    template: Optional[str] = None
    console_url: Optional[str] = None
    job: Any = None  # Beam's Dataflow Job (proto_pipeline: the Runner v2 job graph), when there is one
    staging: Optional[str] = None  # OUT/.staging/<run>: the input list (and GA manifest) the job reads
    finalizes_itself: bool = False  # --finalize-in-job: the job writes the shards, manifest and card

    @property
    def failed(self) -> bool:
        return self.kind == "ended"

    def message(self, out_dir: str) -> str:
        """What happened and what to do next, for the terminal."""
        flag = {"template": "--template_location", "running": "--no_wait_until_finish"}.get(self.kind, "")
        rerun = (
            f"run the same `sciga build` command again without {flag} to write the shards: it reuses every "
            "paper the job stored, so only the shard writing runs again"
        )
        if self.finalizes_itself:
            rerun = (
                "nothing is left to do: its last step moves the shards into place and writes manifest.json and the card"
            )
        if self.kind == "dry_run":
            n = len(self.job.proto_pipeline.components.transforms) if self.job is not None else 0
            name = f" {self.job_name}" if self.job_name else ""
            return (
                f"sciga build: dry run on {self.runner}: the job{name} was built ({n} transforms) and not "
                f"submitted; nothing was written to {out_dir}."
            )
        if self.kind == "template":
            return (
                f"sciga build: {self.runner} wrote the template {self.template}"
                f"{f' (job {self.job_name})' if self.job_name else ''}; no job ran, so {out_dir} has no new shards. "
                f"A launch of the template reads its input list from {self.staging or out_dir + '/.staging'}: keep "
                f"that folder, and after a launched job finished, {rerun}."
            )
        if self.kind == "running":
            where = f" ({self.console_url})" if self.console_url else ""
            return (
                f"sciga build: {self.runner} job {self.job_id or '(no id)'} was submitted and is {self.state}"
                f"{where}; no shards were written to {out_dir} yet. When the job has finished, {rerun}."
            )
        if self.kind == "ended":
            return (
                f"sciga build: {self.runner} job {self.job_id or ''} ended in state {self.state}; nothing was "
                f"written to {out_dir}. Stored results are kept: run the same command again to resume."
            )
        return f"sciga build: {self.runner} ran the job to completion."


def run_outcome(result, options, runner: str, staging: Optional[str] = None) -> RunOutcome:
    """Classify ``result`` (Beam's PipelineResult after the ``with Pipeline`` block);
    ``staging`` is the run's staging folder, which a template or a running job reads."""
    from apache_beam.options.pipeline_options import GoogleCloudOptions, StandardOptions, TestOptions
    from apache_beam.runners.runner import PipelineState

    job = getattr(result, "job", None)  # a dry run's result carries the job it built
    if getattr(options.view_as(TestOptions), "dry_run", False):
        return RunOutcome(runner, False, "dry_run", state="NOT_SUBMITTED", job=job, job_name=_job_name(job))
    gcp = options.view_as(GoogleCloudOptions)
    if gcp.template_location and runner not in LOCAL_RUNNERS:
        job = getattr(getattr(result, "_runner", None), "job", None)
        return RunOutcome(
            runner,
            False,
            "template",
            state="TEMPLATE",
            template=gcp.template_location,
            job_name=_job_name(job) or gcp.job_name,
            job=job,
            staging=staging,
        )
    state = str(result.state) if result is not None else "UNKNOWN"
    state = state.split(".")[-1]
    if state == PipelineState.DONE:
        return RunOutcome(runner, True, "completed", state=state)
    job_id = _job_id(result)
    console = None
    if job_id and runner.endswith("DataflowRunner"):
        console = f"https://console.cloud.google.com/dataflow/jobs/{gcp.region}/{job_id}?project={gcp.project}"
    no_wait = bool(options.view_as(StandardOptions).no_wait_until_finish)
    if no_wait or not PipelineState.is_terminal(state):
        return RunOutcome(runner, False, "running", state=state, job_id=job_id, console_url=console, staging=staging)
    return RunOutcome(runner, False, "ended", state=state, job_id=job_id, console_url=console)


def _job_id(result) -> Optional[str]:
    try:
        return result.job_id()
    except Exception:  # noqa: BLE001 - results without an id (local runners, templates)
        return None


def _job_name(job) -> Optional[str]:
    try:
        return job.proto.name or None
    except AttributeError:
        return None
