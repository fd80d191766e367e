"""The order of a build's input list (``build_inputs.largest_first``): the local runner deals
a stage's elements to its worker processes in turn and each keeps what it was dealt, so
the list puts the largest pages first. The Beam test checks the dealing itself: if Beam
stopped dealing in turn, the order would not balance the workers any more."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sciga.transforms.inputs.build_inputs import largest_first


def test_largest_pages_first_unknown_sizes_last_ties_in_order():
    inputs = ["a", "b", "c", "d", "e"]
    sizes = {"a": 10, "b": 300, "c": 10, "e": 50}
    assert largest_first(inputs, sizes) == ["b", "e", "a", "c", "d"]
    assert largest_first(inputs, {}) == inputs  # nothing known: the order given


def _share_of_each_worker(list_file: Path, seen: Path) -> list[int]:
    import apache_beam as beam

    from sciga.executors.local_run import local_runner, pipeline_options
    from sciga.transforms.inputs.build_inputs import planned_input_from_line

    def record(element):
        uri, _ = element if isinstance(element, tuple) else (element, None)
        with open(seen / f"{os.getpid()}.txt", "a", encoding="utf-8") as f:
            f.write(f"{os.path.getsize(uri)}\n")
        return uri

    options, runner = pipeline_options([], 2)
    with beam.Pipeline(runner=local_runner(options, runner), options=options) as p:
        _ = (
            p
            | beam.io.ReadFromText(str(list_file))
            | beam.Filter(bool)
            | beam.Map(planned_input_from_line)
            | beam.Reshuffle()  # as build_pipeline spreads its inputs
            | beam.Map(record)
        )
    return sorted(sum(int(n) for n in f.read_text().split()) for f in seen.glob("*.txt"))


@pytest.mark.e2e
def test_two_local_workers_get_even_shares_of_the_page_bytes(tmp_path):
    from sciga.executors.beam_executor import input_list_file
    from sciga.transforms.inputs.build_inputs import input_list_lines, largest_first
    from sciga.transforms.inputs.page_index import PageHashes, PageStat

    # Name order alternates long and short pages (a corpus of two pages repeated): dealt in
    # turn, one worker would get every long page.
    pages = []
    for i in range(24):
        page = tmp_path / "pages" / f"2602.{i:05d}.html"
        page.parent.mkdir(exist_ok=True)
        page.write_bytes(b"x" * (50_000 if i % 2 == 0 else 1_000))
        pages.append(str(page))
    total = sum(os.path.getsize(p) for p in pages)
    hashes = PageHashes(stats={p: PageStat(os.path.getsize(p), 0) for p in pages})

    in_name_order = tmp_path / "names.jsonl"
    in_name_order.write_text("".join(json.dumps(p) + "\n" for p in pages), encoding="ascii")
    (tmp_path / "seen_names").mkdir()
    shares = _share_of_each_worker(in_name_order, tmp_path / "seen_names")
    assert len(shares) == 2 and sum(shares) == total
    assert shares[1] - shares[0] > total / 2  # how Beam deals: in turn, in the order given

    sizes = {u: st.size for u, st in hashes.stats.items()}
    listed = input_list_file(list(input_list_lines(largest_first(pages, sizes), None)), str(tmp_path / "staging"))
    (tmp_path / "seen_sized").mkdir()
    shares = _share_of_each_worker(Path(listed), tmp_path / "seen_sized")
    assert len(shares) == 2 and sum(shares) == total
    assert shares[1] - shares[0] <= 50_000  # at most one page apart
