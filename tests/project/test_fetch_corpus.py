"""scripts/fetch_corpus.py: the pinned manifest covers the shared corpus, ``--check`` passes on
it, and a fetch from a local mirror laid out like raw.githubusercontent.com
(``/<owner>/<repo>/<commit>/<path>``, served over HTTP on 127.0.0.1) gives the byte-pinned
files back, refuses a corrupted one without leaving a partial file, and ends a network error
with one sentence. Nothing here touches the internet; latexmlc is not run (``--no-convert``)."""

from __future__ import annotations

import functools
import hashlib
import http.server
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import pytest

from conftest import CORPUS, ROOT

SCRIPT = ROOT / "scripts" / "fetch_corpus.py"
MANIFEST = json.loads((ROOT / "scripts" / "corpus_sources.json").read_text(encoding="utf-8"))
PINNED = [e for e in MANIFEST["files"] if e["kind"] in ("copy", "tar-member")]
PAGES = [e for e in MANIFEST["files"] if e["kind"] == "latexml"]


def script_env(**extra: str) -> dict:
    """This environment, with no proxy for the loopback mirror (a function, not a module
    global: a dict holding $SCIGA_CORPUS would mark every test using it as a corpus test)."""
    return dict(os.environ, no_proxy="127.0.0.1,localhost", NO_PROXY="127.0.0.1,localhost", **extra)


def run_script(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120, env=env or script_env()
    )


def test_manifest_pins_every_source_by_full_commit():
    for entry in MANIFEST["files"]:
        assert entry["kind"] in ("copy", "tar-member", "latexml"), entry["dest"]
        if entry["kind"] == "latexml":
            assert re.fullmatch(r"[0-9a-f]{64}", entry["normalised_sha256"]), entry["dest"]
        else:
            assert re.fullmatch(r"[0-9a-f]{64}", entry["sha256"]) and entry["size"] >= 0, entry["dest"]
        if "source" in entry:
            assert entry["source"] is None and entry["note"], entry["dest"]
            continue
        sources = entry.get("sources") or []
        tree = entry.get("tree") or {}
        assert sources or tree, entry["dest"]
        for src in sources:
            assert re.fullmatch(r"[^/\s]+/[^/\s]+", src["repo"]) and src["path"], entry["dest"]
            assert re.fullmatch(r"[0-9a-f]{40}", src["commit"]), f"{entry['dest']}: {src['commit']}"
        for commit in tree.get("commits", ()):
            assert re.fullmatch(r"[0-9a-f]{40}", commit), f"{entry['dest']}: {commit}"


def test_manifest_covers_the_corpus_and_check_passes():
    on_disk = {p.relative_to(CORPUS).as_posix() for p in CORPUS.rglob("*") if p.is_file()} - {"SOURCES.md"}
    assert on_disk == {e["dest"] for e in MANIFEST["files"]}
    for entry in PINNED:
        data = (CORPUS / entry["dest"]).read_bytes()
        assert (hashlib.sha256(data).hexdigest(), len(data)) == (entry["sha256"], entry["size"]), entry["dest"]
    r = run_script("--check", str(CORPUS))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"all {len(MANIFEST['files'])} files match the pins" in r.stdout


# ------------------------------------------------------------------ a local mirror


def _mirror_path(root: Path, src: dict) -> Path:
    return root / src["repo"] / src["commit"] / src["path"]


def _tarball_with(member_bytes: bytes) -> bytes:
    """A tar.gz like arXiv's: the page under a folder, next to members the script must skip
    (a name with ``..``, an absolute name, a link)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in (("../evil.html", b"<html>escape</html>"), ("/tmp/evil.html", b"<html>abs</html>")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("5393936/link.html")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tf.addfile(link)
        info = tarfile.TarInfo("5393936/5393936.html")
        info.size = len(member_bytes)
        tf.addfile(info, io.BytesIO(member_bytes))
    return buf.getvalue()


def build_mirror(root: Path, corrupt: str | None = None) -> None:
    """The byte-pinned files of the corpus at their first source's place in ``root``; the file
    whose dest is ``corrupt`` gets one byte changed at every source."""
    for entry in PINNED:
        data = (CORPUS / entry["dest"]).read_bytes()
        if entry["dest"] == corrupt:
            data = data[:-1] + bytes([data[-1] ^ 0x20])
            targets = entry["sources"]
        else:
            targets = entry["sources"][:1]
        if entry["kind"] == "tar-member":
            data = _tarball_with(data)
        for src in targets:
            path = _mirror_path(root, src)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    """Serve a folder (``set_root``) over HTTP on 127.0.0.1; yields (base URL, set_root)."""
    state = {"root": tmp_path_factory.mktemp("empty")}

    class Handler(_QuietHandler):
        def __init__(self, *a, **k):
            super().__init__(*a, directory=str(state["root"]), **k)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", functools.partial(state.__setitem__, "root")
    finally:
        server.shutdown()
        server.server_close()


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.name.endswith(".part") or "evil" in p.name)


def test_fetch_from_a_local_mirror_gives_the_pinned_bytes(mirror, tmp_path):
    base_url, set_root = mirror
    build_mirror(tmp_path / "mirror")
    set_root(tmp_path / "mirror")
    dest = tmp_path / "work" / "corpus"
    r = run_script("--base-url", base_url, "--dest", str(dest), "--no-convert")
    assert r.returncode == 0, r.stdout + r.stderr
    for entry in PINNED:
        assert (dest / entry["dest"]).read_bytes() == (CORPUS / entry["dest"]).read_bytes(), entry["dest"]
    assert "#5393936/5393936.html" in r.stdout  # the page's member, by name
    for entry in PAGES:  # each page the script did not make is named, with the reason
        assert not (dest / entry["dest"]).exists()
        why = "not fetchable; ask the maintainers" if entry.get("source", "") is None else "not made (--no-convert)"
        assert f"{entry['dest']}: {why}" in r.stdout, r.stdout
    assert (dest / "SOURCES.md").is_file()
    assert leftovers(tmp_path) == [], "partial or escaped files were left"
    assert "Traceback" not in r.stderr

    # A second run finds everything in place and downloads nothing.
    set_root(tmp_path / "empty-mirror")
    again = run_script("--base-url", base_url, "--dest", str(dest), "--no-convert")
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.count("already in place") == len(PINNED)

    # --check on it: the byte-pinned files pass, the pages it did not make are named as missing.
    r = run_script("--check", str(dest))
    assert r.returncode == 1
    assert sorted(line.split(":")[0] for line in r.stdout.splitlines()) == sorted(e["dest"] for e in PAGES)

    # Without latexmlc on PATH the pages are not made, and the script says what to install.
    (tmp_path / "bin").mkdir()
    r = run_script("--base-url", base_url, "--dest", str(dest), env=script_env(PATH=str(tmp_path / "bin")))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "apt-get install latexml" in r.stdout


def test_a_corrupted_file_fails_in_one_sentence_and_leaves_nothing(mirror, tmp_path):
    base_url, set_root = mirror
    bad = "tex/dd3d/main.tex"
    build_mirror(tmp_path / "mirror", corrupt=bad)
    set_root(tmp_path / "mirror")
    dest = tmp_path / "corpus"
    r = run_script("--base-url", base_url, "--dest", str(dest), "--no-convert")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    errors = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith(f"{bad}: ") and "sha256" in errors[0], r.stderr
    assert errors[0].count(". ") == 0 and errors[0].endswith("."), errors[0]  # one sentence
    assert not (dest / bad).exists()
    assert leftovers(tmp_path) == []
    assert (dest / "tex/dd3d/egbib.bib").read_bytes() == (CORPUS / "tex/dd3d/egbib.bib").read_bytes()

    # --check names the corrupted file once it is in a folder.
    copy = tmp_path / "copy"
    shutil.copytree(CORPUS, copy)
    src = next(e for e in PINNED if e["dest"] == bad)["sources"][0]
    (copy / bad).write_bytes(_mirror_path(tmp_path / "mirror", src).read_bytes())
    r = run_script("--check", str(copy))
    assert r.returncode == 1 and r.stdout.splitlines() == [f"{bad}: differs from the pinned sha256"], r.stdout


def test_a_network_error_is_one_sentence_naming_the_url(tmp_path):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = run_script("--base-url", f"http://127.0.0.1:{port}", "--dest", str(tmp_path / "corpus"), "--no-convert")
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"http://127.0.0.1:{port}/" in lines[0] and "retry" in lines[0], r.stderr
    assert leftovers(tmp_path) == []
