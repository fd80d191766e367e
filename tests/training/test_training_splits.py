"""Hash splits, the experiment subset, the GA ground truth and caption cleaning."""

import dataclasses
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from training_fixtures import make_papers, paper_ids, tiny_build

from sciga.schemas.arrow import TO_ROW
from sciga.schemas.version import SCHEMA_VERSION
from sciga.training.captions import clean_caption
from sciga.training.data import data_version, iter_example_images, load_examples
from sciga.training.ground_truth import Candidate, Example, Unit, build_example, shapes_example
from sciga.training.splits import assign_splits, in_experiment_subset, split_of
from sciga.transforms.vision.figure_rows import figure_rows


def test_split_is_8_1_1_deterministic_and_stable_when_papers_are_added():
    ids = [f"24{m:02d}.{n:05d}" for m in range(1, 13) for n in range(2000)]
    first = assign_splits(ids[:10000])
    counts = Counter(first.values())
    assert abs(counts["train"] / 10000 - 0.8) < 0.015
    assert abs(counts["val"] / 10000 - 0.1) < 0.01
    assert abs(counts["test"] / 10000 - 0.1) < 0.01
    more = assign_splits(ids)  # 14k papers added
    assert all(more[p] == s for p, s in first.items())
    assert assign_splits(ids[:10000]) == first
    other_salt = {p: split_of(p, salt="another") for p in ids[:2000]}
    assert sum(other_salt[p] != first[p] for p in other_salt) > 200
    with pytest.raises(ValueError):
        split_of("2401.00001", ratios=(0.8, 0.2))


def _ex(n_candidates, gt, cat="cs.CV"):
    cands = [Candidate(f"P_F{i}", "", [Unit(f"P_F{i}", "")]) for i in range(1, n_candidates + 1)]
    return Example("P", "", "", cat, [cat], cands, gt, "teaser")


def test_experiment_subset():
    assert in_experiment_subset(_ex(3, [0]))
    assert not in_experiment_subset(_ex(3, []))  # no GA, no de-facto GA
    assert not in_experiment_subset(_ex(1, [0]))  # one figure: nothing to recommend
    assert in_experiment_subset(_ex(3, [0]), category_prefix="cs.")
    assert not in_experiment_subset(_ex(3, [0], cat="q-bio.MN"), category_prefix="cs.")


def test_clean_caption_removes_labels_and_figure_numbers():
    assert (
        clean_caption("<TAG> Figure 3: </TAG> Results of Glimpse. See Fig. 2(a) and Figures 1 and 2.")
        == "Results of Glimpse. See and."
    )
    assert clean_caption("<TAG> (a) </TAG> Accuracy <MATH> x^2 </MATH> vs. Table S1") == "Accuracy x^2 vs."
    assert clean_caption("FIGURE 12. Overview of the pipeline") == "Overview of the pipeline"
    assert clean_caption(None) == ""


def test_ground_truth_sources_on_the_synthetic_build(tmp_path):
    build = tiny_build(tmp_path / "b", {"train": 8, "val": 0, "test": 0})
    examples = {e.paper_id: e for e in load_examples(build)}
    sources = Counter(e.ga_source for e in examples.values())
    assert set(sources) == {"graphical_abstract", "teaser", "intro_first_ref"}
    for e in examples.values():
        assert e.gt and all(0 <= i < len(e.candidates) for i in e.gt)
        for c in e.candidates:
            assert "<TAG>" not in c.caption and "Figure" not in c.caption
        if e.ga_source == "graphical_abstract":
            # the GA image and the figure it reuses are both GT
            assert {e.candidates[i].is_ga_image for i in e.gt} == {True, False}
            assert e.candidates[e.ga_index].is_ga_image
    # the streamed images are those of the wanted papers only, one paper at a time
    wanted = sorted(examples)[:3]
    got = [(ex.paper_id, sorted(imgs)) for ex, imgs in iter_example_images(build, [examples[p] for p in wanted])]
    assert [p for p, _ in got] == wanted
    for pid, unit_ids in got:
        assert unit_ids == sorted(u.id for c in examples[pid].candidates for u in c.units)
    v = data_version(build)
    assert v["schema_version"] == SCHEMA_VERSION and v["inputs_sha256"]


def test_candidate_order_carries_no_position():
    ids = paper_ids({"train": 4, "val": 0, "test": 0})
    papers, _ = make_papers(ids)
    p = papers[2]
    rows = [TO_ROW["figures"](r) for r in figure_rows(p)]
    for r in rows:
        r["image_kind"] = "raster"
    a = build_example(TO_ROW["papers"](p), rows)
    reversed_paper = dataclasses.replace(p, figures=list(reversed(p.figures)))
    b = build_example(TO_ROW["papers"](reversed_paper), rows)
    assert [c.figure_id for c in a.candidates] == [c.figure_id for c in b.candidates]
    assert a.gt == b.gt


@pytest.fixture(scope="module")
def sample_build(tmp_path_factory):
    from sciga.pipelines.build import run_build
    from sciga.pipelines.cli import make_parser

    out = tmp_path_factory.mktemp("sample")
    args = make_parser().parse_args(["build", "--sample", "--output", str(out)])
    run_build(args, [])
    return str(out)


def test_de_facto_ga_of_the_embedded_sample(sample_build):
    examples = {e.paper_id: e for e in load_examples(sample_build, subset_only=False)}
    glimpse = examples["2511.99001"]
    assert glimpse.ga_source == "teaser"
    assert [glimpse.candidates[i].figure_id for i in glimpse.gt] == ["2511.99001_F1"]
    f3 = next(c for c in glimpse.candidates if c.figure_id == "2511.99001_F3")
    assert [u.id for u in f3.units] == ["2511.99001_F3.1", "2511.99001_F3.2", "2511.99001_F3.3"]
    assert f3.units[0].caption.startswith("Results of Glimpse.") and f3.units[0].caption.endswith(
        "Accuracy against compute."
    )
    # figures without an image are not candidates; an inline SVG is one since it is rasterized
    # (image_status rasterized_svg, with a width), so F5 is a candidate like the raster ones
    haptic = examples["2511.99002"]
    assert {c.figure_id for c in haptic.candidates} == {
        "2511.99002_F1",
        "2511.99002_F2",
        "2511.99002_F3",
        "2511.99002_F4",
        "2511.99002_F5",
        "2511.99002_F6",
    }
    assert examples["q-bio/0601999"].gt == []  # no figures: not in the experiment subset
    assert "q-bio/0601999" not in {e.paper_id for e in load_examples(sample_build)}


_STATUSES = ["embedded", "rasterized_svg", "not_found", "unrendered", "unreadable", None]
_ROLES = [None, "", "none", "NON_GA", " component ", "ga", "negative", "main"]


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_an_example_is_the_same_without_the_rows_the_loader_drops(data):
    """Issue 47: ``load_examples`` keeps only the figures rows ``shapes_example`` names; every
    other row changes nothing in the example, whatever its image status and GA role."""
    ids = paper_ids({"train": 3, "val": 0, "test": 0})
    papers, _ = make_papers(ids, seed=data.draw(st.integers(0, 5)))
    p = TO_ROW["papers"](papers[data.draw(st.integers(0, 2))])
    rows = [TO_ROW["figures"](r) for r in figure_rows(next(q for q in papers if q.id == p["id"]))]
    for r in rows:
        r["image_status"] = data.draw(st.sampled_from(_STATUSES))
        r["image_kind"] = data.draw(st.sampled_from(["raster", "svg", None]))
        r["ga_role"] = data.draw(st.sampled_from(_ROLES))
    if data.draw(st.booleans()):  # no GA: the rows' GA roles decide the ground truth
        p["graphical_abstract"] = None
    kept = [r for r in rows if shapes_example(r)]
    assert build_example(p, kept) == build_example(p, rows)


def test_the_loader_gives_the_same_examples_as_when_it_kept_every_figures_row(tmp_path, sample_build, monkeypatch):
    import sciga.training.data as data_module

    build = tiny_build(tmp_path / "b", {"train": 8, "val": 2, "test": 2})
    for folder in (build, sample_build):
        for subset_only in (True, False):
            dropped = load_examples(folder, subset_only=subset_only)
            with monkeypatch.context() as m:
                m.setattr(data_module, "shapes_example", lambda row: True)
                every = load_examples(folder, subset_only=subset_only)
            assert dropped == every and every, folder


def test_a_ga_role_on_a_figure_without_its_own_image_is_kept():
    """A figure whose panels carry the images and whose own row has none is a candidate
    (its panels are the units); a GA role on that row makes it the ground truth, so the
    loader must keep the row although its image is not usable."""
    pid = "2601.20000"
    paper = {
        "id": pid,
        "figures": [
            {"id": f"{pid}_F1", "caption": "Overview.", "subfigures": [{"id": f"{pid}_F1.1"}, {"id": f"{pid}_F1.2"}]},
            {"id": f"{pid}_F2", "caption": "Results.", "subfigures": []},
            {"id": f"{pid}_F3", "caption": "Ablation.", "subfigures": []},
        ],
        "graphical_abstract": None,
        "teaser": [],
        "sections": [],
    }

    def row(rid: str, status: str, role=None) -> dict:
        return {"id": rid, "paper_id": pid, "image_status": status, "ga_role": role}

    rows = [
        row(f"{pid}_F1", "not_found", role="ga"),
        row(f"{pid}_F1.1", "embedded"),
        row(f"{pid}_F1.2", "embedded"),
        row(f"{pid}_F2", "embedded"),
        row(f"{pid}_F3", "embedded", role="none"),
    ]
    example = build_example(paper, rows)
    assert example.ga_source == "ga_role" and [example.candidates[i].figure_id for i in example.gt] == [f"{pid}_F1"]
    assert [r["id"] for r in rows if not shapes_example(r)] == []  # F1 for its role, the rest for their images
    assert build_example(paper, [r for r in rows if shapes_example(r)]) == example
    unusable_without_role = row(f"{pid}_F3", "not_found", role="none")
    assert not shapes_example(unusable_without_role)
