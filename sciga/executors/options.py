"""A build's typed options (``BuildOptions``: what `sciga build`'s flags resolve to, or what
a caller such as `sciga update` or a notebook gives) and its result (``BuildResult``)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from sciga.transforms.write.shard_names import DEFAULT_ROWS_PER_SHARD

if TYPE_CHECKING:  # option types of the stages; imported where they are built (start-up time)
    from sciga.executors.remote_run import RunOutcome
    from sciga.schemas.manifest import BuildManifest
    from sciga.transforms.fetch.endpoints import Endpoints, HttpOptions
    from sciga.transforms.inputs.plan_step import PlanOptions
    from sciga.transforms.latexml.convert import LatexmlOptions
    from sciga.transforms.link.options import LinkOptions
    from sciga.transforms.parse.options import ParseOptions
    from sciga.transforms.tex_recovery.options import TexOptions
    from sciga.transforms.vision.options import ResolvedVision, VisionOptions
    from sciga.transforms.write.layout import ShardLayout
    from sciga.transforms.write.manifest import BuildCounts
    from sciga.transforms.write.steps import WriteOptions

# --executor: which executor runs the build. "auto": in this process (and processes forked
# from it) when nothing needs Beam, else Beam's runner.
EXECUTORS = ("auto", "in-process", "beam", "dask")


@dataclass(frozen=True)
class IdFetchOptions:
    """How ``sciga build --ids`` fetches its papers inside the pipeline (the polite client of
    ``sciga fetch``)."""

    store: str  # the fetch store (--fetch-cache, default OUTPUT/fetch_cache)
    endpoints: Endpoints
    http: HttpOptions
    workers: int = 1


@dataclass(frozen=True)
class BuildOptions:
    """Everything a build needs, resolved once (from the command line, or by a caller)."""

    output: str
    parse: ParseOptions
    tex: TexOptions
    link: LinkOptions
    vision: VisionOptions
    specs: tuple[str, ...] = ()
    fetch_ids: tuple[str, ...] = ()
    fetch: Optional[IdFetchOptions] = None  # how the --ids are fetched (set with fetch_ids)
    papers_per_shard: int = DEFAULT_ROWS_PER_SHARD["papers"]
    figures_per_shard: int = DEFAULT_ROWS_PER_SHARD["figures"]
    no_images: bool = False
    licences: str = "all"  # the licence policy (schemas/licences.py: POLICIES)
    assume_licence: Optional[str] = None  # the licence of a paper without one
    html_from: str = "ar5iv"  # ar5iv | latexml | auto (pages made from e-prints)
    eprints_bulk: Optional[str] = None  # arXiv's bulk source tars
    latexml: LatexmlOptions = field(default_factory=lambda: _default_latexml())
    workers: Optional[int] = None
    rebuild: bool = False
    relist_inputs: bool = False  # walk the input folders even where the last listing still holds
    quiet: bool = False
    verbose: bool = False
    progress_interval: float = 10.0
    finalize_in_job: bool = False
    executor: str = "auto"  # one of EXECUTORS
    dask_address: Optional[str] = None  # a running Dask scheduler (tcp://HOST:PORT); None: a local cluster
    recorded: dict = field(default_factory=dict)  # the options as given, for the manifest
    # The folder every input lies under when the specs are many folders below it (``sciga
    # update``: one folder per paper of its cache): the shards' paths are said relative to it
    # instead of to each spec. With one root per paper, every path was compared with every
    # root (hours at 145,000 papers) and every part's fingerprint named them all, so a new
    # paper made every part of the build be written again.
    input_root: Optional[str] = None
    # Every place the build reads or writes, as (flag, path) for messages: checked before
    # anything is listed or written (``remote_run.check_build_locations``).
    locations: tuple[tuple[str, str], ...] = ()

    def plan_options(
        self, *, store_root: str, fingerprint: str, progress_dir: Optional[str], hash_pages: bool = True
    ) -> PlanOptions:
        """The planner's options (``inputs/plan_step.py: PlanOptions``)."""
        from sciga.transforms.inputs.plan_step import PlanOptions

        return PlanOptions(
            store_root=store_root,
            fingerprint=fingerprint,
            rebuild=self.rebuild,
            max_page_bytes=self.parse.max_page_bytes,
            progress_dir=progress_dir,
            hash_pages=hash_pages,
        )

    def write_options(
        self,
        *,
        store_root: str,
        parts_root: str,
        layout: ShardLayout,
        progress_dir: Optional[str],
        previous_parts: Optional[str],
    ) -> WriteOptions:
        """The shard writer's options (``write/steps.py: WriteOptions``)."""
        from sciga.transforms.write.steps import WriteOptions

        return WriteOptions(
            store_root=store_root,
            parts_root=parts_root,
            layout=layout,
            no_images=self.no_images,
            max_image_bytes=self.vision.max_image_bytes,
            progress_dir=progress_dir,
            previous_parts=previous_parts,
            licences=self.licences,
            assume_licence=self.assume_licence,
            published_roots=self.published_roots(),
        )

    def published_roots(self) -> tuple[str, ...]:
        """The folders the build reads inputs from, which the shards' paths are said
        relative to (``write/published_uri.py``): the --input specs' folders (--sample's
        too), --metadata, --tex-input, the --ga-manifest file's folder and the GA roots, the --ids fetch store and --eprints-bulk."""
        from sciga.transforms.write.published_uri import normalize_roots, spec_root

        ga_manifest = self.vision.ga_manifest
        return normalize_roots(
            [
                *((self.input_root,) if self.input_root else (spec_root(s) for s in self.specs)),
                self.parse.metadata_dir,
                *self.tex.tex_dirs,
                spec_root(ga_manifest) if ga_manifest else None,
                *self.vision.ga_roots,
                self.fetch.store if self.fetch else None,
                self.eprints_bulk,
            ]
        )


def _default_latexml() -> LatexmlOptions:
    from sciga.transforms.latexml.convert import LatexmlOptions

    return LatexmlOptions()


def results_fingerprint(opts: BuildOptions, vision: ResolvedVision) -> str:
    """What, besides a paper's own inputs, its result depends on: the code and every option
    that changes results (not: workers, shard sizes, progress, the executor...)."""
    from sciga.transforms.common.result_store import code_fingerprint

    blob = json.dumps(
        {
            "code": code_fingerprint(),
            "parse": dataclasses.asdict(opts.parse),
            "tex": dataclasses.asdict(opts.tex),
            "link": dataclasses.asdict(opts.link),
            "vision": vision.fingerprint_fields(),
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


@dataclass
class BuildResult:
    out_dir: str
    counts: BuildCounts
    manifest: Optional[BuildManifest]
    seconds: float
    # Set when the runner did not run the job to completion here (dry run, template, a job
    # submitted without waiting): nothing was finalized, ``counts`` are empty.
    outcome: Optional[RunOutcome] = None
    up_to_date: bool = False  # nothing had changed since the last build: nothing was written
