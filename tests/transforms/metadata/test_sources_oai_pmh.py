"""`sciga fetch --oai-pmh` against a real OAI-PMH server on 127.0.0.1 (tests/oai_fixtures.py):
resumption tokens, 503 + Retry-After, tokens that expire, kill -9 and resume, incremental
harvests, OAI-PMH errors, malformed pages, both metadata formats."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from oai_fixtures import ListStore, OaiServer, make_paper
from sources_fixtures import ROOT

from sciga.pipelines.cli import main
from sciga.schemas.records import PaperMeta
from sciga.transforms.fetch.http_client import PoliteClient
from sciga.transforms.metadata.cache_sink import open_for_import
from sciga.transforms.metadata.corpus_selection import Selection
from sciga.transforms.metadata.oai_pmh import OaiHarvester, OaiHarvestOptions

FAST = ["--rate-limit", "0", "--retry-backoff", "0.01", "--timeout", "5", "--no-progress"]
SCIGA = ["--category", "cs", "--from", "2021-01", "--until", "2024-03"]


def papers(n: int = 240, start=datetime(2020, 11, 20, tzinfo=timezone.utc), step_min: int = 9000):
    """n papers, first versions every ~6 days from late 2020 on; a third are not cs (one
    of them cross-listed to cs), datestamps spread so pages cut through days."""
    out = []
    for i in range(n):
        cats = ("astro-ph.IM cs.DL" if i % 6 == 3 else "math.OC") if i % 3 == 0 else None
        p = make_paper(i, first=start + timedelta(minutes=step_min * i), categories=cats, month_seq=i + 1)
        out.append(p)
    return out


def expected(ps, sel: Selection) -> set:
    from oai_fixtures import snapshot_obj

    from sciga.transforms.metadata.arxiv_records import first_version_day, meta_from_snapshot

    keep = set()
    for p in ps:
        m = meta_from_snapshot(snapshot_obj(p))
        if sel.matches(m["categories"], first_version_day(m)):
            keep.add(p.id)
    return keep


SCIGA_SEL = Selection(categories=("cs",), date_from="2021-01-01", date_until="2024-03-31")


def run(args: list[str]) -> tuple[int, str]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(args)
    return rc, buf.getvalue()


def tree(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted((root / "papers").rglob("*")) if p.is_file()}


def journal_ids(cache: Path) -> list:
    return [json.loads(x)["id"] for x in (cache / "journal.jsonl").read_text().splitlines() if x.strip()]


def reference(ps, tmp_path: Path, args=SCIGA, page_size: int = 25) -> Path:
    ref = tmp_path / "reference"
    with OaiServer(ListStore(ps), page_size=page_size) as s:
        rc, out = run(["fetch", "--oai-pmh", "--oai-url", s.url, *args, "--output", str(ref), *FAST])
    assert rc == 0, out
    return ref


def test_harvest_follows_tokens_selects_and_writes_sidecars(tmp_path):
    ps = papers()
    cache = tmp_path / "cache"
    with OaiServer(ListStore(ps), page_size=25) as s:
        rc, out = run(["fetch", "--oai-pmh", "--oai-url", s.url, *SCIGA, "--output", str(cache), *FAST])
        log = list(s.log)
    assert rc == 0, out
    first = log[0]["query"]
    assert first == {"verb": "ListRecords", "metadataPrefix": "arXivRaw", "set": "cs", "from": "2020-12-31"}, (
        "set derived from --category; from = the day before --from; no until (revisions come later)"
    )
    in_set = [p for p in ps if "cs" in p.sets and p.datestamp >= "2020-12-31"]
    assert len(log) == -(-len(in_set) // 25) and all("resumptionToken" in e["query"] for e in log[1:])
    want = expected(ps, SCIGA_SEL)
    got = {d.name for d in (cache / "papers").iterdir()}
    assert got == want and len(want) > 100
    assert any(p.categories == "astro-ph.IM cs.DL" for p in ps if p.id in want), "a cs cross-list is in"
    for pid in list(want)[:20]:
        m = json.loads((cache / "papers" / pid / f"{pid}.meta.json").read_text())
        meta = PaperMeta.from_dict(m)
        assert meta.id == pid and meta.title and meta.authors and "2021-01-01" <= meta.published[:10] <= "2024-03-31"
        assert (cache / "papers" / pid / f"{pid}.api.json").exists()
    assert sorted(journal_ids(cache)) == sorted(want)
    rep = json.loads((cache / "report.json").read_text())
    assert rep["mode"] == "oai-pmh" and rep["selected"] == len(want) and rep["complete"] and rep["requests"] == len(log)
    assert f"{len(want):,} selected" in out and "OAI-PMH set cs" in out


def test_503_retry_after_is_honoured(tmp_path):
    ps = papers(60)
    with OaiServer(ListStore(ps), page_size=25) as s:
        s.script(["ok", "503:1.2", "ok"])
        rc, out = run(["fetch", "--oai-pmh", "--oai-url", s.url, "--output", str(tmp_path / "c"), *FAST])
        log = list(s.log)
    assert rc == 0, out
    assert [e.get("status") for e in log] == [200, 503, 200, 200]
    assert log[2]["t"] - log[1]["t"] >= 1.15, "waited for Retry-After before asking again"
    assert log[2]["query"] == log[1]["query"], "the same page is asked again"
    assert "(1 retries" in out
    assert len(list((tmp_path / "c" / "papers").iterdir())) == 60


def test_expired_token_restarts_from_the_last_datestamp_without_duplicates(tmp_path):
    ps = papers()
    ref = reference(ps, tmp_path)
    cache = tmp_path / "cache"
    with OaiServer(ListStore(ps), page_size=25) as s:
        s.script(["ok", "ok", "expire"])
        rc, out = run(["fetch", "--oai-pmh", "--oai-url", s.url, *SCIGA, "--output", str(cache), *FAST])
        log = list(s.log)
    assert rc == 0, out
    assert log[2]["error"] == "badResumptionToken"
    restart = log[3]["query"]
    assert "resumptionToken" not in restart and restart["from"] > "2020-12-31", restart
    assert "resumption token expired" in out and "1 restarts" in out
    assert tree(cache) == tree(ref), "same sidecars as a harvest whose token never expired"
    ids = journal_ids(cache)
    assert len(ids) == len(set(ids)), "records sent again after the restart are not written twice"


def test_tokens_with_a_lifetime_shorter_than_the_rate_limit(tmp_path):
    """Every token expires before the polite client may use it: the harvest still ends,
    page by page from the last datestamp, with the same files."""
    ps = papers(100)
    ref = reference(ps, tmp_path, args=["--category", "cs"])
    cache = tmp_path / "cache"
    with OaiServer(ListStore(ps), page_size=25, token_ttl=0.05) as s:
        opts = OaiHarvestOptions(url=s.url, set_spec="cs", selection=Selection(categories=("cs",)))
        rep = OaiHarvester(opts, PoliteClient(0.15), open_for_import(str(cache))).run()
        errors = [e for e in s.log if e.get("error") == "badResumptionToken"]
    assert rep.complete and rep.restarts == len(errors) >= 2
    assert tree(cache) == tree(ref)


class _Unordered(ListStore):
    """A server that does not send records in datestamp order (allowed by OAI-PMH)."""

    def window(self, from_, until, set_):
        return list(reversed(super().window(from_, until, set_)))


def test_expired_token_with_records_out_of_datestamp_order_restarts_from_the_pass_start(tmp_path):
    ps = papers(120)
    cache = tmp_path / "cache"
    with OaiServer(_Unordered(ps), page_size=25) as s:
        s.script(["ok", "ok", "expire"])
        opts = OaiHarvestOptions(url=s.url, selection=Selection(categories=("cs",)), set_spec="cs")
        rep = OaiHarvester(opts, PoliteClient(0), open_for_import(str(cache))).run()
        log = list(s.log)
    assert rep.complete and rep.restarts == 1
    assert "from" not in log[3]["query"] and "resumptionToken" not in log[3]["query"], "no safe datestamp: start over"
    assert {d.name for d in (cache / "papers").iterdir()} == expected(ps, Selection(categories=("cs",)))


def test_tokens_that_keep_expiring_stop_with_progress_saved(tmp_path):
    ps = papers(120)
    for p in ps:
        p.datestamp = "2022-01-01"  # a bulk update: one datestamp for every record
    with OaiServer(ListStore(ps), page_size=25) as s:
        s.script(["ok"] + ["expire", "ok"] * 6)
        opts = OaiHarvestOptions(url=s.url, max_restarts=2)
        # Each restart gets the same first page again, then the token expires: no progress.
        rep = OaiHarvester(opts, PoliteClient(0), open_for_import(str(tmp_path / "c"))).run()
    assert not rep.complete and rep.stopped and "rejected 3 resumption tokens in a row" in rep.stopped
    assert rep.exit_code == 1


def _wait(pred, proc, timeout=60.0):
    t0 = time.time()
    while time.time() - t0 < timeout and proc.poll() is None:
        if pred():
            return
        time.sleep(0.01)


def _state(cache: Path) -> dict:
    for f in (cache / "harvests").glob("*.json"):
        try:
            return json.loads(f.read_text())
        except ValueError:
            return {}
    return {}


def test_kill_9_mid_harvest_then_resume_gives_the_uninterrupted_files(tmp_path):
    ps = papers(600, step_min=2500)
    ref = reference(ps, tmp_path, page_size=20)
    cache = tmp_path / "cache"
    with OaiServer(ListStore(ps), page_size=20, delay=0.03) as s:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        args = [
            sys.executable,
            "-m",
            "sciga",
            "fetch",
            "--oai-pmh",
            "--oai-url",
            s.url,
            *SCIGA,
            "--output",
            str(cache),
            *FAST,
        ]
        p = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _wait(lambda: _state(cache).get("pages", 0) >= 6, p)
        time.sleep(0.05)  # somewhere inside a page
        p.kill()
        p.wait(timeout=30)
        st = _state(cache)
        n_before = len(s.log)
        # Run 2: resumes at the saved token.
        r2 = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        log2 = s.log[n_before:]
    total = -(-len([p for p in ps if "cs" in p.sets and p.datestamp >= "2020-12-31"]) // 20)
    assert p.returncode == -signal.SIGKILL and 6 <= st["pages"] < total - 1, "killed mid-way"
    assert r2.returncode == 0, r2.stderr + r2.stdout
    assert log2[0]["query"].get("resumptionToken") == st["token"], "resumed at the page it was on, not from the start"
    assert len(log2) == total - st["pages"]
    assert tree(cache) == tree(ref), "no missing, no extra, no different file"
    ids = journal_ids(cache)
    assert len(ids) == len(set(ids)), "no record journaled twice"


def test_kill_then_token_expired_then_resume(tmp_path):
    ps = papers(400, step_min=3600)
    ref = reference(ps, tmp_path, page_size=20)
    cache = tmp_path / "cache"
    with OaiServer(ListStore(ps), page_size=20, delay=0.03) as s:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        args = [
            sys.executable,
            "-m",
            "sciga",
            "fetch",
            "--oai-pmh",
            "--oai-url",
            s.url,
            *SCIGA,
            "--output",
            str(cache),
            *FAST,
        ]
        p = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _wait(lambda: _state(cache).get("pages", 0) >= 4, p)
        p.kill()
        p.wait(timeout=30)
        s.expire_tokens()  # the pause outlived the token
        r2 = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r2.returncode == 0, r2.stderr + r2.stdout
    assert "resumption token expired" in r2.stdout
    assert tree(cache) == tree(ref)
    ids = journal_ids(cache)
    assert len(ids) == len(set(ids))


def test_incremental_harvest_asks_only_for_changes(tmp_path):
    ps = papers(150)
    cache = tmp_path / "cache"
    store = ListStore(ps)
    today = datetime.now(timezone.utc).date().isoformat()
    with OaiServer(store, page_size=25) as s:
        rc, out = run(["fetch", "--oai-pmh", "--oai-url", s.url, *SCIGA, "--output", str(cache), *FAST])
        assert rc == 0, out
        n1 = len(s.log)
        # Two papers revised, one new paper, all with today's datestamp.
        wanted = sorted(expected(ps, SCIGA_SEL))
        changed = [store.by_id[wanted[0]], store.by_id[wanted[1]]]
        for p in changed:
            p.title = "Revised: " + p.title
            p.datestamp = today
            store.put(p)
        new = make_paper(
            9999, first=datetime(2023, 5, 5, tzinfo=timezone.utc), categories="cs.CL", datestamp=today, month_seq=9999
        )
        store.put(new)
        rc, out = run(["fetch", "--oai-pmh", "--oai-url", s.url, *SCIGA, "--output", str(cache), *FAST])
        log2 = s.log[n1:]
    assert rc == 0, out
    assert log2[0]["query"]["from"] == today, "only records changed since the last harvest started"
    assert "1 new, 2 updated, 0 unchanged" in out and "incremental harvest" in out
    assert json.loads((cache / "papers" / changed[0].id / f"{changed[0].id}.meta.json").read_text())[
        "title"
    ].startswith("Revised")
    assert (cache / "papers" / new.id / f"{new.id}.meta.json").exists()


def test_explicit_datestamp_window(tmp_path):
    ps = papers(150)
    cache = tmp_path / "cache"
    with OaiServer(ListStore(ps), page_size=25) as s:
        rc, out = run(
            [
                "fetch",
                "--oai-pmh",
                "--oai-url",
                s.url,
                "--set",
                "cs",
                "--datestamp-from",
                "2021-06-01",
                "--datestamp-until",
                "2021-12-31",
                "--output",
                str(cache),
                *FAST,
            ]
        )
        q = s.log[0]["query"]
        n1 = len(s.log)
        rc2, out2 = run(
            [
                "fetch",
                "--oai-pmh",
                "--oai-url",
                s.url,
                "--set",
                "cs",
                "--datestamp-from",
                "2021-06-01",
                "--datestamp-until",
                "2021-12-31",
                "--output",
                str(cache),
                *FAST,
            ]
        )
        assert len(s.log) == n1, "a closed window harvested completely is not asked again"
    assert rc == 0 and rc2 == 0, out
    assert (q["from"], q["until"], q["set"]) == ("2021-06-01", "2021-12-31", "cs")
    want = {p.id for p in ps if "cs" in p.sets and "2021-06-01" <= p.datestamp <= "2021-12-31"}
    assert {d.name for d in (cache / "papers").iterdir()} == want and want
    assert "nothing to ask" in out2


def test_oai_errors_malformed_pages_and_deleted_records(tmp_path):
    ps = papers(60)
    ps[5].deleted = True
    with OaiServer(ListStore(ps), page_size=25) as s:
        # A window with no records is an empty, complete harvest.
        rc, out = run(
            [
                "fetch",
                "--oai-pmh",
                "--oai-url",
                s.url,
                "--datestamp-from",
                "2030-01-01",
                "--output",
                str(tmp_path / "empty"),
                *FAST,
            ]
        )
        assert rc == 0 and "0 selected" in out
        # The server rejects the arguments: one sentence, exit 1.
        rc, out = run(
            [
                "fetch",
                "--oai-pmh",
                "--oai-url",
                s.url,
                "--datestamp-from",
                "2022-01-01",
                "--datestamp-until",
                "2021-01-01",
                "--output",
                str(tmp_path / "bad"),
                *FAST,
            ]
        )
        assert rc == 1 and "badArgument" in out and "check --set, --datestamp-from" in out
        # A page cut in half is asked again.
        s.script(["ok", "malformed", "ok"])
        rc, out = run(["fetch", "--oai-pmh", "--oai-url", s.url, "--output", str(tmp_path / "c"), *FAST])
        assert rc == 0, out
        assert "1 deleted records skipped" in out
        assert len(list((tmp_path / "c" / "papers").iterdir())) == 59
        # Three malformed answers in a row stop the harvest, progress kept.
        s.script(["ok", "malformed", "malformed", "malformed"])
        rc, out = run(["fetch", "--oai-pmh", "--oai-url", s.url, "--output", str(tmp_path / "d"), *FAST])
        assert rc == 1 and "malformed page 3 times" in out and "rerun" in out
    # An endpoint that is no OAI-PMH endpoint.
    from sources_fixtures import FaultServer

    with FaultServer() as f:
        f.add("/oai", b"<html><body>hello</body></html>", headers={"Content-Type": "text/html"})
        rc, out = run(["fetch", "--oai-pmh", "--oai-url", f.base + "/oai", "--output", str(tmp_path / "e"), *FAST])
    assert rc == 1 and "check --oai-url" in out


def test_arxiv_format_keeps_affiliations(tmp_path):
    ps = papers(40)
    cache = tmp_path / "cache"
    with OaiServer(ListStore(ps), page_size=25) as s:
        rc, out = run(
            [
                "fetch",
                "--oai-pmh",
                "--oai-url",
                s.url,
                "--oai-format",
                "arXiv",
                "--category",
                "cs",
                "--output",
                str(cache),
                *FAST,
            ]
        )
        assert s.log[0]["query"]["metadataPrefix"] == "arXiv"
    assert rc == 0, out
    with_aff = [p for p in ps if "cs" in p.sets and any(a[3] for a in p.authors)]
    p = with_aff[0]
    m = json.loads((cache / "papers" / p.id / f"{p.id}.meta.json").read_text())
    assert [a["affiliations"] for a in m["authors"]] == [[a[3]] if a[3] else [] for a in p.authors]
    assert m["published"] == p.versions[0][1].strftime("%Y-%m-%d")


def test_flags_that_do_not_go_together(tmp_path):
    out = str(tmp_path / "c")
    for args, msg in [
        (["--oai-pmh", "--metadata-snapshot", "x.jsonl"], "not both"),
        (["--set", "cs", "--ids", "2101.00001"], "--set goes with --oai-pmh"),
        (["--oai-pmh", "--ids", "2101.00001"], "second command"),
        (["--category", "cs", "--ids", "2101.00001"], "select from"),
        (["--html-from", "latexml", "--ids", "2101.00001"], "--html-from goes with --plan"),
        (["--oai-pmh", "--from", "2021-13"], "no month 13"),
    ]:
        with pytest.raises(SystemExit) as e:
            main(["fetch", *args, "--output", out, "--no-progress"])
        assert msg in str(e.value), (args, e.value)
