"""`sciga build` on gs://, against a real GCS API (fake-gcs-server on 127.0.0.1, tests/gcs_fixtures.py):

* gs:// -> gs:// gives the rows a local build of the same inputs gives (only where each
  input was read from, ``provenance.input_uri`` and ``figures.image_uri``, differs);
* ``sciga build --ids`` keeps its fetch cache on gs:// and a rerun fetches nothing;
* a gs:// build killed mid-way resumes from the results it had stored on gs://;
* a missing bucket or no permission is one sentence, and no bucket is created by mistake.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pyarrow.parquet as pq
import pytest
from gcs_fixtures import FAKE_ACCESS_TOKEN, gcs, upload_tree

from sciga.schemas.arrow import CONFIGS

from conftest import ROOT, _build


def rows(out: str, config: str) -> list[dict]:
    """Every row of a config, local or gs://, in shard order."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(out)
    if fs.protocol != "file" and "file" not in fs.protocol:
        fs.invalidate_cache()
    out_rows = []
    for path in sorted(fs.glob(f"{root}/data/{config}/*.parquet")):
        with fs.open(path, "rb") as f:
            out_rows += pq.read_table(f).to_pylist()
    return out_rows


def where_read(row: dict, config: str) -> dict:
    """A row with the place its input was read from made relative to the input folder."""
    row = json.loads(json.dumps(row, default=repr))
    if config == "papers":
        uri = row["provenance"]["input_uri"]
        row["provenance"]["input_uri"] = uri.split("/html/", 1)[-1].split("/pages/", 1)[-1]
    if config == "dead_letter" and row.get("input_uri"):
        row["input_uri"] = row["input_uri"].split("/html/", 1)[-1].split("/pages/", 1)[-1]
    if config == "figures" and row.get("image_uri"):  # where the image file was read from
        row["image_uri"] = row["image_uri"].split("/html/", 1)[-1].split("/pages/", 1)[-1]
    return row


def assert_same_rows(a: str, b: str) -> None:
    for config in CONFIGS:
        ra, rb = rows(a, config), rows(b, config)
        assert len(ra) == len(rb), config
        assert [where_read(r, config) for r in ra] == [where_read(r, config) for r in rb], config


# ------------------------------------------------------------------ gs:// -> gs://


def test_gs_build_equals_the_local_build(gs_sample_build, local_sample_twin):
    papers = rows(gs_sample_build, "papers")
    # the input paths are published relative to the bucket path given as --input, as a local
    # build's are relative to its folder (issue 41 item 8): the same in both builds
    local = rows(str(local_sample_twin), "papers")
    assert not any(p["provenance"]["input_uri"].startswith("gs://") for p in papers)
    assert [p["provenance"]["input_uri"] for p in papers] == [p["provenance"]["input_uri"] for p in local]
    assert_same_rows(gs_sample_build, str(local_sample_twin))
    fs = gcs()
    shards = sorted(p.split("/build/", 1)[1] for p in fs.glob("sciga-sample/build/data/*/*.parquet"))
    assert shards == sorted(
        p.relative_to(local_sample_twin).as_posix() for p in local_sample_twin.glob("data/*/*.parquet")
    )
    manifest = json.loads(fs.cat_file("sciga-sample/build/manifest.json"))
    twin = json.loads((local_sample_twin / "manifest.json").read_text())
    assert manifest["counts"] == twin["counts"] and manifest["reconciled"]
    assert fs.exists("sciga-sample/build/README.md"), "the dataset card is written beside the shards"
    assert not fs.find("sciga-sample/build/.staging"), "the staging folder is gone after a finished build"


# ------------------------------------------------------------------ fetch cache on gs://


@pytest.mark.e2e  # `sciga build --ids` through fetch into gs://
@pytest.mark.corpus
def test_fetch_cache_on_gcs(gcs_server, monkeypatch, tmp_path):
    from sources_fixtures import CORPUS, FaultServer, tar_gz_of_dir

    from sciga.pipelines.cli import main

    gcs().mkdir("sciga-fetch")
    ids = ["1605.08386", "1707.08567", "0000.0000"]
    args = [
        "build",
        "--ids",
        *ids,
        "--output",
        "gs://sciga-fetch/out",
        "--fetch-cache",
        "gs://sciga-fetch/cache",
        "--rate-limit",
        "0.01",
        "--retry-backoff",
        "0.01",
        "--timeout",
        "5",
        "--workers",
        "1",
        "--quiet",
    ]
    with FaultServer() as s:
        s.add("/html/1605.08386", (CORPUS / "latexml" / "a1709.html").read_bytes())
        s.add("/e-print/1605.08386", (CORPUS / "tex" / "1709.07020" / "1709.07020v1.tar.gz").read_bytes())
        s.add("/html/1707.08567", (CORPUS / "latexml" / "dd3d.html").read_bytes())
        s.add("/e-print/1707.08567", tar_gz_of_dir(CORPUS / "tex" / "dd3d"))
        for k, v in s.env().items():
            monkeypatch.setenv(k, v)
        assert main(args) == 0
        first = len(s.log)
        assert main(args) == 0, "a rerun builds from the cache on gs://"
        again = s.log[first:]
    assert [e["path"] for e in again if e["path"].startswith(("/html/", "/e-print/"))] == []
    cached = [p.removeprefix("sciga-fetch/cache/") for p in gcs().find("sciga-fetch/cache")]
    assert "papers/1605.08386/1605.08386.meta.json" in cached and "papers/1707.08567/1707.08567.html.gz" in cached
    assert any(p.startswith("papers/1605.08386/1605.08386.src") for p in cached)
    assert sorted(p["id"] for p in rows("gs://sciga-fetch/out", "papers")) == ["1605.08386", "1707.08567"]
    assert [d["paper_id"] for d in rows("gs://sciga-fetch/out", "dead_letter")] == ["0000.0000"]


# ------------------------------------------------------------------ resume on gs://


@pytest.mark.e2e
def test_killed_gs_build_resumes_from_the_results_it_stored(gcs_server, tmp_path):
    from sciga.samples.scale_corpus import make_image_rich_corpus

    pages = tmp_path / "pages"
    make_image_rich_corpus(pages, 24, n_figures=3, image_kb=4, distinct_images=2)
    gcs().mkdir("sciga-resume")
    upload_tree(pages, "gs://sciga-resume/pages")
    out = "gs://sciga-resume/out"
    cmd = [
        sys.executable,
        "-m",
        "sciga",
        "build",
        "--input",
        "gs://sciga-resume/pages",
        "--output",
        out,
        "--workers",
        "1",
        "--quiet",
    ]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.Popen(
        cmd, cwd=str(ROOT), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    stored = []
    deadline = time.time() + 300
    while time.time() < deadline and p.poll() is None:
        stored = [x for x in gcs().find("sciga-resume/out/.sciga/results") if x.endswith(".zip")]
        if len(stored) >= 6:
            break
        time.sleep(0.2)
    killed = p.poll() is None
    if killed:
        os.killpg(p.pid, signal.SIGKILL)
    output = p.communicate()[0].decode(errors="replace")
    assert FAKE_ACCESS_TOKEN not in output
    assert killed and len(stored) >= 6, output[-2000:]
    assert not gcs().exists("sciga-resume/out/manifest.json"), "killed before it finished"

    resumed = _build("--input", "gs://sciga-resume/pages", "--output", out, "--workers", "1", "--quiet")
    assert resumed.counts.papers == 24 and resumed.counts.reconciled
    assert resumed.counts.reused >= len(stored) - 1 and resumed.counts.recomputed <= 24 - len(stored) + 1
    clean = tmp_path / "clean"
    _build("--input", str(pages), "--output", str(clean), "--workers", "1", "--quiet")
    assert_same_rows(out, str(clean))
    assert not gcs().find("sciga-resume/out/.staging")


def test_gs_rebuild_copies_unchanged_rows_from_the_gs_shards(gcs_server, tmp_path, stored_reads):
    """An incremental build on a bucket: the parts that hold the changed paper are written
    again, the other papers' rows read from the previous shards on the bucket."""
    from sciga.samples.scale_corpus import make_image_rich_corpus

    pages = tmp_path / "pages"
    make_image_rich_corpus(pages, 8, n_figures=3, image_kb=4, distinct_images=2)
    gcs().mkdir("sciga-rows")
    upload_tree(pages, "gs://sciga-rows/pages")
    out = "gs://sciga-rows/out"
    _build("--input", "gs://sciga-rows/pages", "--output", out, "--workers", "1", "--quiet")
    assert gcs().find("sciga-rows/out/.sciga/shard_members")
    page = pages / "2601.00003" / "2601.00003.html"
    page.write_text(page.read_text().replace("Synthetic image-rich paper", "A changed image-rich paper"))
    gcs().put_file(str(page), "sciga-rows/pages/2601.00003/2601.00003.html")

    stored_reads.clear()
    inc = _build("--input", "gs://sciga-rows/pages", "--output", out, "--workers", "1", "--quiet")
    assert (inc.counts.reused, inc.counts.recomputed) == (7, 1)
    assert len(set(stored_reads)) == 1, "only the changed paper's result is read back"
    clean = tmp_path / "clean"
    _build("--input", str(pages), "--output", str(clean), "--workers", "1", "--quiet")
    assert_same_rows(out, str(clean))


# ------------------------------------------------------------------ clear errors


def test_missing_bucket_is_one_sentence_and_never_created(gcs_server, gs_sample_inputs, capsys):
    from sciga.pipelines.cli import main

    with pytest.raises(SystemExit) as e:
        main(["build", "--input", "gs://no-such-input-bucket/html", "--output", "gs://sciga-sample/never"])
    msg = str(e.value)
    assert (
        msg.startswith(
            "sciga build: --input gs://no-such-input-bucket/html: the bucket gs://no-such-input-bucket does not exist"
        )
        and "\n" not in msg
    )
    with pytest.raises(SystemExit) as e:
        main(["build", "--input", gs_sample_inputs["html"], "--output", "gs://no-such-output-bucket/build"])
    assert "gs://no-such-output-bucket does not exist" in str(e.value) and "gcloud storage buckets create" in str(
        e.value
    )
    fs = gcs()
    assert not fs.exists("no-such-output-bucket"), "a typo in --output never creates a bucket"
    for command in (
        ["validate", "gs://no-such-bucket/build"],
        ["sql", "gs://no-such-bucket/build", "SELECT 1"],
        ["stats", "gs://no-such-bucket/build"],
        ["browse", "gs://no-such-bucket/build"],
    ):
        assert main(command) == 2, command
        err = capsys.readouterr().err.strip()
        assert err == (
            f"sciga {command[0]}: the bucket gs://no-such-bucket does not exist (or this account cannot see "
            "it); check the path, or create the bucket first (gcloud storage buckets create gs://no-such-bucket)."
        )
    assert main(["evaluate", "random", "--data", "gs://no-such-bucket/build", "--results", "unused"]) == 2
    err = capsys.readouterr().err.strip()
    assert "gs://no-such-bucket does not exist" in err and len(err.splitlines()) == 1


class ForbiddenGcs:
    """A GCS endpoint on 127.0.0.1 that answers every request as GCS answers an account
    without access: 403 with a JSON error naming that account (which sciga must not print)."""

    ACCOUNT = "someone-else@sciga-test.iam.gserviceaccount.com"

    def __init__(self):
        account = self.ACCOUNT

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _deny(self):
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                body = json.dumps(
                    {
                        "error": {
                            "code": 403,
                            "message": f"{account} does not have storage.objects.list "
                            "access to the Google Cloud Storage bucket. Permission 'storage.objects.list' "
                            "denied on resource (or it may not exist).",
                            "errors": [{"reason": "forbidden"}],
                        }
                    }
                ).encode()
                self.send_response(403)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = _deny

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_no_permission_is_one_sentence_without_the_account(gcs_server, tmp_path):
    """fake-gcs-server has no IAM, so "no permission" comes from a server that answers 403
    the way GCS does; what the user sees is the same."""
    server = ForbiddenGcs()
    env = dict(
        os.environ,
        STORAGE_EMULATOR_HOST=server.url,
        PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )
    try:
        for command in (
            ["validate", "gs://locked-bucket/build"],
            ["build", "--sample", "--output", "gs://locked-bucket/build", "--workers", "1"],
            ["sql", "gs://locked-bucket/build", "SELECT 1"],
        ):
            res = subprocess.run(
                [sys.executable, "-m", "sciga", *command],
                cwd=str(ROOT),
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert res.returncode in (1, 2), (command, res.stderr[-2000:])
            lines = [x for x in res.stderr.splitlines() if x.strip()]
            assert lines and lines[-1].startswith(f"sciga {command[0]}: "), res.stderr[-2000:]
            assert "no permission to use gs://locked-bucket" in lines[-1] and "roles/storage.object" in lines[-1]
            assert "Traceback" not in res.stderr
            assert (
                ForbiddenGcs.ACCOUNT not in res.stderr + res.stdout and FAKE_ACCESS_TOKEN not in res.stderr + res.stdout
            )
    finally:
        server.stop()
