"""Is the build in OUT exactly what this build would write? Then there is nothing to do.

A rebuild where nothing changed used to start Apache Beam, plan every input in the
pipeline, reuse every result and every shard part, and rewrite the manifest: 7.5-9 s at
1,000 papers, to learn that nothing had changed. The launcher can know it before Beam
starts, from what the last finished build recorded (``<out>/.sciga/pages.json``: each page's
size, mtime and SHA-256, see ``inputs/page_index.py``, and the build's *signature*: builder,
schema and code versions, the options that shape the shards, the input list):

- same signature: same code, same result-changing options, same inputs, same layout;
- every page's SHA-256 as recorded (so each result key is the key of the last build);
- every stored result still reusable (complete, final, its sidecar, images, e-print...
  unchanged: the same check the pipeline's plan makes, ``result_store.reusable``);
- the manifest and every shard it lists still there, at their recorded sizes.

Then the shards a build would write are the shards that are there: the build answers
"up to date" and writes nothing. Anything else, or any doubt (a record that does not
parse, a result that cannot be read), runs the pipeline as before.

Checking every result by its header read ~30 files per page: the header itself, and a stat
of each file the result depends on, most of them absent (``2602.01440.src.tar.gz``,
``.src.tgz``, ...): 2.8 s of a no-op rebuild of 20,000 pages. The record now also *vouches*
for each page's result (``result_vouches``, made when a build finishes): the result file's
size and mtime, the files it depends on that exist (size and mtime: the sidecar), and the
folders where the absent ones would be, with their mtime (creating or removing a name in a
folder changes its mtime, as make's and ninja's checks rely on). A vouched result is checked
with a stat of its file, of its present dependencies and, once for all pages, of those
folders; a page without a vouch (a folder or a GA-manifest row among its dependencies, a
result that changed since) is checked by its header as before.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from sciga.schemas.manifest import BuildManifest
from sciga.schemas.version import BUILDER_VERSION, SCHEMA_VERSION
from sciga.transforms.common.input_files import is_local, local_path
from sciga.transforms.common.result_store import FINALIZING, STORE_DIR, ResultStore, result_key, reusable
from sciga.transforms.inputs.page_index import PageHashes

# Options recorded in the manifest that do not change a single byte of the shards.
NOT_SHAPING = ("workers", "rebuild", "fetch_workers", "vision_batch_size", "vision_min_batch_size")


def build_signature(fingerprint: str, inputs: Sequence[str], layout: object, recorded: Mapping) -> str:
    """One hash of everything besides the pages' content that decides what the shards hold:
    versions, code, the input list (names, in order), the shard layout, the options."""
    shaping = {k: v for k, v in sorted(recorded.items()) if k not in NOT_SHAPING}
    names = hashlib.sha256("\n".join(json.dumps(u) for u in inputs).encode("utf-8")).hexdigest()
    blob = json.dumps(
        [BUILDER_VERSION, SCHEMA_VERSION, fingerprint, names, len(inputs), repr(layout), shaping],
        sort_keys=True,
        default=str,
        separators=(",", ":"),
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def up_to_date_manifest(
    out_dir: str,
    store_root: str,
    inputs: Sequence[str],
    hashes: Optional[PageHashes],
    fingerprint: str,
    signature: str,
    inputs_hash: str,
) -> Optional[BuildManifest]:
    """The manifest of the build in ``out_dir`` when this build would write exactly what is
    there, else None (run the pipeline)."""
    if hashes is None or not is_local(out_dir) or not hashes.same_as_record:
        return None
    if len(hashes.sha256) != len(inputs) or hashes.record_signature != signature:
        return None
    root = local_path(out_dir)
    if os.path.exists(os.path.join(root, STORE_DIR, FINALIZING)):
        return None  # a build was killed while moving its shards into place
    try:
        with open(os.path.join(root, "manifest.json"), encoding="utf-8") as f:
            manifest = BuildManifest.loads(f.read())
        if manifest.inputs_sha256 != inputs_hash:
            return None
        for entries in manifest.files.values():
            for e in entries:
                if os.stat(os.path.join(root, *posixpath.split(e.path))).st_size != e.bytes:
                    return None
        if not os.path.isfile(os.path.join(root, "README.md")):
            return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    store = ResultStore(store_root)
    vouches = _Vouches(hashes.record_results)
    for uri in inputs:
        key = result_key(uri, hashes.sha256[uri], fingerprint)
        if vouches.still_true(uri, key, store.path(key)):
            continue
        try:
            header = store.header(key)
        except Exception:  # noqa: BLE001 - a result that cannot be read: let the pipeline say why
            return None
        if not reusable(header):
            return None
    return manifest


# ------------------------------------------------------------------ vouches for results
#
# In the page index (``inputs/page_index.py``, key "results"):
#   {"dirs": [[folder, mtime_ns], ...],
#    "pages": {uri: [result key[:16], result bytes, result mtime_ns, [[dep uri, bytes, token], ...],
#                    [folder index, ...]]}}


def _stat(path: str) -> Optional[os.stat_result]:
    try:
        return os.stat(path)
    except (OSError, ValueError):
        return None


def _file_token(st: os.stat_result) -> str:
    return f"mtime={st.st_mtime_ns}"  # result_store.change_token of a local file


class _Vouches:
    """The vouches of a record, checked against the disk as it is now."""

    def __init__(self, record: Any):
        record = record if isinstance(record, dict) else {}
        pages, dirs = record.get("pages"), record.get("dirs")
        self.pages: dict = pages if isinstance(pages, dict) else {}
        self.dirs: list = dirs if isinstance(dirs, list) else []
        self._dir_ok: dict[int, bool] = {}

    def dir_unchanged(self, i: Any) -> bool:
        got = self._dir_ok.get(i)
        if got is None:
            try:
                folder, mtime = self.dirs[i]
                st = _stat(folder)
                got = st is not None and stat.S_ISDIR(st.st_mode) and st.st_mtime_ns == int(mtime)
            except (IndexError, TypeError, ValueError):
                got = False
            self._dir_ok[i] = got
        return got

    def entry(self, uri: str) -> Optional[tuple]:
        return _as_entry(self.pages.get(uri))

    def take(self, uri: str) -> Optional[tuple]:
        """``entry``, dropped from the record as it is read: a finished build carries the
        vouches over one by one into the new record (``result_vouches``), which then does
        not sit beside the whole old one (both were ~1.5 KB a page in Python)."""
        return _as_entry(self.pages.pop(uri, None))

    def still_true(self, uri: str, key: str, result_path: str) -> bool:
        """Whether the record vouches for ``uri``'s result at ``result_path`` and what it
        vouched for is still there: the same result file, the same present dependencies,
        no name added to or removed from the folders of the absent ones."""
        v = self.entry(uri)
        if v is None or not is_local(result_path):
            return False
        short, rsize, rmtime, present, dirs = v
        if short != key[:16]:
            return False
        st = _stat(local_path(result_path))
        if st is None or st.st_size != rsize or st.st_mtime_ns != rmtime:
            return False
        try:
            for dep_uri, size, token in present:
                st = _stat(local_path(dep_uri))
                if st is None or not stat.S_ISREG(st.st_mode) or st.st_size != size or _file_token(st) != token:
                    return False
            return all(self.dir_unchanged(i) for i in dirs)
        except (TypeError, ValueError):
            return False


def _as_entry(v: Any) -> Optional[tuple]:
    if not isinstance(v, list) or len(v) != 5:
        return None
    return tuple(v)


@dataclass
class VouchStream:
    """The record's vouches for the pages' results, made one page at a time for a record
    written as they come (``page_index.save_page_index``): at 145,000 pages the new vouches
    held whole were ~220 MB of Python objects beside the old record's in the launcher
    finalizing the build."""

    pages: Iterator[tuple[str, list]]  # (uri, vouch), in uri order
    dirs: list  # [[folder, mtime_ns], ...]: complete once ``pages`` is used up


def result_vouches(
    store_root: str, sha256: Mapping[str, str], fingerprint: str, previous: Any = None
) -> Optional[VouchStream]:
    """The record's vouches for the results of the pages in ``sha256`` (uri -> SHA-256), made
    when a build has finished, as they are used: a result whose file is the one the previous
    record vouched for keeps its vouch (its present dependencies and folders checked again);
    the others' headers are read. ``previous`` (the old record's vouches) is used up: its
    pages' entries are removed as they are carried over. None where the store is not on this
    machine."""
    if not is_local(store_root):
        return None
    dir_list: list[list] = []
    return VouchStream(_vouches(ResultStore(store_root), sha256, fingerprint, _Vouches(previous), dir_list), dir_list)


def _vouches(
    store: ResultStore, sha256: Mapping[str, str], fingerprint: str, old: _Vouches, dir_list: list
) -> Iterator[tuple[str, list]]:
    dirs: dict[str, int] = {}  # folder -> its index in dir_list
    listing: dict[str, Optional[set]] = {}  # folder -> the names in it (None: not a folder)

    def folder_index(folder: str) -> Optional[int]:
        if folder not in listing:
            st = _stat(folder)  # before listing it: a name added after this changes the mtime
            try:
                names = set(os.listdir(folder)) if st is not None and stat.S_ISDIR(st.st_mode) else None
            except OSError:
                names = None
            listing[folder] = names
            if names is not None and st is not None:
                dirs[folder] = len(dir_list)
                dir_list.append([folder, st.st_mtime_ns])
        return dirs.get(folder)

    for uri in sorted(sha256):
        key = result_key(uri, sha256[uri], fingerprint)
        st = _stat(local_path(store.path(key)))
        if st is None:
            continue
        prev = old.take(uri)
        deps = None
        if prev is not None and prev[0] == key[:16] and prev[1] == st.st_size and prev[2] == st.st_mtime_ns:
            deps = _carried_deps(prev, old)
        if deps is None:
            deps = _deps_of(store, key)
        if deps is None:
            continue
        v = _vouch(st, deps, folder_index, listing)
        if v is not None:
            yield uri, [key[:16], *v]


def _carried_deps(prev: tuple, old: _Vouches) -> Optional[list]:
    """The dependencies a previous vouch stands for, as ``_deps_of`` gives them: None where
    a folder it names is not as it was (its absent files are not known without the header)."""
    try:
        if not all(old.dir_unchanged(i) for i in prev[4]):
            return None
        present = [("file", u, int(size), str(token)) for u, size, token in prev[3]]
        folders = [("folder", old.dirs[i][0]) for i in prev[4]]
    except (IndexError, TypeError, ValueError):
        return None
    return present + folders


def _deps_of(store: ResultStore, key: str) -> Optional[list]:
    """A reusable result's dependencies as ("file", uri, bytes, token) for a present file and
    ("absent", path) for an absent one; None when it cannot be vouched for (not reusable, or a
    dependency other than a local file)."""
    try:
        header = store.header(key)
    except Exception:  # noqa: BLE001 - not vouched for: the next build reads it again
        return None
    if header is None or not header.complete or not header.final:
        return None
    out: list = []
    for d in header.deps:
        if d.kind != "file" or not is_local(d.uri):
            return None
        if d.absent:
            out.append(("absent", local_path(d.uri)))
        elif d.token is None or not d.token.startswith("mtime="):
            return None
        else:
            out.append(("file", d.uri, d.size, d.token))
    return out


def _vouch(result: os.stat_result, deps: list, folder_index, listing: dict) -> Optional[list]:
    """A page's vouch, when every dependency is as the result recorded it now; else None."""
    present: list = []
    folders: set[int] = set()
    for d in deps:
        if d[0] == "file":
            _, uri, size, token = d
            st = _stat(local_path(uri))
            if st is None or not stat.S_ISREG(st.st_mode) or st.st_size != size or _file_token(st) != token:
                return None  # changed since: the next build computes the paper again
            present.append([uri, size, token])
        elif d[0] == "absent":
            # The nearest folder that exists: no name is created below it without changing
            # its mtime (a missing "assets/" of a page without images).
            folder, name = os.path.split(d[1])
            i = folder_index(folder)
            while i is None and listing[folder] is None and folder != os.path.dirname(folder):
                folder, name = os.path.split(folder)
                i = folder_index(folder)
            if i is None or name in (listing[folder] or ()):
                return None  # there now (the next build computes the paper again), or not a folder
            folders.add(i)
        else:  # a folder a carried vouch named: its absent files are still absent
            i = folder_index(d[1])
            if i is None:
                return None
            folders.add(i)
    return [result.st_size, result.st_mtime_ns, present, sorted(folders)]
