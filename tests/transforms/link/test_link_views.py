"""The link stage inside a real `sciga build` (Beam DirectRunner, Parquet) and the task
views over it, queried with DuckDB."""

from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to
from link_fixtures import CORPUS, needs_corpus, parse

from sciga.explore.views import connect, task_views
from sciga.pipelines.build import run_build
from sciga.pipelines.cli import make_parser
from sciga.schemas.build import PaperWork
from sciga.schemas.records import Paragraph

VIEW_COLUMNS = {
    "caption_context": [
        "paper_id",
        "figure_id",
        "number",
        "label",
        "caption",
        "caption_text",
        "image",
        "is_teaser",
        "paragraphs",
        "mention_sentences",
        "n_mentions",
    ],
    "method_diagrams": [
        "paper_id",
        "figure_id",
        "number",
        "method_section_id",
        "method_section_title",
        "method_text",
        "caption",
        "caption_text",
        "image",
        "width",
        "height",
        "size_source",
        "aspect_ratio",
        "in_method_section",
        "mentioned_in_method",
        "diagram_caption",
    ],
    "subfigure_subcaption": [
        "paper_id",
        "figure_id",
        "subfigure_id",
        "panel",
        "label",
        "subcaption",
        "subcaption_text",
        "subcaption_source",
        "figure_caption",
        "image",
        "image_kind",
        "is_medical",
    ],
    "ga_candidates": [
        "paper_id",
        "abstract",
        "candidate_kind",
        "candidate_id",
        "figure_index",
        "caption",
        "image",
        "image_path",
        "is_teaser",
        "ga_role",
        "ga_type",
        "in_ga_components",
        "is_ga",
    ],
}


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    out = tmp_path_factory.mktemp("linkbuild")
    argv = ["build", "--sample", "--output", str(out)]
    for name in ("muse.html", "dd3d.html"):
        if (CORPUS / "latexml" / name).exists():
            argv += ["--input", str(CORPUS / "latexml" / name)]
    result = run_build(make_parser().parse_args(argv))
    assert result.counts.reconciled and result.counts.dead_letter == 0
    con = connect(str(out))
    yield con
    con.close()


def rows(con, sql):
    cur = con.execute(sql)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def test_every_view_is_shipped_and_has_its_fields(build):
    assert set(task_views()) >= set(VIEW_COLUMNS)
    for view, cols in VIEW_COLUMNS.items():
        cur = build.execute(f"SELECT * FROM {view} LIMIT 1")
        assert [d[0] for d in cur.description] == cols, view


def test_mentions_config(build):
    got = rows(
        build,
        "SELECT context, resolution, count(*) AS n FROM mentions WHERE paper_id LIKE '2511.%' "
        "GROUP BY ALL ORDER BY ALL",
    )
    assert got == [
        {"context": "paragraph", "resolution": "anchor", "n": 17},
        {"context": "paragraph", "resolution": "text", "n": 10},
    ]
    (r,) = rows(build, "SELECT * FROM mentions WHERE surface = 'Fig. 3b'")
    assert r["figure_id"] == "2511.99001_F3.2" and r["sentence"].endswith("see also Fig. 3b for the other attributes.")
    spans = rows(
        build,
        "SELECT s.text, s.ref_id, s.resolution, s.sentence_start FROM papers p, unnest(p.sections) t(sec), "
        "unnest(t.sec.paragraphs) u(par), unnest(u.par.ref_spans) v(s) WHERE p.id = '2511.99003' "
        "AND t.sec.id = '2511.99003_S1' AND s.resolution = 'text' ORDER BY s.start, s.ref_id",
    )
    assert [(s["text"], s["ref_id"]) for s in spans][:2] == [("Figures 1", "2511.99003_F1"), ("2", "2511.99003_F2")]
    assert all(s["sentence_start"] is not None for s in spans)


def test_caption_context(build):
    (r,) = rows(build, "SELECT * FROM caption_context WHERE figure_id = '2511.99001_F3'")
    assert r["caption_text"].startswith("Results of Glimpse.") and "<TAG>" not in r["caption_text"]
    assert r["n_mentions"] == 7  # Figs. 2 and *3*, Fig. 3, Figure 2(a)-(c) (its panels), Fig. 3b, Fig. 3(a)
    assert len(r["paragraphs"]) == 2
    assert r["paragraphs"][0].startswith("Our contributions are:") and r["paragraphs"][1].startswith(
        "Fig. 3 summarises"
    )
    assert "Fig. 3 summarises the trade-off." in r["mention_sentences"]
    assert r["image"] is None  # a figure made of panels: the panels carry the images
    unmentioned = rows(
        build, "SELECT figure_id FROM caption_context WHERE len(paragraphs) = 0 AND paper_id LIKE '2511.%'"
    )
    # LaTeXML prints the reference to Figure 2 (a minipage sharing one element with Figure 3) as "3".
    assert {u["figure_id"] for u in unmentioned} == {"2511.99002_F2"}


@needs_corpus
def test_method_diagrams_default_filter_and_parameters(build):
    got = rows(build, "SELECT * FROM method_diagrams ORDER BY figure_id")
    by_id = {r["figure_id"]: r for r in got}
    assert "muse_F3" in by_id  # "Muse Framework: ..." mentioned from section 2 "Model"
    muse = by_id["muse_F3"]
    assert muse["size_source"] == "html" and (muse["width"], muse["height"]) == (706, 351)
    assert 1.5 <= muse["aspect_ratio"] <= 2.5 and muse["diagram_caption"] and muse["mentioned_in_method"]
    assert muse["method_section_title"] == "Model" and muse["method_text"].startswith("Model")
    assert all(1.5 <= r["aspect_ratio"] <= 2.5 for r in got)
    g = by_id["2511.99001_F2"]  # the sample's overview diagram, 640x300 decoded = 2.13
    assert (g["width"], g["height"], g["size_source"]) == (640, 300, "decoded")
    assert g["in_method_section"] and g["method_section_title"] == "Method"
    assert g["caption_text"].startswith("Overview of Glimpse.")
    assert g["image"]["bytes"][:8] == b"\x89PNG\r\n\x1a\n"
    build.execute("SET VARIABLE method_diagrams_max_ratio = 2.0")  # the parameter in plain SQL
    try:
        assert not rows(build, "SELECT * FROM method_diagrams WHERE figure_id = '2511.99001_F2'")
    finally:
        build.execute("RESET VARIABLE method_diagrams_max_ratio")
    assert rows(build, "SELECT * FROM method_diagrams WHERE figure_id = '2511.99001_F2'")


def test_method_diagrams_prefers_decoded_sizes(build):
    """When the vision stage filled figures.width/height, those win over the HTML size."""
    build.execute(
        "CREATE OR REPLACE TEMP VIEW figures_decoded AS SELECT * REPLACE ("
        "CASE WHEN id = '2511.99001_F2' THEN 1000 ELSE width END AS width, "
        "CASE WHEN id = '2511.99001_F2' THEN 500 ELSE height END AS height) FROM figures"
    )
    sql = task_views()["method_diagrams"].replace("FROM figures AS f", "FROM figures_decoded AS f")
    (g,) = rows(build, f"SELECT * FROM ({sql}) WHERE figure_id = '2511.99001_F2'")
    assert (g["width"], g["height"], g["size_source"], g["aspect_ratio"]) == (1000, 500, "decoded", 2.0)
    # Without decoded sizes the HTML display size is used (LaTeXML wrote 598x281).
    build.execute(
        "CREATE OR REPLACE TEMP VIEW figures_html AS SELECT * REPLACE (NULL::INTEGER AS width, "
        "NULL::INTEGER AS height) FROM figures"
    )
    sql = task_views()["method_diagrams"].replace("FROM figures AS f", "FROM figures_html AS f")
    (g,) = rows(build, f"SELECT * FROM ({sql}) WHERE figure_id = '2511.99001_F2'")
    assert (g["width"], g["height"], g["size_source"]) == (598, 281, "html")


def test_subfigure_subcaption(build):
    got = rows(build, "SELECT * FROM subfigure_subcaption WHERE paper_id LIKE '2511.%'")
    pairs = {(r["subfigure_id"], r["subcaption_source"], r["subcaption_text"]) for r in got}
    assert ("2511.99003_F2.1", "split_parent", "T1-weighted MRI") in pairs
    assert ("2511.99001_F3.2", "html", "Accuracy per video attribute.") in pairs
    assert ("2511.99002_F4.4", "split_parent", "twisted column") in pairs
    assert len(got) == 3 + 4 + 3 + 2 + 3  # 99001 F3, 99002 F5 grid, 99003 F1, F2 (split), F4
    assert all(r["image"]["bytes"] for r in got)
    assert {r["panel"] for r in got if r["figure_id"] == "2511.99002_F4"} == {1, 2, 3, 4}


def test_ga_candidates(build):
    got = rows(build, "SELECT * FROM ga_candidates WHERE paper_id = '2511.99001' ORDER BY figure_index")
    assert [r["candidate_id"] for r in got] == ["2511.99001_F1", "2511.99001_F2", "2511.99001_F3"]
    assert [r["is_teaser"] for r in got] == [True, False, False]
    assert all("<TAG>" not in r["caption"] and r["abstract"].startswith("Semi-supervised") for r in got)
    assert got[0]["caption"].startswith("Glimpse processes only a few keyframes")
    n = rows(build, "SELECT count(*) AS n FROM ga_candidates WHERE candidate_kind = 'figure'")[0]["n"]
    assert n == rows(build, "SELECT count(*) AS n FROM figures WHERE kind = 'figure'")[0]["n"]


@pytest.mark.e2e  # runs linking in a Beam pipeline
def test_link_failure_becomes_one_dead_letter():
    good = parse("2511.99002")
    bad = parse("2511.99001")
    bad.sections[1].paragraphs.append(Paragraph(text=None))  # a broken record: linking raises
    works = [PaperWork(uri=f"{p.id}.html", key=p.id, paper=p) for p in (good, bad)]
    with BeamTestPipeline() as p:
        from sciga.transforms.common.dead_letter import DEAD_LETTER_TAG
        from sciga.transforms.common.stage_fn import StepStage
        from sciga.transforms.link.step import LinkStep

        out = p | beam.Create(works) | StepStage(LinkStep(), DEAD_LETTER_TAG, main="papers")
        assert_that(
            out.papers | "Ids" >> beam.Map(lambda w: (w.paper.id, len(w.mentions) > 0)),
            equal_to([("2511.99002", True)]),
            label="kept",
        )
        assert_that(
            out[DEAD_LETTER_TAG]
            | "Dead" >> beam.Map(lambda w: (w.paper, [(d.paper_id, d.stage, d.error_type, d.scope) for d in w.dead])),
            equal_to([(None, [("2511.99001", "link", "internal", "input")])]),
            label="dead",
        )


def test_unknown_sentence_model_is_one_clear_error(tmp_path):
    args = make_parser().parse_args(["build", "--sample", "--output", str(tmp_path), "--sentencizer", "en_core_sci_zz"])
    with pytest.raises(SystemExit, match="--sentencizer: the sentence model 'en_core_sci_zz' is not installed"):
        run_build(args)
