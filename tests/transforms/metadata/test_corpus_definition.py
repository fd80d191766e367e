"""The corpus definition `sciga update` saves with a build (OUT/corpus.json): what it
selects from a real fetch cache (categories, first-version dates, accepted venues), and
which selected papers are new to the build or have a new version."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from oai_fixtures import make_paper, snapshot_obj

from sciga.transforms.metadata.arxiv_records import meta_from_snapshot
from sciga.transforms.metadata.cache_sink import MetadataSink, open_for_import
from sciga.transforms.metadata.corpus_definition import (
    CachedPaper,
    CorpusDefinition,
    DefinitionError,
    load_definition,
    matches,
    plan_fetch,
    save_definition,
    selected_papers,
    venue_of,
)
from sciga.transforms.metadata.corpus_selection import Selection


def meta(i: int, year: int, categories: str, comment=None) -> dict:
    p = make_paper(i, first=datetime(year, 3, 1 + i, tzinfo=timezone.utc), categories=categories, month_seq=10 + i)
    p.comments = comment
    return meta_from_snapshot(snapshot_obj(p))


def test_definition_round_trip_and_a_broken_file(tmp_path):
    d = CorpusDefinition(
        cache=str(tmp_path / "cache"),
        selection=Selection(("cs",), "2021-01-01", "2024-03-31"),
        venues=("CVPR",),
        oai_url="http://127.0.0.1:1/oai",
        parts=("meta", "html"),
        rate_limit=0.0,
        build_args=("--no-tex",),
        repo_id="org/name",
    )
    save_definition(str(tmp_path / "out"), d)
    assert load_definition(str(tmp_path / "out")) == d
    assert load_definition(str(tmp_path / "nothing")) is None
    (tmp_path / "out" / "corpus.json").write_text(json.dumps({"definition_version": 99}))
    with pytest.raises(DefinitionError, match="version-1 corpus definition"):
        load_definition(str(tmp_path / "out"))
    with pytest.raises(DefinitionError, match="meta, html, source"):
        CorpusDefinition(cache="c", parts=("html",))


def test_venues_from_the_sidecar_or_the_comment():
    assert venue_of({"conference": {"venue": "ICCV", "year": 2023}}) == "ICCV"
    assert venue_of({"comment": "Accepted to CVPR 2025 (main conference). 8 pages"}) == "CVPR"
    assert venue_of({"comment": "Submitted to NeurIPS 2024"}) is None
    d = CorpusDefinition(cache="c", selection=Selection(("cs",)), venues=("cvpr", "NeurIPS"))
    assert matches(d, meta(1, 2025, "cs.CV", "Accepted to CVPR 2025"))
    assert not matches(d, meta(2, 2025, "cs.CV", "Accepted to ICLR 2025"))
    assert not matches(d, meta(3, 2025, "math.OC", "Accepted to CVPR 2025")), "categories first"
    assert matches(CorpusDefinition(cache="c", selection=Selection(("cs",))), meta(4, 2025, "cs.CL"))


def test_selection_from_a_cache_and_the_fetch_plan(tmp_path):
    cache = tmp_path / "cache"
    store = open_for_import(str(cache))
    sink = MetadataSink(store, "test")
    metas = [
        meta(0, 2022, "cs.CV", "Accepted to CVPR 2022"),
        meta(1, 2022, "cs.CL"),
        meta(2, 2019, "cs.CV"),
        meta(3, 2022, "math.OC cs.LG"),
        meta(4, 2023, "q-bio.NC"),
    ]
    for m in metas:
        sink.put(m)
    sink.checkpoint()
    store.close()
    d = CorpusDefinition(cache=str(cache), selection=Selection(("cs",), "2021-01-01", None))
    got = list(selected_papers(d))
    assert [p.id for p in got] == sorted(m["id"] for m in (metas[0], metas[1], metas[3]))
    assert {p.id: p.version for p in got}[metas[0]["id"]] == metas[0]["version"]
    assert [
        p.id for p in selected_papers(CorpusDefinition(cache=str(cache), selection=d.selection, venues=("CVPR",)))
    ] == [metas[0]["id"]]

    built = {got[0].id: (got[0].version, got[0].updated), got[1].id: ("v0", got[1].updated)}
    plan = plan_fetch(got + [CachedPaper("2401.99999", "v1", None)], built, dead={"2401.99999"})
    assert plan.new == [got[2].id], "not built, not a dead letter"
    assert plan.revised == [got[1].id], "its version differs from the built row"
    assert plan.selected == [p.id for p in got] + ["2401.99999"]
