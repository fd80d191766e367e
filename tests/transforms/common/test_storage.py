"""transforms/common/storage.py without a server: which paths are remote, which bucket a path is in,
which errors become one sentence (and which are left alone), and DuckDB connections that
never install an extension."""

from __future__ import annotations

import errno

from sciga.transforms.common.storage import bucket_of, duckdb_connect, is_remote, storage_error_message


def test_paths():
    assert [is_remote(p) for p in ("out/x", "/abs/x", "file:///x", "gs://b/x", "s3://b/x", "hf://datasets/o/n")] == [
        False,
        False,
        False,
        True,
        True,
        True,
    ]
    assert [
        bucket_of(p) for p in ("gs://my-bucket/a/b", "gcs://b2", "s3://arxiv/src/", "hf://datasets/o/n", "out/x")
    ] == ["my-bucket", "b2", "arxiv", None, None]


def test_errors_that_become_one_sentence():
    forbidden = OSError("Forbidden: b/locked/o\nsomeone@x.iam.gserviceaccount.com does not have storage.objects.list")
    assert storage_error_message(RuntimeError("while running Write")) is None
    wrapped = RuntimeError("step failed")
    wrapped.__cause__ = forbidden
    msg = storage_error_message(wrapped)
    assert msg.startswith("this account has no permission to use gs://locked;") and "iam.gserviceaccount" not in msg
    s3_denied = PermissionError("Access Denied")
    assert "s3://arxiv" in storage_error_message(s3_denied, "s3://arxiv/src/x.tar")
    local = PermissionError(errno.EACCES, "Permission denied", "/root/out/data")
    assert storage_error_message(local, "out/") is None, "a local file's permission error is not a bucket's"
    assert storage_error_message(FileNotFoundError("out/x")) is None


def test_duckdb_connect_never_installs_extensions(tmp_path):
    con = duckdb_connect(str(tmp_path))
    assert con.execute("SELECT current_setting('autoinstall_known_extensions')").fetchone()[0] is False
    assert con.list_filesystems() == []  # local paths are DuckDB's own
    con.close()
