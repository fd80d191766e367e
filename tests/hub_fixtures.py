"""A Hugging Face Hub-compatible HTTP server on 127.0.0.1 for publish/load tests.

It implements the endpoints huggingface_hub 2.x uses to create a dataset repo, pre-upload,
upload LFS objects (batch API + a presigned-style PUT URL on the same server), commit
(NDJSON), list refs/tree/commits, tag, validate card YAML, and resolve/download files
(with Range requests, for ``datasets`` and ``HfFileSystem``). Repos live in memory as a
chain of commits, each a full snapshot of path -> blob. Faults can be injected, and every
request is recorded (method, path; never headers) so tests can assert what was sent.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Optional
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

LFS_PATTERNS = re.compile(r"\.(parquet|arrow|png|jpg|jpeg|bin|safetensors|gz|zip|tar)$")
GITATTRIBUTES = b"*.parquet filter=lfs diff=lfs merge=lfs -text\n*.arrow filter=lfs diff=lfs merge=lfs -text\n"


def git_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Blob:
    data: bytes
    lfs: bool

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def pointer(self) -> bytes:
        return f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.sha256}\nsize {len(self.data)}\n".encode()

    @property
    def oid(self) -> str:  # git blob id (of the pointer file for LFS blobs, as on the Hub)
        return git_sha1(self.pointer if self.lfs else self.data)


@dataclass
class Commit:
    oid: str
    parent: Optional[str]
    title: str
    message: str
    files: dict  # path -> Blob


@dataclass
class Repo:
    repo_type: str
    repo_id: str
    private: bool
    commits: dict = field(default_factory=dict)
    branches: dict = field(default_factory=dict)
    tags: dict = field(default_factory=dict)  # name -> (commit oid, message)

    def resolve(self, rev: str) -> Optional[Commit]:
        rev = unquote(rev)
        oid = self.branches.get(rev) or (self.tags.get(rev) or (None,))[0]
        if oid is None and rev in self.commits:
            oid = rev
        return self.commits.get(oid) if oid else None

    def history(self, oid: str) -> list:
        out = []
        while oid:
            c = self.commits[oid]
            out.append(c)
            oid = c.parent
        return out


class FakeHub:
    def __init__(self, token: str):
        self.token = token
        self.repos: dict = {}
        self.lfs: dict = {}  # sha256 -> bytes
        self.requests: list = []  # (method, path)
        self.authorized_writes = 0
        self.fail: dict = {}  # endpoint name -> remaining injected 500s
        self.lock = threading.Lock()
        self._n = 0
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # keep test output clean
                pass

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    out = b""
                    while True:
                        size = int(self.rfile.readline().strip().split(b";")[0], 16)
                        if size == 0:
                            self.rfile.readline()
                            return out
                        out += self.rfile.read(size)
                        self.rfile.readline()
                n = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(n) if n else b""

            def _handle(self, method):
                body = self._body() if method in ("POST", "PUT") else b""
                url = urlsplit(self.path)
                with hub.lock:
                    hub.requests.append((method, url.path))
                try:
                    status, headers, payload = hub.route(method, url.path, parse_qs(url.query), body, self.headers)
                except Exception as e:  # noqa: BLE001 - a server bug must show up as a 500 in the test
                    status, headers, payload = 500, {}, json.dumps({"error": f"fake hub bug: {e!r}"}).encode()
                if isinstance(payload, (dict, list)):
                    payload = json.dumps(payload).encode()
                    headers.setdefault("Content-Type", "application/json")
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                if "Content-Length" not in headers:
                    self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if method != "HEAD":
                    self.wfile.write(payload)

            def do_GET(self):
                self._handle("GET")

            def do_HEAD(self):
                self._handle("HEAD")

            def do_POST(self):
                self._handle("POST")

            def do_PUT(self):
                self._handle("PUT")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> FakeHub:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- helpers -------------------------------------------------------------------------
    def _authorized(self, headers) -> bool:
        return headers.get("Authorization") == f"Bearer {self.token}"

    def _new_oid(self, *parts) -> str:
        self._n += 1
        return hashlib.sha1(("|".join(map(str, parts)) + f"|{self._n}").encode()).hexdigest()

    def _injected(self, name: str) -> bool:
        if self.fail.get(name, 0) > 0:
            self.fail[name] -= 1
            return True
        return False

    def writes(self) -> list:
        return [
            (m, p)
            for m, p in self.requests
            if m in ("POST", "PUT") and not p.endswith(("/paths-info", "/validate-yaml")) and "/paths-info/" not in p
        ]

    def commits(self, repo_id: str, repo_type: str = "dataset") -> list:
        repo = self.repos[(repo_type, repo_id)]
        return repo.history(repo.branches["main"])

    def files_at(self, repo_id: str, rev: str = "main", repo_type: str = "dataset") -> dict:
        return {p: b.data for p, b in self.repos[(repo_type, repo_id)].resolve(rev).files.items()}

    # -- routing ---------------------------------------------------------------------------
    def route(self, method, path, query, body, headers):
        err = lambda code, msg: (code, {"X-Error-Message": msg}, {"error": msg})
        if path == "/api/repos/create" and method == "POST":
            if not self._authorized(headers):
                return err(401, "Invalid credentials in Authorization header")
            d = json.loads(body)
            repo_type = d.get("type") or "model"
            repo_id = f"{d['organization']}/{d['name']}" if d.get("organization") else d["name"]
            prefix = "" if repo_type == "model" else f"{repo_type}s/"
            url = f"{self.url}/{prefix}{repo_id}"
            if (repo_type, repo_id) in self.repos:
                return 409, {}, {"error": "You already created this dataset repo", "url": url}
            self.authorized_writes += 1
            private = bool(d.get("private")) or d.get("visibility") == "private"
            repo = Repo(repo_type, repo_id, private)
            oid = self._new_oid(repo_id, "initial")
            repo.commits[oid] = Commit(oid, None, "initial commit", "", {".gitattributes": Blob(GITATTRIBUTES, False)})
            repo.branches["main"] = oid
            self.repos[(repo_type, repo_id)] = repo
            return 200, {}, {"url": url, "name": repo_id}
        if path == "/api/validate-yaml" and method == "POST":
            content = json.loads(body)["content"]
            try:
                if content.startswith("---\n"):
                    yaml.safe_load(content[4 : content.index("\n---\n", 4)])
            except (yaml.YAMLError, ValueError) as e:
                return 400, {}, {"errors": [{"message": f"invalid YAML: {e}"}]}
            return 200, {}, {"errors": [], "warnings": []}
        m = re.match(r"^/lfs-upload/([0-9a-f]{64})$", path)
        if m and method == "PUT":
            if hashlib.sha256(body).hexdigest() != m.group(1):
                return err(400, "uploaded bytes do not match the oid")
            self.lfs[m.group(1)] = body
            return 200, {}, b""
        if path == "/lfs-verify" and method == "POST":
            d = json.loads(body)
            return (200, {}, {}) if d["oid"] in self.lfs else err(404, "object not found")
        m = re.match(r"^/(datasets/|spaces/)?([^/]+/[^/]+)\.git/info/lfs/objects/batch$", path)
        if m and method == "POST":
            return self._lfs_batch(m.group(1), m.group(2), body, headers)
        m = re.match(r"^/api/(models|datasets|spaces)/([^/]+/[^/]+)(?:/(.*))?$", path)
        if m:
            repo_type = m.group(1)[:-1]
            repo = self.repos.get((repo_type, m.group(2)))
            if repo is None or (repo.private and not self._authorized(headers)):
                return 404, {"X-Error-Code": "RepoNotFound"}, {"error": "Repository not found"}
            return self._api(method, repo, m.group(3) or "", query, body, headers)
        m = re.match(r"^/(datasets/|spaces/)?([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path)
        if m and method in ("GET", "HEAD"):
            repo_type = (m.group(1) or "models/")[:-2]
            repo = self.repos.get((repo_type, m.group(2)))
            if repo is None or (repo.private and not self._authorized(headers)):
                return 404, {"X-Error-Code": "RepoNotFound"}, {"error": "Repository not found"}
            return self._resolve(method, repo, m.group(3), unquote(m.group(4)), headers)
        return err(404, f"no route for {method} {path}")

    def _lfs_batch(self, prefix, repo_id, body, headers):
        if not self._authorized(headers):
            return 401, {}, {"message": "Invalid credentials"}
        d = json.loads(body)
        objects = []
        for o in d["objects"]:
            entry = {"oid": o["oid"], "size": o["size"], "authenticated": True}
            if o["oid"] not in self.lfs:
                entry["actions"] = {
                    "upload": {"href": f"{self.url}/lfs-upload/{o['oid']}", "header": {}},
                    "verify": {"href": f"{self.url}/lfs-verify", "header": {}},
                }
            objects.append(entry)
        self.authorized_writes += 1
        return 200, {"Content-Type": "application/vnd.git-lfs+json"}, {"transfer": "basic", "objects": objects}

    def _info(self, repo: Repo, commit: Commit) -> dict:
        return {
            "id": repo.repo_id,
            "sha": commit.oid,
            "private": repo.private,
            "disabled": False,
            "gated": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "lastModified": "2026-01-01T00:00:00.000Z",
            "siblings": [{"rfilename": p} for p in sorted(commit.files)],
            "cardData": {},
        }

    def _tree_entries(self, commit: Commit, prefix: str, recursive: bool) -> list:
        prefix = prefix.strip("/")
        files, dirs = [], set()
        for p in sorted(commit.files):
            if prefix and not p.startswith(prefix + "/"):
                continue
            rest = p[len(prefix) + 1 :] if prefix else p
            if "/" in rest and not recursive:
                dirs.add((prefix + "/" if prefix else "") + rest.split("/", 1)[0])
                continue
            if recursive:
                parts = rest.split("/")[:-1]
                for i in range(1, len(parts) + 1):
                    dirs.add((prefix + "/" if prefix else "") + "/".join(parts[:i]))
            files.append(self._file_entry(p, commit.files[p]))
        return [{"type": "directory", "oid": git_sha1(d.encode()), "size": 0, "path": d} for d in sorted(dirs)] + files

    @staticmethod
    def _file_entry(path: str, b: Blob) -> dict:
        e = {"type": "file", "oid": b.oid, "size": len(b.data), "path": path}
        if b.lfs:
            e["lfs"] = {"oid": b.sha256, "size": len(b.data), "pointerSize": len(b.pointer)}
        return e

    def _api(self, method, repo: Repo, rest: str, query, body, headers):
        parts = rest.split("/", 1) if rest else [""]
        action, tail = parts[0], (parts[1] if len(parts) > 1 else "")
        if method == "GET" and action in ("", "revision"):
            commit = repo.resolve(tail.split("/")[0] if tail else "main")
            if commit is None:
                return 404, {"X-Error-Code": "RevisionNotFound"}, {"error": "Invalid rev id"}
            return 200, {}, self._info(repo, commit)
        if method == "GET" and action == "refs":
            ref = lambda name, kind, oid: {"name": name, "ref": f"refs/{kind}/{name}", "targetCommit": oid}
            return (
                200,
                {},
                {
                    "branches": [ref(n, "heads", o) for n, o in sorted(repo.branches.items())],
                    "converts": [],
                    "tags": [ref(n, "tags", o) for n, (o, _) in sorted(repo.tags.items())],
                    "pullRequests": [],
                },
            )
        if method == "GET" and action == "tree":
            rev, _, sub = tail.partition("/")
            commit = repo.resolve(rev)
            if commit is None:
                return 404, {"X-Error-Code": "RevisionNotFound"}, {"error": "Invalid rev id"}
            recursive = (query.get("recursive") or ["false"])[0].lower() in ("true", "1")
            entries = self._tree_entries(commit, unquote(sub), recursive)
            if sub and not entries:
                return 404, {"X-Error-Code": "EntryNotFound"}, {"error": "Entry not found"}
            return 200, {}, entries
        if method == "POST" and action == "paths-info":
            commit = repo.resolve(tail)
            if commit is None:
                return 404, {"X-Error-Code": "RevisionNotFound"}, {"error": "Invalid rev id"}
            try:
                paths = json.loads(body)["paths"]
            except ValueError:
                paths = parse_qs(body.decode()).get("paths", [])
            out = []
            for p in paths:
                p = p.strip("/")
                if p in commit.files:
                    out.append(self._file_entry(p, commit.files[p]))
                elif any(f.startswith(p + "/") for f in commit.files):
                    out.append({"type": "directory", "oid": git_sha1(p.encode()), "size": 0, "path": p})
            return 200, {}, out
        if method == "GET" and action == "commits":
            commit = repo.resolve(tail or "main")
            if commit is None:
                return 404, {}, {"error": "Invalid rev id"}
            return (
                200,
                {},
                [
                    {
                        "id": c.oid,
                        "title": c.title,
                        "message": c.message,
                        "authors": [{"user": "sciga"}],
                        "date": "2026-01-01T00:00:00.000Z",
                    }
                    for c in repo.history(commit.oid)
                ],
            )
        if method == "POST" and action == "preupload":
            if not self._authorized(headers):
                return 401, {}, {"error": "Invalid credentials in Authorization header"}
            commit = repo.resolve(tail)
            out = []
            for f in json.loads(body)["files"]:
                lfs = bool(LFS_PATTERNS.search(f["path"])) or f["size"] > 10 * 1024 * 1024
                existing = commit.files.get(f["path"]) if commit else None
                oid = None if existing is None else (existing.sha256 if existing.lfs else existing.oid)
                out.append(
                    {"path": f["path"], "uploadMode": "lfs" if lfs else "regular", "shouldIgnore": False, "oid": oid}
                )
            return 200, {}, {"files": out, "commitOid": commit.oid if commit else None}
        if method == "POST" and action == "commit":
            return self._commit(repo, tail, body, headers)
        if method == "POST" and action == "tag":
            if not self._authorized(headers):
                return 401, {}, {"error": "Invalid credentials in Authorization header"}
            commit = repo.resolve(tail)
            d = json.loads(body)
            if commit is None:
                return 404, {}, {"error": "Invalid rev id"}
            if d["tag"] in repo.tags:
                return 409, {}, {"error": f"Tag {d['tag']} already exists"}
            repo.tags[d["tag"]] = (commit.oid, d.get("message", ""))
            self.authorized_writes += 1
            return 200, {}, {"tag": d["tag"]}
        return 404, {}, {"error": f"no route for {method} /{rest}"}

    def _commit(self, repo: Repo, rev: str, body: bytes, headers):
        if not self._authorized(headers):
            return 401, {}, {"error": "Invalid credentials in Authorization header"}
        if self._injected("commit"):
            return 500, {}, {"error": "Internal Error - We're working hard to fix this as soon as possible!"}
        lines = [json.loads(x) for x in body.decode().splitlines() if x.strip()]
        header = lines[0]["value"]
        branch = unquote(rev)
        head = repo.branches.get(branch)
        if header.get("parentCommit") and header["parentCommit"] != head:
            return 412, {}, {"error": "A commit has happened since. Please refresh and try again."}
        files = dict(repo.commits[head].files) if head else {}
        for item in lines[1:]:
            key, v = item["key"], item["value"]
            if key == "file":
                files[v["path"]] = Blob(base64.b64decode(v["content"]), False)
            elif key == "lfsFile":
                if v["oid"] not in self.lfs:
                    return 422, {}, {"error": f"LFS object {v['oid']} for {v['path']} was never uploaded"}
                files[v["path"]] = Blob(self.lfs[v["oid"]], True)
            elif key == "deletedFile":
                files.pop(v["path"], None)
            elif key == "deletedFolder":
                for p in [p for p in files if p.startswith(v["path"].rstrip("/") + "/")]:
                    files.pop(p)
        oid = self._new_oid(repo.repo_id, head, header.get("summary"))
        repo.commits[oid] = Commit(oid, head, header.get("summary", ""), header.get("description", ""), files)
        repo.branches[branch] = oid
        self.authorized_writes += 1
        prefix = "" if repo.repo_type == "model" else f"{repo.repo_type}s/"
        return (
            200,
            {},
            {
                "commitUrl": f"{self.url}/{prefix}{repo.repo_id}/commit/{oid}",
                "commitOid": oid,
                "success": True,
                "pullRequestUrl": None,
            },
        )

    def _resolve(self, method, repo: Repo, rev: str, path: str, headers):
        commit = repo.resolve(rev)
        if commit is None:
            return 404, {"X-Error-Code": "RevisionNotFound"}, {"error": "Invalid rev id"}
        blob = commit.files.get(path)
        if blob is None:
            return 404, {"X-Error-Code": "EntryNotFound"}, {"error": "Entry not found"}
        data = blob.data
        h = {
            "X-Repo-Commit": commit.oid,
            "ETag": f'"{blob.oid}"',
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
        }
        if blob.lfs:
            h["X-Linked-Etag"] = f'"{blob.sha256}"'
            h["X-Linked-Size"] = str(len(data))
        rng = headers.get("Range")
        if rng and method == "GET":
            m = re.match(r"bytes=(\d*)-(\d*)", rng)
            start = int(m.group(1)) if m.group(1) else max(0, len(data) - int(m.group(2)))
            end = int(m.group(2)) if (m.group(2) and m.group(1)) else len(data) - 1
            end = min(end, len(data) - 1)
            part = data[start : end + 1]
            h["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
            h["Content-Length"] = str(len(part))
            return 206, h, part
        h["Content-Length"] = str(len(data))
        return 200, h, data


# ------------------------------------------------------------------ using it from a test


@contextlib.contextmanager
def served_hub(monkeypatch, tmp_path: Path, token: str):
    """A FakeHub that huggingface_hub in this process talks to: the test's token, an HF_HOME
    of its own (never the user's stored login), no HF_ENDPOINT from outside, and Xet off (the
    real Hub stores large files with Xet; this server speaks the LFS protocol that
    huggingface_hub uses when Xet is off)."""
    import huggingface_hub.constants as hf_constants

    server = FakeHub(token).start()
    monkeypatch.setenv("HF_TOKEN", token)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    monkeypatch.setattr(hf_constants, "HF_HUB_DISABLE_XET", True)
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)  # training code may have set TRANSFORMERS_OFFLINE
    try:
        yield server
    finally:
        server.stop()


def hub_subprocess_env(hub: FakeHub, token: str, tmp_path: Path, pythonpath: Path) -> dict:
    """The environment of a `sciga` subprocess that talks to ``hub`` with ``token`` (which
    can write: a test that checks a command writes nothing must not rely on it being unable)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(
        HF_ENDPOINT=hub.url,
        HF_TOKEN=token,
        HF_HOME=str(tmp_path / "hf_home_sub"),
        HF_HUB_DISABLE_XET="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        PYTHONPATH=str(pythonpath),
    )
    return env
