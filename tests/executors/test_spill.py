"""The launcher groups references and cuts part jobs on disk (``executors/spill.py``): the
same groups and jobs, in the same order, as grouping in memory did, with memory that does
not grow with the number of papers (issue 47)."""

from __future__ import annotations

import gc
import os
import tracemalloc
import weakref

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sciga.executors.chain import BuildChain
from sciga.executors.spill import JobFile, SortedRuns, load_job
from sciga.schemas.build import DeadLetter, ResultRef
from sciga.transforms.write.layout import layout_for
from sciga.transforms.write.steps import CollectStep, CutStep, WriteOptions, paper_key


def grouped_in_memory(pairs):
    """What the launcher did before: a dict of lists, keys in ascending order."""
    groups: dict = {}
    for key, item in pairs:
        groups.setdefault(key, []).append(item)
    return [(key, groups[key]) for key in sorted(groups)]


@settings(max_examples=60, deadline=None)
@given(
    pairs=st.lists(st.tuples(st.sampled_from(["a", "b", "id:2602.00001", "uri:x", ""]), st.integers()), max_size=60),
    run_items=st.integers(min_value=1, max_value=8),
)
def test_sorted_runs_group_as_a_dict_of_lists_in_any_run_size(tmp_path_factory, pairs, run_items):
    folder = str(tmp_path_factory.mktemp("runs"))
    runs = SortedRuns(folder, "refs", run_items=run_items)
    for key, item in pairs:
        runs.add(key, item)
    assert len(runs) == len(pairs)
    assert list(runs.grouped()) == grouped_in_memory(pairs)
    assert os.listdir(folder) == [], "a run file outlived its reading"


def test_group_keys_of_tuples_sort_as_the_dicts_keys_did(tmp_path):
    pairs = [(("papers", 3), 1), (("dead_letter", 0), 2), (("figures", 10), 3), (("figures", 2), 4), (("papers", 3), 5)]
    runs = SortedRuns(str(tmp_path), "items", run_items=2)
    for key, item in pairs:
        runs.add(key, item)
    assert list(runs.grouped()) == grouped_in_memory(pairs)


def test_jobs_come_back_largest_first_and_as_they_were_written(tmp_path):
    jobs = JobFile(str(tmp_path))
    for name, nbytes in (("a", 5), ("b", 9), ("c", 5), ("d", 1)):
        jobs.add({"job": name}, nbytes)
    refs = jobs.refs()
    assert [load_job(r)["job"] for r in refs] == ["b", "a", "c", "d"]  # ties keep their order
    assert [r.nbytes for r in refs] == [9, 5, 5, 1]


def _refs(n: int, dup_every: int = 7, dead_until: int = 1 << 30) -> list[ResultRef]:
    """References as the store gives them: papers with their tables' sizes and digests, a
    second copy of every ``dup_every``-th paper id (one is dead-lettered as a duplicate),
    and a dead-lettered input per 11 papers among the first ``dead_until``."""
    out = []
    for i in range(n):
        pid = f"2602.{i:05d}"
        sizes = {"papers": [1, 20_000 + i, 0], "figures": [8, 4_000, 90_000], "mentions": [12, 3_000, 0]}
        digests = {c: f"{c}-{i:064d}"[:64] for c in sizes}
        out.append(
            ResultRef(
                uri=f"/pages/{pid}.html",
                key=f"k{i:06d}",
                paper_id=pid,
                is_paper=True,
                version="v1",
                n_figures=8,
                n_paragraphs=30,
                content_sha256=f"{i:064d}",
                sizes=sizes,
                digests=digests,
                stats={"figures": 8, "mentions": 12},
            )
        )
        if i % dup_every == 0 and i < dead_until:
            out.append(
                ResultRef(
                    uri=f"/other/{pid}.html",
                    key=f"j{i:06d}",
                    paper_id=pid,
                    is_paper=True,
                    version="v2",
                    sizes=sizes,
                    digests=digests,
                )
            )
        if i % 11 == 0 and i < dead_until:
            dl = DeadLetter(
                paper_id=f"2603.{i:05d}",
                stage="parse",
                error_type="ParseError",
                message="no body",
                input_uri=f"/bad/{i}.html",
            )
            out.append(ResultRef(uri=f"/bad/{i}.html", key=None, paper_id=dl.paper_id, is_paper=False, dead=[dl]))
    return out


def _chain(tmp_path, n: int) -> BuildChain:
    options = WriteOptions(store_root=str(tmp_path / "store"), parts_root=str(tmp_path / "parts"), layout=layout_for(n))
    # Only the steps that group and cut: the others are not run here.
    chain = BuildChain(
        plan=None,  # type: ignore[arg-type]
        per_paper=(),
        store=None,  # type: ignore[arg-type]
        collect=CollectStep(options),
        cut=CutStep(options),
        write_part=None,  # type: ignore[arg-type]
    )
    chain.collect.setup()
    chain.cut.setup()
    return chain


def _jobs_in_memory(chain: BuildChain, refs: list) -> list:
    """How the launcher cut the jobs before they were cut on disk: dicts of lists."""
    by_group: dict = {}
    for key, items in grouped_in_memory((paper_key(r), r) for r in refs):
        for group, item in chain.collect.process((key, items)):
            by_group.setdefault(group, []).append(item)
    jobs = [job for group in sorted(by_group) for job in chain.cut.process((group, by_group[group]))]
    jobs.sort(key=lambda j: sum(b for _, b in j.sizes) if j.sizes else len(j.members), reverse=True)
    return jobs


def _on_disk(chain: BuildChain, refs: list, folder: str, run_items: int) -> list:
    by_paper = SortedRuns(folder, "references", run_items=run_items)
    for r in refs:
        by_paper.add(paper_key(r), r)
    return chain.part_jobs_on_disk(by_paper, folder)


def test_jobs_cut_on_disk_are_the_jobs_cut_in_memory(tmp_path):
    """Same parts, same members in the same order, same sizes, same order of jobs, with runs
    much smaller than the build (every grouping merges many files)."""
    refs = _refs(3_000)
    chain = _chain(tmp_path, 3_000)
    want = _jobs_in_memory(chain, refs)
    folder = tmp_path / "spill"
    folder.mkdir()
    got = [load_job(r) for r in _on_disk(chain, refs, str(folder), run_items=97)]
    assert len(got) == len(want) > 10
    for g, w in zip(got, want):
        assert (g.config, g.group, g.part, g.sizes) == (w.config, w.group, w.part, w.sizes)
        assert g.members == w.members
    assert any(j.config == "dead_letter" for j in got)


def test_the_launcher_keeps_no_reference_once_the_jobs_are_cut(tmp_path):
    refs = _refs(200)
    watch = [weakref.ref(r) for r in refs]
    chain = _chain(tmp_path, 200)
    by_paper = SortedRuns(str(tmp_path), "references", run_items=16)
    while refs:
        r = refs.pop()
        by_paper.add(paper_key(r), r)
    del r
    jobs = chain.part_jobs_on_disk(by_paper, str(tmp_path))
    gc.collect()
    assert all(w() is None for w in watch), "a reference outlived the cut"
    assert jobs and sum(len(load_job(j).members) for j in jobs) > 200


def _peak_of_cutting(tmp_path, n: int) -> int:
    # Dead letters all go to one group (``ShardLayout.dead_letter_groups``): as many here
    # at both sizes, so that what is measured is what grows with the papers.
    refs_of = _refs(n, dead_until=3_000)
    chain = _chain(tmp_path, n)
    folder = tmp_path / f"spill{n}"
    folder.mkdir()
    gc.collect()
    tracemalloc.start()
    try:
        by_paper = SortedRuns(str(folder), "references")
        # As the launcher gets them: batch after batch from the workers, none kept here.
        while refs_of:
            batch = refs_of[-16:]
            del refs_of[-16:]
            for r in batch:
                by_paper.add(paper_key(r), r)
            del batch
        tracemalloc.reset_peak()
        jobs = chain.part_jobs_on_disk(by_paper, str(folder))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert jobs
    return peak


@pytest.mark.e2e  # ~40 s: 66,000 papers' references grouped and cut under tracemalloc
def test_cutting_ten_times_the_papers_takes_the_same_memory(tmp_path):
    """Issue 47: grouping and cutting in memory took ~2.3 KB of Python objects per paper
    (60,000 papers: ~140 MB). On disk the launcher holds a run of references, one group's
    write items (a group's papers are bounded by the layout), a read buffer per run and a
    place per job: ~45 bytes more per paper, not kilobytes."""
    small, large = _peak_of_cutting(tmp_path, 6_000), _peak_of_cutting(tmp_path, 60_000)
    assert (large - small) / 54_000 < 200, (small, large)  # bytes per paper; ~55 measured
    assert large < 16 << 20, large  # ~9 MB measured


def _shards(out) -> dict:
    import hashlib

    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.glob("data/*/*"))}


@pytest.mark.e2e  # two builds of the sample, the second with every item a run of its own
@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_build_whose_groupings_merge_many_runs_writes_the_same_shards(tmp_path, monkeypatch, workers):
    """Builds as small as the sample sort their references in one run, never merging files;
    here every reference and write item is a run of its own (all merged back), the jobs are
    read back by forked workers too, and the shards are the ones of a build that did not."""
    from sciga.executors import spill

    from conftest import _build

    plain, merged = tmp_path / "plain", tmp_path / "merged"
    assert _build("--sample", "--output", str(plain), "--quiet", "--workers", workers).counts.reconciled
    monkeypatch.setattr(spill, "RUN_ITEMS", 1)
    runs: list = []
    grouped = spill.SortedRuns.grouped
    monkeypatch.setattr(spill.SortedRuns, "grouped", lambda self: runs.append(len(self._runs)) or grouped(self))
    assert _build("--sample", "--output", str(merged), "--quiet", "--workers", workers).counts.reconciled
    assert runs and min(runs) > 3, runs  # the references' and the write items' runs, each merged
    assert _shards(merged) == _shards(plain) and _shards(plain)
