"""arXiv bulk e-prints read where they are, from a local folder and from a real
S3-compatible server on 127.0.0.1 (moto's server mode, s3fs pointed at it): every paper
gets its e-print or a reason, corrupt tars never feed sources, and a run killed with
SIGKILL resumes without redoing what it finished."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bulk_fixtures import TEX, S3Server, many_tars, paper_tar, standard_bulk

from sciga.transforms.common.errors import StageError
from sciga.transforms.eprints.bulk_reader import BulkEprints, default_storage_options
from sciga.transforms.eprints.bulk_tar import Manifest, item_name, member_paper_id, parse_manifest

from conftest import ROOT

ALL = [f"2101.{i:05d}" for i in range(1, 10)] + ["2102.00001", "2102.00002", "astro-ph/0601001", "2105.00001"]
EXPECTED_REASONS = {
    "2101.00002": "pdf_only",  # PDF-only submission
    "2101.00004": "corrupt_source",  # a bad gzip
    "2101.00005": "unsafe_archive",  # the e-print holds ../../etc/evil.tex
    "2101.00009": "unsafe_archive",  # the bulk tar's own member is ../../2101.00009.gz
    "2102.00001": "md5_mismatch",  # the tar does not match the manifest
    "2102.00002": "md5_mismatch",
    "2105.00001": "not_in_bulk",  # no tar covers it
}
EXTRACTED = ["2101.00001", "2101.00003", "2101.00006", "2101.00007", "2101.00008", "astro-ph/0601001"]


@pytest.fixture(scope="module")
def s3():
    import logging

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's server logs every request
    server = S3Server().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def bulk_dir(tmp_path_factory) -> Path:
    return standard_bulk(tmp_path_factory.mktemp("bulk"))


@pytest.fixture(scope="module")
def s3_root(s3, bulk_dir) -> str:
    s3.upload(bulk_dir, "arxiv", "src")
    return "s3://arxiv/src"


@pytest.fixture(params=["local", "s3"])
def where(request, bulk_dir):
    """(root, storage options) of the same archives, in a folder and in S3."""
    if request.param == "local":
        return str(bulk_dir), {}
    s3 = request.getfixturevalue("s3")
    return request.getfixturevalue("s3_root"), s3.storage_options()


# -- manifest and names ---------------------------------------------------------------------
def test_manifest_in_arxivs_format_and_ranges(bulk_dir):
    entries = parse_manifest((bulk_dir / "arXiv_src_manifest.xml").read_bytes())
    assert [e.name for e in entries] == [
        "arXiv_src_0601_001",
        "arXiv_src_2101_001",
        "arXiv_src_2101_002",
        "arXiv_src_2102_001",
    ]
    e = entries[1]
    assert (e.filename, e.first_item, e.last_item, e.num_items, e.seq_num, e.yymm) == (
        "src/arXiv_src_2101_001.tar",
        "2101.00001",
        "2101.00005",
        5,
        1,
        "2101",
    )
    assert len(e.md5sum) == 32 and e.size == (bulk_dir / "arXiv_src_2101_001.tar").stat().st_size
    m = Manifest(entries)
    assert m.locate("2101.00003").name == "arXiv_src_2101_001"
    assert m.locate("2101.00007v2").name == "arXiv_src_2101_002"
    assert m.locate("astro-ph/0601001").name == "arXiv_src_0601_001"
    assert m.locate("2101.00010") is None and m.locate("2105.00001") is None and m.locate("hep-th/0601001") is None
    assert item_name("math.GT/0309136") == "math0309136"
    assert member_paper_id("0601/astro-ph0601001.gz") == ("astro-ph/0601001", "gz")
    assert member_paper_id("2101/2101.00002.pdf") == ("2101.00002", "pdf")


@pytest.mark.parametrize(
    "xml, why",
    [
        (b"not xml <", "is not XML"),
        (b"<arXivPDFX><file/></arXivPDFX>", "not an arXiv bulk manifest"),
        (b"<arXivSRC></arXivSRC>", "lists no <file>"),
        (
            b"<arXivSRC><file><filename>a.tar</filename><md5sum>x</md5sum><size>1</size></file></arXivSRC>",
            "valid md5sum",
        ),
        (b"<arXivSRC><file><filename>a.tar</filename><size>big</size></file></arXivSRC>", "not a number"),
    ],
)
def test_a_bad_manifest_is_one_clear_sentence(xml, why):
    with pytest.raises(StageError) as ei:
        parse_manifest(xml, label="m.xml")
    assert ei.value.error_type == "bad_manifest" and why in ei.value.message and "fetch" in ei.value.message


def test_a_missing_manifest_names_the_path(tmp_path):
    with pytest.raises(StageError) as ei:
        BulkEprints.open(str(tmp_path), str(tmp_path / "cache"))
    assert ei.value.error_type == "missing_manifest" and "arXiv_src_manifest.xml" in ei.value.message


# -- every case, local and S3 ---------------------------------------------------------------
def test_every_paper_gets_its_eprint_or_a_reason(where, bulk_dir, tmp_path):
    root, opts = where
    bulk = BulkEprints.open(root, str(tmp_path / "cache"), storage_options=opts)
    rep = bulk.extract(ALL)
    assert sorted(rep.extracted) == sorted(EXTRACTED)
    assert {k: v[0] for k, v in rep.reasons.items()} == EXPECTED_REASONS
    assert rep.tars_scanned == ["arXiv_src_0601_001", "arXiv_src_2101_001", "arXiv_src_2101_002", "arXiv_src_2102_001"]
    # What was extracted is byte for byte what arXiv stores, and reads safely.
    assert bulk.source("2101.00001") == paper_tar("2101.00001")
    assert (tmp_path / "cache" / "eprints" / "astro-ph_0601001.gz").read_bytes() == paper_tar("astro-ph/0601001")
    single = bulk.tree("2101.00003")
    assert single.kind == "tex" and single.files["main.tex"] == TEX
    assert sorted(bulk.tree("2101.00006").files) == ["fig.png", "main.tex"]
    # Reasons are sentences naming the tar; md5 mismatches never hand out bytes.
    msg = rep.reasons["2102.00001"][1]
    assert "arXiv_src_2102_001.tar does not match arXiv_src_manifest.xml" in msg and "none of its e-prints" in msg
    for pid, error_type in EXPECTED_REASONS.items():
        with pytest.raises(StageError) as ei:
            bulk.tree(pid)
        assert ei.value.error_type == error_type and ei.value.stage == "tex_source" and ei.value.paper_id == pid
    assert "no TeX source" in rep.reasons["2101.00002"][1]
    assert "'../../2101.00009.gz'" in rep.reasons["2101.00009"][1]
    # Nothing was written outside the cache, nothing of a refused or corrupt e-print kept.
    assert sorted(p.name for p in (tmp_path / "cache" / "eprints").iterdir()) == sorted(
        f"{p.replace('/', '_')}.gz" for p in EXTRACTED
    )
    assert not list(tmp_path.parent.glob("2101.00009*")) and not (tmp_path / "cache" / ".staging").exists()
    # A second run reads nothing again.
    again = bulk.extract(ALL)
    assert again.tars_scanned == [] and again.bytes_read == 0 and sorted(again.already) == sorted(EXTRACTED)
    assert {k: v[0] for k, v in again.reasons.items()} == EXPECTED_REASONS


def test_members_of_a_verified_tar_are_range_reads_checked_by_sha256(bulk_dir, tmp_path):
    import shutil

    data = tmp_path / "data"
    shutil.copytree(bulk_dir, data)
    bulk = BulkEprints.open(str(data), str(tmp_path / "cache"))
    first = bulk.extract(["2101.00006"])
    assert first.tars_scanned == ["arXiv_src_2101_002"] and list(first.extracted) == ["2101.00006"]
    # Another build wants a sibling: no second pass, one range read of its member.
    later = BulkEprints.open(str(data), str(tmp_path / "cache"))
    assert later.plan(["2101.00007"]).range_reads == 1 and later.plan(["2101.00007"]).tars == ()
    rep = later.extract(["2101.00007"])
    assert rep.tars_scanned == [] and rep.tars_reused == ["arXiv_src_2101_002"]
    assert later.source("2101.00007") == paper_tar("2101.00007")
    assert rep.bytes_read == len(paper_tar("2101.00007"))
    # The tar changes under the index: the member's sha256 no longer matches; not used.
    idx = later.index("arXiv_src_2101_002").by_paper()["2101.00008"]
    raw = bytearray((data / "arXiv_src_2101_002.tar").read_bytes())
    raw[idx.offset + 20] ^= 0xFF
    (data / "arXiv_src_2101_002.tar").write_bytes(bytes(raw))
    with pytest.raises(StageError) as ei:
        BulkEprints.open(str(data), str(tmp_path / "cache")).source("2101.00008")
    assert ei.value.error_type == "md5_mismatch" and "verify the tar again" in ei.value.message


def test_a_paper_of_an_unscanned_tar_and_a_missing_tar(bulk_dir, tmp_path):
    import shutil

    bulk = BulkEprints.open(str(bulk_dir), str(tmp_path / "cache"))
    with pytest.raises(StageError) as ei:
        bulk.source("2101.00001")
    assert ei.value.error_type == "bulk_not_scanned"
    data = tmp_path / "data"
    shutil.copytree(bulk_dir, data)
    (data / "arXiv_src_0601_001.tar").unlink()
    gone = BulkEprints.open(str(data), str(tmp_path / "cache2"))
    rep = gone.extract(["astro-ph/0601001"])
    assert rep.reasons["astro-ph/0601001"][0] == "bulk_tar_unreadable"
    assert gone.index("arXiv_src_0601_001") is None, "a missing tar is tried again next run"
    # A tar cut short (a transfer that broke off) is not a verdict either: no index is kept.
    whole = (bulk_dir / "arXiv_src_2101_002.tar").read_bytes()
    (data / "arXiv_src_2101_002.tar").write_bytes(whole[:5000])
    rep = gone.extract(["2101.00006"])
    assert rep.reasons["2101.00006"][0] in ("bulk_tar_unreadable", "md5_mismatch") and not rep.extracted
    assert gone.index("arXiv_src_2101_002") is None
    (data / "arXiv_src_2101_002.tar").write_bytes(whole)
    assert BulkEprints.open(str(data), str(tmp_path / "cache2")).extract(["2101.00006"]).extracted


def test_s3_is_read_requester_pays_with_the_cost_stated_first(s3, s3_root, bulk_dir, tmp_path):
    assert default_storage_options("s3://arxiv/src/")["requester_pays"] is True
    assert "requester_pays" not in default_storage_options("s3://my-mirror/src/")
    bulk = BulkEprints.open(s3_root, str(tmp_path / "cache"), storage_options=s3.storage_options())
    assert bulk.requester_pays and bulk.fs.req_kw == {"RequestPayer": "requester"}
    plan = bulk.plan(ALL)
    assert plan.tars and plan.bytes_to_scan == sum(bulk.manifest.by_name[t].size for t in plan.tars)
    assert plan.not_covered == ("2105.00001",)
    assert "\n" not in plan.warning and "requester-pays" in plan.warning and "$0.09/GB" in plan.warning
    assert f"${plan.usd_estimate:,.2f}" in plan.warning and "aws.amazon.com/s3/pricing" in plan.warning
    local = BulkEprints.open(str(bulk_dir), str(tmp_path / "c2"))
    assert not local.requester_pays and local.plan(ALL).warning is None and local.plan(ALL).usd_estimate == 0


# -- kill -9 mid-extraction, then resume ----------------------------------------------------------
_CHILD = r"""
import json, sys, time
from sciga.transforms.eprints.bulk_reader import BulkEprints

class Slow(BulkEprints):
    def scan(self, name, wanted=(), *, on_bytes=None, rescan=False):
        print("START", name, flush=True)
        def slow(n):
            time.sleep(0.15)
            if on_bytes:
                on_bytes(n)
        return super().scan(name, wanted, on_bytes=slow, rescan=rescan)

root, cache, opts, pids = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
bulk = Slow.open(root, cache, storage_options=opts)
bulk.extract(pids, max_workers=1, progress=lambda name, idx: print("DONE", name, flush=True))
print("FINISHED", flush=True)
"""


def _tree(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.e2e  # kills an extraction subprocess and resumes
@pytest.mark.parametrize("kind", ["local", "s3"])
def test_kill_9_mid_extraction_then_resume(kind, tmp_path, request):
    src, pids = many_tars(tmp_path / "data", n_tars=4, per_tar=3, pad=700_000)
    root, opts = str(src), {}
    if kind == "s3":
        s3 = request.getfixturevalue("s3")
        s3.upload(src, "arxiv", f"kill-{os.getpid()}/src")
        root, opts = f"s3://arxiv/kill-{os.getpid()}/src", s3.storage_options()
    cache = tmp_path / "cache"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, root, str(cache), json.dumps(opts), json.dumps(pids)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    lines = []
    try:
        for line in child.stdout:
            lines.append(line.split())
            if lines[-1] == ["START", "arXiv_src_2103_003"]:
                # Inside the third tar's pass: kill once bytes are staged, before they are verified.
                deadline = time.monotonic() + 10
                while not any((cache / ".staging").rglob("*.gz")) and time.monotonic() < deadline:
                    time.sleep(0.01)
                child.send_signal(signal.SIGKILL)
                break
    finally:
        child.kill()
        child.wait()
    assert ["DONE", "arXiv_src_2103_002"] in lines and ["FINISHED"] not in lines
    assert sorted(p.name for p in (cache / "tars").iterdir()) == ["arXiv_src_2103_001.json", "arXiv_src_2103_002.json"]
    killed = _tree(cache / "eprints")
    assert sorted(killed) == [f"{p}.gz" for p in pids[:6]], "only verified tars' e-prints are in the cache"
    assert any((cache / ".staging").rglob("*.gz")), "the pass was killed with bytes staged"

    bulk = BulkEprints.open(root, str(cache), storage_options=opts)
    before = {p: os.stat(cache / "eprints" / p).st_mtime_ns for p in killed}
    rep = bulk.extract(pids)
    assert rep.tars_scanned == ["arXiv_src_2103_003", "arXiv_src_2103_004"]
    assert rep.tars_reused == ["arXiv_src_2103_001", "arXiv_src_2103_002"]
    assert rep.already == pids[:6] and sorted(rep.extracted) == pids[6:] and not rep.reasons
    assert {p: os.stat(cache / "eprints" / p).st_mtime_ns for p in killed} == before, "finished files untouched"
    assert not (cache / ".staging").exists()

    clean = BulkEprints.open(root, str(tmp_path / "clean"), storage_options=opts)
    clean.extract(pids)
    assert _tree(cache) == _tree(tmp_path / "clean"), "the resumed cache is the uninterrupted one, byte for byte"
    assert all(bulk.source(p) == paper_tar(p, 700_000) for p in pids)
    assert gzip.decompress(bulk.source(pids[-1]))[:1]  # a real gzip


def test_flat_mirror_layout(tmp_path):
    # A mirror that keeps the tars beside the manifest, named by the manifest's base names.
    from bulk_fixtures import write_bulk

    src = write_bulk(tmp_path, {"2101_001": [("2101/2101.00001.gz", paper_tar("2101.00001"))]}, flat=True)
    bulk = BulkEprints.open(str(src / "arXiv_src_manifest.xml"), str(tmp_path / "cache"))
    assert bulk.extract(["2101.00001"]).extracted == {
        "2101.00001": str(tmp_path / "cache" / "eprints" / "2101.00001.gz")
    }
    assert bulk.source("2101.00001") == paper_tar("2101.00001")


def test_the_tex_figure_stage_finds_extracted_eprints_with_tex_input(bulk_dir, tmp_path):
    # `sciga build --tex-input <cache>/eprints`: the figure stage's lookup finds them by id.
    from sciga.transforms.eprints.tex_sources import load_source, locate_source

    bulk = BulkEprints.open(str(bulk_dir), str(tmp_path / "cache"))
    bulk.extract(["2101.00001", "astro-ph/0601001"])
    for pid in ("2101.00001", "astro-ph/0601001"):
        src = locate_source(f"/elsewhere/{pid.replace('/', '_')}.html", pid, [str(tmp_path / "cache" / "eprints")])
        assert src is not None and src.endswith(".gz")
        assert sorted(load_source(src, paper_id=pid).files) == ["fig.png", "main.tex"]
