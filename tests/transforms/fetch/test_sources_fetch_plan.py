"""`sciga fetch --plan` (nothing sent: every endpoint is a server that fails the test on any
request, and sockets refuse to connect), bulk e-print coverage from arXiv_src_manifest.xml,
and `sciga fetch --cached-metadata` fetching pages and e-prints for bulk-imported metadata."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import math
import socket
import zipfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from oai_fixtures import ListStore, OaiServer, make_paper, snapshot_obj
from sources_fixtures import CORPUS, FaultServer, Route, tar_gz_of

from sciga.pipelines.cli import main
from sciga.transforms.eprints.bulk_coverage import bulk_eprint_coverage, item_of
from sciga.transforms.fetch.cache import FetchCache, gzip_deterministic
from sciga.transforms.fetch.cost_estimate import DEFAULT_HTML_BYTES, PlanOptions, plan_fetch
from sciga.transforms.fetch.endpoints import Endpoints
from sciga.transforms.metadata.cache_sink import open_for_import
from sciga.transforms.metadata.corpus_selection import Selection
from sciga.transforms.metadata.snapshot import SnapshotOptions, import_snapshot

from conftest import scoped_environ

T0 = datetime(2021, 1, 4, tzinfo=timezone.utc)


def corpus(n: int = 40):
    """n cs papers in Jan 2021 (2101.00001 ...), every fourth one math only."""
    return [
        make_paper(
            i, first=T0 + timedelta(hours=6 * i), categories="math.OC" if i % 4 == 3 else "cs.CV", month_seq=i + 1
        )
        for i in range(n)
    ]


def write_snapshot(path: Path, ps) -> None:
    path.write_text("".join(json.dumps(snapshot_obj(p)) + "\n" for p in ps))


MANIFEST = """<?xml version='1.0' standalone='yes'?>
<arXivSRC>
 <file><content_md5sum>a</content_md5sum><filename>src/arXiv_src_0001_001.tar</filename><first_item>astro-ph0001001</first_item>
  <last_item>quant-ph0001116</last_item><md5sum>bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb</md5sum><num_items>2364</num_items><seq_num>1</seq_num><size>225605507</size>
  <timestamp>2010-12-23 00:13:59</timestamp><yymm>0001</yymm></file>
 <file><content_md5sum>c</content_md5sum><filename>src/arXiv_src_2101_001.tar</filename><first_item>2101.00001</first_item>
  <last_item>2101.00010</last_item><md5sum>dddddddddddddddddddddddddddddddd</md5sum><num_items>10</num_items><seq_num>1</seq_num><size>30000000</size>
  <timestamp>2021-02-02 00:00:00</timestamp><yymm>2101</yymm></file>
 <file><content_md5sum>e</content_md5sum><filename>src/arXiv_src_2101_002.tar</filename><first_item>2101.00011</first_item>
  <last_item>2101.00020</last_item><md5sum>ffffffffffffffffffffffffffffffff</md5sum><num_items>10</num_items><seq_num>2</seq_num><size>10000000</size>
  <timestamp>2021-02-02 00:00:00</timestamp><yymm>2101</yymm></file>
</arXivSRC>
"""


@contextlib.contextmanager
def refusing_network():
    """Any socket connection or name lookup inside fails the test."""
    attempts = []

    def refuse(*a, **k):
        attempts.append(a)
        raise AssertionError(f"--plan tried to reach the network: {a[:2]}")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(socket.socket, "connect", refuse)
        mp.setattr(socket, "getaddrinfo", refuse)
        mp.setattr(socket, "create_connection", refuse)
        yield attempts


@pytest.fixture
def no_network():
    with refusing_network() as attempts:
        yield attempts


def test_manifest_coverage(tmp_path):
    (tmp_path / "arXiv_src_manifest.xml").write_text(MANIFEST)
    cov = bulk_eprint_coverage(str(tmp_path))
    assert len(cov.tars) == 3
    assert cov.tar_for("2101.00001").filename == "src/arXiv_src_2101_001.tar"
    assert cov.tar_for("2101.00010").filename == "src/arXiv_src_2101_001.tar"
    assert cov.tar_for("2101.00011").filename == "src/arXiv_src_2101_002.tar"
    assert cov.tar_for("2101.00021") is None and "2102.00001" not in cov and "not an id" not in cov
    assert cov.tar_for("astro-ph/0001001").filename == "src/arXiv_src_0001_001.tar"
    assert "hep-th/0001050" in cov and "quant-ph/0001117" not in cov and cov("cond-mat/0001020")
    assert item_of("math.GT/0309136") == ("0309", "math0309136")
    assert cov.mean_item_bytes("2101.00005") == 2_000_000
    assert bulk_eprint_coverage(str(tmp_path / "arXiv_src_manifest.xml")).months == ["0001", "2101"]
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "arXiv_src_manifest.xml").write_text("<arXivSRC><file>")
    with pytest.raises(FileNotFoundError, match="is not XML"):
        bulk_eprint_coverage(str(tmp_path / "bad"))
    (tmp_path / "bad" / "arXiv_src_manifest.xml").write_text(
        "<arXivSRC><file><filename>src/x.tar</filename></file></arXivSRC>"
    )
    with pytest.raises(FileNotFoundError, match="size, num_items or seq_num is not a number"):
        bulk_eprint_coverage(str(tmp_path / "bad"))
    with pytest.raises(FileNotFoundError, match="--eprints-bulk"):
        bulk_eprint_coverage(str(tmp_path / "missing"))


def _cache_with_parts(tmp_path: Path, ps) -> Path:
    """A cache with the snapshot's metadata, pages for papers 0-4, an e-print for paper 5."""
    snap = tmp_path / "s.jsonl"
    write_snapshot(snap, ps)
    cache = tmp_path / "cache"
    import_snapshot(SnapshotOptions(uri=str(snap)), open_for_import(str(cache)))
    c = FetchCache(str(cache))
    for p in ps[:5]:
        c.save(
            p.id,
            "html",
            gzip_deterministic(b"<html>" + b"x" * 1000 + b"</html>"),
            suffix=".html.gz",
            info={"source": "ar5iv"},
        )
    c.save(ps[5].id, "source", tar_gz_of({"main.tex": b"\\documentclass{article}"}), suffix=".src.tar.gz")
    c.fail(ps[6].id, "html", "http_404", "gone", permanent=True)
    c.close()
    return cache


def _dump(tmp_path: Path, ids: list[str]) -> Path:
    z = tmp_path / "ar5iv-2024.zip"
    with zipfile.ZipFile(z, "w") as zf:
        for pid in ids:
            zf.writestr(f"{pid[:4]}/{pid}.html", "<html><body class='ltx_page_main'>x</body></html>")
    return z


def test_plan_counts_every_source_of_every_part(tmp_path, no_network):
    ps = corpus(40)
    cache = _cache_with_parts(tmp_path, ps)
    (tmp_path / "arXiv_src_manifest.xml").write_text(MANIFEST)
    dump = _dump(tmp_path, [ps[k].id for k in (4, 8, 9)])
    ep = Endpoints(rate_limit=3.0)
    sel = Selection(categories=("cs",), date_from="2021-01-01", date_until="2021-01-31")
    plan = plan_fetch(
        PlanOptions(
            cache=str(cache),
            endpoints=ep,
            cached_metadata=True,
            selection=sel,
            html_dumps=(str(dump),),
            eprints_bulk=str(tmp_path),
            bandwidth_mbit=80,
        )
    )
    cs = [p for p in ps if p.categories == "cs.CV"]
    assert plan.papers == len(cs) == 30
    rows = {(r.part, r.source): r for r in plan.rows}
    assert rows[("metadata", "cache")].papers == 30
    # HTML: 0-2 and 4 cached (3 and 7 are math), 6 failed before, 8 and 9 in the dump, the rest over HTTP.
    assert rows[("html", "cache")].papers == 4
    assert rows[("html", "failed before (skipped; --retry-failed)")].papers == 1
    assert rows[("html", "ar5iv dump (local zip)")].papers == 2
    http = rows[("html", "HTTP ar5iv.labs.arxiv.org")]
    assert http.papers == http.requests == 30 - 4 - 1 - 2
    assert http.bytes == http.requests * DEFAULT_HTML_BYTES
    assert http.seconds == pytest.approx(http.requests * 3.0 + http.bytes / 10e6)
    # E-prints: paper 5 cached; 2101.00001-00020 in the two bulk tars; the rest over HTTP.
    assert rows[("e-print", "cache")].papers == 1
    bulk = rows[("e-print", "bulk tars (local)")]
    covered = [p for p in cs if p.id <= "2101.00020" and p is not ps[5]]
    assert bulk.papers == len(covered) and bulk.requests == 0 and bulk.bytes == 40_000_000
    ehttp = rows[("e-print", "HTTP arxiv.org")]
    assert ehttp.papers == ehttp.requests == 30 - 1 - len(covered)
    assert ehttp.bytes == pytest.approx(ehttp.requests * 2_000_000), "the manifest's mean for the month"
    assert plan.wall_seconds == pytest.approx(max(http.seconds, ehttp.seconds)), "hosts side by side"
    text = plan.text()
    assert "nothing was sent" in text and "2 of the manifest's 3 tars" in text
    assert "per HTML page" in text, "the page size is an assumption (no pages to measure)"
    assert no_network == []


def test_plan_of_ids_and_query_and_latexml(tmp_path, no_network):
    ps = corpus(12)
    cache = _cache_with_parts(tmp_path, ps)
    ids = tuple([p.id for p in ps[:3]] + [f"2102.{k:05d}" for k in range(1, 251)] + ["not-an-id", "2102.00001v2"])
    plan = plan_fetch(PlanOptions(cache=str(cache), ids=ids, html_from="latexml", parts=("meta", "html")))
    rows = {(r.part, r.source): r for r in plan.rows}
    assert plan.papers == 253
    assert rows[("metadata", "cache")].papers == 3
    api = rows[("metadata", "arXiv API export.arxiv.org")]
    assert api.papers == 250 and api.requests == math.ceil(250 / 100)
    assert rows[("html", "LaTeXML from the e-print")].papers == 253 - 3
    assert rows[("e-print", "HTTP arxiv.org")].papers == 253 - 3, "conversion needs the e-print"
    assert "1 of the ids are not arXiv ids" in plan.text() and "LaTeXML during the build" in plan.text()
    # A query nobody paged yet: unknown without asking, bounded by --max-results.
    q = plan_fetch(PlanOptions(cache=str(cache), query="cat:cs.CV", parts=("meta",)))
    assert q.papers is None and "only known by asking the API" in q.text()
    q = plan_fetch(PlanOptions(cache=str(cache), query="cat:cs.CV", max_results=1000, page_size=100, parts=("meta",)))
    r = q.row("metadata", "arXiv API export.arxiv.org")
    assert r.papers == 1000 and r.requests == 10 and r.seconds >= 30
    assert no_network == []


def test_plan_cli_sends_nothing_to_any_endpoint(tmp_path):
    ps = corpus(20)
    snap = tmp_path / "s.jsonl"
    write_snapshot(snap, ps)
    (tmp_path / "arXiv_src_manifest.xml").write_text(MANIFEST)
    cache = tmp_path / "cache"
    with FaultServer() as f, OaiServer(ListStore(ps)) as oai:
        env = {**f.env(), "SCIGA_OAI_URL": oai.url}
        with scoped_environ(env):
            outs = []
            for extra in (
                ["--metadata-snapshot", str(snap)],
                ["--oai-pmh"],
                ["--ids", ps[0].id, ps[1].id],
                ["--query", "cat:cs.CV", "--max-results", "50"],
                ["--cached-metadata"],
            ):
                buf = io.StringIO()
                with contextlib.redirect_stdout(buf):
                    rc = main(
                        [
                            "fetch",
                            "--plan",
                            *extra,
                            "--category",
                            "cs",
                            "--from",
                            "2021-01",
                            "--until",
                            "2021-12",
                            "--eprints-bulk",
                            "s3://arxiv/src/",
                            "--eprints-manifest",
                            str(tmp_path / "arXiv_src_manifest.xml"),
                            "--output",
                            str(cache),
                            "--no-progress",
                        ]
                    )
                assert rc == 0, buf.getvalue()
                outs.append(buf.getvalue())
        assert f.log == [] and oai.log == [], "--plan sent a request"
    snap_plan, oai_plan = outs[0], outs[1]
    assert "15 papers" in snap_plan and "bulk tars (S3)" in snap_plan and "requester pays" in snap_plan
    assert "$0.00" in snap_plan or "$0.0" in snap_plan
    assert "unknown papers" in oai_plan and "not harvested yet" in oai_plan
    assert not cache.exists(), "--plan writes nothing"


def test_plan_after_an_oai_harvest_counts_the_harvested_papers(tmp_path):
    from sciga.transforms.fetch.http_client import PoliteClient
    from sciga.transforms.metadata.oai_pmh import OaiHarvester, OaiHarvestOptions

    ps = corpus(30)
    cache = tmp_path / "cache"
    sel = Selection(categories=("cs",))
    with OaiServer(ListStore(ps), page_size=10) as s:
        opts = OaiHarvestOptions(url=s.url, set_spec="cs", selection=sel)
        OaiHarvester(opts, PoliteClient(0), open_for_import(str(cache))).run()
    with refusing_network() as attempts:
        plan = plan_fetch(PlanOptions(cache=str(cache), oai=opts, selection=sel))
    assert attempts == []
    assert plan.papers == sum(1 for p in ps if p.categories == "cs.CV")
    r = plan.row("metadata", "OAI-PMH 127.0.0.1")
    assert r.requests == 1 and "harvested before" in r.note


@pytest.mark.corpus
def test_cached_metadata_fetches_pages_and_eprints_of_the_selected_papers(tmp_path):
    ps = corpus(12)
    snap = tmp_path / "s.jsonl"
    write_snapshot(snap, ps)
    cache = tmp_path / "cache"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["fetch", "--metadata-snapshot", str(snap), "--output", str(cache), "--no-progress"]) == 0
    (tmp_path / "bulk").mkdir()
    (tmp_path / "bulk" / "arXiv_src_manifest.xml").write_text(MANIFEST.replace("2101.00010", "2101.00002"))
    page = (CORPUS / "latexml" / "eml.html").read_bytes()
    eprint = tar_gz_of({"main.tex": b"\\documentclass{article}\\begin{document}x\\end{document}"})
    with FaultServer() as f:
        f.default_html = lambda pid: Route(page, 200, {"Content-Type": "text/html"})
        f.default_eprint = lambda pid: Route(eprint, 200)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = main(
                [
                    "fetch",
                    "--cached-metadata",
                    "--category",
                    "cs.CV",
                    "--eprints-bulk",
                    str(tmp_path / "bulk"),
                    "--output",
                    str(cache),
                    "--arxiv-api-url",
                    f.api_url,
                    "--html-base-url",
                    f.html_base,
                    "--eprint-base-url",
                    f.eprint_base,
                    "--rate-limit",
                    "0",
                    "--no-progress",
                ]
            )
        out = buf.getvalue()
        paths = [e["path"] for e in f.log]
    assert rc == 0, out
    cv = [p.id for p in ps if p.categories == "cs.CV"]
    assert not [x for x in paths if x.startswith("/api/")], "metadata came from the snapshot"
    assert sorted(x[len("/html/") :] for x in paths if x.startswith("/html/")) == sorted(cv)
    in_bulk = {"2101.00001", "2101.00002", "2101.00011"}  # the manifest's tars: 00001-00002 and 00011-00020
    assert sorted(x[len("/e-print/") :] for x in paths if x.startswith("/e-print/")) == sorted(set(cv) - in_bulk)
    assert "3 e-prints left to the bulk tars" in out and f"{len(cv)} complete" in out
    m = json.loads((cache / "papers" / cv[0] / f"{cv[0]}.meta.json").read_text())
    assert m["source"] and m["url"].endswith(cv[0]) and m["categories"] == ["cs.CV"]
    assert gzip.decompress((cache / "papers" / cv[0] / f"{cv[0]}.html.gz").read_bytes()) == page
