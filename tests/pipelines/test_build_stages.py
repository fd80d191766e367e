"""Each stage of the build on its own, in Beam's TestPipeline: plan, parse, TeX recovery,
link, vision, write, each step run through the one Beam adapter (``StepStage``) as the Beam
executor runs it. Inputs are the embedded sample and small hand-made cases."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import apache_beam as beam
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from sources_fixtures import tar_gz_of, traversal_tarball

from sciga.schemas.build import MedicalResult, PaperWork, PlannedInput, ResultHeader
from sciga.schemas.records import Medical
from sciga.transforms.common.dead_letter import DEAD_LETTER_TAG
from sciga.transforms.common.result_store import ResultStore, result_key
from sciga.transforms.common.stage_fn import StepDoFn, StepStage
from sciga.transforms.inputs.plan_step import REUSED, PlanOptions, PlanStep
from sciga.transforms.link.options import LinkOptions
from sciga.transforms.link.step import LinkStep
from sciga.transforms.parse.options import ParseOptions
from sciga.transforms.parse.step import ParseStep
from sciga.transforms.tex_recovery.options import TexOptions
from sciga.transforms.tex_recovery.step import RecoverStep
from sciga.transforms.vision.options import VisionOptions, resolve_vision
from sciga.transforms.vision.stage import Vision
from sciga.transforms.write.layout import layout_for
from sciga.transforms.write.steps import (
    CollectStep,
    CutStep,
    StoreStep,
    WriteOptions,
    WritePartStep,
    merge_annotations,
    result_header,
    result_tables,
)

from conftest import SAMPLES

PAGE = str(SAMPLES / "html" / "2511.99001" / "2511.99001.html")
META = str(SAMPLES / "meta")


def PlanInputs(options: PlanOptions):
    return StepStage(PlanStep(options), REUSED, main="planned")


def ParsePapers(options: ParseOptions, fingerprint: str):
    return StepStage(ParseStep(options, fingerprint), DEAD_LETTER_TAG, main="papers")


def RecoverFiguresFromTex(options: TexOptions):
    return StepStage(RecoverStep(options), DEAD_LETTER_TAG, main="papers")


def LinkPapers(options: LinkOptions = LinkOptions()):
    return StepStage(LinkStep(options), DEAD_LETTER_TAG, main="papers")


def LinkPaper():
    return StepDoFn(LinkStep(LinkOptions()))


def WriteBuild(options: WriteOptions):
    from types import SimpleNamespace

    from sciga.executors.beam_write import WriteBuild as Write

    steps = SimpleNamespace(
        store=StoreStep(options),
        collect=CollectStep(options),
        cut=CutStep(options),
        write_part=WritePartStep(options),
    )
    return Write(steps)


def _parsed(uri: str = PAGE, key: str = "k1") -> PaperWork:
    out = list(StepDoFn(ParseStep(ParseOptions(metadata_dir=META), "fp")).process(PlannedInput(uri=uri, key=key)))
    return out[0]


@pytest.mark.e2e  # runs the stage in a Beam pipeline
def test_plan_reuses_only_complete_results_whose_files_are_unchanged(tmp_path):
    page = tmp_path / "2511.99001.html"
    shutil.copy(PAGE, page)
    store = ResultStore(str(tmp_path / "store"))
    from sciga.transforms.common.result_store import hash_file

    key = result_key(str(page), hash_file(str(page))[0], "fp")
    side = tmp_path / "2511.99001.meta.json"
    header = {
        "key": key,
        "uri": str(page),
        "paper_id": "2511.99001",
        "is_paper": True,
        "complete": True,
        "deps": [{"uri": str(side)}],
        "dead": [],
        "stats": {},
    }
    store.write(key, ResultHeader.from_json(header), {})
    opts = PlanOptions(store_root=str(tmp_path / "store"), fingerprint="fp")
    with TestPipeline() as p:
        out = p | beam.Create([str(page), str(tmp_path / "missing.html")]) | PlanInputs(opts)
        assert_that(
            out.reused | "R" >> beam.Map(lambda r: (r.paper_id, r.reused)),
            equal_to([("2511.99001", True)]),
            label="reused",
        )
        assert_that(
            out.planned | "P" >> beam.Map(lambda x: (Path(x.uri).name, x.key is None)),
            equal_to([("missing.html", True)]),
            label="planned",
        )
    side.write_text("{}")  # a sidecar appeared where there was none: the result is stale
    with TestPipeline() as p:
        out = p | beam.Create([str(page)]) | PlanInputs(opts)
        assert_that(out.planned | "P" >> beam.Map(lambda x: x.key), equal_to([key]), label="stale")


@pytest.mark.e2e  # runs the stage in a Beam pipeline
def test_parse_stage_parses_or_dead_letters(tmp_path):
    bad = tmp_path / "notes.html"
    bad.write_bytes(b"<html><body><p>Not LaTeXML</p></body></html>")
    with TestPipeline() as p:
        out = (
            p
            | beam.Create([PlannedInput(PAGE, None), PlannedInput(str(bad), None)])
            | ParsePapers(ParseOptions(metadata_dir=META), "fp")
        )
        assert_that(
            out.papers | "Ok" >> beam.Map(lambda w: (w.paper.id, bool(w.key), len(w.deps) >= 1)),
            equal_to([("2511.99001", True, True)]),
            label="ok",
        )
        assert_that(
            out[DEAD_LETTER_TAG] | "Dead" >> beam.Map(lambda w: [(d.stage, d.error_type) for d in w.dead]),
            equal_to([[("parse", "not_latexml")]]),
            label="dead",
        )


@pytest.mark.e2e  # runs the stage in a Beam pipeline
def test_tex_stage_keeps_the_paper_when_its_eprint_is_unsafe(tmp_path):
    page = tmp_path / "2511.99001.html"
    shutil.copy(PAGE, page)
    (tmp_path / "2511.99001.src.tar.gz").write_bytes(traversal_tarball())
    work = _parsed(str(page))
    with TestPipeline() as p:
        out = p | beam.Create([work]) | RecoverFiguresFromTex(TexOptions())
        assert_that(
            out["papers"] | beam.Map(lambda w: (w.paper.id, [(d.stage, d.error_type, d.scope) for d in w.dead])),
            equal_to([("2511.99001", [("tex_source", "unsafe_archive", "part")])]),
        )


@pytest.mark.e2e  # runs the stage in a Beam pipeline
def test_tex_stage_makes_the_images_of_recovered_figures(tmp_path, corpus):

    page = tmp_path / "2603.21852.html"  # a LaTeXML page whose figures were PDFs: no images beside it
    shutil.copy(corpus / "latexml" / "eml.html", page)
    src = corpus / "tex" / "2603.21852"
    (tmp_path / "2603.21852.src.tar.gz").write_bytes(
        tar_gz_of({p.name: p.read_bytes() for p in src.iterdir() if p.suffix in (".tex", ".pdf")})
    )
    work = _parsed(str(page))
    [out] = list(StepDoFn(RecoverStep(TexOptions())).process(work))
    assert sorted(out.made_images) == ["Fig1_graph_spiral.pdf", "Fig2_trees.pdf"]
    assert all(b.startswith(b"\x89PNG") for b in out.made_images.values())
    assert any(d.uri.endswith(".src.tar.gz") and d.size for d in out.deps), "the e-print is a dependency"
    assert any(d.absent for d in out.deps), "and so are the places that held no source"


@pytest.mark.e2e  # runs the stage in a Beam pipeline
def test_link_stage_adds_mentions():
    with TestPipeline() as p:
        out = p | beam.Create([_parsed()]) | LinkPapers()
        assert_that(
            out.papers
            | beam.Map(lambda w: len(w.mentions) > 0 and all(m.paper_id == "2511.99001" for m in w.mentions)),
            equal_to([True]),
        )


@pytest.mark.e2e  # runs the stage in a Beam pipeline
def test_vision_stage_measures_images_by_reference(tmp_path):
    vision = resolve_vision(VisionOptions(), str(tmp_path))

    fn = LinkPaper()
    fn.setup()
    [work] = list(fn.process(_parsed()))
    with TestPipeline() as p:
        out = p | beam.Create([work]) | Vision(vision)

        def facts(w):
            rows = {r.id: r for r in w.figure_rows}
            r = rows["2511.99001_F2"]
            return (
                r.image_bytes is None,
                r.image_uri.endswith("figs/overview.png"),
                len(r.image_sha256),
                r.width > 0,
                bool(r.phash),
                w.paper.graphical_abstract.de_facto,
            )

        assert_that(out["papers"] | beam.Map(facts), equal_to([(True, True, 64, True, True, True)]))


@pytest.mark.e2e  # runs the stage in a Beam pipeline
def test_write_stage_keeps_one_copy_and_merges_annotations(tmp_path):
    store_root = str(tmp_path / "store")
    layout = layout_for(2)
    opts = WriteOptions(store_root=store_root, parts_root=str(tmp_path / "parts"), layout=layout)
    from sciga.transforms.vision.stage import MeasureFigures

    link = LinkPaper()
    link.setup()
    measure = MeasureFigures(resolve_vision(VisionOptions(), str(tmp_path)))
    measure.setup()
    works = []
    for i, key in enumerate(("a" * 64, "b" * 64)):
        w = _parsed(key=key)
        w.uri = f"{PAGE}#{i}"  # two inputs, one paper id
        w = list(link.process(w))[0]
        w = [x for x in measure.process(w) if isinstance(x, PaperWork)][0]
        w.pending = ["medical"]
        works.append(w)
    ann = MedicalResult(
        key="a" * 64,
        paper_id="2511.99001",
        row_id="2511.99001_F2",
        medical=Medical(
            keyword_hits=["x"], classifier_run=True, topk_labels=["Medical"], topk_scores=[0.9], is_medical=True
        ),
    )
    with TestPipeline() as p:
        parts = {
            "works": p | "W" >> beam.Create(works),
            "reused": p | "R" >> beam.Create([]),
            "annotations": p | "A" >> beam.Create([ann]),
        } | WriteBuild(opts)
        assert_that(
            parts | beam.Map(lambda i: (i.config, i.rows)),
            equal_to([("papers", 1), ("figures", 6), ("mentions", 10), ("dead_letter", 1)]),
        )
    dead = pq.read_table(next((tmp_path / "parts" / "dead_letter").glob("*.parquet"))).to_pylist()
    assert [(d["error_type"], d["input_uri"].endswith("#1")) for d in dead] == [("duplicate", True)]
    figs = pq.read_table(next((tmp_path / "parts" / "figures").glob("*.parquet"))).to_pylist()
    f2 = next(r for r in figs if r["id"] == "2511.99001_F2")
    assert f2["medical"]["is_medical"] is True and f2["image"]["bytes"].startswith(b"\x89PNG")
    header = ResultStore(store_root).header("a" * 64)
    assert header is not None and header.complete and header.pending == []
    assert json.loads((next((tmp_path / "parts" / "papers").glob("*.json"))).read_text())["keys"] == ["a" * 64]


def test_merge_annotations_is_idempotent(tmp_path):

    link = LinkPaper()
    link.setup()
    w = list(link.process(_parsed(key="c" * 64)))[0]
    store = ResultStore(str(tmp_path))

    store.write(w.key, result_header(w), result_tables(w))
    res = store.read(w.key)
    ann = MedicalResult(key=w.key, paper_id=w.paper.id, row_id="2511.99001_F1", medical=Medical(is_medical=False))
    once = merge_annotations(res, [ann])
    store.write(w.key, res.header, once)
    twice = merge_annotations(store.read(w.key), [ann])
    assert once["figures"].equals(twice["figures"])
