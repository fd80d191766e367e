"""`sciga fetch` end to end against a real HTTP server on 127.0.0.1 serving the recorded
arXiv API responses, real LaTeXML pages and real e-prints, with injected faults; then
`sciga build --input CACHE` on what it fetched; then kill / Ctrl-C and resume."""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from sources_fixtures import (
    CORPUS,
    FAILED_CONVERSION_PAGE,
    ROOT,
    FaultServer,
    Route,
    tar_gz_of_dir,
    traversal_tarball,
)

from sciga.pipelines.cli import main
from sciga.schemas.records import PaperMeta

from conftest import scoped_environ

pytestmark = pytest.mark.corpus

IDS = ["1605.08386", "2104.12255v1", "astro-ph/0601001", "quant-ph/0201082v1", "1707.08567", "0000.0000", "abc"]
FAST = ["--rate-limit", "0.01", "--retry-backoff", "0.01", "--timeout", "1", "--no-progress"]


def journal(cache: Path) -> list[dict]:
    return [json.loads(ln) for ln in (cache / "journal.jsonl").read_text().splitlines() if ln.strip()]


def serve_papers(s: FaultServer) -> None:
    s.add(
        "/html/1605.08386",
        (CORPUS / "latexml" / "a1709.html").read_bytes(),
        etag='"a1709-v1"',
        headers={"Content-Type": "text/html; charset=utf-8"},
    )
    s.add("/html/2104.12255v1", (CORPUS / "latexml" / "eml.html").read_bytes())
    s.add("/html/1707.08567", (CORPUS / "latexml" / "dd3d.html").read_bytes())
    s.add("/html/astro-ph/0601001", FAILED_CONVERSION_PAGE)
    s.add("/html/quant-ph/0201082v1", (s.base + "/abs/quant-ph/0201082v1").encode(), status=307)
    s.add("/e-print/1605.08386", (CORPUS / "tex" / "1709.07020" / "1709.07020v1.tar.gz").read_bytes())
    s.add("/e-print/2104.12255v1", tar_gz_of_dir(CORPUS / "tex" / "2603.21852"))
    s.add("/e-print/1707.08567", tar_gz_of_dir(CORPUS / "tex" / "dd3d"))
    s.add("/e-print/astro-ph/0601001", b"%PDF-1.4\n% a PDF-only submission\n")
    s.add("/e-print/quant-ph/0201082v1", traversal_tarball())


class _Run:
    def __init__(self, returncode: int, stdout: str):
        self.returncode, self.stdout = returncode, stdout


def _fetch_in_process(args: list[str], env: dict, capfd=None) -> _Run:
    """`sciga fetch` through the CLI entry point, in this process (no interpreter start-up)."""
    import contextlib
    import io

    buf = io.StringIO()
    with scoped_environ(env), contextlib.redirect_stdout(buf):
        rc = main(args)
    return _Run(rc, buf.getvalue())


@pytest.fixture(scope="module")
def fetched(tmp_path_factory):
    """One faulty fetch into a cache, then a rerun and a --refresh (module scope: one set)."""
    cache = tmp_path_factory.mktemp("fetch") / "cache"
    with FaultServer() as s:
        serve_papers(s)
        s.script("/html/1605.08386", ["429:0.2", "503", "reset", "truncate"])
        s.script("/e-print/1707.08567", ["500", "slow:1.5"])
        s.script("/e-print/2104.12255v1", ["503", "503"])
        args = ["fetch", "--ids", *IDS, "--output", str(cache), *FAST]
        first = _fetch_in_process(args, s.env())
        log1 = list(s.log)
        journal1 = journal(cache)
        second = _fetch_in_process(args, s.env())
        log2 = s.log[len(log1) :]
        journal2 = journal(cache)
        refresh = _fetch_in_process(args + ["--refresh"], s.env())
        log3 = s.log[len(log1) + len(log2) :]
    return {
        "cache": cache,
        "first": first,
        "second": second,
        "refresh": refresh,
        "log1": log1,
        "log2": log2,
        "log3": log3,
        "journal1": journal1,
        "journal2": journal2,
    }


def test_fetch_summary_and_clear_per_paper_failures(fetched):
    r = fetched["first"]
    assert r.returncode == 1, r.stdout  # some ids failed: non-zero, and the ids are listed
    out = r.stdout
    assert "failed ids (4): 0000.0000 abc astro-ph/0601001 quant-ph/0201082;" in out
    assert "7 papers in" in out and "3 complete (metadata + HTML), 4 with TeX source" in out
    assert "failed  0000.0000 meta [unknown_id]: arXiv has no paper 0000.0000" in out
    assert "failed  abc meta [bad_id]: 'abc' is not an arXiv id" in out
    assert "astro-ph/0601001 html [conversion_failed]" in out and "LaTeXML conversion failed" in out
    assert "quant-ph/0201082 html [no_html]" in out and "redirected to the abstract page" in out
    assert "quant-ph/0201082 source [unsafe_archive]" in out and "'../../etc/evil.tex'" in out
    assert "MiB downloaded" in out


def test_retries_bounded_and_faults_survived(fetched):
    by_path = Counter(e["path"] for e in fetched["log1"])
    assert by_path["/html/1605.08386"] == 5  # 429, 503, reset, truncated, then the page
    assert by_path["/e-print/1707.08567"] == 3  # 500, timeout, then the e-print
    assert by_path["/e-print/2104.12255v1"] == 3
    assert by_path["/api/query"] == 1, "seven ids, one API request"
    assert not any("abc" in e["query"] for e in fetched["log1"]), "an invalid id never reaches the API"
    # Unknown / invalid ids never reach the HTML or e-print hosts.
    assert not any("0000.0000" in e["path"] or e["path"].endswith("/abc") for e in fetched["log1"])


def test_nothing_lost_no_duplicates(fetched):
    cache = fetched["cache"]
    recs = fetched["journal2"]
    assert recs == fetched["journal1"], "the rerun journaled nothing new"
    ok = Counter((r["id"], r["part"]) for r in recs if r["status"] == "ok")
    assert all(n == 1 for n in ok.values()), "each part stored once"
    for pid in ("1605.08386", "2104.12255", "1707.08567"):
        assert {(pid, p) for p in ("meta", "html", "source")} <= set(ok)
    every = {(r["id"], r["part"]) for r in recs}
    wanted = {
        ("0000.0000", "meta"),
        ("abc", "meta"),
        ("astro-ph/0601001", "html"),
        ("quant-ph/0201082", "html"),
        ("quant-ph/0201082", "source"),
        ("astro-ph/0601001", "source"),
    }
    assert wanted <= every, "every failure is journaled"
    papers = sorted(p.name for p in (cache / "papers").iterdir())
    assert papers == ["1605.08386", "1707.08567", "2104.12255", "astro-ph_0601001", "quant-ph_0201082"]
    assert not list((cache / "papers" / "quant-ph_0201082").glob("*.src*")), "a refused e-print is not linked"
    assert (cache / "papers" / "astro-ph_0601001" / "astro-ph_0601001.src.pdf").exists()
    assert not list(cache.rglob(".tmp-*"))
    # view files are the blobs (content addressed)
    page = cache / "papers" / "1605.08386" / "1605.08386.html.gz"
    rec = [r for r in journal(cache) if r["id"] == "1605.08386" and r["part"] == "html"][-1]
    assert (cache / "blobs" / rec["sha256"][:2] / rec["sha256"]).read_bytes() == page.read_bytes()


def test_sidecars_are_readable_metadata(fetched):
    cache = fetched["cache"]
    side = json.loads((cache / "papers" / "astro-ph_0601001" / "astro-ph_0601001.meta.json").read_text())
    meta = PaperMeta.from_dict(side)
    assert meta.id == "astro-ph/0601001" and meta.authors[0].affiliations == ["Ohio State"]
    assert meta.url is None, "no page: no page URL"
    side = json.loads((cache / "papers" / "1605.08386" / "1605.08386.meta.json").read_text())
    assert side["url"].endswith("/html/1605.08386") and side["source"] == "http"
    assert side["html_generator"] == "LaTeXML" and side["eprint"]["kind"] == "tar"


def test_rerun_fetches_nothing_and_refresh_is_conditional(fetched):
    assert fetched["second"].returncode == 1  # the ids that failed for good still failed: listed, non-zero
    assert fetched["log2"] == [], "a complete cache is not fetched again"
    assert "fetched 0, cached" in fetched["second"].stdout
    html = [e for e in fetched["log3"] if e["path"] == "/html/1605.08386"]
    assert [e["status"] for e in html] == [304], "--refresh sends the ETag and gets 304"


def test_build_reads_the_cache_and_recovers_figures_from_tex(fetched, tmp_path):
    out = tmp_path / "build"
    rc = main(["build", "--input", str(fetched["cache"]), "--output", str(out)])
    assert rc == 0
    papers = pq.read_table(glob.glob(str(out / "data" / "papers" / "*.parquet"))).to_pylist()
    assert sorted(p["id"] for p in papers) == ["1605.08386", "1707.08567", "2104.12255"]
    p = {x["id"]: x for x in papers}["1605.08386"]
    assert p["title"] == "Heat-bath random walks with Markov bases", "metadata from the sidecar"
    assert p["subjects"]["arxiv"] == ["math.CO", "math.ST"]
    assert p["provenance"]["generator"] == "LaTeXML" and p["provenance"]["source"] == "http"
    fig = pq.read_table(glob.glob(str(out / "data" / "figures" / "*.parquet"))).to_pylist()
    rows = {r["id"]: r for r in fig}
    r = rows["1605.08386_F1"]
    # The page says x1.png; ar5iv's asset was not fetched, so the figure comes from the
    # e-print's PDF, rasterized by pdftoppm.
    assert r["image_source"] == "tex" and r["image"]["path"] == "preprint_inset.pdf"
    assert r["image"]["bytes"].startswith(b"\x89PNG") and r["image_error"] is None
    assert rows["2104.12255_F1"]["image"]["path"] == "Fig1_graph_spiral.pdf"
    assert rows["2104.12255_F2"]["image"]["bytes"].startswith(b"\x89PNG")
    assert rows["1707.08567_F1"]["image"]["path"] == "figures/fcos3d_arch.png"
    # The page's x2.png was not fetched and the e-print lacks figures/scaling_law.pdf too:
    # the row keeps the HTML image and says it was not found.
    f2 = rows["1707.08567_F2"]
    assert f2["image_source"] == "html" and f2["image"] is None and f2["image_status"] == "not_found"
    assert "not found" in f2["image_error"]
    dead = glob.glob(str(out / "data" / "dead_letter" / "*.parquet"))
    assert sum(pq.read_metadata(f).num_rows for f in dead) == 0


# -- kill and resume --------------------------------------------------------------------------
def _wait_for_lines(path: Path, n: int, proc, timeout: float = 60.0) -> None:
    t0 = time.time()
    while time.time() - t0 < timeout:
        if path.exists() and path.read_text().count("\n") >= n:
            return
        if proc.poll() is not None:
            return
        time.sleep(0.02)


def test_ctrl_c_and_kill_then_resume_completes_with_nothing_refetched(tmp_path):
    cache = tmp_path / "cache"
    a1709 = (CORPUS / "latexml" / "a1709.html").read_bytes()
    tarball = (CORPUS / "tex" / "1709.07020" / "1709.07020v1.tar.gz").read_bytes()
    with FaultServer(delay=0.01) as s:
        s.default_html = lambda pid: Route(a1709, 200, {"Content-Type": "text/html"})
        s.default_eprint = lambda pid: Route(tarball, 200)
        env = dict(os.environ, **s.env(), PYTHONPATH=str(ROOT))
        args = [
            sys.executable,
            "-m",
            "sciga",
            "fetch",
            "--query",
            "testing",
            "--max-results",
            "30",
            "--page-size",
            "10",
            "--output",
            str(cache),
            *FAST,
        ]
        jpath = cache / "journal.jsonl"

        # Run 1: Ctrl-C mid-way.
        p1 = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _wait_for_lines(jpath, 25, p1)
        p1.send_signal(signal.SIGINT)
        out1, _ = p1.communicate(timeout=60)
        assert p1.returncode == 130, out1
        assert "interrupted" in out1 and "rerun the same command to resume" in out1
        committed1 = {(r["id"], r["part"]) for r in journal(cache) if r["status"] == "ok"}
        n1 = len(s.log)

        # Run 2: killed hard (no cleanup at all).
        p2 = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _wait_for_lines(jpath, len(committed1) + 25, p2)
        p2.kill()
        p2.wait(timeout=30)
        log2 = s.log[n1:]
        n2 = len(s.log)
        committed2 = {(r["id"], r["part"]) for r in journal(cache) if r["status"] == "ok"}

        # Run 3: completes.
        p3 = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert p3.returncode == 0, p3.stderr
        log3 = s.log[n2:]

    assert 0 < len(committed1) < 90 and len(committed1) <= len(committed2), "run 1 was stopped mid-way"
    if p2.returncode == -signal.SIGKILL:
        assert len(committed2) < 90, "run 2 was killed mid-way"
    recs = journal(cache)
    ok = Counter((r["id"], r["part"]) for r in recs if r["status"] == "ok")
    ids = {pid for pid, _ in ok}
    assert len(ids) == 30 and len(ok) == 90, "the whole set: 30 papers x (meta, html, source)"
    assert all(n == 1 for n in ok.values()), "no part stored twice"
    assert not [r for r in recs if r["status"] != "ok"]

    def path_of(pid, part):
        return {"html": "/html/", "source": "/e-print/"}[part] + pid

    for later, committed in ((log2, committed1), (log3, committed2)):
        asked = {e["path"] for e in later}
        again = [k for k in committed if k[1] != "meta" and path_of(*k) in asked]
        assert again == [], f"refetched after resume: {again[:5]}"
    # Query pages already paged are not asked again.
    state = json.loads(next((cache / "queries").glob("*.json")).read_text())
    assert state["complete"] and len(state["ids"]) == 30
    starts3 = [int(e["query"].split("start=")[1].split("&")[0]) for e in log3 if e["path"] == "/api/query"]
    assert all(st >= 10 for st in starts3), starts3
    for pid in ids:
        safe = pid.replace("/", "_")
        d = cache / "papers" / safe
        assert (d / f"{safe}.html.gz").exists() and (d / f"{safe}.src.tar.gz").exists()
        meta = PaperMeta.from_dict(json.loads((d / f"{safe}.meta.json").read_text()))
        assert meta.id == pid and meta.title
    assert not list(cache.rglob(".tmp-*"))
    assert "done" in p3.stdout and "30 complete" in p3.stdout


def test_fetch_takes_pages_from_an_ar5iv_dump(tmp_path):
    import zipfile

    dump = tmp_path / "ar5iv-2016-05.zip"
    with zipfile.ZipFile(dump, "w") as zf:
        zf.writestr("1605/1605.08386.html", (CORPUS / "latexml" / "a1709.html").read_bytes())
    cache = tmp_path / "cache"
    with FaultServer() as s:
        r = _fetch_in_process(
            [
                "fetch",
                "--ids",
                "1605.08386",
                "--html-dump",
                str(dump),
                "--parts",
                "meta,html",
                "--output",
                str(cache),
                *FAST,
            ],
            s.env(),
        )
        paths = [e["path"] for e in s.log]
    assert r.returncode == 0 and "1 complete" in r.stdout
    assert paths == ["/api/query"], "the page came from the dump, not over HTTP; no e-print asked for"
    side = json.loads((cache / "papers" / "1605.08386" / "1605.08386.meta.json").read_text())
    assert side["source"] == "ar5iv_dump" and side["url"].startswith("zip://1605/1605.08386.html::")


def test_pages_read_from_a_dump_are_not_reported_as_downloads(tmp_path):
    """A local ar5iv dump is read, not downloaded: the network line counts HTTP only."""
    import zipfile

    dump = tmp_path / "ar5iv-2016-05.zip"
    page = (CORPUS / "latexml" / "a1709.html").read_bytes()
    with zipfile.ZipFile(dump, "w") as zf:
        zf.writestr("1605/1605.08386.html", page)
    cache = tmp_path / "cache"
    with FaultServer() as s:
        r = _fetch_in_process(
            [
                "fetch",
                "--ids",
                "1605.08386",
                "--html-dump",
                str(dump),
                "--parts",
                "meta,html",
                "--output",
                str(cache),
                *FAST,
            ],
            s.env(),
        )
    assert r.returncode == 0
    report = json.loads((cache / "report.json").read_text())
    assert report["requests"] == 1  # the arXiv API query for the metadata
    assert report["dump_pages"] == 1 and report["dump_bytes"] == len(page)
    assert report["bytes"] < len(page)  # the page's bytes are not network bytes
    assert f"dumps   1 pages ({len(page) / (1 << 20):.2f} MiB) read from local ar5iv dumps, no request" in r.stdout


def test_the_fetch_job_runs_from_typed_options_without_a_command_line(tmp_path):
    """The fetch job is an object of transforms/sources: typed options in, a summary out."""
    from sciga.transforms.fetch.endpoints import HttpOptions, resolve_endpoints
    from sciga.transforms.fetch.job import FetchOptions, run_fetch_job

    with FaultServer() as s:
        serve_papers(s)
        env = s.env()
        endpoints = resolve_endpoints(
            env["SCIGA_ARXIV_API_URL"], env["SCIGA_HTML_BASE_URL"], env["SCIGA_EPRINT_BASE_URL"], rate_limit=0.0
        )
        opts = FetchOptions(
            output=str(tmp_path / "cache"),
            endpoints=endpoints,
            http=HttpOptions(max_retries=2, timeout=5, backoff=0.01),
            ids=("1605.08386", "abc"),
            parts=("meta", "html"),
            progress=False,
        )
        summary = run_fetch_job(opts)
    assert (summary.papers, summary.complete, summary.failed) == (2, 1, 1)
    assert [f[0] for f in summary.failures] == ["abc"]
    assert (tmp_path / "cache" / "papers" / "1605.08386" / "1605.08386.html.gz").exists()
    assert json.loads((tmp_path / "cache" / "report.json").read_text())["complete"] == 1
