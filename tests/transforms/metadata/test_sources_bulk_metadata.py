"""Bulk arXiv metadata without the network: the record mapping (snapshot line, OAI-PMH
arXivRaw / arXiv) to the sidecar the build reads, the corpus selection, and `sciga fetch
--metadata-snapshot` end to end (malformed lines, reruns, kill and resume), then `sciga
build --input CACHE` on a cache holding only that metadata plus pages placed there."""

from __future__ import annotations

import bz2
import glob
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from oai_fixtures import make_paper, record_xml, snapshot_obj
from sources_fixtures import ROOT

from sciga.pipelines.cli import main
from sciga.schemas.records import PaperMeta
from sciga.transforms.fetch.cache import FetchCache
from sciga.transforms.metadata.arxiv_records import (
    RecordError,
    meta_from_arxiv_format,
    meta_from_arxiv_raw,
    meta_from_snapshot,
    rfc_to_iso,
    split_author_string,
    tex_to_unicode,
)
from sciga.transforms.metadata.cache_sink import open_for_import
from sciga.transforms.metadata.corpus_selection import (
    Selection,
    SelectionError,
    oai_set_of,
    parse_categories,
    parse_day,
)
from sciga.transforms.metadata.oai_pmh import ListRecordsPage, select_item
from sciga.transforms.metadata.snapshot import SnapshotOptions, import_snapshot

from conftest import CORPUS

# arXiv's first record (0704.0001) as the Kaggle snapshot has it, byte for byte in shape.
KAGGLE_0704_0001 = {
    "id": "0704.0001",
    "submitter": "Pavel Nadolsky",
    "authors": "C. Bal\\'azs, E. L. Berger, P. M. Nadolsky, C.-P. Yuan",
    "title": "Calculation of prompt diphoton production cross sections at Tevatron and\n  LHC energies",
    "comments": "37 pages, 15 figures; published version",
    "journal-ref": "Phys.Rev.D76:013009,2007",
    "doi": "10.1103/PhysRevD.76.013009",
    "report-no": "ANL-HEP-PR-07-12",
    "categories": "hep-ph",
    "license": None,
    "abstract": "  A fully differential calculation in perturbative quantum chromodynamics is\npresented for the "
    "production of massive photon pairs at hadron colliders.\n",
    "versions": [
        {"version": "v1", "created": "Mon, 2 Apr 2007 19:18:42 GMT"},
        {"version": "v2", "created": "Tue, 24 Jul 2007 20:10:27 GMT"},
    ],
    "update_date": "2008-11-13",
    "authors_parsed": [
        ["Balázs", "C.", ""],
        ["Berger", "E. L.", ""],
        ["Nadolsky", "P. M.", ""],
        ["Yuan", "C. -P.", ""],
    ],
}
API_KEYS = {
    "id",
    "version",
    "title",
    "authors",
    "published",
    "updated",
    "categories",
    "primary_category",
    "comment",
    "journal_ref",
    "dois",
    "license",
    "abstract",
    "acm_classes",
    "msc_classes",
    "conference",
    "abs_url",
}


# -- mapping ------------------------------------------------------------------------------------
def test_snapshot_record_maps_to_the_api_sidecar_shape():
    m = meta_from_snapshot(KAGGLE_0704_0001)
    assert set(m) == API_KEYS, "the same keys arxiv_api.meta_from_result writes"
    assert m["id"] == "0704.0001" and m["version"] == "v2"
    assert m["published"] == "2007-04-02T19:18:42Z" and m["updated"] == "2007-07-24T20:10:27Z"
    assert m["title"] == "Calculation of prompt diphoton production cross sections at Tevatron and LHC energies"
    assert [a["name"] for a in m["authors"]] == ["C. Balázs", "E. L. Berger", "P. M. Nadolsky", "C. -P. Yuan"]
    assert m["categories"] == ["hep-ph"] and m["primary_category"] == "hep-ph"
    assert m["dois"] == ["10.1103/PhysRevD.76.013009"] and m["journal_ref"] == "Phys.Rev.D76:013009,2007"
    assert m["comment"] == "37 pages, 15 figures; published version" and m["conference"] is None
    assert m["abstract"].startswith("A fully differential calculation") and "\n" not in m["abstract"]
    assert m["abs_url"] == "https://arxiv.org/abs/0704.0001v2"
    meta = PaperMeta.from_dict(m)
    assert meta.id == "0704.0001" and meta.authors[0].name == "C. Balázs"


def test_snapshot_without_authors_parsed_reads_the_tex_author_string():
    obj = dict(KAGGLE_0704_0001)
    del obj["authors_parsed"]
    assert [a["name"] for a in meta_from_snapshot(obj)["authors"]] == [
        "C. Balázs",
        "E. L. Berger",
        "P. M. Nadolsky",
        "C.-P. Yuan",
    ]


def test_venue_acm_msc_and_cross_lists():
    obj = dict(
        KAGGLE_0704_0001,
        categories="cs.CV cs.LG stat.ML",
        comments="Accepted to CVPR 2023 (main conference)",
        doi="10.1/a 10.2/b",
        **{"acm-class": "I.2.6; I.4.8", "msc-class": "68T07, 62H30"},
    )
    m = meta_from_snapshot(obj)
    assert m["primary_category"] == "cs.CV" and m["categories"] == ["cs.CV", "cs.LG", "stat.ML"]
    assert m["conference"] == {"venue": "CVPR", "year": 2023, "track": "main"}
    assert m["acm_classes"] == ["I.2.6", "I.4.8"] and m["msc_classes"] == ["68T07", "62H30"]
    assert m["dois"] == ["10.1/a", "10.2/b"]


@pytest.mark.parametrize(
    "tex,uni",
    [
        (r"Bal\'azs", "Balázs"),
        (r"M\"uller", "Müller"),
        (r"Erd\H{o}s", "Erdős"),
        (r"{\O}vreb{\o}", "Øvrebø"),
        (r"\c{S}im\c{s}ek", "Şimşek"),
        (r"Garc\'{\i}a", "García"),
        (r"Garc\'\i a", "García"),
        (r"Dvo\v{r}\'ak", "Dvořák"),
        (r"Stra\ss e", "Straße"),
        (r"W{\l}adys{\l}aw", "Władysław"),
        (r"van~der Berg", "van der Berg"),
        (r"\textsc{Smith}", "Smith"),
        ("Plain Name", "Plain Name"),
    ],
)
def test_tex_names_become_unicode(tex, uni):
    assert tex_to_unicode(tex) == uni


def test_author_strings():
    assert split_author_string("A. One (MIT), B. Two and C. Three") == [
        {"name": "A. One", "affiliations": ["MIT"]},
        {"name": "B. Two", "affiliations": []},
        {"name": "C. Three", "affiliations": []},
    ]
    assert split_author_string("A. One (1), B. Two (1, 2) ((1) MIT, Cambridge, (2) CMU (Pittsburgh))") == [
        {"name": "A. One", "affiliations": ["MIT, Cambridge"]},
        {"name": "B. Two", "affiliations": ["MIT, Cambridge", "CMU (Pittsburgh)"]},
    ]
    assert [a["name"] for a in split_author_string("Alice Smith, Bob Jones, and Carol Anderson")] == [
        "Alice Smith",
        "Bob Jones",
        "Carol Anderson",
    ], "'Anderson' is no separator, ', and' is"
    assert split_author_string("X (Dept. of A and B), Y")[0] == {"name": "X", "affiliations": ["Dept. of A and B"]}
    assert split_author_string("Sandra Anderson (Univ. of (weird")[0]["name"] == "Sandra Anderson"
    assert split_author_string("") == []


def test_dates():
    assert rfc_to_iso("Mon, 2 Apr 2007 19:18:42 GMT") == "2007-04-02T19:18:42Z"
    assert rfc_to_iso("2 Apr 2007 19:18 GMT") == "2007-04-02T19:18:00Z"
    with pytest.raises(RecordError):
        rfc_to_iso("yesterday")


@pytest.mark.parametrize(
    "broken,why",
    [
        ({"id": 7}, "not a string"),
        ({"id": "not-an-id"}, "not an arXiv id"),
        ({"versions": []}, "no versions"),
        ({"versions": [{"version": "x", "created": "Mon, 2 Apr 2007 19:18:42 GMT"}]}, "not v<N>"),
        ({"versions": [{"version": "v1", "created": "soon"}]}, "not an RFC 2822 date"),
        ({"categories": ""}, "no categories"),
        ({"versions": "v1"}, "versions"),
    ],
)
def test_malformed_records_say_which_field(broken, why):
    with pytest.raises(RecordError, match=why):
        meta_from_snapshot(dict(KAGGLE_0704_0001, **broken))


def test_oai_formats_and_snapshot_give_the_same_sidecar():
    p = make_paper(123, categories="cs.DL astro-ph.IM")
    page = (
        '<?xml version="1.0"?><OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><ListRecords>'
        + record_xml(p, "arXivRaw")
        + "</ListRecords></OAI-PMH>"
    ).encode()
    (item,) = list(ListRecordsPage(page, "arXivRaw").items())
    raw = select_item(item, "arXivRaw", Selection())
    snap = meta_from_snapshot(json.loads(json.dumps(snapshot_obj(p))))
    assert raw == snap, "OAI-PMH arXivRaw and the snapshot make byte-identical sidecars"
    assert (
        raw["categories"] == ["cs.DL", "astro-ph.IM"]
        and raw["authors"][0]["name"] == f"{p.authors[0][2]} {p.authors[0][0]}"
    )
    page2 = page.replace(b"arXivRaw", b"arXiv")
    from oai_fixtures import arxiv_xml

    page2 = (
        '<?xml version="1.0"?><OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><ListRecords>'
        + record_xml(p, "arXiv")
        + "</ListRecords></OAI-PMH>"
    ).encode()
    assert arxiv_xml(p) in page2.decode()
    (item2,) = list(ListRecordsPage(page2, "arXiv").items())
    fmt = meta_from_arxiv_format(item2.fields)
    assert fmt["published"] == raw["published"][:10] and fmt["version"] is None, (
        "the arXiv format has days, no versions"
    )
    assert [a["name"] for a in fmt["authors"]] == [a["name"] for a in raw["authors"]]
    assert [a["affiliations"] for a in fmt["authors"]] == [a["affiliations"] for a in raw["authors"]]
    for k in ("title", "categories", "comment", "license", "abstract", "dois", "conference"):
        assert fmt[k] == raw[k], k
    assert meta_from_arxiv_raw(item.fields) == raw


# -- selection ----------------------------------------------------------------------------------
def test_category_selection_matches_any_listed_category_of_the_archive():
    cs = Selection(categories=("cs",))
    assert cs.category_matches(["cs.DL", "astro-ph.IM"]) and cs.category_matches(["astro-ph.IM", "cs.DL"])
    assert not cs.category_matches(["astro-ph.IM"]) and not cs.category_matches(["physics.comp-ph"])
    cv = Selection(categories=("cs.CV",))
    assert cv.category_matches(["cs.LG", "cs.CV"]) and not cv.category_matches(["cs.LG"])
    hep = Selection(categories=("hep-th", "astro-ph"))
    assert (
        hep.category_matches(["hep-th"])
        and hep.category_matches(["astro-ph.GA"])
        and not hep.category_matches(["hep-ph"])
    )
    assert parse_categories(["cs", "stat.ML,math.OC"]) == ("cs", "math.OC", "stat.ML")
    with pytest.raises(SelectionError):
        parse_categories(["cs;rm -rf"])
    assert oai_set_of(cs) == "cs" and oai_set_of(Selection(categories=("hep-th",))) == "physics:hep-th"
    assert oai_set_of(Selection(categories=("cs", "math"))) is None and oai_set_of(Selection()) is None


def test_date_selection_is_inclusive_on_first_version_days():
    s = Selection(date_from=parse_day("2021-01", "--from"), date_until=parse_day("2024-03", "--until", end=True))
    assert (s.date_from, s.date_until) == ("2021-01-01", "2024-03-31")
    assert s.date_matches("2021-01-01T00:00:01Z") and s.date_matches("2024-03-31T23:59:59Z")
    assert not s.date_matches("2020-12-31T23:59:59Z") and not s.date_matches("2024-04-01T00:00:00Z")
    assert not s.date_matches(None)
    assert parse_day("2024-02", "--until", end=True) == "2024-02-29"
    for bad in ("2021-13-01", "2021-02-30", "March"):
        with pytest.raises(SelectionError, match="--from"):
            parse_day(bad, "--from")
    with pytest.raises(SelectionError, match="after"):
        Selection(date_from="2024-01-01", date_until="2021-01-01")


# -- the snapshot import --------------------------------------------------------------------------
def write_snapshot(path: Path, papers, extra_lines=None) -> list[str]:
    """Papers as snapshot lines; ``extra_lines``: {line index: raw text} inserted."""
    lines = [json.dumps(snapshot_obj(p), ensure_ascii=False) for p in papers]
    for at, text in sorted((extra_lines or {}).items()):
        lines.insert(at, text)
    data = ("\n".join(lines) + "\n").encode("utf-8")
    if path.suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    elif path.suffix == ".bz2":
        data = bz2.compress(data)
    path.write_bytes(data)
    return lines


def corpus_papers():
    """Papers on both sides of SciGA's window and categories, including cross-lists."""
    from datetime import datetime, timezone

    ps = []
    for i, (day, cats) in enumerate(
        [
            ("2020-12-31T23:59:00", "cs.CV"),
            ("2021-01-01T00:01:00", "cs.CV"),
            ("2022-06-15T10:00:00", "cs.DL astro-ph.IM"),
            ("2022-06-15T11:00:00", "astro-ph.IM cs.DL"),
            ("2022-06-16T10:00:00", "astro-ph.IM"),
            ("2023-03-01T08:00:00", "math.OC stat.ML"),
            ("2024-03-31T23:00:00", "cs.LG"),
            ("2024-04-01T00:00:10", "cs.LG"),
            ("2023-07-07T07:07:07", "physics.comp-ph cs.NA"),
        ]
    ):
        first = datetime.fromisoformat(day).replace(tzinfo=timezone.utc)
        ps.append(make_paper(1000 + i, first=first, categories=cats, month_seq=10 + i))
    return ps


SCIGA = ["--category", "cs", "--from", "2021-01", "--until", "2024-03"]
INSIDE = {"2101.00011", "2206.00012", "2206.00013", "2403.00016", "2307.00018"}


def _run(args: list[str]) -> tuple[int, str]:
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(args)
    return rc, buf.getvalue()


def papers_in(cache: Path) -> set:
    return {p.name for p in (cache / "papers").iterdir() if (p / f"{p.name}.meta.json").exists()}


def test_snapshot_import_selects_cs_2021_to_2024_03_and_reports_bad_lines(tmp_path):
    snap = tmp_path / "arxiv-metadata-oai-snapshot.json.gz"
    write_snapshot(
        snap,
        corpus_papers(),
        {
            2: "{not json",
            5: '"a string"',
            7: json.dumps({"id": "2201.00001"}),
            8: "",
            9: json.dumps(dict(KAGGLE_0704_0001, id="bad id")),
        },
    )
    cache = tmp_path / "cache"
    rc, out = _run(["fetch", "--metadata-snapshot", str(snap), *SCIGA, "--output", str(cache), "--no-progress"])
    assert rc == 0, out
    assert papers_in(cache) == INSIDE, (
        "cs anywhere in the list (cs.DL astro-ph.IM, physics.comp-ph cs.NA), v1 in the window"
    )
    assert "5 selected" in out and "5 new" in out
    report = json.loads((cache / "report.json").read_text())
    assert report["mode"] == "metadata-snapshot" and report["selected"] == 5 and report["problem_count"] == 4
    where = [w for w, _ in report["problems"]]
    assert where == ["line 3", "line 6", "line 8", "line 10"], report["problems"]
    msgs = dict(report["problems"])
    assert "not JSON" in msgs["line 3"] and "not a JSON object" in msgs["line 6"]
    assert "2201.00001: categories is missing" in msgs["line 8"] and "not an arXiv id" in msgs["line 10"]
    assert "line 3: not JSON" in out, "the summary names the first problems with their line numbers"
    # The sidecar is what the build reads; the journal says where it came from.
    m = json.loads((cache / "papers" / "2206.00012" / "2206.00012.meta.json").read_text())
    assert PaperMeta.from_dict(m).categories == ["cs.DL", "astro-ph.IM"] and m["source"] is None
    jl = [json.loads(x) for x in (cache / "journal.jsonl").read_text().splitlines()]
    assert {j["id"] for j in jl} == INSIDE and all(j["info"]["source"] == "snapshot" for j in jl)

    # A rerun changes nothing; a changed record is updated, the others stay.
    before = {p: (cache / "papers" / p / f"{p}.meta.json").read_bytes() for p in INSIDE}
    rc, out = _run(["fetch", "--metadata-snapshot", str(snap), *SCIGA, "--output", str(cache), "--no-progress"])
    assert rc == 0 and "0 new, 0 updated, 5 unchanged" in out
    assert len((cache / "journal.jsonl").read_text().splitlines()) == 5, "no journal line for unchanged metadata"
    ps = corpus_papers()
    ps[1].title = "A revised title"
    write_snapshot(snap, ps)
    rc, out = _run(["fetch", "--metadata-snapshot", str(snap), *SCIGA, "--output", str(cache), "--no-progress"])
    assert "0 new, 1 updated, 4 unchanged" in out
    after = {p: (cache / "papers" / p / f"{p}.meta.json").read_bytes() for p in INSIDE}
    assert [p for p in INSIDE if before[p] != after[p]] == ["2101.00011"]
    assert json.loads(after["2101.00011"])["title"] == "A revised title"


def test_snapshot_import_without_selection_and_compressed_forms(tmp_path):
    ps = corpus_papers()
    for name in ("s.jsonl", "s.jsonl.bz2"):
        snap = tmp_path / name
        write_snapshot(snap, ps)
        cache = tmp_path / f"cache-{name}"
        rep = import_snapshot(SnapshotOptions(uri=str(snap)), open_for_import(str(cache)))
        assert rep.read == len(ps) == rep.selected == rep.new and rep.problem_count == 0
        assert len(papers_in(cache)) == len(ps)
    with pytest.raises(FileNotFoundError, match="--metadata-snapshot"):
        import_snapshot(SnapshotOptions(uri=str(tmp_path / "missing.jsonl")), open_for_import(str(tmp_path / "c")))


def test_an_overlong_line_is_reported_not_held(tmp_path):
    snap = tmp_path / "s.jsonl"
    write_snapshot(snap, corpus_papers()[:2], {1: '{"id": "' + "x" * 50_000 + '"}'})
    rep = import_snapshot(SnapshotOptions(uri=str(snap), max_line_bytes=10_000), open_for_import(str(tmp_path / "c")))
    assert rep.selected == 2 and rep.problems == [["line 2", "longer than 10,000 bytes; not a metadata record"]]


def test_snapshot_import_killed_and_rerun_gives_the_same_files(tmp_path):
    from datetime import datetime, timedelta, timezone

    t0 = datetime(2021, 2, 1, tzinfo=timezone.utc)
    ps = [make_paper(i, first=t0 + timedelta(minutes=37 * i), categories="cs.CV") for i in range(1200)]
    snap = tmp_path / "s.jsonl"
    write_snapshot(snap, ps)
    ref = tmp_path / "ref"
    import_snapshot(SnapshotOptions(uri=str(snap)), open_for_import(str(ref)))
    cache = tmp_path / "cache"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    args = [
        sys.executable,
        "-m",
        "sciga",
        "fetch",
        "--metadata-snapshot",
        str(snap),
        "--output",
        str(cache),
        "--no-progress",
    ]
    p = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    t = time.time()
    while time.time() - t < 60 and p.poll() is None:
        if (cache / "journal.jsonl").exists() and (cache / "journal.jsonl").stat().st_size > 60_000:
            break
        time.sleep(0.01)
    p.send_signal(signal.SIGKILL)
    p.wait()
    killed_at = len(papers_in(cache))
    r = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    if p.returncode == -signal.SIGKILL:
        assert 0 < killed_at < 1200, "killed mid-way"
    assert tree(cache) == tree(ref), "same papers, same bytes as an uninterrupted import"
    ids = [json.loads(x)["id"] for x in (cache / "journal.jsonl").read_text().splitlines() if x.strip()]
    assert len(ids) == len(set(ids)), "no paper journaled twice"
    FetchCache(str(cache)).recover()  # what `sciga fetch` does first: a line lost to the kill comes back
    ids = {json.loads(x)["id"] for x in (cache / "journal.jsonl").read_text().splitlines() if x.strip()}
    assert ids == {p.id for p in ps}


def test_rerun_import_removes_what_a_killed_one_half_wrote(tmp_path):
    """A kill during an atomic write leaves a `.tmp-*` file in a paper folder; the rerun
    must leave the same files as an uninterrupted import."""
    from datetime import datetime, timezone

    ps = [make_paper(i, first=datetime(2021, 2, 1, tzinfo=timezone.utc), categories="cs.CV") for i in range(3)]
    snap = tmp_path / "s.jsonl"
    write_snapshot(snap, ps)
    ref, cache = tmp_path / "ref", tmp_path / "cache"
    import_snapshot(SnapshotOptions(uri=str(snap)), open_for_import(str(ref)))
    import_snapshot(SnapshotOptions(uri=str(snap)), open_for_import(str(cache)))
    folder = next(p for p in sorted((cache / "papers").iterdir()) if p.is_dir())
    (folder / ".tmp-killed").write_bytes(b"")
    import_snapshot(SnapshotOptions(uri=str(snap)), open_for_import(str(cache)))
    assert tree(cache) == tree(ref)


def tree(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted((root / "papers").rglob("*")) if p.is_file()}


# -- the build reads it ------------------------------------------------------------------------------
@pytest.mark.corpus
def test_build_reads_a_cache_of_snapshot_metadata_plus_placed_pages(tmp_path):
    from datetime import datetime, timezone

    p1 = make_paper(5, first=datetime(2022, 5, 2, 9, 0, tzinfo=timezone.utc), categories="cs.CV cs.LG", month_seq=4242)
    p2 = make_paper(
        6, first=datetime(2023, 1, 9, 9, 0, tzinfo=timezone.utc), categories="cs.DL astro-ph.IM", month_seq=777
    )
    p1.comments = "Accepted to ICCV 2023. 9 pages"
    snap = tmp_path / "s.jsonl"
    write_snapshot(snap, [p1, p2])
    cache = tmp_path / "cache"
    rc, out = _run(["fetch", "--metadata-snapshot", str(snap), *SCIGA, "--output", str(cache), "--no-progress"])
    assert rc == 0, out
    # Pages placed where `sciga fetch` puts them (one paper has metadata only).
    page = cache / "papers" / p1.id / f"{p1.id}.html.gz"
    page.write_bytes(gzip.compress((CORPUS / "latexml" / "dd3d.html").read_bytes(), mtime=0))
    out_dir = tmp_path / "out"
    assert main(["build", "--input", str(cache), "--output", str(out_dir), "--no-tex"]) == 0
    rows = pq.read_table(glob.glob(str(out_dir / "data" / "papers" / "*.parquet"))).to_pylist()
    assert [r["id"] for r in rows] == [p1.id], "the paper with a page; the metadata-only one is not an input"
    r = rows[0]
    assert r["title"] == p1.title and r["subjects"]["arxiv"] == ["cs.CV", "cs.LG"]
    assert r["primary_category"] == "cs.CV" and r["published"] == "2022-05-02T09:00:00Z"
    assert r["conference"]["venue"] == "ICCV" and r["conference"]["year"] == 2023
    assert [a["name"] for a in r["authors"]][0] == f"{p1.authors[0][2]} {p1.authors[0][0]}"
    figs = pq.read_table(glob.glob(str(out_dir / "data" / "figures" / "*.parquet"))).to_pylist()
    assert figs and all(f["paper_id"] == p1.id for f in figs)
    shutil.rmtree(out_dir)


def test_journal_line_cut_by_a_kill_is_dropped_and_recovered_from_the_view_file(tmp_path):
    ps = corpus_papers()[:3]
    snap = tmp_path / "s.jsonl"
    write_snapshot(snap, ps)
    cache = tmp_path / "cache"
    import_snapshot(SnapshotOptions(uri=str(snap)), open_for_import(str(cache)))
    j = cache / "journal.jsonl"
    data = j.read_bytes()
    j.write_bytes(data[:-1])  # the last line lost its newline: the kill came mid-write
    c = FetchCache(str(cache))
    assert len(j.read_bytes().splitlines()) == 2, "the torn line is dropped, so the next line starts clean"
    assert c.recover() == 1, "its view file is journaled again"
    assert {r.id for r in c.records() if r.part == "meta"} == {p.id for p in ps}
    c.close()
    # A cache opened for a bulk import keeps no meta records in memory: it looks at the files.
    b = open_for_import(str(cache))
    assert not [r for r in b.records() if r.part == "meta"]
    rec = b.record(ps[0].id, "meta")
    assert rec.status == "ok" and rec.sha256 is None and json.loads(b.read_part(ps[0].id, "meta"))["id"] == ps[0].id
    assert b.record("2101.99999", "meta") is None
