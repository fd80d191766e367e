"""Venue / year / track from author comments, ACM-CCS and MSC classes, sidecar enrichment."""

from __future__ import annotations

import json

import pytest

from sciga.schemas.records import Conference
from sciga.transforms.inputs.pages import read_sidecar
from sciga.transforms.metadata.classifications import (
    acm_from_metadata,
    ccs_path,
    classes_from_html,
    classes_from_tex,
    msc_from_metadata,
)
from sciga.transforms.metadata.comment_venue import parse_comment_venue

from conftest import ROOT


@pytest.mark.parametrize(
    "comment, expected",
    [
        ("Accepted to CVPR 2025 (main conference). 8 pages, 3 figures, 1 table", ("CVPR", 2025, "main")),
        ("Workshop on Haptics for Creative Tools at CHI 2025. 6 pages, 6 figures", ("CHI", 2025, "workshop")),
        (
            "12 pages, 5 figures. Extended version of our paper at the MICCAI 2025 Workshop on Medical Image Learning",
            ("MICCAI", 2025, "workshop"),
        ),
        ("CVPRW'23 oral", ("CVPR", 2023, "workshop")),
        ("In ECCV22", ("ECCV", 2022, "main")),
        ("to appear in Proc. of IJCAI-21", ("IJCAI", 2021, "main")),
        ("Accepted by NAACL-HLT 2019", ("NAACL", 2019, "main")),
        ("Findings of EMNLP 2023", ("EMNLP", 2023, "main")),
        ("accepted at NeurIPS 2022 Workshop on Distribution Shifts", ("NeurIPS", 2022, "workshop")),
        ("NIPS 2016", ("NeurIPS", 2016, "main")),
        ("Camera-ready version for AAAI 2024, oral", ("AAAI", 2024, "main")),
        (
            "accepted for publication at the IEEE/CVF Winter Conference on Applications of Computer Vision (WACV) 2024",
            ("WACV", 2024, "main"),
        ),
        ("Under review at ICLR 2025; accepted at ICML 2024 workshop", ("ICML", 2024, "workshop")),
        ("Accepted by SIGGRAPH Asia 2022", ("SIGGRAPH Asia", 2022, "main")),
        ("BMVC 2021 (oral)", ("BMVC", 2021, "main")),
        ("ACL 2020 short paper", ("ACL", 2020, "main")),
    ],
)
def test_accepted_venues(comment, expected):
    assert parse_comment_venue(comment) == Conference(*expected)


@pytest.mark.parametrize(
    "comment",
    [
        "Submitted to NeurIPS 2024",
        "Under review at CVPR 2025",
        "12 pages, 2 figures",
        "62 pages including 16 figures and 9 tables. Submitted to Acta Astronomica.",
        "The chi-square test 2023",
        "44 pages, editors for the proceedings: Yanling Chen and A. J. Han Vinck",  # real comment (1707.08567)
        "",
        None,
    ],
)
def test_no_accepted_venue(comment):
    assert parse_comment_venue(comment) is None


def test_acm_and_msc_from_tex():
    tex = r"""
    \ccsdesc[500]{Human-centered computing~Haptic devices}
    % \ccsdesc[300]{Commented~Out}
    \category{H.5.2}{Information Interfaces}{User Interfaces}
    \subjclass[2020]{Primary 05C10; Secondary 68R10}
    \begin{keyword} graphs \sep walks \MSC[2010] 00-01 \sep 99-00 \end{keyword}
    \keywords{random walks, MSC 2020: 60J10}
    ACM CCS: I.2.6; I.4.8
    """
    acm, msc = classes_from_tex(tex)
    assert acm == ["Human-centered computing \u2192 Haptic devices", "H.5.2", "I.2.6", "I.4.8"]
    assert msc == ["05C10", "68R10", "00-01", "99-00", "60J10"]


def test_acm_from_the_sample_acmart_source_and_page():
    tex = (ROOT / "samples" / "tex" / "2511.99002" / "main.tex").read_text()
    expected = ["Human-centered computing \u2192 Haptic devices", "Computing methodologies \u2192 Shape modeling"]
    assert classes_from_tex(tex)[0] == expected
    html = (ROOT / "samples" / "html" / "2511.99002" / "2511.99002.html").read_bytes()
    assert classes_from_html(html) == (expected, [])


def test_metadata_strings():
    assert acm_from_metadata("I.2.6; H.3.3") == ["I.2.6", "H.3.3"]
    assert msc_from_metadata("Primary 05C10; Secondary 68R10, 35Qxx") == ["05C10", "68R10", "35Qxx"]
    assert ccs_path("Computing methodologies~Shape modeling") == "Computing methodologies \u2192 Shape modeling"


def test_sidecar_gets_the_venue_from_its_comment(tmp_path):
    meta = json.loads((ROOT / "samples" / "meta" / "2511.99001.meta.json").read_text())
    page = tmp_path / "2511.99001.html"
    page.write_bytes(b"<html></html>")
    (tmp_path / "2511.99001.meta.json").write_text(json.dumps(meta))
    m = read_sidecar(str(page))
    assert m.conference == Conference("CVPR", 2025, "main")
    meta["conference"] = {"venue": "ICCV", "year": 2023, "track": "main"}
    (tmp_path / "2511.99001.meta.json").write_text(json.dumps(meta))
    assert read_sidecar(str(page)).conference.venue == "ICCV", "a venue in the sidecar wins"
