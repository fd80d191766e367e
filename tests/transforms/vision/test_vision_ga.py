"""Graphical abstracts: typing accuracy on a synthetic set built from real figures, the
manifest (local files and a real 127.0.0.1 server with faults), de-facto GAs, and the build."""

from __future__ import annotations

import collections
import logging

import pytest
from PIL import Image
from vision_fixtures import (
    ROOT,
    LocalServer,
    copy_sample,
    mosaic,
    png_bytes,
    read_rows,
    real_figures,
    run_build,
    save_tiny_classifier,
    synthetic_ga_set,
)

import sciga  # noqa: F401 - puts the checkout on sciga's path
from sciga.schemas.records import Figure, Paper, Paragraph, RefSpan, Section
from sciga.transforms.vision.ga import de_facto_ga
from sciga.transforms.vision.ga_manifest import GAEntry, ManifestError, fetch_ga_bytes, read_ga_manifest
from sciga.transforms.vision.ga_match import GAThresholds, decide, prepare


@pytest.fixture(scope="module")
def papers():
    return real_figures()


@pytest.mark.e2e  # types a synthetic set of graphical abstracts end to end
def test_ga_typing_accuracy_per_type(papers):
    """Exact and resized copies must come out Reused with the right single component,
    crops and 2x2 mosaics Modified, another paper's figures Original."""
    prepped = {p: [(n, prepare(im)) for n, im in figs] for p, figs in papers.items()}
    cases = synthetic_ga_set(papers)
    total, right, comps_exact = collections.Counter(), collections.Counter(), collections.Counter()
    for paper, ga, typ, comps in cases:
        d = decide(prepare(ga), prepped[paper], GAThresholds())
        total[typ] += 1
        right[typ] += d.type == typ
        comps_exact[typ] += d.type == typ and sorted(d.components) == sorted(comps)
    acc = {t: right[t] / total[t] for t in total}
    print(
        "\nGA typing on",
        sum(total.values()),
        "synthetic GAs from",
        len(papers),
        "papers:",
        {t: f"{right[t]}/{total[t]} correct, {comps_exact[t]} with exact components" for t in total},
    )
    assert total["Reused"] >= 26 and total["Modified"] >= 15 and total["Original"] >= 13
    assert acc["Reused"] >= 0.95 and acc["Original"] >= 0.95 and acc["Modified"] >= 0.85
    assert comps_exact["Reused"] == right["Reused"]  # components exact on every Reused


def test_a_mosaic_of_all_panels_of_one_figure_is_that_figure_reused():
    figs = ROOT / "samples" / "html" / "2511.99002" / "figs"
    panels = [
        (f"P_F5.{i}", prepare(Image.open(figs / f"grid_{c}.png").convert("RGB"))) for i, c in enumerate("abcd", 1)
    ]
    other = [("P_F2", prepare(Image.open(figs / "study_setup.png").convert("RGB")))]
    ga = mosaic([Image.open(figs / f"grid_{c}.png").convert("RGB") for c in "abcd"])
    d = decide(prepare(ga), other + panels, panels={"P_F5": [p for p, _ in panels]})
    assert (d.type, d.components) == ("Reused", ["P_F5"])
    d = decide(
        prepare(mosaic([Image.open(figs / f"grid_{c}.png").convert("RGB") for c in "abc"])),
        other + panels,
        panels={"P_F5": [p for p, _ in panels]},
    )
    assert d.type == "Modified" and d.components == ["P_F5.1", "P_F5.2", "P_F5.3"]


def _paper(teaser=(), intro_refs=(), intro_title="<TAG> 1 </TAG> Introduction"):
    figs = [Figure(id=f"P_F{i}", html_id=None, index=i, number=str(i), label=None, caption="") for i in (1, 2, 3)]
    for f in figs:
        f.is_teaser = f.id in teaser
    text = " ".join(f"See ref{i}." for i in range(len(intro_refs)))
    spans = [
        RefSpan(text.index(f"ref{i}"), text.index(f"ref{i}") + 4, f"ref{i}", rid) for i, rid in enumerate(intro_refs)
    ]
    secs = [
        Section(
            id="P_S1",
            parent_id=None,
            level=1,
            number="1",
            title=intro_title,
            body=text,
            paragraphs=[Paragraph(text=text, ref_spans=spans)],
        ),
        Section(
            id="P_S1.1",
            parent_id="P_S1",
            level=2,
            number="1.1",
            title="Scope",
            body="",
            paragraphs=[Paragraph(text="Figure 1.", ref_spans=[RefSpan(0, 8, "Figure 1", "P_F1")])],
        ),
    ]
    return Paper(id="P", title="t", abstract="a", sections=secs, figures=figs, teaser=list(teaser))


def test_de_facto_ga_is_the_teaser_else_the_first_figure_the_introduction_references():
    assert de_facto_ga(_paper(teaser=["P_F2"], intro_refs=["P_F3"])) == ("P_F2", "teaser")
    assert de_facto_ga(_paper(intro_refs=["P_T1", "P_F3.2", "P_F1"])) == ("P_F3", "first_intro_reference")
    assert de_facto_ga(_paper(intro_refs=[])) == ("P_F1", "first_intro_reference")  # from the subsection
    assert de_facto_ga(_paper(intro_refs=["P_F3"], intro_title="<TAG> 1 </TAG> Method")) is None


def test_manifest_reading(tmp_path):
    m = tmp_path / "ga.csv"
    m.write_text(
        "arxiv_id,path,source\n2401.00001v2,ga/a.png,Cell\n2401.00001,ga/b.png,\nq-bio/0601999,https://x.org/a.jpg,\n,,\n"
    )
    entries = read_ga_manifest(str(m))
    assert [(e.paper_id, e.path, e.source) for e in entries] == [
        ("2401.00001", "ga/a.png", "Cell"),
        ("q-bio/0601999", "https://x.org/a.jpg", None),
    ]
    assert entries[0].uri == f"{tmp_path}/ga/a.png" and entries[0].extra_paths == ["ga/b.png"]
    m.write_text("id,file\n1,2\n")
    with pytest.raises(ManifestError, match="needs the columns arxiv_id,path"):
        read_ga_manifest(str(m))
    with pytest.raises(ManifestError, match="could not be read"):
        read_ga_manifest(str(tmp_path / "absent.csv"))


def test_polite_fetch_with_faults():
    img = png_bytes(Image.new("RGB", (10, 10), "red"))
    with LocalServer(
        {"/flaky.png": [(500, b"oops"), (200, img)], "/big.png": [(200, b"x" * (2 << 20))], "/gone.png": [(404, b"")]}
    ) as srv:
        e = lambda p: GAEntry(paper_id="P", path=srv.url(p), uri=srv.url(p))
        assert fetch_ga_bytes(e("/flaky.png"), timeout=5) == img and srv.hits["/flaky.png"] == 2
        with pytest.raises(OSError, match="above the 1 MiB limit"):
            fetch_ga_bytes(e("/big.png"), max_bytes=1 << 20, timeout=5)
        with pytest.raises(OSError, match="HTTP 404"):
            fetch_ga_bytes(e("/gone.png"), timeout=5)
        assert all(a.startswith("sciga-builder/") for a in srv.agents)


def test_build_with_ga_manifest(tmp_path, caplog):
    src = tmp_path / "in"
    d1 = copy_sample(src, "2511.99001")
    d2 = copy_sample(src, "2511.99002")
    copy_sample(src, "q-bio0601999")
    (tmp_path / "ga").mkdir()
    (tmp_path / "ga" / "99001.png").write_bytes(
        png_bytes(Image.open(d1 / "figs" / "overview.png").convert("RGB").resize((960, 450)))
    )  # 1.5x the 640x300 figure
    combo = mosaic(
        [
            Image.open(d2 / "figs" / n).convert("RGB")
            for n in ("study_setup.png", "task_times.png", "appendix_ratings.png", "teaser.png")
        ]
    )
    tiny = save_tiny_classifier(tmp_path / "emb.pt")
    (tmp_path / "ga" / "99002.png").write_bytes(png_bytes(combo))
    # A web address is never fetched by default (issue 43: --ga-allow-outside fetches it; the
    # fetch itself is test_polite_fetch_with_faults): its GA row says why.
    with LocalServer({"/ga/q-bio.png": [(200, png_bytes(combo))]}) as srv:
        (tmp_path / "manifest.csv").write_text(
            "arxiv_id,path,source\n"
            "2511.99001v1,ga/99001.png,Journal A\n"
            "2511.99002,ga/99002.png,Journal B\n"
            f"q-bio/0601999,{srv.url('/ga/q-bio.png')},\n"
            "2511.00000,ga/none.png,\n"
        )
        with caplog.at_level(logging.WARNING):
            rc = run_build(
                [
                    "--input",
                    str(src),
                    "--output",
                    str(tmp_path / "out"),
                    "--ga-manifest",
                    str(tmp_path / "manifest.csv"),
                    "--ga-embedding-weights",
                    tiny,
                    "--ga-timeout",
                    "5",
                ]
            )
        assert rc == 0 and not srv.hits, "a web address in the manifest was fetched without --ga-allow-outside"
    assert "2511.00000, which is not among the built papers" in caplog.text
    papers = {p["id"]: p for p in read_rows(tmp_path / "out", "papers")}
    ga1, ga2, ga3 = (papers[k]["graphical_abstract"] for k in ("2511.99001", "2511.99002", "q-bio/0601999"))
    assert (ga1["type"], ga1["components"], ga1["source"], ga1["de_facto"]) == (
        "Reused",
        ["2511.99001_F2"],
        "Journal A",
        False,
    )
    assert ga2["type"] == "Modified" and set(ga2["components"]) == {
        "2511.99002_F1",
        "2511.99002_F2",
        "2511.99002_F3",
        "2511.99002_F6",
    }
    assert ga3["type"] is None and "never fetched over the network" in ga3["error"]
    figs = {r["id"]: r for r in read_rows(tmp_path / "out", "figures")}
    assert (
        figs["2511.99001_F2"]["ga_role"] == "ga_reused" and figs["2511.99001_F1"]["ga_role"] is None
    )  # teaser is no longer de facto
    assert {k for k, r in figs.items() if r["ga_role"] == "ga_component"} == set(ga2["components"])
    row = figs["2511.99001_GA"]
    assert (
        row["kind"] == "graphical_abstract" and row["ga_role"] == "ga" and (row["width"], row["height"]) == (960, 450)
    )
    assert row["image"]["bytes"][:4] == b"\x89PNG" and row["image"]["path"] == "ga/99001.png"
    assert row["medical"]["is_medical"] is False and row["medical"]["keyword_hits"] == []
    assert figs["q-bio/0601999_GA"]["image"] is None and "--ga-allow-outside" in figs["q-bio/0601999_GA"]["image_error"]
    assert figs["q-bio/0601999_GA"]["image_status"] == "outside_input"


def test_build_without_manifest_marks_de_facto_gas(tmp_path):
    assert run_build(["--sample", "--output", str(tmp_path / "out")]) == 0
    papers = {p["id"]: p for p in read_rows(tmp_path / "out", "papers")}
    ga = papers["2511.99001"]["graphical_abstract"]
    assert (ga["de_facto"], ga["source"], ga["components"], ga["type"]) == (True, "teaser", ["2511.99001_F1"], None)
    figs = {r["id"]: r for r in read_rows(tmp_path / "out", "figures")}
    assert figs["2511.99001_F1"]["ga_role"] == "de_facto_ga" and figs["2511.99001_F1"]["is_teaser"]
    # 2511.99003 has no teaser: its Introduction references Figure 1 first (with its 3 panels).
    ga3 = papers["2511.99003"]["graphical_abstract"]
    assert (ga3["de_facto"], ga3["source"], ga3["components"]) == (True, "first_intro_reference", ["2511.99003_F1"])
    assert {k for k, r in figs.items() if r["ga_role"] == "de_facto_ga"} == {
        "2511.99001_F1",
        "2511.99002_F1",
        "2511.99003_F1",
        "2511.99003_F1.1",
        "2511.99003_F1.2",
        "2511.99003_F1.3",
    }


def test_a_manifest_ga_whose_file_is_missing_keeps_the_de_facto_ga(tmp_path):
    """`sciga build --ga-manifest` (a subprocess, as a user runs it) with a row whose file is
    not there: the GA row says ``not_found``, and the paper keeps its de-facto GA (the teaser)
    with the reason the manifest's GA was not used; the gate passes."""
    from conftest import run_cli

    (tmp_path / "ga.csv").write_text("arxiv_id,path\n2511.99001,ga/missing.png\n")
    out = tmp_path / "out"
    r = run_cli("build", "--sample", "--output", str(out), "--ga-manifest", str(tmp_path / "ga.csv"), "--quiet")
    assert r.returncode == 0, r.stderr[-3000:]
    figs = {row["id"]: row for row in read_rows(out, "figures")}
    ga_row = figs["2511.99001_GA"]
    assert (ga_row["kind"], ga_row["ga_role"], ga_row["image_status"]) == ("graphical_abstract", "ga", "not_found")
    assert figs["2511.99001_F1"]["ga_role"] == "de_facto_ga"
    ga = {p["id"]: p for p in read_rows(out, "papers")}["2511.99001"]["graphical_abstract"]
    assert (ga["de_facto"], ga["source"], ga["components"]) == (True, "teaser", ["2511.99001_F1"])
    assert "ga/missing.png not found" in ga["error"]
    r = run_cli("validate", str(out))
    assert r.returncode == 0 and "PASSED" in r.stdout, r.stdout + r.stderr[-3000:]
