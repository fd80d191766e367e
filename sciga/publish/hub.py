"""`sciga publish OUT --repo-id ORG/NAME --version v1.2.0`: gate, then one Hub commit plus a tag.

1. The quality gate runs first; a failing build is refused before any request reaches the Hub.
2. The build's dataset card (``OUT/README.md``, explore/dataset_card.py) is written if it is
   missing or stale, and that file is what gets uploaded: the card depends on the build only,
   so the folder and the Hub carry the same card. The plan compares the build (shards by
   sha256, the card by git blob id) with the repo: the files at the version's tag if it
   exists, else at ``main``.
   - tag exists with the same files: already published, nothing to do;
   - tag exists with other files: refused (a version is immutable; pick a new one);
   - otherwise one commit adds changed files and deletes shards the build no longer has,
     then the version tag points at it. Unchanged shards are not uploaded again; a new
     version of a build that is already on ``main`` is only a new tag.
3. ``manifest.json`` travels with the data, as the gate reads it (the shards with their
   sha256, the counts, the versions, the options), plus the verdict publish gated on
   (``quality_gate``), so ``sciga validate hf://ORG/NAME@vX.Y.Z`` checks the published version
   on what it has. It leaves out what describes the run and the machine, not the data:
   ``run`` (seconds, timestamps, runner), ``incremental``, and the folders of option files
   (an option naming a local path keeps only its last component). The same data published
   again gives the same bytes, so a new version of unchanged data is only a tag.
4. Resumable: LFS objects that reached the Hub before an interruption are not sent again
   (the LFS batch API reports them present), and a commit that landed without its tag is
   found unchanged on the next run, which only adds the tag.

The token comes from huggingface_hub's usual sources (``HF_TOKEN``, ``hf auth login``); this
module never reads, prints or logs it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import posixpath
import re
from dataclasses import dataclass, field
from typing import Optional, Union

import fsspec

from sciga.explore.dataset_card import CARD
from sciga.schemas.arrow import CONFIGS
from sciga.schemas.manifest import BuildManifest
from sciga.transforms.write.manifest import MANIFEST, read_manifest

log = logging.getLogger("sciga.publish")
VERSION_RE = re.compile(r"^v?\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.\-]+)?$")
REPO_ID_RE = re.compile(r"^[A-Za-z0-9][\w.\-]*/[A-Za-z0-9][\w.\-]*$")
REPO_TYPE = "dataset"


class PublishError(Exception):
    """A publish that cannot go on; the message is one sentence for a person."""


class GateFailed(PublishError):
    def __init__(self, result):
        super().__init__("the quality gate failed; nothing was uploaded")
        self.result = result


@dataclass(frozen=True)
class RemoteFile:
    """A shard of a build on gs://, s3://... (read when its batch is uploaded, never copied to disk)."""

    url: str


@dataclass
class LocalFile:
    path_in_repo: str
    source: Union[str, bytes, RemoteFile]  # a local file path, the bytes, or a file of a remote build
    size: int
    sha256: str
    git_oid: str


# A build on remote storage is uploaded in batches of about this many bytes (read into
# memory, pre-uploaded, freed), then committed at once: memory does not grow with the build.
PREUPLOAD_BATCH_BYTES = 1 << 30


@dataclass
class PublishResult:
    repo_id: str
    version: str
    status: str  # "published" | "already published" | "dry run" | "tagged"
    commit: Optional[str] = None
    added: list = field(default_factory=list)
    deleted: list = field(default_factory=list)
    unchanged: list = field(default_factory=list)
    created_repo: bool = False
    upload_bytes: int = 0
    notes: list = field(default_factory=list)
    previous: Optional[str] = None  # the version the changelog compares with
    changes: Optional[str] = None  # the changelog's one-line summary
    gate: Optional[str] = None  # the quality gate's verdict, one line
    tag: Optional[str] = None  # what happens to the version tag, one line

    def summary(self) -> str:
        lines = [f"sciga publish {self.repo_id} {self.version}: {self.status}"]
        if self.gate:
            lines.append(f"  gate      {self.gate}")
        if self.tag:
            lines.append(f"  tag       {self.tag}")
        if self.commit:
            lines.append(f"  commit    {self.commit}")
        lines.append(
            f"  add       {len(self.added):>4} files ({self.upload_bytes} bytes)"
            + (f": {', '.join(self.added[:6])}{' ...' if len(self.added) > 6 else ''}" if self.added else "")
        )
        lines.append(
            f"  delete    {len(self.deleted):>4} files" + (f": {', '.join(self.deleted[:6])}" if self.deleted else "")
        )
        lines.append(f"  unchanged {len(self.unchanged):>4} files")
        if self.changes:
            lines.append(f"  changes   {self.changes}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def normalize_version(version: str) -> str:
    """``1.2.0`` and ``v1.2.0`` are the same version, tagged ``v1.2.0`` on the Hub; anything
    but MAJOR.MINOR.PATCH (``v1.0``, ``1``) is refused in one sentence naming the form."""
    if not VERSION_RE.match(version):
        raise PublishError(
            f"--version {version!r} is not a version: give MAJOR.MINOR.PATCH, e.g. v1.0.0 or 1.0.0 "
            "(it becomes the git tag v1.0.0 on the Hub)."
        )
    return version if version.startswith("v") else f"v{version}"


def git_blob_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _file_hashes(fs, path: str) -> tuple[int, str, str]:
    """(size, sha256, git blob id) in one pass over the file."""
    n = fs.size(path)
    sha, git = hashlib.sha256(), hashlib.sha1(b"blob %d\0" % n)
    with fs.open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            sha.update(chunk)
            git.update(chunk)
    return n, sha.hexdigest(), git.hexdigest()


def local_files(out_dir: str, manifest: BuildManifest, card: str, extra: Optional[dict] = None) -> dict:
    """path in repo -> LocalFile: every shard the manifest lists, the card, and ``extra``
    (path in repo -> bytes: the changelog files)."""
    fs, root = fsspec.core.url_to_fs(out_dir)
    files = {}
    for config in CONFIGS:
        for e in manifest.shard_files(config):
            local = posixpath.join(root, e.path)
            size, sha, git = _file_hashes(fs, local)
            source = local if "://" not in out_dir else RemoteFile(fs.unstrip_protocol(local))
            files[e.path] = LocalFile(e.path, source, size, sha, git)
    for path, data in sorted({CARD: card.encode("utf-8"), **(extra or {})}.items()):
        files[path] = LocalFile(path, data, len(data), hashlib.sha256(data).hexdigest(), git_blob_oid(data))
    return files


# Keys of manifest.json that describe a run or a machine rather than the data: not published.
RUN_ONLY_MANIFEST_KEYS = ("run", "incremental")


def _without_machine_path(value):
    """A local path (``/home/me/meta``, ``../pages``) -> its last component; URLs and other
    values unchanged; lists element by element."""
    if isinstance(value, list):
        return [_without_machine_path(v) for v in value]
    if isinstance(value, str) and "://" not in value and ("/" in value or "\\" in value):
        return posixpath.basename(value.replace("\\", "/").rstrip("/")) or value
    return value


def published_manifest(out_dir: str, gate) -> bytes:
    """The ``manifest.json`` a publish uploads: the build's manifest without the run's facts
    and the machine's paths, with the gate's summary (``quality_gate``); deterministic."""
    from sciga.explore.dataset_card import gate_summary

    fs, root = fsspec.core.url_to_fs(out_dir)
    with fs.open(posixpath.join(root, MANIFEST), "r", encoding="utf-8") as f:
        data = json.load(f)
    for key in RUN_ONLY_MANIFEST_KEYS:
        data.pop(key, None)
    data["options"] = {k: _without_machine_path(v) for k, v in (data.get("options") or {}).items()}
    data["quality_gate"] = gate_summary(gate)
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8")


def remote_files(api, repo_id: str, revision: str) -> dict:
    """path -> (sha256 or None, git blob id) at ``revision``."""
    from huggingface_hub.hf_api import RepoFile

    out = {}
    for item in api.list_repo_tree(repo_id, repo_type=REPO_TYPE, revision=revision, recursive=True):
        if isinstance(item, RepoFile):
            out[item.path] = (item.lfs.sha256 if item.lfs else None, item.blob_id)
    return out


def _same(local: LocalFile, remote: tuple) -> bool:
    sha256, blob = remote
    return local.sha256 == sha256 if sha256 else local.git_oid == blob


def diff(local: dict, remote: dict) -> tuple[list, list, list]:
    """(to add, to delete, unchanged). Only data files the build no longer has are deleted;
    anything else in the repo (.gitattributes, extra docs) is left alone."""
    add = sorted(p for p, f in local.items() if p not in remote or not _same(f, remote[p]))
    unchanged = sorted(p for p in local if p not in add)
    delete = sorted(p for p in remote if p not in local and p.startswith("data/"))
    return add, delete, unchanged


def _hub_error(e: Exception, what: str, repo_id: str) -> PublishError:
    status = getattr(getattr(e, "response", None), "status_code", None)
    server = ""
    resp = getattr(e, "response", None)
    if resp is not None:
        server = (resp.headers.get("X-Error-Message") or "").strip()
    hint = {
        401: "check the token: set HF_TOKEN or run `hf auth login`",
        403: f"the token has no write access to {repo_id.split('/')[0]}; use a token with write permission",
        404: f"check the repo id {repo_id} and the endpoint",
        409: "the repo changed meanwhile; run the same command again",
        412: "someone committed to the repo meanwhile; run the same command again",
    }.get(
        status or 0,
        "run the same command again: uploads that finished are reused"
        if (status or 500) >= 500
        else "see the Hub's message",
    )
    msg = f"the Hub answered {status or 'with an error'} when {what} for {repo_id}"
    if server:
        msg += f" ({server})"
    return PublishError(f"{msg}; {hint}.")


def _is_network_error(e: BaseException) -> bool:
    """Connection refused, DNS, TLS, timeouts: huggingface_hub lets its HTTP client's
    transport errors through unwrapped."""
    return isinstance(e, OSError) or type(e).__module__.split(".")[0] in (
        "httpx",
        "httpx2",
        "httpcore",
        "requests",
        "urllib3",
    )


def _xet_enabled() -> bool:
    import huggingface_hub.constants as hf_constants

    return not getattr(hf_constants, "HF_HUB_DISABLE_XET", True)


def _unreachable(api, e: BaseException, uploading: bool = False) -> PublishError:
    if _xet_enabled() and (uploading or "xet" in str(e).lower()):
        # The shards go through Xet storage, which the real Hub has and a Hub-compatible
        # server (a mirror, a test server) may not: its refusal looks like a dead network.
        return PublishError(
            f"cannot reach the Hub's Xet storage from {api.endpoint} while uploading the shards "
            f"({type(e).__name__}); a Hub-compatible server without Xet needs HF_HUB_DISABLE_XET=1, "
            "otherwise check --endpoint / HF_ENDPOINT and the network, then run the same command again."
        )
    return PublishError(
        f"cannot reach the Hub at {api.endpoint} ({type(e).__name__}); check --endpoint / HF_ENDPOINT and "
        "the network, then run the same command again."
    )


def _commit_texts(manifest: BuildManifest, version: str, gate: dict) -> tuple[str, str]:
    from sciga.explore.dataset_card import gate_sentence
    from sciga.schemas.version import BUILDER_VERSION, SCHEMA_VERSION

    c = manifest.count
    title = f"Publish {version}: {c('papers')} papers, {c('figures')} figures, {c('subfigures')} subfigures"
    desc = (
        f"sciga-builder {manifest.builder_version or BUILDER_VERSION}, schema {manifest.schema_version or SCHEMA_VERSION}; "
        f"inputs sha256 {manifest.inputs_sha256}; {gate_sentence(gate)}."
    )
    return title, desc


def build_card(out_dir: str, notes: list, write: bool = True, text: Optional[str] = None) -> str:
    """The build's card text, written to OUT/README.md first when missing or stale (a build
    made before the build wrote cards, or a folder changed since). A folder that cannot be
    written (read-only bucket) still publishes the same text, with a note. A dry run
    (``write=False``) only says what it would write."""
    from sciga.explore.dataset_card import card_path, dataset_card_text

    text = dataset_card_text(out_dir) if text is None else text
    fs, p = fsspec.core.url_to_fs(card_path(out_dir))
    try:
        current = fs.cat_file(p) if fs.exists(p) else None
    except OSError:
        current = None
    if current != text.encode("utf-8") and not write:
        notes.append(f"would {'write' if current is None else 'refresh'} the dataset card {card_path(out_dir)}")
    elif current != text.encode("utf-8"):
        try:
            with fs.open(p, "wb") as f:
                f.write(text.encode("utf-8"))
            notes.append(f"{'wrote' if current is None else 'refreshed'} the dataset card {card_path(out_dir)}")
        except OSError as e:
            notes.append(f"could not write {card_path(out_dir)} ({type(e).__name__}); uploaded the card from memory")
    return text


def restricted_papers(out_dir: str) -> dict[str, int]:
    """The papers a build writes in full although their licence does not let a third party
    share and adapt them (``schemas/licences.py``, even non-commercially), by licence."""
    from sciga.explore.views import connect
    from sciga.schemas.licences import admits, canonical_url

    con = connect(out_dir, tasks=False)
    try:
        rows = con.execute("SELECT license, count(*) FROM papers WHERE withheld IS NULL GROUP BY ALL").fetchall()
    finally:
        con.close()
    out: dict[str, int] = {}
    for lic, n in rows:
        if not admits("redistributable-nc", lic):
            out[canonical_url(lic)] = out.get(canonical_url(lic), 0) + int(n)
    return out


def check_licences_for_public(out_dir: str, manifest: BuildManifest, repo_id: str) -> None:
    """Refuse (``PublishError``) a build for a public repository when its licence policy let
    in papers that may not be redistributed."""
    from sciga.schemas.licences import policy_allows_restricted

    policy = str(manifest.options.get("licences") or "all")
    if not policy_allows_restricted(policy):
        return
    restricted = restricted_papers(out_dir)
    if not restricted:
        return
    n = sum(restricted.values())
    top = ", ".join(f"{k} {v}" for k, v in sorted(restricted.items(), key=lambda kv: (-kv[1], kv[0]))[:3])
    raise PublishError(
        f"{out_dir} was built under --licences {policy} and holds {n} papers whose licence does not let "
        f"a third party redistribute them ({top}), and {repo_id} is public; rebuild it with "
        f"`sciga build --output {out_dir} --licences redistributable` and the same inputs (it recomputes nothing), "
        "publish to a private repository (--private), or pass --allow-any-licence if you hold the rights."
    )


def publish(
    out_dir: str,
    repo_id: str,
    version: str,
    *,
    dry_run: bool = False,
    private: bool = False,
    endpoint: Optional[str] = None,
    gate_options: Optional[dict] = None,
    changelog: bool = True,
    gate_result=None,
    changes=None,
    allow_any_licence: bool = False,
) -> PublishResult:
    """``gate_result``: the gate's result on this very build, when the caller just ran it
    (`sciga update`); ``changes``: the changelog against the previous version, when the
    caller computed it (``publish/changelog.py``)."""
    from huggingface_hub import HfApi, get_token
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

    from sciga.explore.build_folder import check_is_build
    from sciga.quality.gate import run_gate

    if not REPO_ID_RE.match(repo_id):
        raise PublishError(f"--repo-id {repo_id!r} is not ORG/NAME; give the dataset repo as e.g. my-org/sciga-arxiv.")
    version = normalize_version(version)
    check_is_build(out_dir)
    if not dry_run and get_token() is None:
        raise PublishError(
            "no Hugging Face token found; set HF_TOKEN or run `hf auth login` with a token that can write "
            f"to {repo_id.split('/')[0]}."
        )

    # 1. The gate, before anything talks to the Hub.
    gate = gate_result if gate_result is not None else run_gate(out_dir, **(gate_options or {}))
    if not gate.success:
        raise GateFailed(gate)
    log.info("quality gate passed (%d expectations)", len(gate.checks))
    gate_verdict = f"passed ({len(gate.checks)} expectations)"

    # 2. What the Hub has: refs, and the files at the version's tag (if any) and at main;
    # then the files this version consists of (the card says what changed since the
    # previous version, and the full diff goes into the same commit).
    manifest = read_manifest(out_dir)
    travels = {MANIFEST: published_manifest(out_dir, gate)}
    result = PublishResult(
        repo_id=repo_id, version=version, status="dry run" if dry_run else "published", gate=gate_verdict
    )
    api = HfApi(endpoint=endpoint)
    try:
        try:
            refs = api.list_repo_refs(repo_id, repo_type=REPO_TYPE)
            repo_exists = True
        except RepositoryNotFoundError:
            refs, repo_exists = None, False
        public = not (api.repo_info(repo_id, repo_type=REPO_TYPE).private if repo_exists else private)
        if public and not allow_any_licence:
            check_licences_for_public(out_dir, manifest, repo_id)
        tags = {t.name: t.target_commit for t in (refs.tags if refs else [])}
        head = next((b.target_commit for b in (refs.branches if refs else []) if b.name == "main"), None)
        at_tag = remote_files(api, repo_id, tags[version]) if version in tags else None
        remote = remote_files(api, repo_id, head) if (repo_exists and head) else {}
        card, extra = (
            _card_and_changes(out_dir, repo_id, version, tags, endpoint, result, changes) if changelog else (None, {})
        )
    except Exception as e:
        if not isinstance(e, HfHubHTTPError) and not _is_network_error(e):
            raise
        problem = _hub_error(e, "reading the repo", repo_id) if isinstance(e, HfHubHTTPError) else _unreachable(api, e)
        if dry_run:
            result.notes.append(f"remote state unknown: {problem}")
            result.tag = f"{version} (would be created if the Hub has no such tag)"
            local = local_files(out_dir, manifest, build_card(out_dir, result.notes, write=False), travels)
            result.added = sorted(local)
            result.upload_bytes = sum(f.size for f in local.values())
            return result
        raise problem from None
    card = build_card(out_dir, result.notes, write=not dry_run, text=card)
    local = local_files(out_dir, manifest, card, {**extra, **travels})

    if at_tag is not None:
        add, delete, unchanged = diff(local, at_tag)
        if not add and not delete:
            result.status, result.commit, result.unchanged = "already published", tags[version], unchanged
            result.tag = f"{version} exists with these files"
            return result
        raise PublishError(
            f"version {version} already exists on {repo_id} with different files "
            f"({len(add)} differ or are new, {len(delete)} would go); a version never changes: "
            "publish this build under a new --version."
        )

    add, delete, unchanged = diff(local, remote)
    result.added, result.deleted, result.unchanged = add, delete, unchanged
    result.upload_bytes = sum(local[p].size for p in add)
    if not repo_exists:
        result.created_repo = True
        result.notes.append(
            f"{'would create' if dry_run else 'created'} dataset repo {repo_id} ({'private' if private else 'public'})"
        )
    if dry_run:
        result.tag = f"{version} (new; would point at {'a new commit' if (add or delete) else 'main, unchanged'})"
        result.notes.append(f"would {'commit and ' if (add or delete) else ''}tag {version}; nothing was sent")
        return result

    # 4. Write: repo, one commit, the tag.
    result.commit = _commit_and_tag(
        api, repo_id, version, manifest, gate, local, result, repo_exists=repo_exists, private=private, head=head
    )
    result.tag = f"{version} created"
    return result


def _commit_and_tag(
    api,
    repo_id: str,
    version: str,
    manifest: BuildManifest,
    gate,
    local: dict,
    result: PublishResult,
    *,
    repo_exists: bool,
    private: bool,
    head: Optional[str],
) -> Optional[str]:
    """Step 4 of ``publish``: create the repo when missing, commit what differs from main in one
    commit, tag it ``version``; the commit tagged. Every Hub or network failure becomes one
    sentence (PublishError)."""
    from huggingface_hub import CommitOperationDelete
    from huggingface_hub.errors import HfHubHTTPError

    from sciga.explore.dataset_card import gate_summary

    add, delete = result.added, result.deleted
    uploading = False  # the shards' bytes are going to the Hub's large-file storage (LFS / Xet)
    try:
        if not repo_exists:
            api.create_repo(repo_id, repo_type=REPO_TYPE, private=private, exist_ok=True)
            refs = api.list_repo_refs(repo_id, repo_type=REPO_TYPE)
            head = next((b.target_commit for b in refs.branches if b.name == "main"), None)
            remote = remote_files(api, repo_id, head) if head else {}
            add, delete, unchanged = diff(local, remote)
            result.added, result.deleted, result.unchanged = add, delete, unchanged
        commit = head
        if add or delete:
            uploading = True  # through create_commit, which uploads what _additions left
            ops = _additions(api, repo_id, local, add)
            ops += [CommitOperationDelete(path_in_repo=p) for p in delete]
            title, desc = _commit_texts(manifest, version, gate_summary(gate))
            log.info("committing %d additions and %d deletions to %s", len(add), len(delete), repo_id)
            info = api.create_commit(
                repo_id, ops, commit_message=title, commit_description=desc, repo_type=REPO_TYPE, parent_commit=head
            )
            commit = info.oid
            uploading = False
        else:
            result.status = "tagged"
            result.notes.append(
                "main already holds exactly these files (an earlier publish of this build); only the tag was added"
            )
        from sciga.schemas.version import BUILDER_VERSION, SCHEMA_VERSION

        api.create_tag(
            repo_id,
            tag=version,
            revision=commit,
            repo_type=REPO_TYPE,
            tag_message=f"sciga-builder {BUILDER_VERSION}, schema {SCHEMA_VERSION}",
        )
    except HfHubHTTPError as e:
        raise _hub_error(e, "publishing", repo_id) from None
    except Exception as e:
        if _is_network_error(e):
            raise _unreachable(api, e, uploading) from None
        if not isinstance(e, RuntimeError):  # huggingface_hub wraps failed LFS uploads in RuntimeError
            raise
        cause = e.__cause__
        if cause is not None and _is_network_error(cause):
            raise _unreachable(api, cause, uploading) from None
        if isinstance(cause, HfHubHTTPError):
            raise _hub_error(cause, "uploading a shard", repo_id) from None
        raise PublishError(
            f"uploading to {repo_id} failed ({e}); run the same command again: finished uploads are reused."
        ) from None
    return commit


def repo_tags(repo_id: str, endpoint: Optional[str] = None) -> dict:
    """tag -> commit of the dataset repo's tags; empty when the repo does not exist yet.
    PublishError (one sentence) when the Hub cannot be read."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

    api = HfApi(endpoint=endpoint)
    try:
        refs = api.list_repo_refs(repo_id, repo_type=REPO_TYPE)
    except RepositoryNotFoundError:
        return {}
    except HfHubHTTPError as e:
        raise _hub_error(e, "reading the repo", repo_id) from None
    except Exception as e:
        if _is_network_error(e):
            raise _unreachable(api, e) from None
        raise
    return {t.name: t.target_commit for t in refs.tags}


def _card_and_changes(
    out_dir: str, repo_id: str, version: str, tags: dict, endpoint: Optional[str], result: PublishResult, changes=None
) -> tuple[Optional[str], dict]:
    """The card text (None: the build's own card) and the changelog files of this version,
    against the previous version on the Hub. Data identical to the previous version's: its
    card as it is (the new version is then only a tag on the same files)."""
    from sciga.explore.dataset_card import dataset_card_text
    from sciga.publish.changelog import card_with_changes, changelog_against, previous_version

    previous = previous_version(tags, version)
    if previous is None:
        return None, {}
    result.previous = previous
    log.info("comparing the build with %s on %s for the changelog", previous, repo_id)
    if changes is None or (changes.previous, changes.version) != (previous, version):
        changes = changelog_against(out_dir, repo_id, previous, version, endpoint)
    result.changes = changes.summary
    if changes.empty:
        from sciga.transforms.common.storage import hub_filesystem

        card = hub_filesystem(endpoint).cat_file(f"datasets/{repo_id}@{tags[previous]}/{CARD}")
        return card.decode("utf-8"), {}
    return card_with_changes(dataset_card_text(out_dir), changes.section), changes.files


def _additions(api, repo_id: str, local: dict, add: list) -> list:
    """One CommitOperationAdd per file to add. Files of a remote build are read a batch at a
    time and pre-uploaded (LFS/Xet), which frees their bytes; the commit then only names them."""
    import fsspec
    from huggingface_hub import CommitOperationAdd

    ops: list = []
    batch: list = []
    size = 0

    def flush():
        nonlocal batch, size
        if batch:
            api.preupload_lfs_files(repo_id, batch, repo_type=REPO_TYPE, free_memory=True)
        batch, size = [], 0

    for p in add:
        source = local[p].source
        if isinstance(source, RemoteFile):
            with fsspec.open(source.url, "rb") as f:
                op = CommitOperationAdd(path_in_repo=p, path_or_fileobj=f.read())
            batch.append(op)
            size += local[p].size
            if size >= PREUPLOAD_BATCH_BYTES:
                flush()
        else:
            op = CommitOperationAdd(path_in_repo=p, path_or_fileobj=source)
        ops.append(op)
    flush()
    return ops
