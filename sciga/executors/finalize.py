"""Finalizing a build, whichever executor ran it: the written parts become ``OUT/data``, the
result store is pruned, ``manifest.json`` and the dataset card are written."""

from __future__ import annotations

import logging
import posixpath
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

import fsspec

from sciga.transforms.write import manifest as mf

if TYPE_CHECKING:
    from sciga.schemas.manifest import BuildManifest

log = logging.getLogger("sciga.build")


@dataclass(frozen=True)
class Finalize:
    """What turning the written parts into the build needs: picklable, so that it runs in
    the launcher after the job, or as the job's last step (``--finalize-in-job``)."""

    out_dir: str
    staging: str  # OUT/.staging/<run>, removed at the end
    parts_root: str
    store_root: str
    n_inputs: int
    inputs_hash: str
    recorded: dict
    ga_entries_uri: Optional[str] = None
    run: dict[str, Any] = field(default_factory=dict)  # runner, workers, started_unix


# What finalize_build imports that a build has not imported before it (the dataset card's
# statistics, and pandas under them): a local build with forked workers imports them before
# forking (in_process.import_before_forking).
FINALIZE_MODULES = (
    "sciga.transforms.write.finalize",
    "sciga.explore.dataset_card",
    "sciga.explore.card_stats",
    "sciga.explore.stats",
    "sciga.explore.views",
    "pandas",
)


def finalize_build(f: Finalize) -> tuple[mf.BuildCounts, BuildManifest]:
    """Move the parts into ``OUT/data``, prune the result store, write manifest.json and the
    dataset card; remove the run's staging folder. Returns the counts and the manifest."""
    from sciga.executors.local_run import remove_if_empty
    from sciga.explore.dataset_card import write_dataset_card
    from sciga.transforms.common.interrupts import raise_if_received
    from sciga.transforms.common.result_store import ResultStore
    from sciga.transforms.write.finalize import (
        commit_generation,
        finalize_parts,
        generation_data,
        live_keys,
        manifest_target,
        mark_finalizing,
        read_part_infos,
        write_shard_members,
    )

    raise_if_received()  # nothing is finalized after a Ctrl-C, even one a finalizer swallowed
    infos = read_part_infos(f.parts_root)
    mark_finalizing(f.out_dir, True)
    # A local build assembles its shards and manifest as the next generation and commits
    # them with one atomic exchange (``write/finalize.py``): a reader sees old or new, whole.
    files = finalize_parts(f.out_dir, infos, generation_data(f.out_dir))
    write_shard_members(f.out_dir, infos)
    counts = mf.counts_from_parts(infos)
    counts.inputs = f.n_inputs
    pruned = ResultStore(f.store_root).prune(live_keys(infos))
    run = dict(f.run)
    started = run.pop("started_unix", None)
    if started is not None:
        run["seconds"] = round(time.time() - started, 3)
    run.update(
        finished_unix=int(time.time()),
        results_pruned=pruned,
        shard_parts_written=sum(1 for i in infos if i.path and not i.reused),
        shard_parts_reused=sum(1 for i in infos if i.reused),
        shard_row_groups_taken=sum(i.row_groups_taken for i in infos),
    )
    manifest = mf.write_manifest(
        manifest_target(f.out_dir), counts, files, f.inputs_hash, f.recorded, run=dict(sorted(run.items()))
    )
    card_committed = _card_into_generation(f.out_dir)  # the card's split sizes are the new shards'
    commit_generation(f.out_dir)
    mark_finalizing(f.out_dir, False)  # the manifest describes the shards again
    if f.ga_entries_uri:
        _warn_unmatched_ga(f.ga_entries_uri, f.out_dir)
    fs, staging = fsspec.core.url_to_fs(f.staging)
    if fs.exists(staging):
        fs.rm(staging, recursive=True)
    remove_if_empty(fs, posixpath.dirname(staging.rstrip("/")))
    if not card_committed:
        write_dataset_card(f.out_dir)  # README.md with configs and features: the folder loads with `datasets`
    return counts, manifest


def _card_into_generation(out_dir: str) -> bool:
    """Render the dataset card of a local build's next generation into it, to be committed
    with its shards (``commit_generation``): `datasets` checks the card's split sizes, so a
    card of the previous build beside the new shards would not load. The generation reads
    the store's card statistics and shard member lists through links; the card's key is its
    own until the commit. False: no generation (a bucket), the card is written after."""
    import os
    import shutil

    from sciga.explore.dataset_card import CARD_KEY, card_path, write_dataset_card
    from sciga.transforms.common.input_files import local_path
    from sciga.transforms.common.result_store import SHARD_MEMBERS, STORE_DIR
    from sciga.transforms.write.card_rows import CARD_STATS
    from sciga.transforms.write.finalize import manifest_target

    nxt = manifest_target(out_dir)
    if nxt == out_dir:
        return False
    out = local_path(out_dir)
    own = os.path.join(nxt, STORE_DIR)
    os.makedirs(own, exist_ok=True)
    for name in (CARD_STATS, SHARD_MEMBERS):
        os.makedirs(os.path.join(out, STORE_DIR, name), exist_ok=True)
        os.symlink(os.path.join("..", "..", name), os.path.join(own, name))
    card, key = local_path(card_path(out_dir)), os.path.join(out, CARD_KEY)
    if os.path.isfile(card) and os.path.isfile(key):  # the same card is not rendered again
        shutil.copyfile(card, local_path(card_path(nxt)))
        shutil.copyfile(key, os.path.join(nxt, CARD_KEY))
    write_dataset_card(nxt)
    return True


def _warn_unmatched_ga(ga_entries_uri: str, out_dir: str) -> None:
    """GA-manifest rows whose paper is not in the build (a typo, or a paper that failed)."""
    import pyarrow.parquet as pq

    from sciga.transforms.vision.options import GAIndex
    from sciga.transforms.write.manifest import shard_files

    built: set[str] = set()
    fs = fsspec.core.url_to_fs(out_dir)[0]
    for path in shard_files(out_dir, "papers"):
        with fs.open(path, "rb") as f:
            built.update(pq.read_table(f, columns=["id"]).column("id").to_pylist())
    missing = sorted(set(GAIndex(ga_entries_uri).entries()) - built)
    for pid in missing[:20]:
        log.warning("GA manifest names %s, which is not among the built papers; its GA is not used", pid)
    if len(missing) > 20:
        log.warning("... and %d more GA-manifest rows name papers that are not in the build", len(missing) - 20)
