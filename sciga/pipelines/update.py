"""`sciga update OUT`: one command that takes a dataset from its last published version to
today.

    harvest   OAI-PMH, incremental: only records changed since the last harvest started
    select    the papers of the cache the saved corpus definition keeps (categories, first-
              version dates, venues); new ones, and ones with a new version since the build
    fetch     pages (and e-prints) of the new papers; those of new versions re-checked
    build     incremental, into OUT: unchanged papers are reused (pages are converted with
              LaTeXML when the build's flags say --html-from auto|latexml)
    validate  the quality gate; a failing build stops here
    publish   the next version (--bump patch|minor|major of the latest tag; v1.0.0 first),
              with the changelog against the latest version; nothing when nothing changed

The first run takes the corpus definition from its flags and saves it with the build as
``OUT/corpus.json``; later runs read it, so ``sciga update OUT`` is the whole monthly
command. Unknown flags of the first run are `sciga build`'s (and Apache Beam's) and are
saved with the definition; on later runs they apply to that run only.

Every step resumes after a kill: the harvest saves its progress per page, the fetch
journals every part, the build reuses every paper it finished, publishing reuses uploaded
files and finds a commit that lost its tag. Nothing else needs remembering: which papers
are new or revised follows from the cache and the build, and what to publish from the
Hub's tags. A rerun with nothing new builds nothing new and publishes nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import posixpath
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from sciga.transforms.fetch.endpoints import HttpOptions

if TYPE_CHECKING:
    from sciga.transforms.metadata.corpus_definition import CorpusDefinition

BUMPS = ("patch", "minor", "major")
DEFINITION_FLAGS = {  # CorpusDefinition field -> the flag that sets it
    "cache": "--cache",
    "selection": "--category / --from / --until",
    "venues": "--venue",
    "oai_url": "--oai-url",
    "oai_format": "--oai-format",
    "oai_set": "--set",
    "parts": "--parts",
    "arxiv_api_url": "--arxiv-api-url",
    "html_base_url": "--html-base-url",
    "eprint_base_url": "--eprint-base-url",
    "rate_limit": "--rate-limit",
    "repo_id": "--repo-id",
    "private": "--private",
}
RESERVED_BUILD_FLAGS = ("--output", "--input", "--ids", "--id-file", "--sample")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    from sciga.pipelines.sources_options import add_endpoint_arguments
    from sciga.pipelines.validate import add_gate_arguments

    ap.add_argument(
        "out", metavar="OUT", help="the build folder (local or gs://); its corpus.json holds the definition"
    )
    d = ap.add_argument_group("the corpus definition (first run; saved as OUT/corpus.json and read by later runs)")
    d.add_argument("--cache", default=None, metavar="DIR", help="the fetch cache: harvested metadata, pages, e-prints")
    d.add_argument(
        "--category",
        action="append",
        default=[],
        metavar="CAT",
        help="arXiv archive or category, repeatable or comma-separated (cs, cs.CV ...)",
    )
    d.add_argument("--from", dest="date_from", default=None, metavar="YYYY-MM-DD", help="first version on or after")
    d.add_argument("--until", dest="date_until", default=None, metavar="YYYY-MM-DD", help="first version on or before")
    d.add_argument(
        "--venue",
        action="append",
        default=[],
        metavar="VENUE",
        help="keep only papers whose comment names this accepted venue (CVPR, NeurIPS ...); repeatable",
    )
    d.add_argument(
        "--oai-url", default=None, metavar="URL", help="OAI-PMH base URL (default: SCIGA_OAI_URL, else arXiv's)"
    )
    d.add_argument("--oai-format", default=None, choices=("arXivRaw", "arXiv"), help="OAI-PMH metadataPrefix")
    d.add_argument("--set", dest="oai_set", default=None, metavar="SET", help="OAI-PMH set (default: from --category)")
    d.add_argument(
        "--parts", default=None, help="what to fetch per paper: comma list of meta, html, source (default all)"
    )
    d.add_argument("--repo-id", default=None, metavar="ORG/NAME", help="the Hub dataset repo the versions go to")
    d.add_argument("--private", action="store_true", default=None, help="create the repo private")
    add_endpoint_arguments(d)
    r = ap.add_argument_group("this run")
    r.add_argument(
        "--bump",
        choices=BUMPS,
        default="patch",
        help="which part of the latest version grows (default patch); the first version is v1.0.0",
    )
    r.add_argument(
        "--dry-run",
        action="store_true",
        help="harvest, fetch, build and validate, then show what would be published; upload nothing",
    )
    r.add_argument(
        "--endpoint",
        default=None,
        metavar="URL",
        help="Hub endpoint (default: the definition's, else HF_ENDPOINT or https://huggingface.co)",
    )
    r.add_argument("--no-progress", action="store_true", help="no progress bars or lines")
    add_gate_arguments(r)


# ------------------------------------------------------------------ typed options


@dataclass(frozen=True)
class UpdateOptions:
    out: str
    definition: CorpusDefinition
    bump: str = "patch"
    dry_run: bool = False
    hub_endpoint: Optional[str] = None
    run_build_args: tuple[str, ...] = ()  # this run's extra `sciga build` / Beam flags
    progress: bool = True
    http: HttpOptions = field(default_factory=HttpOptions)
    gate: dict = field(default_factory=dict)  # run_gate keyword arguments
    # The first run's definition, saved as OUT/corpus.json once its harvest succeeded: a first
    # run whose harvest failed (a wrong --oai-url, a typo in the selection the server refuses)
    # leaves nothing behind, so the corrected command is a first run again.
    unsaved_definition: bool = False


def _given_definition(args: argparse.Namespace) -> dict:
    """The definition fields the flags of this run set."""
    from sciga.transforms.common.errors import UserError
    from sciga.transforms.metadata.corpus_selection import Selection, SelectionError, parse_categories, parse_day

    given: dict = {}
    try:
        if args.category or args.date_from or args.date_until:
            given["selection"] = Selection(
                categories=parse_categories(args.category),
                date_from=parse_day(args.date_from, "--from") if args.date_from else None,
                date_until=parse_day(args.date_until, "--until", end=True) if args.date_until else None,
            )
    except SelectionError as e:
        raise UserError(str(e).rstrip(".") + ".") from None
    if args.cache:
        if "://" in args.cache:
            raise UserError(f"--cache {args.cache} must be a local folder (the fetch cache keeps a journal on disk).")
        given["cache"] = os.path.abspath(args.cache)
    if args.venue:
        given["venues"] = tuple(sorted({v.strip() for x in args.venue for v in x.split(",") if v.strip()}))
    if args.parts:
        given["parts"] = tuple(p.strip() for p in args.parts.split(",") if p.strip())
    for name in (
        "oai_url",
        "oai_format",
        "oai_set",
        "arxiv_api_url",
        "html_base_url",
        "eprint_base_url",
        "repo_id",
        "rate_limit",
        "private",
    ):
        value = getattr(args, name)
        if value is not None:
            given[name] = value
    return given


def definition_from_args(args: argparse.Namespace, rest: list[str]):
    """The saved definition (flags given again must agree with it), or on the first run the
    one the flags make (``run_update`` saves it once the harvest succeeded)."""
    from sciga.publish.hub import REPO_ID_RE
    from sciga.transforms.common.errors import UserError
    from sciga.transforms.metadata.corpus_definition import (
        CorpusDefinition,
        DefinitionError,
        definition_path,
        load_definition,
    )

    given = _given_definition(args)
    try:
        saved = load_definition(args.out)
    except DefinitionError as e:
        raise UserError(f"{e}; fix or remove that file and run again.") from None
    if saved is not None:
        for name, value in given.items():
            if getattr(saved, name) != value:
                raise UserError(
                    f"{definition_path(args.out)} already defines the corpus ({name} = "
                    f"{_show(getattr(saved, name))}); run `sciga update {args.out}` without "
                    f"{DEFINITION_FLAGS[name]}, or edit that file to change the definition."
                )
        return saved
    if "cache" not in given:
        raise UserError(
            f"{args.out} has no corpus definition yet ({definition_path(args.out)}); the first run needs "
            "--cache DIR and the selection (--category, --from, --until, --venue), --repo-id to publish."
        )
    if given.get("repo_id") and not REPO_ID_RE.match(given["repo_id"]):
        raise UserError(
            f"--repo-id {given['repo_id']!r} is not ORG/NAME; give the dataset repo as e.g. my-org/sciga-arxiv."
        )
    reserved = [a for a in rest if a.split("=", 1)[0] in RESERVED_BUILD_FLAGS]
    if reserved:
        raise UserError(
            f"{reserved[0]} is not a flag of `sciga update`: the build reads the papers the corpus "
            "definition selects and writes into OUT."
        )
    try:
        definition = CorpusDefinition(build_args=tuple(rest), **given)
    except DefinitionError as e:
        raise UserError(str(e)) from None
    return definition


def _show(value) -> str:
    if hasattr(value, "describe"):
        return value.describe()
    return ",".join(value) if isinstance(value, tuple) else str(value)


def options_from_args(args: argparse.Namespace, rest: Optional[list[str]]) -> UpdateOptions:
    from sciga.pipelines.sources_options import http_options_from_args

    rest = list(rest or [])
    first_run = _is_first_run(args.out)
    definition = definition_from_args(args, rest)
    gate = {
        "max_dead_letter_rate": args.max_dead_letter_rate,
        "max_missing_image_rate": args.max_missing_image_rate,
        "image_check": args.image_check,
        "max_pixels": args.max_image_pixels,
        "image_workers": args.image_workers,
    }
    return UpdateOptions(
        out=args.out.rstrip("/") or args.out,
        definition=definition,
        bump=args.bump,
        dry_run=args.dry_run,
        hub_endpoint=args.endpoint,
        progress=not args.no_progress,
        run_build_args=() if first_run else tuple(rest),
        http=http_options_from_args(args),
        gate=gate,
        unsaved_definition=first_run,
    )


def _is_first_run(out: str) -> bool:
    from sciga.transforms.metadata.corpus_definition import DefinitionError, load_definition

    try:
        return load_definition(out) is None
    except DefinitionError:
        return False


# ------------------------------------------------------------------ the steps


class Steps:
    """Prints one line per step (and keeps them for OUT/.sciga/update/last.json)."""

    def __init__(self, out: str, stream=None):
        self.out, self.stream, self.t0 = out, stream or sys.stdout, time.time()
        self.lines: list[str] = []

    def say(self, step: str, text: str) -> None:
        line = f"  {step:<9} {text}"
        self.lines.append(line)
        print(line, file=self.stream, flush=True)

    def save(self, outcome: str) -> None:
        import fsspec

        path = posixpath.join(self.out, ".sciga", "update", "last.json")
        fs, p = fsspec.core.url_to_fs(path)
        fs.makedirs(posixpath.dirname(p), exist_ok=True)
        with fs.open(p, "w") as f:
            json.dump(
                {
                    "outcome": outcome,
                    "steps": self.lines,
                    "seconds": round(time.time() - self.t0, 1),
                    "finished_unix": int(time.time()),
                },
                f,
                indent=1,
            )


def run_update(o: UpdateOptions, stream=None) -> int:
    """The six steps; the exit status (0 done or nothing to do, 1 a step failed, 130
    interrupted)."""
    from sciga.transforms.common.errors import UserError

    d = o.definition
    steps = Steps(o.out, stream)
    if not o.progress:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()  # the upload's bars
    print(f"sciga update {o.out}", file=steps.stream, flush=True)
    endpoint = o.hub_endpoint or d.hub_endpoint or os.environ.get("HF_ENDPOINT") or None
    if d.repo_id and not o.dry_run:
        from huggingface_hub import get_token

        if get_token() is None:
            raise UserError(
                f"no Hugging Face token found to publish to {d.repo_id}; set HF_TOKEN or run `hf auth login` "
                "(or give --dry-run), before anything is harvested or built."
            )
    code = _harvest(o, steps)
    if code is not None:
        if not o.unsaved_definition:  # a first run leaves no folder behind: it is a first run again
            steps.save("harvest stopped")
        return code
    if o.unsaved_definition:
        from sciga.transforms.metadata.corpus_definition import definition_path, save_definition

        save_definition(o.out, d)
        steps.say("define", f"saved the corpus definition to {definition_path(o.out)}")
    plan = _select(o, steps)
    code = _fetch(o, plan, steps)
    if code is not None:
        steps.save("fetch interrupted")
        return code
    code = _build(o, plan, steps)
    if code is not None:
        steps.save("build did not finish here")
        return code
    gate = _validate(o, steps)
    if not gate.success:
        steps.save("quality gate failed")
        return 1
    code = _publish(o, gate, endpoint, steps)
    steps.save("done" if code == 0 else "publish failed")
    return code


def _endpoints(d):
    from sciga.transforms.common.errors import UserError
    from sciga.transforms.fetch.endpoints import resolve_endpoints

    try:
        return resolve_endpoints(d.arxiv_api_url, d.html_base_url, d.eprint_base_url, d.rate_limit)
    except ValueError as e:
        raise UserError(str(e)) from None


def _harvest(o: UpdateOptions, steps: Steps) -> Optional[int]:
    from sciga.transforms.metadata.cache_sink import open_for_import
    from sciga.transforms.metadata.corpus_selection import oai_set_of
    from sciga.transforms.metadata.oai_pmh import DEFAULT_OAI_URL, OaiHarvester, OaiHarvestOptions

    d = o.definition
    url = d.oai_url or os.environ.get("SCIGA_OAI_URL") or DEFAULT_OAI_URL
    options = OaiHarvestOptions(
        url=url, metadata_prefix=d.oai_format, set_spec=d.oai_set or oai_set_of(d.selection), selection=d.selection
    )
    cache = open_for_import(d.cache)
    try:
        report = OaiHarvester(options, o.http.client(_endpoints(d)), cache).run()
    finally:
        cache.close()
    incremental = next((n for n in report.notes if n.startswith("incremental")), None)
    steps.say(
        "harvest",
        f"{url}: {report.read:,} records read, {report.selected:,} in the selection "
        f"({report.new:,} new, {report.updated:,} updated)" + (f"; {incremental}" if incremental else ""),
    )
    if report.interrupted:
        steps.say("harvest", "interrupted; run the same command again to resume")
        return 130
    if report.stopped:
        steps.say("harvest", f"stopped: {report.stopped}")
        return 1
    return None


def _select(o: UpdateOptions, steps: Steps):
    from sciga.explore.build_folder import built_papers
    from sciga.transforms.common.errors import UserError
    from sciga.transforms.metadata.corpus_definition import plan_fetch, selected_papers

    d = o.definition
    built, dead = built_papers(o.out)
    plan = plan_fetch(list(selected_papers(d)), built, dead)
    if not plan.selected:
        raise UserError(
            f"no paper in the cache {d.cache} matches the corpus definition ({d.selection.describe()}"
            + (f", venues {', '.join(d.venues)}" if d.venues else "")
            + "); check the selection in "
            f"{o.out}/corpus.json and the harvest above."
        )
    steps.say(
        "select",
        f"{len(plan.selected):,} papers in the corpus ({d.selection.describe()}"
        + (f"; venues {', '.join(d.venues)}" if d.venues else "")
        + f"); {len(plan.new):,} new to the "
        f"build, {len(plan.revised):,} with a new version",
    )
    return plan


def _fetch(o: UpdateOptions, plan, steps: Steps) -> Optional[int]:
    from sciga.transforms.fetch.job import FetchOptions, run_fetch_job

    d = o.definition
    todo = sorted(set(plan.new) | set(plan.revised))
    if not todo or d.parts == ("meta",):
        steps.say("fetch", "nothing to fetch")
        return None
    summary = run_fetch_job(
        FetchOptions(
            output=d.cache,
            endpoints=_endpoints(d),
            http=o.http,
            ids=tuple(todo),
            parts=d.parts,
            retry_failed=True,
            refresh_ids=frozenset(plan.revised),
            progress=o.progress,
        )
    )
    steps.say(
        "fetch",
        f"{len(todo):,} papers: parts fetched {summary.fetched:,}, already cached {summary.cached:,}, "
        f"failed {summary.failed:,} ({summary.requests:,} requests)",
    )
    for pid, part, error_type, _ in summary.failures[:5]:
        steps.say("", f"failed {pid} {part} [{error_type}]")
    if summary.interrupted:
        steps.say("fetch", "interrupted; run the same command again to resume")
        return 130
    return None


def build_run_options(o: UpdateOptions, plan):
    """The build of this update, as typed options (and what is left for Apache Beam): the
    selected papers' cache folders into OUT, with the build flags the corpus definition
    saved and this run's."""
    from sciga.pipelines.build import build_flags, build_options, check_build_paths
    from sciga.pipelines.flags import replace_flags
    from sciga.schemas.ids import safe_filename

    d = o.definition
    papers = os.path.join(d.cache, "papers")
    specs = [os.path.join(papers, safe_filename(pid)) for pid in plan.selected]
    specs = [s for s in specs if os.path.isdir(s)]
    flags, beam_args = build_flags([*d.build_args, *o.run_build_args], prog="sciga update (build)")
    check_build_paths(flags)
    flags = replace_flags(flags, output=o.out, input=specs, quiet=flags.run.quiet or not o.progress)
    if flags.licence.licences is None:  # not in the saved build flags nor this run's
        flags = replace_flags(flags, licences=default_update_policy(d))
    # One folder per paper, all in the cache's papers/: the shards' paths are said relative to
    # it (PAPER/PAPER.html.gz, as `sciga build --input CACHE/papers` says them), and a GA
    # manifest's paths may lie under it; not one root per paper (BuildOptions.input_root).
    return build_options(flags, input_root=papers), beam_args


def default_update_policy(d: CorpusDefinition) -> str:
    """The licence policy of an update whose build flags name none: ``redistributable`` when
    it publishes to a public repository (a weekly public update must not redistribute what
    only arXiv may), else ``all``."""
    return "redistributable" if d.repo_id and not d.private else "all"


def _build(o: UpdateOptions, plan, steps: Steps) -> Optional[int]:
    from sciga.executors.build import run_build
    from sciga.transforms.write.manifest import summary_text

    opts, beam_args = build_run_options(o, plan)
    result = run_build(opts, beam_args)
    if result.outcome is not None and not result.outcome.completed:
        steps.say("build", result.outcome.message(result.out_dir))
        steps.say("build", "the build has not finished here; run `sciga update` again once its job has ended")
        return 1 if result.outcome.failed else 0
    c = result.counts
    steps.say(
        "build",
        f"{c.papers:,} papers, {c.dead_letter:,} dead letters; reused {c.reused:,}, recomputed "
        f"{c.recomputed:,} ({result.seconds:.1f}s)",
    )
    if not c.reconciled:
        print(summary_text(c, result.out_dir, result.seconds), file=steps.stream)
    return None


def _validate(o: UpdateOptions, steps: Steps):
    from sciga.explore.build_folder import check_is_build
    from sciga.pipelines.validate import write_reports
    from sciga.quality.gate import run_gate
    from sciga.quality.report import summary_text

    check_is_build(o.out)
    gate = run_gate(o.out, **o.gate)
    paths = write_reports(gate, o.out, None)
    met = len(gate.checks) - len(gate.failed)
    steps.say("validate", f"{met} of {len(gate.checks)} expectations met; report {paths[0]}")
    if not gate.success:
        print(summary_text(gate), file=sys.stderr)
        steps.say(
            "validate",
            "the quality gate failed: nothing is published; fix the build (see the report) and run "
            "the same command again",
        )
    return gate


def _publish(o: UpdateOptions, gate, endpoint: Optional[str], steps: Steps) -> int:
    from sciga.publish.changelog import bump, changelog_against, latest_version
    from sciga.publish.hub import PublishError, publish, repo_tags

    d = o.definition
    if not d.repo_id:
        steps.say("publish", "no --repo-id in the corpus definition: built and validated, nothing to publish")
        return 0
    try:
        latest = latest_version(repo_tags(d.repo_id, endpoint))
        version = bump(latest, o.bump)
        changes = None
        if latest is not None:
            changes = changelog_against(o.out, d.repo_id, latest, version, endpoint)
            if changes.empty:
                steps.say("publish", f"nothing new since {latest}: nothing published")
                return 0
        result = publish(
            o.out,
            d.repo_id,
            version,
            dry_run=o.dry_run,
            private=d.private,
            endpoint=endpoint,
            gate_result=gate,
            changes=changes,
        )
    except PublishError as e:
        steps.say("publish", f"failed: {e}")
        return 1
    steps.say(
        "publish",
        f"{version}: {result.status}"
        + (f" (commit {result.commit})" if result.commit else "")
        + (f"; {result.changes}" if result.changes else "; the first version"),
    )
    for line in result.summary().splitlines()[1:]:
        print("           " + line.strip(), file=steps.stream)
    return 0


def run(args: argparse.Namespace, rest: Optional[list[str]] = None) -> int:
    return run_update(options_from_args(args, rest))
