"""`sciga update OUT` end to end on loopback servers, driven as a user drives it (a
subprocess): the OAI-PMH server (tests/oai_fixtures.py), the arXiv HTML server
(tests/sources_fixtures.py) and the Hub (tests/hub_fixtures.py).

Version 1 is built and published from a first harvest; the harvest server then serves new
and updated records (and the HTML server a new page for the new version); `sciga update`
publishes version 2 whose card lists exactly the added and changed papers; a second run
publishes nothing. A run killed with SIGKILL mid-way is resumed by running it again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hub_fixtures import FakeHub
from oai_fixtures import ListStore, OaiServer, make_paper
from sources_fixtures import FaultServer, Route

from conftest import ROOT, SAMPLES

# The harvest serves pages without their images (--parts meta,html, --no-tex): every figure is
# without an image, which the gate fails by default (--max-missing-image-rate 0.5).
NO_IMAGES_GATE = ("--max-missing-image-rate", "1")
TOKEN = "hf_sciga_TEST_update_token_7a8b9c"
REPO = "sciga-org/living"
PAGES = [SAMPLES / "html" / d / f"{d}.html" for d in ("2511.99001", "2511.99002", "2511.99003")]


def corpus() -> list:
    """Six cs papers first submitted in 2025, one math paper and one cs paper from 2024
    (both outside the definition)."""
    out = []
    for i in range(6):
        out.append(
            make_paper(
                i,
                first=datetime(2025, 2 + i, 3, 9, 0, tzinfo=timezone.utc),
                categories="cs.CV cs.LG",
                month_seq=100 + i,
            )
        )
    out.append(make_paper(6, first=datetime(2025, 3, 9, tzinfo=timezone.utc), categories="math.OC", month_seq=200))
    out.append(make_paper(7, first=datetime(2024, 6, 1, tzinfo=timezone.utc), categories="cs.CL", month_seq=300))
    for p in out:  # one version each: the update below adds the second
        p.versions = p.versions[:1]
        p.datestamp = p.versions[0][1].strftime("%Y-%m-%d")
    return out


class World:
    """The three servers, and the pages the HTML server has for each paper."""

    def __init__(self, tmp_path: Path):
        self.papers = corpus()
        self.store = ListStore(self.papers)
        self.pages = {p.id: PAGES[i % len(PAGES)].read_bytes() for i, p in enumerate(self.papers)}
        self.tmp = tmp_path
        self.out = tmp_path / "out"
        self.cache = tmp_path / "cache"

    def __enter__(self):
        self.oai = OaiServer(self.store, page_size=3).__enter__()
        self.web = FaultServer().start()
        self.web.default_html = lambda pid: (
            Route(self.pages[pid], 200, {"Content-Type": "text/html"}) if pid in self.pages else None
        )
        self.hub = FakeHub(TOKEN).start()
        return self

    def __exit__(self, *exc):
        self.hub.stop()
        self.web.stop()
        self.oai.__exit__(*exc)

    def env(self) -> dict:
        # Without HF_* / TRANSFORMERS_* of this process (training code sets TRANSFORMERS_OFFLINE,
        # which huggingface_hub reads as offline mode) and SCIGA_* endpoints.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "SCIGA_", "TRANSFORMERS_"))}
        env.update(
            PYTHONPATH=str(ROOT),
            HF_TOKEN=TOKEN,
            HF_HOME=str(self.tmp / "hf_home"),
            HF_HUB_DISABLE_XET="1",
            HF_HUB_DISABLE_TELEMETRY="1",
        )
        return env

    def first_run_args(self) -> list[str]:
        return [
            "--cache",
            str(self.cache),
            "--category",
            "cs",
            "--from",
            "2025-01-01",
            "--oai-url",
            self.oai.url,
            "--html-base-url",
            self.web.html_base,
            "--arxiv-api-url",
            self.web.api_url,
            "--eprint-base-url",
            self.web.eprint_base,
            "--rate-limit",
            "0",
            "--parts",
            "meta,html",
            "--repo-id",
            REPO,
            "--endpoint",
            self.hub.url,
            "--no-tex",
            "--workers",
            "1",
        ]

    def update(self, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "sciga",
                "update",
                str(self.out),
                *args,
                "--endpoint",
                self.hub.url,
                "--no-progress",
                "--image-check",
                "header",
                "--retry-backoff",
                "0.01",
                *NO_IMAGES_GATE,
            ],
            cwd=ROOT,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sciga",
                "update",
                str(self.out),
                *args,
                "--endpoint",
                self.hub.url,
                "--no-progress",
                "--image-check",
                "header",
                *NO_IMAGES_GATE,
            ],
            cwd=ROOT,
            env=self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def revise(self) -> dict:
        """What arXiv's harvest serves a month later: two new cs papers (one in a new
        category); a new version of paper 0 with a revised page; a journal reference added
        to paper 1 (metadata only); a new version of the math paper (not in the corpus)."""
        today = datetime.now(timezone.utc)
        day = today.strftime("%Y-%m-%d")
        cs = [p for p in self.papers if p.categories.startswith("cs") and p.versions[0][1].year == 2025]
        revised, journal = cs[0], cs[1]
        revised.versions.append(("v2", today))
        revised.title = "Revised: " + revised.title
        revised.datestamp = day
        text = self.pages[revised.id].decode("utf-8")
        self.pages[revised.id] = text.replace("</p>", " A sentence added in v2.</p>", 1).encode("utf-8")
        journal.journal_ref = "Journal of Examples 7 (2026)"
        journal.datestamp = day
        for p in (revised, journal):
            self.store.put(p)
        math = next(p for p in self.papers if p.categories == "math.OC")
        math.versions.append(("v2", today))
        math.datestamp = day
        self.store.put(math)
        new = [
            make_paper(
                40 + k,
                first=datetime(2026, 9, 1 + k, tzinfo=timezone.utc),
                categories=cat,
                datestamp=day,
                month_seq=500 + k,
            )
            for k, cat in enumerate(("cs.CL", "cs.RO stat.ML"))
        ]
        for k, p in enumerate(new):
            p.versions = p.versions[:1]
            self.papers.append(p)
            self.store.put(p)
            self.pages[p.id] = PAGES[k].read_bytes()
        return {"added": sorted(p.id for p in new), "revised": revised.id, "journal": journal.id}


def card_section(card: str) -> str:
    return card[card.index("## Changes in this version") : card.index("## Configs")]


@pytest.mark.e2e
def test_update_publishes_v1_then_exactly_what_changed_then_nothing(tmp_path):
    with World(tmp_path) as w:
        # 1. First run: the definition from the flags, saved; harvest, fetch, build, validate, v1.0.0.
        r = w.update(*w.first_run_args())
        assert r.returncode == 0, r.stdout + r.stderr[-4000:]
        assert "v1.0.0: published" in r.stdout and "the first version" in r.stdout, r.stdout
        definition = json.loads((w.out / "corpus.json").read_text())
        assert definition["selection"] == {"categories": ["cs"], "from": "2025-01-01", "until": None, "venues": []}
        assert (
            definition["build"]["args"] == ["--no-tex", "--workers", "1"] and definition["publish"]["repo_id"] == REPO
        )
        v1 = w.hub.files_at(REPO, "v1.0.0")
        in_corpus = sorted(p.id for p in w.papers if p.categories.startswith("cs") and p.versions[0][1].year == 2025)
        import pyarrow.parquet as pq

        papers_table = pq.read_table(sorted((w.out / "data" / "papers").glob("*.parquet"))[0])
        built = sorted(papers_table.column("id").to_pylist())
        assert built == in_corpus and len(built) == 6, "the math paper and the 2024 paper are not in the corpus"
        # each page's path is said relative to the cache's papers/ folder, as a build of that folder says it
        uris = {r["id"]: r["provenance"]["input_uri"] for r in papers_table.to_pylist()}
        assert all(u.startswith(f"{pid}/{pid}.html") for pid, u in uris.items()), uris
        assert "## Changes in this version" not in v1["README.md"].decode()

        # 2. A month later: new and updated records. A dry run first: all steps, nothing sent to the Hub.
        change = w.revise()
        writes = len(w.hub.writes())
        r = w.update("--dry-run")
        assert r.returncode == 0, r.stdout + r.stderr[-4000:]
        assert "v1.0.1: dry run" in r.stdout and "since v1.0.0: 2 papers added, 0 removed, 2 changed" in r.stdout, (
            r.stdout
        )
        assert "2 new to the build, 1 with a new version" in r.stdout, r.stdout
        assert len(w.hub.writes()) == writes and "v1.0.1" not in w.hub.repos[("dataset", REPO)].tags
        fetched = sorted(e["path"] for e in w.web.requests_for("/html/"))
        assert fetched.count(f"/html/{change['revised']}") == 2, "the page of the new version was asked for again"

        # The real run: what the dry run fetched and built is reused; only the upload is new.
        n_html = len(w.web.requests_for("/html/"))
        r = w.update()
        assert r.returncode == 0, r.stdout + r.stderr[-4000:]
        assert "v1.0.1: published" in r.stdout, r.stdout
        assert "0 new to the build, 0 with a new version" in r.stdout and "recomputed 0" in r.stdout, r.stdout
        assert w.web.requests_for("/html/")[n_html:] == []
        files = w.hub.files_at(REPO, "v1.0.1")
        section = card_section(files["README.md"].decode())
        assert f"- Added: `{change['added'][0]}`, `{change['added'][1]}`\n" in section, section
        assert "Removed" not in section
        changed = {c["id"]: c["fields"] for c in json.loads(files["changes/v1.0.1.json"])["changed_papers"]}
        assert set(changed) == {change["revised"], change["journal"]}, changed
        assert changed[change["journal"]] == ["metadata"]
        assert {"metadata", "text"} <= set(changed[change["revised"]])
        assert f"`{change['journal']}` (metadata)" in section and f"`{change['revised']}` (metadata, text" in section
        tags = dict(w.hub.repos[("dataset", REPO)].tags)
        commits = len(w.hub.commits(REPO))

        # 3. Nothing new: nothing is published.
        r = w.update()
        assert r.returncode == 0, r.stdout + r.stderr[-4000:]
        assert "nothing new since v1.0.1: nothing published" in r.stdout, r.stdout
        assert "0 new to the build, 0 with a new version" in r.stdout and "reused 8, recomputed 0" in r.stdout
        assert w.hub.repos[("dataset", REPO)].tags == tags and len(w.hub.commits(REPO)) == commits
        last = json.loads((w.out / ".sciga" / "update" / "last.json").read_text())
        assert last["outcome"] == "done"


def _harvest_pages(cache: Path) -> int:
    for f in (cache / "harvests").glob("*.json"):
        try:
            return json.loads(f.read_text()).get("pages", 0)
        except ValueError:
            return 0
    return 0


@pytest.mark.e2e
@pytest.mark.parametrize("step", ["harvest", "build"])
def test_a_killed_update_resumes_and_publishes_once(tmp_path, step):
    with World(tmp_path) as w:
        r = w.update(*w.first_run_args())
        assert r.returncode == 0, r.stdout + r.stderr[-4000:]
        change = w.revise()
        pages = _harvest_pages(w.cache)
        if step == "harvest":
            w.oai.delay = 1.0  # slow pages: the kill lands between the incremental pass's two pages
            reached = lambda: _harvest_pages(w.cache) > pages
        else:  # the build of version 2 has started: its staging folder exists
            reached = lambda: (w.out / ".staging").is_dir() and any((w.out / ".staging").iterdir())
        p = w.popen()
        t0 = time.time()
        while p.poll() is None and time.time() - t0 < 300 and not reached():
            time.sleep(0.05)
        time.sleep(0.3)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=60)
        w.oai.delay = 0.0
        assert p.returncode == -signal.SIGKILL, "killed before it finished"
        assert "v1.0.1" not in w.hub.repos[("dataset", REPO)].tags
        if step == "harvest":
            assert _harvest_pages(w.cache) == pages + 1, "killed after the first page of the incremental pass"
        r = w.update()
        assert r.returncode == 0, r.stdout + r.stderr[-4000:]
        assert "v1.0.1: published" in r.stdout, r.stdout
        section = card_section(w.hub.files_at(REPO, "v1.0.1")["README.md"].decode())
        assert f"- Added: `{change['added'][0]}`, `{change['added'][1]}`\n" in section, section
        # The journal reference changes the paper's metadata alone: its result keeps its key
        # (a kill after it was stored must not leave the old rows in the shards).
        assert f"`{change['journal']}` (metadata)" in section, section + r.stdout
        assert f"`{change['revised']}` (metadata, text" in section, section + r.stdout
        assert len(w.hub.commits(REPO)) == 3  # initial, v1.0.0, v1.0.1: published once
        r = w.update()
        assert r.returncode == 0 and "nothing new since v1.0.1" in r.stdout, r.stdout + r.stderr[-3000:]


def test_first_run_mistakes_are_one_sentence(tmp_path):
    out = tmp_path / "out"
    cases = [
        ([], "has no corpus definition yet"),
        (["--cache", str(tmp_path / "c"), "--category", "cs", "--from", "2025-13-01"], "--from"),
        (["--cache", str(tmp_path / "c"), "--category", "cs", "--repo-id", "not a repo"], "--repo-id"),
        (
            ["--cache", str(tmp_path / "c"), "--category", "cs", "--input", "x"],
            "--input is not a flag of `sciga update`",
        ),
        (["--cache", "gs://bucket/cache", "--category", "cs"], "must be a local folder"),
        # build flags pass through `sciga update` to the build: a misspelled one is still caught,
        # and a bad value of a real one is refused before anything runs
        (["--cache", str(tmp_path / "c"), "--category", "cs", "--wokers", "2"], "--wokers (did you mean --workers?)"),
        (["--cache", str(tmp_path / "c"), "--category", "cs", "--workers", "0"], "argument --workers"),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    env.update(PYTHONPATH=str(ROOT), HF_HOME=str(tmp_path / "hf"))
    for args, needle in cases:
        r = subprocess.run(
            [sys.executable, "-m", "sciga", "update", str(out), *args, "--dry-run"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        err = r.stderr.strip()
        assert err.startswith("sciga update: ") and needle in err and "\n" not in err, (args, err)
    # A saved definition is not silently changed by other flags.
    (out).mkdir()
    (out / "corpus.json").write_text(
        json.dumps({"definition_version": 1, "cache": str(tmp_path / "c"), "selection": {"categories": ["cs"]}})
    )
    r = subprocess.run(
        [sys.executable, "-m", "sciga", "update", str(out), "--category", "math", "--dry-run"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "already defines the corpus" in r.stderr and "--category" in r.stderr, r.stderr


@pytest.mark.e2e
def test_a_first_run_whose_harvest_failed_saves_no_definition(tmp_path):
    """A first run with a wrong --oai-url (the loopback arXiv server answers 404 there) fails at
    the harvest and leaves no OUT/corpus.json; the corrected command is a first run again,
    not refused as a change to a definition that never built."""
    with World(tmp_path) as w:
        args = w.first_run_args()
        wrong = list(args)
        wrong[wrong.index("--oai-url") + 1] = w.web.html_base.rstrip("/") + "/no-oai-here"
        r = w.update(*wrong, "--dry-run")
        assert r.returncode != 0, r.stdout + r.stderr[-3000:]
        assert "Traceback" not in r.stderr, r.stderr[-3000:]
        assert not (w.out / "corpus.json").exists()

        r = w.update(*args, "--dry-run")
        assert r.returncode == 0, r.stdout + r.stderr[-3000:]
        assert "already defines the corpus" not in r.stderr
        assert "saved the corpus definition" in r.stdout, r.stdout
        assert json.loads((w.out / "corpus.json").read_text())["harvest"]["oai_url"] == w.oai.url


def test_the_update_build_publishes_paths_against_one_root_whatever_the_papers(tmp_path):
    """One spec per selected paper, but one root: the shards' paths and every part's
    fingerprint (which names the roots) do not change with the selection. With a root per
    paper, a path was compared with each of them (hours at 145,000 papers), and one new
    paper changed every part's fingerprint, so every part was written again."""
    from types import SimpleNamespace

    from sciga.pipelines.update import build_run_options

    cache = tmp_path / "cache"
    ids = [f"2601.{i:05d}" for i in range(1, 6)]
    for pid in ids:
        (cache / "papers" / pid).mkdir(parents=True)
    definition = SimpleNamespace(cache=str(cache), build_args=["--no-tex"], repo_id=None, private=False)
    o = SimpleNamespace(definition=definition, run_build_args=[], out=str(tmp_path / "out"), progress=False)
    roots = []
    for selected in (ids[:2], ids):
        opts, _ = build_run_options(o, SimpleNamespace(selected=selected))
        assert len(opts.specs) == len(selected)
        assert opts.vision.ga_roots == (str(cache / "papers"),)
        roots.append(opts.published_roots())
    assert roots[0] == roots[1] and str(cache / "papers") in roots[0]
    assert not any(r.startswith(str(cache / "papers") + "/") for r in roots[0]), roots[0]
