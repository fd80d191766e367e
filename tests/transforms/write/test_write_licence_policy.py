"""The licence policy (``--licences``) end to end through the CLI: sample pages given a
sidecar of each licence kind are built under ``all``, ``redistributable`` and
``redistributable-nc`` into one folder; each build holds exactly the papers it should in
full, a withheld paper keeps only its metadata row (no sections, figures, figure rows,
image bytes or mentions), a policy change recomputes no paper, the gate passes each build
and fails one where a withheld paper's content was put back, and `datasets` loads every
config."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from quality_fixtures import rewrite_shard

from sciga.pipelines.cli import main
from sciga.samples import sample_dir
from sciga.schemas.licences import canonical_url

pytestmark = pytest.mark.e2e

# paper id -> the licence its sidecar gives (None: the sidecar says nothing)
LICENCES = {
    "2511.99101": "http://creativecommons.org/publicdomain/zero/1.0/",
    "2511.99102": "https://creativecommons.org/licenses/by/4.0",  # spelled as some tools do
    "2511.99103": "http://creativecommons.org/licenses/by-sa/4.0/",
    "2511.99104": "http://creativecommons.org/licenses/by-nc-sa/4.0/",
    "2511.99105": "http://creativecommons.org/licenses/by-nc-nd/4.0/",
    "2511.99106": "http://arxiv.org/licenses/nonexclusive-distrib/1.0/",
    "2511.99107": "http://creativecommons.org/licenses/by/3.0/",
    "2511.99108": None,
}
IN_FULL = {
    "all": set(LICENCES),
    "redistributable": {"2511.99101", "2511.99102", "2511.99103", "2511.99107"},
    "redistributable-nc": {"2511.99101", "2511.99102", "2511.99103", "2511.99104", "2511.99107"},
}


def make_pages(root: Path) -> Path:
    """One sample page (with its figures) copied once per licence, each with its sidecar."""
    src = Path(sample_dir()) / "2511.99001"
    meta = json.loads((Path(sample_dir("meta")) / "2511.99001.meta.json").read_text())
    for pid, lic in LICENCES.items():
        dest = root / pid
        shutil.copytree(src, dest)
        (dest / "2511.99001.html").rename(dest / f"{pid}.html")
        (dest / f"{pid}.meta.json").write_text(json.dumps({**meta, "id": pid, "license": lic}))
    return root


def build(pages: Path, out: Path, policy: str | None, *extra: str) -> dict:
    args = ["build", "--input", str(pages), "--output", str(out), *extra]
    if policy:
        args += ["--licences", policy]
    assert main(args) == 0
    return json.loads((out / "manifest.json").read_text())


def rows(out: Path, config: str) -> list[dict]:
    return [r for f in sorted((out / "data" / config).glob("*.parquet")) for r in pq.read_table(f).to_pylist()]


def validate(out: Path) -> int:
    return main(["validate", str(out), "--image-check", "header"])


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> Path:
    return make_pages(tmp_path_factory.mktemp("licence_pages"))


def check_build(out: Path, policy: str, manifest: dict) -> None:
    papers = {p["id"]: p for p in rows(out, "papers")}
    assert set(papers) == set(LICENCES)  # a withheld paper never vanishes: counts reconcile
    assert manifest["reconciled"] and manifest["options"]["licences"] == policy
    full = {pid for pid, p in papers.items() if p["withheld"] is None}
    assert full == IN_FULL[policy]
    for pid, p in papers.items():
        if pid in full:
            assert p["sections"] and p["figures"] and p["abstract"]
        else:  # the metadata row: id, title, authors, licence, why
            assert p["title"] and p["authors"] and p["license"] == LICENCES[pid]
            assert p["provenance"]["url"] or p["provenance"]["input_uri"]  # where the paper is
            assert p["withheld"] == canonical_url(LICENCES[pid])  # the licence, "unknown" for none
            assert not p["sections"] and not p["figures"] and p["abstract"] is None and not p["teaser"]
    figure_papers = {r["paper_id"] for r in rows(out, "figures")}
    mention_papers = {r["paper_id"] for r in rows(out, "mentions")}
    assert figure_papers == full and mention_papers == full
    withheld = len(LICENCES) - len(full)
    assert sum((manifest.get("withheld") or {}).values()) == withheld


def test_each_policy_writes_exactly_its_papers_and_a_change_recomputes_nothing(pages, tmp_path, capsys):
    out = tmp_path / "build"
    m = build(pages, out, None)  # the default of `sciga build` is all
    check_build(out, "all", m)
    assert m["incremental"]["recomputed"] == len(LICENCES)
    assert validate(out) == 0

    m = build(pages, out, "redistributable")
    check_build(out, "redistributable", m)
    assert m["incremental"] == {"recomputed": 0, "reused": len(LICENCES)}  # the policy filters the writing
    summary = capsys.readouterr().out
    assert "withheld               4" in summary and "--assume-licence URL" in summary
    assert validate(out) == 0
    front = (out / "README.md").read_text().split("---")[1]
    assert "license: cc-by-4.0" not in front and "license: other" in front  # CC0, CC BY 3.0/4.0, BY-SA
    card = (out / "README.md").read_text()
    assert "licence policy `redistributable`" in card and "4 papers were withheld" in card

    m = build(pages, out, "redistributable-nc")
    check_build(out, "redistributable-nc", m)
    assert m["incremental"]["recomputed"] == 0
    assert validate(out) == 0
    assert "non-commercial" in (out / "README.md").read_text().split("---")[1]

    m = build(pages, out, "all")  # back: the withheld papers are written in full again
    check_build(out, "all", m)
    assert m["incremental"]["recomputed"] == 0 and "withheld" not in m


def test_assume_licence_gives_pages_without_one_a_licence(pages, tmp_path):
    out = tmp_path / "build"
    m = build(pages, out, "redistributable", "--assume-licence", "https://creativecommons.org/licenses/by/4.0")
    papers = {p["id"]: p for p in rows(out, "papers")}
    assert papers["2511.99108"]["withheld"] is None
    assert papers["2511.99108"]["license"] == "http://creativecommons.org/licenses/by/4.0/"
    assert papers["2511.99106"]["withheld"] == LICENCES["2511.99106"]  # a licence given is kept
    assert m["options"]["assume_licence"] == "http://creativecommons.org/licenses/by/4.0/"


def test_an_unknown_policy_or_licence_is_one_line(pages, tmp_path, capsys):
    for extra in (["--licences", "open"], ["--assume-licence", "https://example.org/mine"]):
        with pytest.raises(SystemExit) as e:
            main(["build", "--input", str(pages), "--output", str(tmp_path / "b"), *extra])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and ("--licences" in err or "--assume-licence" in err)


def test_the_gate_fails_a_build_where_withheld_content_was_put_back(pages, tmp_path):
    out = tmp_path / "build"
    build(pages, out, "redistributable")
    full = next(p for p in rows(out, "papers") if p["withheld"] is None)

    def put_back(papers):
        for p in papers:
            if p["id"] == "2511.99106":
                p["sections"] = full["sections"]
        return papers

    rewrite_shard(out, "papers", put_back)
    assert validate(out) == 1
    report = json.loads((out / "quality" / "report.json").read_text())
    failed = [c for c in report["checks"] if not c["success"]]
    assert any(c["table"] == "licences" and "withheld" in c["description"] for c in failed)


def test_the_gate_fails_a_paper_in_full_that_the_policy_does_not_let_in(pages, tmp_path):
    out = tmp_path / "build"
    build(pages, out, "redistributable")

    def release(papers):
        for p in papers:
            p["withheld"] = None  # the metadata rows now claim to be papers in full
        return papers

    rewrite_shard(out, "papers", release)
    assert validate(out) == 1
    report = json.loads((out / "quality" / "report.json").read_text())
    assert any(c["table"] == "licences" and "policy" in c["description"] for c in report["checks"] if not c["success"])


def test_datasets_loads_every_config_of_a_filtered_build(pages, tmp_path):
    datasets = pytest.importorskip("datasets")
    out = tmp_path / "build"
    build(pages, out, "redistributable")
    for config in ("papers", "figures", "mentions"):
        ds = datasets.load_dataset(str(out), config, split="train", cache_dir=str(tmp_path / "hf"))
        assert ds.num_rows == len(rows(out, config))
    papers = datasets.load_dataset(str(out), "papers", split="train", cache_dir=str(tmp_path / "hf"))
    assert sorted(x for x in papers["withheld"] if x) == sorted(
        canonical_url(LICENCES[p]) for p in LICENCES if p not in IN_FULL["redistributable"]
    )
