"""Publishing against a Hub-compatible server on 127.0.0.1 (tests/hub_fixtures.py) with the
real huggingface_hub client: one commit per publish plus a version tag, the card's YAML, the
file list, idempotent re-publish, resumption after a failed commit, a refused failing build,
and a token that never reaches logs or output. Loading the result back: `datasets` from the
build folder and from the loopback Hub, DuckDB over hf:// paths."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from hub_fixtures import hub_subprocess_env, served_hub
from quality_fixtures import ROOT, edit_manifest, rewrite_shard, shard

from sciga.explore.dataset_card import read_front_matter
from sciga.pipelines.cli import main
from sciga.schemas.version import BUILDER_VERSION, SCHEMA_VERSION

TOKEN = "hf_sciga_TEST_token_5b7f0c9e2d"  # a fake token: the tests assert it never shows up
REPO = "sciga-org/sample"


@pytest.fixture
def hub(monkeypatch, tmp_path):
    with served_hub(monkeypatch, tmp_path, TOKEN) as server:
        yield server


def publish(build, version, hub, *extra):
    return main(
        [
            "publish",
            str(build),
            "--repo-id",
            REPO,
            "--version",
            version,
            "--endpoint",
            hub.url,
            "--allow-any-licence",
            *extra,
        ]
    )


def puts(hub):
    return [p for m, p in hub.requests if m == "PUT"]


def commit_posts(hub):
    return [p for m, p in hub.requests if m == "POST" and "/commit/" in p]


def test_publish_lifecycle_one_commit_per_version_and_idempotent(hub, build_copy, capsys, caplog):
    caplog.set_level(logging.DEBUG)  # every logger, huggingface_hub's included: the token must not appear
    local_shards = sorted(p.relative_to(build_copy).as_posix() for p in (build_copy / "data").rglob("*.parquet"))

    # v1.0.0: repo created, one commit with every shard and the card, then the tag.
    (build_copy / "README.md").unlink(missing_ok=True)  # a build from before builds wrote their card
    assert publish(build_copy, "v1.0.0", hub) == 0
    out = capsys.readouterr().out
    assert "published" in out and "wrote the dataset card" in out
    commits = hub.commits(REPO)
    assert len(commits) == 2  # the repo's initial .gitattributes commit + ours
    assert len(commit_posts(hub)) == 1
    repo = hub.repos[("dataset", REPO)]
    assert repo.tags["v1.0.0"][0] == commits[0].oid
    assert BUILDER_VERSION in repo.tags["v1.0.0"][1] and SCHEMA_VERSION in repo.tags["v1.0.0"][1]
    files = hub.files_at(REPO, "v1.0.0")
    assert sorted(files) == sorted([".gitattributes", "README.md", "manifest.json"] + local_shards)
    for path in local_shards:
        assert files[path] == (build_copy / path).read_bytes()
        assert repo.resolve("v1.0.0").files[path].lfs  # shards went through the LFS batch API
    assert len(puts(hub)) == len(local_shards)

    card = files["README.md"].decode()
    assert files["README.md"] == (build_copy / "README.md").read_bytes()  # the folder's card is the Hub's card
    meta = read_front_matter(card)
    assert meta["license"] == "other"
    by_name = {c["config_name"]: c for c in meta["configs"]}
    manifest = json.loads((build_copy / "manifest.json").read_text())
    # Every config with rows; an empty one (the sample's dead_letter) is not declared, since
    # `datasets` cannot load a split without rows (issue 41).
    assert set(by_name) == {c for c, files in manifest["files"].items() if sum(f["rows"] for f in files)}
    assert "dead_letter" not in by_name and manifest["counts"]["dead_letter"] == 0
    assert by_name["papers"]["default"] is True
    assert by_name["figures"]["data_files"] == [{"split": "train", "path": "data/figures/train-*.parquet"}]
    infos = {i["config_name"]: i for i in meta["dataset_info"]}
    assert infos["papers"]["splits"][0]["num_examples"] == manifest["counts"]["papers"]
    assert (
        infos["figures"]["splits"][0]["num_examples"]
        == manifest["counts"]["figures"] + manifest["counts"]["subfigures"]
    )
    assert {"name": "image", "dtype": "image"} in infos["figures"]["features"]
    assert f"schema version {SCHEMA_VERSION}" in card and manifest["inputs"]["sha256"] in card
    assert str(build_copy) not in card and "v1.0.0" not in card  # a function of the build alone
    assert re.search(
        r"quality gate: (\d+) of \1 Great Expectations expectations met", commits[0].message
    )  # 47 since 1.1.0

    # Same build, same version: a no-op that writes nothing.
    before = len(hub.requests)
    assert publish(build_copy, "v1.0.0", hub) == 0
    assert "already published" in capsys.readouterr().out
    assert [r for r in hub.requests[before:] if r[0] in ("POST", "PUT")] == []
    assert len(hub.commits(REPO)) == 2

    # Same build, new version: the files on main are already this build's, so only a new tag.
    before = len(hub.requests)
    assert publish(build_copy, "v1.1.0", hub) == 0
    assert "tagged" in capsys.readouterr().out
    assert len(hub.commits(REPO)) == 2 and repo.tags["v1.1.0"][0] == repo.tags["v1.0.0"][0]
    writes = [p for m, p in hub.requests[before:] if m in ("POST", "PUT")]
    assert len(writes) == 1 and f"/api/datasets/{REPO}/tag/" in writes[0]

    # A version never changes: different files under an existing tag are refused.
    rewrite_shard(build_copy, "mentions", lambda rows: rows[:-1])
    edit_manifest(build_copy, lambda m: m["counts"].__setitem__("mentions", m["counts"]["mentions"] - 1))
    assert publish(build_copy, "v1.1.0", hub) == 1
    assert "already exists" in capsys.readouterr().err
    assert len(hub.commits(REPO)) == 2

    out_err = capsys.readouterr()
    assert TOKEN not in caplog.text and TOKEN not in out_err.out and TOKEN not in out_err.err
    assert hub.authorized_writes > 0  # the token was used, just never shown


def test_shard_layout_change_deletes_stale_shards_in_the_same_commit(hub, build_copy):
    assert publish(build_copy, "v1.0.0", hub) == 0
    # Rebuild-like change: mentions now come in two shards.
    old = shard(build_copy, "mentions")
    table = pq.read_table(old)
    half = table.num_rows // 2
    new_paths = [old.parent / "train-00000-of-00002.parquet", old.parent / "train-00001-of-00002.parquet"]
    pq.write_table(table.slice(0, half), new_paths[0])
    pq.write_table(table.slice(half), new_paths[1])
    old.unlink()

    def relist(m):
        from sciga.transforms.write.manifest import count_build

        _, files = count_build(str(build_copy))
        m["files"] = {config: [f.to_json() for f in fs] for config, fs in files.items()}

    edit_manifest(build_copy, relist)
    assert publish(build_copy, "v2.0.0", hub) == 0
    v2 = hub.files_at(REPO, "v2.0.0")
    assert "data/mentions/train-00000-of-00001.parquet" not in v2
    assert {"data/mentions/train-00000-of-00002.parquet", "data/mentions/train-00001-of-00002.parquet"} <= set(v2)
    assert "data/mentions/train-00000-of-00001.parquet" in hub.files_at(REPO, "v1.0.0")  # old version intact
    assert len(commit_posts(hub)) == 2


def test_failing_gate_uploads_nothing(hub, build_copy, capsys):
    def dangle(rows):
        rows[0]["figure_id"] = rows[0]["paper_id"] + "_F99"
        return rows

    rewrite_shard(build_copy, "mentions", dangle)
    assert publish(build_copy, "v1.0.0", hub) == 1
    err = capsys.readouterr().err
    assert "quality gate failed; nothing was uploaded" in err and "mentions.figure_id: 1" in err
    assert hub.requests == []  # not even a read
    assert hub.repos == {}


def test_interrupted_publish_resumes_without_reuploading(hub, build_copy, capsys):
    hub.fail["commit"] = 1  # the commit call fails after every shard was uploaded
    assert publish(build_copy, "v1.0.0", hub) == 1
    err = capsys.readouterr().err
    assert "answered 500" in err and "run the same command again" in err
    uploaded = len(puts(hub))
    assert uploaded == 4 and len(hub.lfs) == 4
    assert len(hub.commits(REPO)) == 1 and not hub.repos[("dataset", REPO)].tags

    assert publish(build_copy, "v1.0.0", hub) == 0
    assert len(puts(hub)) == uploaded  # the LFS batch API said every object was already there
    assert len(hub.commits(REPO)) == 2
    assert "v1.0.0" in hub.repos[("dataset", REPO)].tags

    # A commit that landed without its tag (interrupted between the two): the next run only tags.
    del hub.repos[("dataset", REPO)].tags["v1.0.0"]
    assert publish(build_copy, "v1.0.0", hub) == 0
    assert "tagged" in capsys.readouterr().out
    assert len(hub.commits(REPO)) == 2 and "v1.0.0" in hub.repos[("dataset", REPO)].tags


def test_dry_run_sends_no_writes_and_missing_token_is_one_sentence(hub, build_copy, capsys, monkeypatch):
    assert publish(build_copy, "v1.0.0", hub, "--dry-run") == 0
    out = capsys.readouterr().out
    assert "dry run" in out and "would create dataset repo" in out and "nothing was sent" in out
    assert all(m == "GET" for m, _ in hub.requests) and hub.repos == {}

    monkeypatch.delenv("HF_TOKEN")
    n = len(hub.requests)
    assert publish(build_copy, "v1.0.0", hub) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("sciga publish: no Hugging Face token found") and err.count("\n") == 0
    assert len(hub.requests) == n


def test_dry_run_prints_the_gate_verdict_and_the_tag_and_versions_are_one_form(hub, build_copy, tmp_path):
    """As a user meets it (the CLI in a subprocess): the dry run names the gate's verdict and the
    tag it would create; 1.0.1 and v1.0.1 are the same version (tag v1.0.1); v1.0 is refused in
    one sentence that names the accepted form."""

    def cli(version):
        return subprocess.run(
            [sys.executable, "-m", "sciga", "publish", str(build_copy), "--repo-id", REPO, "--version", version]
            + ["--endpoint", hub.url, "--allow-any-licence", "--dry-run"],
            capture_output=True,
            text=True,
            env=_hub_env(hub, tmp_path),
            timeout=300,
        )

    for version in ("1.0.1", "v1.0.1"):
        res = cli(version)
        assert res.returncode == 0, res.stderr
        assert re.search(r"^  gate +passed \(\d+ expectations\)$", res.stdout, re.M), res.stdout
        assert re.search(r"^  tag +v1\.0\.1 \(new", res.stdout, re.M), res.stdout
        assert "sciga publish sciga-org/sample v1.0.1: dry run" in res.stdout
    res = cli("v1.0")
    assert res.returncode == 2 and res.stdout == ""
    err = res.stderr.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    assert "'v1.0' is not a version" in err and "MAJOR.MINOR.PATCH" in err and "v1.0.0" in err
    assert all(m == "GET" for m, _ in hub.requests) and hub.repos == {}


def test_a_hub_without_xet_is_named_in_the_error(hub, build_copy, tmp_path):
    """The loopback Hub has no Xet storage, as some Hub-compatible servers: with Xet left on,
    publish fails in one sentence that names the Xet step and HF_HUB_DISABLE_XET=1."""
    env = {k: v for k, v in _hub_env(hub, tmp_path).items() if k != "HF_HUB_DISABLE_XET"}
    res = subprocess.run(
        [sys.executable, "-m", "sciga", "publish", str(build_copy), "--repo-id", REPO, "--version", "v1.0.0"]
        + ["--endpoint", hub.url, "--allow-any-licence"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    err = res.stderr.strip()
    assert res.returncode == 1 and err.count("\n") == 0 and "Traceback" not in err, err
    assert "Xet" in err and "HF_HUB_DISABLE_XET=1" in err, err


def test_private_repo_is_private(hub, build_copy):
    from huggingface_hub import HfApi
    from huggingface_hub.errors import RepositoryNotFoundError

    assert publish(build_copy, "v1.0.0", hub, "--private") == 0
    assert hub.repos[("dataset", REPO)].private
    with pytest.raises(RepositoryNotFoundError):
        HfApi(endpoint=hub.url, token=False).list_repo_refs(REPO, repo_type="dataset")


def _hub_env(hub, tmp_path) -> dict:
    return hub_subprocess_env(hub, TOKEN, tmp_path, ROOT)


# Loads every config four ways (local folder, local streaming, Hub, Hub streaming) and prints
# per way and config: the features, the row count, a digest of every row (images as bytes)
# and how many images decoded (every pixel of every image). Every config the card declares
# loads every way: the card declares no config without rows. Each dataset is freed and
# collected once read (see LOAD_EVERY_ROW in tests/e2e/test_first_hour.py: Arrow's scanner
# threads outliving Arrow at exit).
LOAD_ALL_WAYS = r"""
import gc, hashlib, json, sys
import datasets
from datasets import load_dataset
folder, repo, rev = sys.argv[1], sys.argv[2], sys.argv[3]
configs = json.loads(sys.argv[4])

def digest(rows):
    h, n = hashlib.sha256(), 0
    for r in rows:
        n += 1
        h.update(json.dumps(r, sort_keys=True, default=lambda b: hashlib.sha256(b).hexdigest()).encode())
    return n, h.hexdigest()

out = {}
for way, path, kw in (("folder", folder, {}), ("folder_streaming", folder, {"streaming": True}),
                      ("hub", repo, {"revision": rev}), ("hub_streaming", repo, {"revision": rev, "streaming": True})):
    for config in configs:
        ds = load_dataset(path, config, split="train", **kw)
        features = ds.features.to_dict()
        image_types, decoded = set(), 0
        if config == "figures":
            for r in ds:
                if r["image"] is not None:
                    r["image"].load()
                    image_types.add(type(r["image"]).__name__)
                    decoded += 1
                else:
                    assert r["image_status"] != "embedded", r["id"]
            ds = ds.cast_column("image", datasets.Image(decode=False))
        n, d = digest(ds)
        out[f"{way}/{config}"] = {"features": features, "rows": n, "digest": d, "image_types": sorted(image_types),
                                  "decoded": decoded}
        del ds
        gc.collect()
print(json.dumps(out))
"""

LOAD_FROM_HUB = r"""
import duckdb, sys
from datasets import load_dataset
from sciga.pipelines.sql_shell import hf_filesystem
repo, rev = sys.argv[1], sys.argv[2]
papers = load_dataset(repo, "papers", revision=rev, split="train")
figures = load_dataset(repo, "figures", revision=rev, split="train")
img = next(r["image"] for r in figures if r["image"] is not None)
con = duckdb.connect()
con.register_filesystem(hf_filesystem())
n = con.execute(f"SELECT count(*) FROM read_parquet('hf://datasets/{repo}@{rev}/data/figures/*.parquet')").fetchall()[0][0]
print(papers.num_rows, figures.num_rows, type(img).__name__, img.size[0] > 0, n)
"""


def test_published_dataset_loads_with_datasets_and_duckdb_hf_paths(hub, build_copy, tmp_path):
    from sciga.explore.dataset_card import write_dataset_card
    from sciga.schemas.arrow import SCHEMAS

    write_dataset_card(str(build_copy))  # what the build does at its end
    assert publish(build_copy, "v1.0.0", hub) == 0
    manifest = json.loads((build_copy / "manifest.json").read_text())
    n_papers = manifest["counts"]["papers"]
    n_figs = manifest["counts"]["figures"] + manifest["counts"]["subfigures"]
    env = _hub_env(hub, tmp_path)
    res = subprocess.run(
        [sys.executable, "-c", LOAD_FROM_HUB, REPO, "v1.0.0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.split() == [str(n_papers), str(n_figs), "PngImageFile", "True", str(n_figs)]
    assert TOKEN not in res.stdout + res.stderr

    # The build folder, streaming mode and the Hub give the same features and the same rows.
    configs = [c["config_name"] for c in read_front_matter((build_copy / "README.md").read_text())["configs"]]
    assert configs == ["papers", "figures", "mentions"]  # every config with rows (no dead letter here)
    res = subprocess.run(
        [sys.executable, "-c", LOAD_ALL_WAYS, str(build_copy), REPO, "v1.0.0", json.dumps(configs)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    loaded = json.loads(res.stdout.strip().splitlines()[-1])
    import datasets

    for config in configs:
        expected = datasets.Features.from_arrow_schema(SCHEMAS[config]).to_dict()
        ways = {w: loaded[f"{w}/{config}"] for w in ("folder", "folder_streaming", "hub", "hub_streaming")}
        for way, got in ways.items():
            assert got["features"] == expected, (config, way)
            assert (got["rows"], got["digest"]) == (ways["folder"]["rows"], ways["folder"]["digest"]), (config, way)
        if config == "figures":
            assert ways["folder"]["rows"] == n_figs
            assert {t for w in ways.values() for t in w["image_types"]} == {"PngImageFile"}
            assert {w["decoded"] for w in ways.values()} == {manifest["counts"]["images_embedded"]}
    assert loaded["folder/figures"]["features"]["image"] == {"_type": "Image"}

    # `sciga sql` straight on the published version.
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "sciga",
            "sql",
            f"hf://datasets/{REPO}@v1.0.0",
            "SELECT count(*) AS n FROM papers",
            "--format",
            "csv",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.split() == ["n", str(n_papers)]


LOAD_LOCAL = r"""
import sys
from datasets import load_dataset
folder = sys.argv[1]
papers = load_dataset("parquet", data_files={"train": folder + "/data/papers/*.parquet"}, split="train")
figures = load_dataset("parquet", data_files={"train": folder + "/data/figures/*.parquet"}, split="train")  # plain Parquet
img = next(r["image"] for r in figures if r["image"] is not None)
by_card = load_dataset(folder, "figures", split="train")  # through the card's configs
print(papers.num_rows, figures.num_rows, type(img).__name__, by_card.num_rows, by_card.features["image"].__class__.__name__)
"""


def test_card_is_not_rendered_again_for_the_same_build_state(build_copy, monkeypatch):
    """An incremental build that rewrote nothing keeps its card without reading the shards;
    a change of the shards' content (a manifest field the card depends on) renders it."""
    from sciga.explore import dataset_card

    path = dataset_card.write_dataset_card(str(build_copy))
    before = open(path, "rb").read()
    manifest_path = build_copy / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["run"] = {"seconds": 1.0, "workers": 7}  # describes the run, not the dataset
    manifest["incremental"] = {"reused": 3, "recomputed": 0}
    manifest_path.write_text(json.dumps(manifest))

    def boom(*a, **k):
        raise AssertionError("the card was rendered again")

    monkeypatch.setattr(dataset_card, "render_card", boom)
    dataset_card.write_dataset_card(str(build_copy))
    assert open(path, "rb").read() == before

    manifest["counts"]["dead_letter"] = 41
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(AssertionError, match="rendered again"):
        dataset_card.write_dataset_card(str(build_copy))
    monkeypatch.undo()
    dataset_card.write_dataset_card(str(build_copy))
    assert "dead letters (inputs that failed a stage, kept in `dead_letter`): 41" in open(path).read()


def test_build_folder_is_a_dataset_with_its_card(build_copy, tmp_path):
    from sciga.explore.dataset_card import card_path, dataset_card_text, write_dataset_card

    path = write_dataset_card(str(build_copy))
    assert path == card_path(str(build_copy)) and os.path.isfile(path)
    card = (build_copy / "README.md").read_text()
    assert card == dataset_card_text(str(build_copy))
    mtime = os.stat(path).st_mtime_ns
    write_dataset_card(str(build_copy))  # unchanged build: the file is left alone
    assert os.stat(path).st_mtime_ns == mtime

    meta = read_front_matter(card)
    manifest = json.loads((build_copy / "manifest.json").read_text())
    c = manifest["counts"]
    # the sample has no dead letters: only configs with rows are declared (every declared config
    # loads with `datasets`, streaming or not); the empty one is named in the body
    assert [x["config_name"] for x in meta["configs"]] == ["papers", "figures", "mentions"]
    assert "no dead letter: every input became a paper" in card
    infos = {i["config_name"]: i for i in meta["dataset_info"]}
    assert infos["mentions"]["splits"] == [
        {"name": "train", "num_bytes": infos["mentions"]["dataset_size"], "num_examples": c["mentions"]}
    ]
    assert (
        meta["license"] == "other"
        and "papers.license" in card
        and "http://creativecommons.org/licenses/by/4.0/" in card
    )
    for line in (
        f"| papers | {c['papers']} |",
        f"| figures | {c['figures'] + c['subfigures']} |",
        f"| mentions | {c['mentions']} |",
    ):
        assert line in card

    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf_home"), PYTHONPATH=str(ROOT))
    res = subprocess.run(
        [sys.executable, "-c", LOAD_LOCAL, str(build_copy)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    n_figs = c["figures"] + c["subfigures"]
    assert res.stdout.split() == [str(c["papers"]), str(n_figs), "PngImageFile", str(n_figs), "Image"]


def test_browse_a_published_version(hub, build_copy, tmp_path):
    """`sciga browse` reads a build through fsspec: here straight from the (loopback) Hub."""
    assert publish(build_copy, "v1.0.0", hub) == 0
    site = tmp_path / "site"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "sciga",
            "browse",
            f"hf://datasets/{REPO}@v1.0.0",
            "--output",
            str(site),
            "--papers",
            "1",
        ],
        env=_hub_env(hub, tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "paper pages        1 of 4 papers" in res.stdout
    page = (site / "papers" / "2511.99001.html").read_text()
    assert 'id="fig-2511.99001_F3.2"' in page and 'href="#fig-2511.99001_F3.2"' in page
    assert sorted(p.name for p in (site / "images" / "2511.99001").iterdir()) == [
        "2511.99001_F1.png",
        "2511.99001_F2.png",
        "2511.99001_F3.1.png",
        "2511.99001_F3.2.png",
        "2511.99001_F3.3.png",
    ]
    assert TOKEN not in res.stdout + res.stderr + page
    # A published version carries its manifest.json (issue 41): the index shows the build's counts.
    index = (site / "index.html").read_text()
    assert f"sciga-builder {BUILDER_VERSION}, schema {SCHEMA_VERSION}; dead_letter 0, " in index
    assert "figures 14, images_embedded 23, mentions 27, papers 4, subfigures 15" in index


@pytest.mark.corpus
def test_builds_without_images_publish_and_load_every_row(hub, tmp_path):
    """A --no-images build and a build of real pages whose images are not beside them
    (../shared/corpus): published, then every row of every config loaded from the Hub and
    the folder, streaming or not, from another working folder."""
    import shutil

    from conftest import CORPUS

    pages = tmp_path / "pages"
    for sub in ("html", "latexml"):
        shutil.copytree(CORPUS / sub, pages / sub)
    builds = {
        "no_images": ["--sample", "--no-images"],
        "corpus": ["--input", str(pages / "html"), str(pages / "latexml")],
    }
    for i, (name, argv) in enumerate(builds.items()):
        out = tmp_path / name
        assert main(["build", *argv, "--output", str(out), "--workers", "1", "--quiet"]) == 0
        # Real pages without their images fail the gate's default missing-image rate: say so to publish them.
        extra = ["--max-missing-image-rate", "1"] if name == "corpus" else []
        repo = f"sciga-org/{name.replace('_', '-')}"
        assert (
            main(
                [
                    "publish",
                    str(out),
                    "--repo-id",
                    repo,
                    "--version",
                    "v1.0.0",
                    "--endpoint",
                    hub.url,
                    "--allow-any-licence",
                    *extra,
                ]
            )
            == 0
        )
        manifest = json.loads((out / "manifest.json").read_text())
        cwd = tmp_path / f"elsewhere{i}"
        cwd.mkdir()
        res = subprocess.run(
            [
                sys.executable,
                "-c",
                LOAD_ALL_WAYS,
                str(out),
                repo,
                "v1.0.0",
                json.dumps(
                    declared := [
                        c["config_name"] for c in read_front_matter((out / "README.md").read_text())["configs"]
                    ]
                ),
            ],
            env=_hub_env(hub, tmp_path),
            capture_output=True,
            text=True,
            timeout=600,
            cwd=cwd,
        )
        assert res.returncode == 0, res.stderr[-3000:]
        loaded = json.loads(res.stdout.strip().splitlines()[-1])
        c = manifest["counts"]
        for way in ("folder", "folder_streaming", "hub", "hub_streaming"):
            assert loaded[f"{way}/figures"]["rows"] == c["figures"] + c["subfigures"], (name, way)
            # no image files beside the pages; the corpus' three inline SVG figures are rasterized (issue 44)
            assert loaded[f"{way}/figures"]["decoded"] == c["images_embedded"] == (3 if name == "corpus" else 0), (
                name,
                way,
            )
            assert loaded[f"{way}/papers"]["rows"] == c["papers"] and loaded[f"{way}/mentions"]["rows"] == c["mentions"]
            if c["dead_letter"]:
                assert loaded[f"{way}/dead_letter"]["rows"] == c["dead_letter"]
            assert ("dead_letter" in declared) == bool(c["dead_letter"])
            assert loaded[f"{way}/figures"]["digest"] == loaded["folder/figures"]["digest"], (name, way)


@pytest.mark.e2e
def test_a_build_with_author_provided_gas_builds_validates_and_publishes(hub, tmp_path):
    """Issue 41: `--ga-manifest` with one valid row made the gate fail on the GA's own row in
    the figures config, so such a build could never be published. Driven as a user: the CLI
    in a subprocess, from the manifest's folder."""
    from PIL import Image

    work = tmp_path / "work"
    work.mkdir()
    Image.new("RGB", (96, 64), (200, 30, 30)).save(work / "ga_99001.png")
    (work / "ga.csv").write_text("arxiv_id,path\n2511.99001,ga_99001.png\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_TOKEN=TOKEN, HF_HUB_DISABLE_XET="1", HF_HOME=str(tmp_path / "hf"))

    def cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "sciga", *args], cwd=work, env=env, capture_output=True, text=True, timeout=600
        )

    r = cli("build", "--sample", "--output", "out", "--ga-manifest", "ga.csv", "--workers", "1", "--quiet")
    assert r.returncode == 0, r.stderr[-3000:]
    ga_rows = pq.read_table(next((work / "out/data/figures").glob("*.parquet")), columns=["id", "kind"]).to_pylist()
    assert {"id": "2511.99001_GA", "kind": "graphical_abstract"} in ga_rows

    r = cli("validate", "out")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASSED" in r.stdout + r.stderr

    r = cli("publish", "out", "--repo-id", REPO, "--version", "v1.0.0", "--endpoint", hub.url, "--allow-any-licence")
    assert r.returncode == 0, r.stderr[-3000:]
    assert len(commit_posts(hub)) == 1 and "v1.0.0" in hub.repos[("dataset", REPO)].tags
    published = hub.files_at(REPO, "v1.0.0")
    figures = [p for p in published if p.startswith("data/figures/")]
    assert figures and all(published[p] == (work / "out" / p).read_bytes() for p in figures)


def test_the_gate_still_refuses_a_ga_row_that_no_paper_gave(build_copy):
    """The GA rows the gate accepts are exactly the papers' manifest GAs: a graphical_abstract
    row for a paper without one, or a figure row named like a GA, fails."""
    from sciga.quality.gate import run_gate

    def add_stray_ga(rows):
        stray = dict(rows[0], id=rows[0]["paper_id"] + "_GA", kind="graphical_abstract", parent_id=None)
        return rows + [stray]

    rewrite_shard(build_copy, "figures", add_stray_ga)
    edit_manifest(build_copy, lambda m: m["counts"].__setitem__("figures", m["counts"]["figures"] + 1))
    result = run_gate(str(build_copy))
    failed = {f"{c.table} [{c.column}]" for c in result.failed}
    assert "references [resolved]" in failed, failed
