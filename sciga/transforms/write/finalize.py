"""After the pipeline: number the staged parts and move them into ``data/``.

Runs on the launching machine once every shard group has written its parts, so a build
that fails or is killed never touches the previous build's shards. The parts of a config
are ordered by (group, part) and named ``train-NNNNN-of-MMMMM.parquet``; shards of an
earlier build that are not replaced are removed, so a rerun never mixes two builds. A
config without any row still gets one empty, typed shard that readers can open.

What a later build reuses of the shards (``previous_parts``): a shard whose results are all
unchanged is taken over whole, and a shard that must be written again takes its unchanged
papers' rows from the old shard (``OUT/.sciga/shard_members/<fingerprint>.json`` says which
papers, with which results, it holds). While the shards are being moved, a marker
(``OUT/.sciga/finalizing``) says the manifest does not describe them: a build killed then
leaves the marker, and the next build reuses no shard.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import json
import os
import posixpath
import shutil
from collections.abc import Iterable
from typing import Optional

import fsspec

from sciga.schemas.arrow import CONFIGS
from sciga.schemas.build import PartInfo
from sciga.schemas.manifest import ShardFile
from sciga.transforms.common.input_files import is_local, local_path
from sciga.transforms.common.result_store import FINALIZING, SHARD_MEMBERS, STORE_DIR, store_root
from sciga.transforms.write.shard_names import empty_table_bytes, shard_name


def read_part_infos(parts_root: str) -> list[PartInfo]:
    """The sidecars of the parts staged under ``parts_root``, config by config."""
    fs, root = fsspec.core.url_to_fs(parts_root)
    infos = []
    for config in CONFIGS:
        d = posixpath.join(root, config)
        if not fs.isdir(d):
            continue
        for p in sorted(fs.ls(d, detail=False)):
            if p.endswith(".parquet.json"):
                with fs.open(p, "r") as f:
                    infos.append(PartInfo.from_json(json.load(f)))
    return infos


def finalize_parts(
    out_dir: str, infos: Iterable[PartInfo], data_root: Optional[str] = None
) -> dict[str, list[ShardFile]]:
    """Move the parts into ``<out>/data/<config>/`` (or into ``data_root/<config>/``: the
    next generation of a local build, ``generation_data``); the manifest's ``files``
    entries (named ``data/<config>/...`` either way)."""
    fs, out_root = fsspec.core.url_to_fs(out_dir)
    data_dir = data_root if data_root is not None else posixpath.join(out_root, "data")
    by_config: dict[str, list[PartInfo]] = {c: [] for c in CONFIGS}
    for info in infos:
        if info.path and info.rows:
            by_config[info.config].append(info)
    files: dict[str, list[ShardFile]] = {}
    for config in CONFIGS:
        parts = sorted(by_config[config], key=lambda i: (i.group, i.part))
        dest = posixpath.join(data_dir, config)
        fs.makedirs(dest, exist_ok=True)
        keep = set()
        entries = []
        total = max(1, len(parts))
        for i, info in enumerate(parts):
            name = shard_name(i, total)
            target = posixpath.join(dest, name)
            _, src = fsspec.core.url_to_fs(info.path)
            fs.mv(src, target)
            keep.add(target)
            entries.append(
                ShardFile(
                    path=posixpath.join("data", config, name),
                    rows=info.rows,
                    bytes=info.bytes,
                    sha256=info.sha256,
                    from_part=True,
                    group=info.group,
                    fingerprint=info.fingerprint,
                    counts={k: v for k, v in info.counts.items() if k not in ("reused", "recomputed")},
                )
            )
        if not parts:
            data = empty_table_bytes(config)
            target = posixpath.join(dest, shard_name(0, 1))
            with fs.open(target, "wb") as f:
                f.write(data)
            keep.add(target)
            entries.append(
                ShardFile(
                    path=posixpath.join("data", config, shard_name(0, 1)),
                    rows=0,
                    bytes=len(data),
                    sha256=hashlib.sha256(data).hexdigest(),
                )
            )
        for old in fs.ls(dest, detail=False):
            if (
                old.endswith(".parquet")
                and old not in keep
                and posixpath.join(dest, posixpath.basename(old)) not in keep
            ):
                fs.rm(old)
        files[config] = entries
    return files


# ------------------------------------------------------------------ generations (local builds)

NEXT = "next"  # OUT/.sciga/next: the generation being assembled (then the one replaced)
MANIFEST_IN_DATA = ".manifest.json"  # the generation's manifest, inside its data folder
CARD = "README.md"
CARD_IN_DATA = ".README.md"  # the generation's dataset card (README.md links to it)
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def generation_data(out_dir: str) -> Optional[str]:
    """A fresh, empty folder for the next generation's data of a local build (whatever a
    killed build left there removed), or None for a build into a bucket."""
    if not is_local(out_dir):
        return None
    nxt = os.path.join(local_path(store_root(out_dir)), NEXT)
    shutil.rmtree(nxt, ignore_errors=True)
    if os.path.islink(os.path.join(local_path(out_dir), "data")):
        return None  # data/ links elsewhere (another disk): its shards are moved in place
    data = os.path.join(nxt, "data")
    os.makedirs(data)
    return data


def manifest_target(out_dir: str) -> str:
    """Where ``write_manifest`` writes this build's manifest: inside the next generation of
    a local build (committed with its shards), else ``OUT`` itself."""
    nxt = os.path.join(local_path(store_root(out_dir)), NEXT) if is_local(out_dir) else ""
    return nxt if nxt and os.path.isdir(os.path.join(nxt, "data")) else out_dir


def _exchange(a: str, b: str) -> bool:
    """Swap two folders atomically (Linux renameat2 RENAME_EXCHANGE); False where the system
    or the file system cannot."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), a)


def commit_generation(out_dir: str) -> None:
    """Make the assembled next generation the build (one atomic exchange of ``data``), point
    ``manifest.json`` at its manifest, and remove the generation it replaced."""
    from sciga.transforms.write.manifest import MANIFEST

    if manifest_target(out_dir) == out_dir:
        return  # no generation assembled: a bucket, or a data/ that links elsewhere
    out = local_path(out_dir)
    nxt = os.path.join(local_path(store_root(out_dir)), NEXT)
    linked = [(MANIFEST, MANIFEST_IN_DATA)]
    os.replace(os.path.join(nxt, MANIFEST), os.path.join(nxt, "data", MANIFEST_IN_DATA))
    if os.path.isfile(os.path.join(nxt, CARD)):  # rendered into the generation (executors/finalize.py)
        os.replace(os.path.join(nxt, CARD), os.path.join(nxt, "data", CARD_IN_DATA))
        linked.append((CARD, CARD_IN_DATA))
    live, new = os.path.join(out, "data"), os.path.join(nxt, "data")
    if os.path.isdir(live):
        if not _exchange(new, live):
            old = os.path.join(nxt, "replaced")
            os.rename(live, old)
            os.rename(new, live)
    else:
        os.rename(new, live)
    for name, inside in linked:
        link = os.path.join(out, name)
        target = posixpath.join("data", inside)
        if not (os.path.islink(link) and os.readlink(link) == target):
            tmp = os.path.join(nxt, f"{name}.link")
            if os.path.lexists(tmp):
                os.remove(tmp)
            os.symlink(target, tmp)
            os.replace(tmp, link)  # a file written by an earlier builder becomes the link
    key = os.path.join(nxt, STORE_DIR, "card.key")
    if os.path.isfile(key):  # after the card it names is in place (a kill before: rendered again)
        os.replace(key, os.path.join(out, STORE_DIR, "card.key"))
    shutil.rmtree(nxt, ignore_errors=True)


def previous_parts(out_dir: str) -> dict:
    """The shards of the build now in ``out_dir`` by part fingerprint, for ``WritePart`` to
    take over unchanged parts: {fingerprint: {config, uri, rows, bytes, sha256, counts}}."""
    from sciga.transforms.write.manifest import read_manifest

    if being_finalized(out_dir):
        return {}  # killed while moving its shards: the manifest does not describe them
    try:
        manifest = read_manifest(out_dir)
    except (FileNotFoundError, OSError, ValueError):
        return {}
    out = {}
    root = out_dir.rstrip("/")
    for config, entries in manifest.files.items():
        for e in entries:
            if e.fingerprint and e.rows:
                out[e.fingerprint] = {
                    "config": config,
                    "uri": posixpath.join(root, e.path),
                    "rows": e.rows,
                    "bytes": e.bytes,
                    "sha256": e.sha256,
                    "counts": e.counts or {},
                }
                if e.group is not None:  # builds before 0.1.2 did not record it
                    out[e.fingerprint]["group"] = int(e.group)
                    out[e.fingerprint]["members"] = members_uri(out_dir, e.fingerprint)
    return out


# ------------------------------------------------------------------ what each shard holds


def _sciga_path(out_dir: str, *names: str) -> str:
    return posixpath.join(store_root(out_dir), *names)


def members_uri(out_dir: str, fingerprint: str) -> str:
    """Where the papers of the shard with part fingerprint ``fingerprint`` are listed."""
    return _sciga_path(out_dir, SHARD_MEMBERS, f"{fingerprint}.json")


def read_members(uri: str) -> list[list[str]]:
    """[paper id, result key, table digest] of each paper in a shard, in order; [] when not
    recorded (or recorded by a builder before 0.1.3, without digests)."""
    try:
        with fsspec.open(uri, "r", encoding="utf-8") as f:
            got = json.load(f)
        return [[str(pid), str(key), str(digest)] for pid, key, digest in got["members"]]
    except (FileNotFoundError, OSError, ValueError, KeyError, TypeError):
        return []


def write_shard_members(out_dir: str, infos: Iterable[PartInfo]) -> None:
    """The member lists of this build's shards, and none of another build's."""
    fs, root = fsspec.core.url_to_fs(_sciga_path(out_dir, SHARD_MEMBERS))
    fs.makedirs(root, exist_ok=True)
    try:  # one listing (a bucket answers one request, not one per shard)
        there = {posixpath.basename(p): p for p in fs.ls(root, detail=False)}
    except FileNotFoundError:  # an empty prefix on a bucket
        there = {}
    keep = set()
    for info in infos:
        if not (info.fingerprint and info.members and info.path and info.rows):
            continue
        name = f"{info.fingerprint}.json"
        keep.add(name)
        if name not in there:  # the same fingerprint, the same members
            with fs.open(posixpath.join(root, name), "w", encoding="utf-8") as f:
                f.write(json.dumps({"config": info.config, "members": info.members}, separators=(",", ":")))
    for name, p in there.items():
        if name not in keep:
            fs.rm(p)


def being_finalized(out_dir: str) -> bool:
    fs, p = fsspec.core.url_to_fs(_sciga_path(out_dir, FINALIZING))
    return fs.exists(p)


def mark_finalizing(out_dir: str, on: bool) -> None:
    """Set (before the first shard moves) or clear (once the manifest is written) the marker."""
    fs, p = fsspec.core.url_to_fs(_sciga_path(out_dir, FINALIZING))
    if on:
        fs.makedirs(posixpath.dirname(p), exist_ok=True)
        with fs.open(p, "w") as f:
            f.write("the shards are being moved into data/; manifest.json does not describe them\n")
    elif fs.exists(p):
        fs.rm(p)


def live_keys(infos: Iterable[PartInfo]) -> set[str]:
    """Every result a part stands on: the ones to keep in the store."""
    out: set[str] = set()
    for info in infos:
        out.update(info.keys)
    return out
