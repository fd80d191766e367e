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
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
from collections.abc import Mapping, Sequence
from typing import Optional

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
    for uri in inputs:
        try:
            header = store.header(result_key(uri, hashes.sha256[uri], fingerprint))
        except Exception:  # noqa: BLE001 - a result that cannot be read: let the pipeline say why
            return None
        if not reusable(header):
            return None
    return manifest
