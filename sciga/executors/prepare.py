"""What every executor needs before it runs the chain: the inputs listed (and their pages
hashed where the last build's record no longer vouches for them), the output folder locked,
the vision options resolved, the results' fingerprint, the shard layout, and whether the
build in OUT is already what this one would write (``PreparedBuild``); and what every
executor does after it: the pages' hashes recorded for the next build."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import posixpath
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

import fsspec

from sciga.executors.finalize import Finalize
from sciga.executors.options import BuildOptions, BuildResult, results_fingerprint
from sciga.transforms.inputs.listing_record import LISTING
from sciga.transforms.write import manifest as mf

if TYPE_CHECKING:
    from sciga.schemas.manifest import BuildManifest
    from sciga.transforms.vision.options import ResolvedVision
    from sciga.transforms.write.layout import ShardLayout

log = logging.getLogger("sciga.build")


@dataclass
class PreparedBuild:
    """A build ready for an executor: its inputs, layout, fingerprint and what finalizing
    it takes (``fin``, whose ``run`` the executor completes)."""

    opts: BuildOptions
    inputs: list[str]
    hashes: Any  # inputs/page_index.PageHashes of local pages, None for the others
    vision: ResolvedVision
    layout: ShardLayout
    fingerprint: str
    signature: str
    fin: Finalize
    to_compute: int  # inputs the build will probably compute (sizes the worker count)
    workers_hash: bool  # the pages were not hashed here: the workers hash what they read
    started: float

    @property
    def out_dir(self) -> str:
        return self.fin.out_dir

    def input_lines(self) -> list[str]:
        """The inputs as lines of the input list, largest pages first."""
        from sciga.transforms.inputs.build_inputs import input_list_lines, largest_first

        h = self.hashes
        sizes = {u: st.size for u, st in h.stats.items()} if h is not None else {}
        return list(input_list_lines(largest_first(self.inputs, sizes), h.sha256 if h is not None else None))

    def previous_parts(self) -> Optional[str]:
        """The previous build's shards by part fingerprint, staged for the part writers."""
        if self.opts.rebuild:
            return None
        from sciga.transforms.write.finalize import previous_parts

        prev = previous_parts(self.out_dir)
        if not prev:
            return None
        return _write_staged(self.fin.staging, "previous_parts.json", json.dumps(prev, sort_keys=True))

    def finished(
        self, counts: mf.BuildCounts, manifest: BuildManifest, page_sha256: Optional[dict] = None
    ) -> BuildResult:
        """The result of a build finalized here; the pages' hashes recorded for the next
        build (``page_sha256``: the hashes the workers made, when the pages were not hashed
        here)."""
        if self.workers_hash and self.hashes is not None and page_sha256 is not None:
            self.hashes.fill(page_sha256, self.opts.parse.max_page_bytes)
        record_pages(self.fin.store_root, self.hashes, self.signature, self.fingerprint)
        return BuildResult(out_dir=self.out_dir, counts=counts, manifest=manifest, seconds=time.time() - self.started)


def _write_staged(staging: str, name: str, text: str) -> str:
    path = posixpath.join(staging, name)
    fs, p = fsspec.core.url_to_fs(path)
    fs.makedirs(posixpath.dirname(p), exist_ok=True)
    with fs.open(p, "w") as f:
        f.write(text)
    return path


def list_inputs(opts: BuildOptions, record: Optional[dict] = None) -> tuple[list[str], Optional[dict]]:
    """The build's inputs: the ids to fetch, or the pages its specs name; one sentence when
    there are none. And what the next build needs to reuse this listing (None where it
    cannot): ``record``, the last build's page index, may hold a listing that is still true
    (``inputs/listing_record.py``), which is then used, and carried over, instead of walking
    the input folders."""
    from sciga.transforms.inputs.build_inputs import build_input_listing, output_inside_inputs, warn_without_page
    from sciga.transforms.inputs.listing_record import folder_stamps, listing_record, recorded_listing
    from sciga.transforms.inputs.page_index import recorded_uris

    if opts.fetch_ids:
        return list(opts.fetch_ids), None
    if not opts.specs:
        raise SystemExit("sciga build: give --input PATH_OR_GLOB, --ids ID ... (or --sample for the embedded corpus).")
    around = output_inside_inputs(opts.specs, opts.output)
    if around:
        log.warning(
            "the output folder %s lies inside the input %s: its files (shards, browse pages, reports) are "
            "skipped, never read as inputs",
            opts.output,
            around[0],
        )
    recordable = not around and opts.html_from == "ar5iv"
    if recordable and record and not opts.relist_inputs:
        reused = recorded_listing(record.get(LISTING), opts.specs, recorded_uris(record))
        if reused is not None:
            warn_without_page(reused)
            return reused.inputs, record[LISTING]
    stamps = folder_stamps(opts.specs) if recordable else None  # before listing: a page added after moves a stamp
    listing = build_input_listing(opts.specs, opts.html_from, exclude=opts.output if around else None)
    if not listing.inputs:
        raise SystemExit(
            f"sciga build: no .html or .html.gz pages found in {', '.join(opts.specs)}; check the path"
            + (
                " (or give --html-from auto to convert the e-prints of papers with metadata)."
                if opts.html_from == "ar5iv"
                else "."
            )
        )
    return listing.inputs, listing_record(opts.specs, stamps, listing)


def lock_output(out_dir: str, held: contextlib.ExitStack) -> str:
    """Take OUT's lock for the rest of the build (a second build into OUT is refused, saying
    who holds it), clean what killed runs left, and return this run's staging folder."""
    from sciga.executors.local_run import clean_stale_staging
    from sciga.transforms.write.output_lock import OutputLock

    fs, out_root = fsspec.core.url_to_fs(out_dir)
    fs.makedirs(out_root, exist_ok=True)
    run_id = uuid.uuid4().hex
    held.enter_context(OutputLock(out_dir, run_id))
    held.push(_on_failure(out_dir))
    clean_stale_staging(out_dir, run_id)
    return posixpath.join(out_dir, ".staging", run_id)


def _on_failure(out_dir: str):
    """Exit callback for the build's stack: a full disk becomes one sentence (measured before
    anything is cleaned up), Ctrl-C stays Ctrl-C, and this run's staging folder goes."""
    from sciga.executors.local_run import clean_stale_staging, disk_full_sentence, no_space_left, was_interrupted
    from sciga.transforms.common.errors import UserError

    def callback(exc_type, exc, tb):
        if exc is None or isinstance(exc, (UserError, SystemExit)):
            return False
        clean = clean_stale_staging if "://" not in out_dir else None
        try:
            if no_space_left(exc):
                raise UserError(disk_full_sentence(out_dir)) from None
            if was_interrupted(exc) and not isinstance(exc, KeyboardInterrupt):
                raise KeyboardInterrupt from None
        finally:
            if clean is not None:
                try:
                    clean(out_dir, None)  # this run's parts are of no use; the results are in the store
                except OSError:
                    pass
        return False

    return callback


def resolve_vision_options(opts: BuildOptions, staging: str) -> ResolvedVision:
    from sciga.executors.local_run import notices_off
    from sciga.transforms.vision.options import VisionConfigError, resolve_vision

    try:
        with notices_off(opts.quiet):  # --quiet: no notice about options
            return resolve_vision(opts.vision, staging)
    except VisionConfigError as e:
        raise SystemExit(f"sciga build: {e}") from None


def prepare_build(
    opts: BuildOptions, beam_args: Optional[Sequence[str]], held: contextlib.ExitStack
) -> PreparedBuild | BuildResult:
    """The build ready for an executor, holding OUT's lock in ``held``; or, when OUT already
    holds what it would write, the result of a build that wrote nothing."""
    from sciga.executors.choice import without_beam
    from sciga.transforms.common.result_store import store_root
    from sciga.transforms.inputs.page_index import load_record, page_hashes, record_identity
    from sciga.transforms.inputs.pages import input_list_hash
    from sciga.transforms.write.layout import layout_for
    from sciga.transforms.write.up_to_date import build_signature, up_to_date_manifest

    t0 = time.time()
    out_dir = opts.output.rstrip("/") or opts.output
    sroot = store_root(out_dir)
    # The last build's record (``inputs/page_index.py``; --rebuild ignores it), read before
    # OUT is locked, since the listing may come from it, and read again once OUT is locked
    # if another build replaced it meanwhile.
    reads_record = not opts.fetch_ids and opts.html_from == "ar5iv"
    uses_record = reads_record and not opts.rebuild
    seen = record_identity(sroot) if uses_record else None
    record = load_record(sroot) if seen is not None else {}
    inputs, listing = list_inputs(opts, record)
    staging = lock_output(out_dir, held)
    if uses_record and record_identity(sroot) != seen:
        record = load_record(sroot)
    vision = resolve_vision_options(opts, staging)
    fingerprint = results_fingerprint(opts, vision)
    layout = layout_for(len(inputs), opts.papers_per_shard, opts.figures_per_shard)
    # The pages' SHA-256s, read again only where a page's size or mtime moved since the last
    # build (local pages; the pipeline plans the others). A build without Beam whose store
    # holds no result leaves them to its workers, which hash each page as they read it:
    # with nothing to reuse, the launcher's reading every page first only delays them.
    workers_hash = without_beam(opts, vision, beam_args) and not _holds_results(sroot)
    hashes = (
        page_hashes(
            inputs,
            sroot,
            opts.parse.max_page_bytes,
            use_record=not opts.rebuild,
            hash_now=not workers_hash,
            record=record,
        )
        if reads_record
        else None
    )
    if hashes is not None:
        hashes.listing = listing
    inputs_hash = input_list_hash(inputs, {u: st.size for u, st in hashes.stats.items()} if hashes else None)
    signature = build_signature(fingerprint, inputs, layout, opts.recorded)
    if (
        not opts.rebuild
        and not beam_args  # the default local runner, nothing for Beam to check
        and not opts.eprints_bulk
        and not opts.finalize_in_job
        and not vision.ga_entries_uri
    ):
        manifest = up_to_date_manifest(out_dir, sroot, inputs, hashes, fingerprint, signature, inputs_hash)
        if manifest is not None:
            if listing is not None and record.get(LISTING) != listing:
                _record_listing(sroot, record, listing)
            return _nothing_to_do(out_dir, staging, manifest, len(inputs), t0)
    if hashes is not None:
        hashes.set_aside_record_results()  # not needed until the build records its pages
    fin = Finalize(
        out_dir=out_dir,
        staging=staging,
        parts_root=posixpath.join(staging, "parts"),
        store_root=sroot,
        n_inputs=len(inputs),
        inputs_hash=inputs_hash,
        recorded=opts.recorded,
        ga_entries_uri=vision.ga_entries_uri,
        run={"started_unix": t0},  # the runner and its workers: the executor's
    )
    to_compute = _inputs_to_compute(inputs, hashes, signature, opts.rebuild)
    if to_compute:
        from sciga.executors.local_run import notices_off
        from sciga.transforms.vision.options import warn_keywords_only

        with notices_off(opts.quiet):  # --quiet: no notice about options
            warn_keywords_only(opts.vision)
    _unclaim_pages(sroot)
    return PreparedBuild(
        opts, inputs, hashes, vision, layout, fingerprint, signature, fin, to_compute, workers_hash, t0
    )


def _record_listing(sroot: str, record: dict, listing: dict) -> None:
    """A build with nothing to do adds its listing to a record that lacks it (one made
    before records held listings), so that the next one need not walk the inputs."""
    from sciga.transforms.inputs.page_index import save_record

    try:
        save_record(sroot, {**record, LISTING: listing})
    except OSError as e:  # the next build lists its inputs again
        log.warning("could not record the input listing in %s: %s", sroot, e)


def _holds_results(sroot: str) -> bool:
    """Whether the result store has any result (a local one; another may, as far as known)."""
    from sciga.transforms.common.input_files import is_local, local_path
    from sciga.transforms.common.result_store import RESULTS

    if not is_local(sroot):
        return True
    try:
        with os.scandir(os.path.join(local_path(sroot), RESULTS)) as entries:
            return any(True for _ in entries)
    except OSError:  # no folder: a new output
        return False


def _inputs_to_compute(inputs: Sequence[str], hashes, signature: str, rebuild: bool) -> int:
    """How many inputs the build will probably compute: with the same build signature as
    the last build, only the pages that changed since (an image that changed is not seen
    here; this only sizes the default number of worker processes, whose start-up costs
    more than a few papers do)."""
    if rebuild or hashes is None or hashes.record_signature != signature:
        return len(inputs)
    return len(inputs) - hashes.unchanged


def _unclaim_pages(sroot: str) -> None:
    """Before any result is stored: the last build's record no longer vouches for OUT
    (``page_index.unclaim_page_index``); where it cannot be rewritten (a full disk), it goes."""
    from sciga.transforms.inputs.page_index import forget_page_index, unclaim_page_index

    try:
        unclaim_page_index(sroot)
    except OSError:
        forget_page_index(sroot)  # unlinking needs no space; the next build hashes its pages again


def record_pages(sroot: str, hashes, signature: str, fingerprint: Optional[str] = None) -> None:
    """What the next build needs to know that nothing changed (``inputs/page_index.py``),
    with the vouches for the pages' results when the results' ``fingerprint`` is given
    (``write/up_to_date.result_vouches``), written as they are made."""
    from sciga.transforms.inputs.page_index import forget_page_index, save_page_index
    from sciga.transforms.write.up_to_date import result_vouches

    try:
        if hashes is not None:
            results = (
                result_vouches(sroot, hashes.sha256, fingerprint, hashes.previous_record_results(sroot))
                if fingerprint is not None
                else None
            )
            save_page_index(sroot, hashes, signature, results)
        else:
            forget_page_index(sroot)
    except OSError as e:  # the build is done; the next one hashes its pages again
        log.warning("could not record the pages' hashes in %s: %s", sroot, e)


def _nothing_to_do(out_dir: str, staging: str, manifest: BuildManifest, n_inputs: int, t0: float) -> BuildResult:
    """The build in OUT is what this build would write: leave it as it is."""
    from sciga.executors.local_run import remove_if_empty

    fs, path = fsspec.core.url_to_fs(staging)
    if fs.exists(path):  # resolving the options may have staged a file (none is needed now)
        fs.rm(path, recursive=True)
        remove_if_empty(fs, posixpath.dirname(path.rstrip("/")))
    counts = mf.counts_from_manifest(manifest)
    counts.reused, counts.recomputed = n_inputs, 0
    return BuildResult(out_dir=out_dir, counts=counts, manifest=manifest, seconds=time.time() - t0, up_to_date=True)
