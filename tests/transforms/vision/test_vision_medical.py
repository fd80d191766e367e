"""MedICaT medical filter: the keyword list, stage 1 on captions + references, the top-K rule."""

from __future__ import annotations

import numpy as np
import pytest

import sciga  # noqa: F401 - puts the checkout on sciga's path
from sciga.schemas.records import Figure, Paper, Paragraph, RefSpan, Section, Subfigure
from sciga.transforms.vision.figure_rows import figure_rows
from sciga.transforms.vision.medical import (
    DOCFIGURE_LABELS,
    KEYWORDS_FILE,
    KeywordMatcher,
    MedicalRule,
    annotate_keywords,
    load_keywords,
    medical_label,
    sentence_around,
    top_k,
)

APPENDIX_B = """MRI fMRI CT CAT PET PET-MRI MEG EEG ultrasound X-ray Xray nuclear imaging tracer isotope scan
positron EKG spectroscopy radiograph tomography endoscope endoscopy colonoscopy elastography ultrasonic
ultrasonography echocardiogram endomicroscopy pancreatoscopy cholangioscopy enteroscopy retroscopy
chromoendoscopy sigmoidoscopy cholangiography pancreatography cholangio-pancreatography
esophagogastroduodenoscopy""".split()


def test_shipped_list_is_medicat_appendix_b_complete_and_sourced():
    assert load_keywords() == APPENDIX_B and len(APPENDIX_B) == 39
    head = KEYWORDS_FILE.read_text()
    assert "MedICaT" in head and "Appendix B" in head


def test_whole_word_case_insensitive():
    m = KeywordMatcher(load_keywords())
    assert m.hits(["Axial mri of the knee"]) == ["MRI"]
    assert m.hits(["A PET-MRI study"]) == ["MRI", "PET", "PET-MRI"]
    assert m.hits(["x-ray and XRAY images"]) == ["X-ray", "Xray"]
    # no substring hits: "scans", "CTA", "category", "imagingX", "catalogue", "competitive"
    assert m.hits(["two scans of a CTA category; imagingX catalogue, competitive PETs"]) == []
    assert m.hits(["<TAG> Figure 2: </TAG> Ultrasound <MATH> x </MATH>"]) == ["ultrasound"]
    assert KeywordMatcher(["heat map"]).hits(["A Heat  map? no. A heat map: yes"]) == ["heat map"]


def test_custom_list(tmp_path):
    f = tmp_path / "kw.txt"
    f.write_text("# mine\nhistology\nMRI  # comment\n\n")
    assert load_keywords(str(f)) == ["histology", "MRI"]
    (tmp_path / "empty.txt").write_text("# nothing\n")
    with pytest.raises(ValueError):
        load_keywords(str(tmp_path / "empty.txt"))


def test_sentence_around_skips_abbreviations():
    text = "We scanned ten patients. As Fig. 2 shows, the CT volume is sharp. Et al. is not here. Done."
    i = text.index("Fig. 2")
    assert sentence_around(text, i, i + 6) == "As Fig. 2 shows, the CT volume is sharp."


def _paper():
    fig1 = Figure(
        id="P_F1", html_id="S1.F1", index=1, number="1", label="Figure 1:", caption="<TAG> Figure 1: </TAG> Setup."
    )
    sub = [
        Subfigure(id=f"P_F2.{i}", html_id=None, label=f"({c})", caption=f"<TAG> ({c}) </TAG> {t}")
        for i, (c, t) in enumerate([("a", "Loss curve."), ("b", "Axial view.")], 1)
    ]
    fig2 = Figure(
        id="P_F2",
        html_id="S1.F2",
        index=2,
        number="2",
        label="Figure 2:",
        caption="<TAG> Figure 2: </TAG> Results.",
        subfigures=sub,
    )
    fig3 = Figure(
        id="P_F3",
        html_id="S1.F3",
        index=3,
        number="3",
        label="Figure 3:",
        caption="<TAG> Figure 3: </TAG> Positron emission tomography.",
    )
    t1 = "Figure 1 shows the lab. In Figure 2b we show an MRI slice of the brain. The rest is plain."
    t2 = "Figure 2 has two panels."
    paras = [
        Paragraph(
            text=t1,
            ref_spans=[
                RefSpan(0, 8, "Figure 1", "P_F1"),
                RefSpan(t1.index("Figure 2b"), t1.index("Figure 2b") + 9, "Figure 2b", "P_F2.2"),
            ],
        ),
        Paragraph(text=t2, ref_spans=[RefSpan(0, 8, "Figure 2", "P_F2")]),
    ]
    sec = Section(
        id="P_S1", parent_id=None, level=1, number="1", title="<TAG> 1 </TAG> Introduction", body="", paragraphs=paras
    )
    return Paper(id="P", title="t", abstract="a", sections=[sec], figures=[fig1, fig2, fig3])


def test_stage_one_on_captions_and_inline_references():
    paper = _paper()
    rows = {r.id: r for r in annotate_keywords(paper, figure_rows(paper), KeywordMatcher(load_keywords()))}
    assert rows["P_F1"].medical.keyword_hits == [] and rows["P_F1"].medical.is_medical is False
    # the panel's reference sentence mentions MRI: the panel and its parent hit, not the sibling
    assert rows["P_F2.2"].medical.keyword_hits == ["MRI"] and rows["P_F2.2"].medical.is_medical is None
    assert rows["P_F2"].medical.keyword_hits == ["MRI"]
    assert rows["P_F2.1"].medical.keyword_hits == []
    assert rows["P_F3"].medical.keyword_hits == ["positron", "tomography"]
    assert all(r.medical.classifier_run is False for r in rows.values())


def test_top_k_rule_on_crafted_probabilities():
    labels = tuple(DOCFIGURE_LABELS)
    med = labels.index("Medical image")
    rule = MedicalRule(labels, k=4)
    paper = _paper()
    rows = {r.id: r for r in annotate_keywords(paper, figure_rows(paper), KeywordMatcher(load_keywords()))}
    p = np.full(28, 0.01)
    p[[0, 1, 2, 3]] = [0.4, 0.2, 0.15, 0.1]
    p[med] = 0.09  # fifth: not in the top 4
    r = rule.apply(rows["P_F3"], p)
    assert r.medical.classifier_run and r.medical.is_medical is False and len(r.medical.topk_labels) == 4
    p[med] = 0.12  # fourth
    r = rule.apply(rows["P_F3"], p)
    assert r.medical.is_medical is True and r.medical.topk_labels[3] == "Medical image"
    assert r.medical.topk_scores == sorted(r.medical.topk_scores, reverse=True) and r.medical.keyword_hits == [
        "positron",
        "tomography",
    ]
    # a figure without keyword hits is never medical, whatever the classifier says
    p[med] = 0.9
    assert rule.apply(rows["P_F1"], p).medical.is_medical is False
    assert MedicalRule(labels, k=1).apply(rows["P_F3"], p).medical.topk_labels == ["Medical image"]


def test_top_k_ties_and_label_detection():
    assert top_k([0.5, 0.5, 0.0], ["a", "b", "c"], 2) == (["a", "b"], [0.5, 0.5])
    assert medical_label(["Line graph", "Medical images"]) == "Medical images"
    with pytest.raises(ValueError):
        medical_label(["Line graph", "Bar plot"])


def test_case_twins_are_every_non_ascii_letter_twin():
    """The substring pre-test folds exactly the characters Python's IGNORECASE matches to an
    ASCII letter; a new Python that adds one fails here instead of silently losing hits."""
    import re

    from sciga.transforms.vision.medical import ASCII_CASE_TWINS

    letter = re.compile("[a-z]", re.IGNORECASE)
    twins = {c for c in range(128, 0x110000) if letter.fullmatch(chr(c))}
    assert twins == set(ASCII_CASE_TWINS)


def test_pretest_never_changes_the_hits():
    """The fast path gives what the plain regular expressions give, on tricky casing too."""
    import random
    import re

    kws = load_keywords()
    m = KeywordMatcher(kws)
    plain = [(kw, re.compile(r"(?<![0-9A-Za-z])" + re.escape(kw) + r"(?![0-9A-Za-z])", re.I)) for kw in kws]
    rng = random.Random(7)
    pieces = kws + ["x", "-", " ", "2", "\u0130", "\u0131", "\u017f", "\u212a", "é", "MRI", "scans", "<TAG>"]
    texts = [
        "ſcan of the brain",  # long s: IGNORECASE matches "scan"
        "\u212aidney CT",  # Kelvin sign for K
        "PET-MRI of a tumour",
        "X-RAY and x-ray; microscopy",
    ]
    for _ in range(400):
        words = [rng.choice(pieces) for _ in range(rng.randint(1, 8))]
        w = "".join(rng.choice([" ", "", "-"]) + (x.upper() if rng.random() < 0.3 else x) for x in words)
        texts.append(w)
    for t in texts:
        blob = re.sub(r"</?(?:TAG|MATH|NOTE)>", " ", t)
        assert m.hits([t]) == [kw for kw, rx in plain if rx.search(blob)], t
