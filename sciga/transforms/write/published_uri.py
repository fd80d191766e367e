"""What the published shards say of where an input was: a path relative to the input root it
came from, never the machine's absolute location (issue 41, item 8).

The build reads every file by its absolute location (``/home/ana/corpus/html/x.html``,
``gs://bucket/prefix/x.html``), and its result store keeps that location: a stored result is
read again from it, and image bytes are read from ``image_uri`` when the shard is written. But
the absolute location names the machine and its user, and the shards reach the Hub. So the
shard writer rewrites each path column (``papers.provenance.input_uri``,
``figures.image_uri``, ``dead_letter.input_uri``) and the text that quotes one
(``dead_letter.message``, ``figures.image_error``) as it writes a row, with the roots the
build read from: the ``--input`` folders (a file's folder, a glob's folder before its first
wildcard; ``--sample``'s embedded folder), ``--metadata``, ``--tex-input`` and the
``--ga-manifest`` file's folder.

* a path inside a root is its path relative to that root, ``/`` separated
  (``/home/ana/corpus/html/assets/x1.png`` with ``--input /home/ana/corpus/html`` ->
  ``assets/x1.png``); with nested roots the innermost one counts;
* an object store key under a root is its key relative to it, without the scheme
  (``gs://bucket/prefix/x.html`` with ``--input gs://bucket/prefix`` -> ``x.html``);
* a local or object store path outside every root (a GA image that
  ``--ga-allow-outside`` let the build read) is its base name alone (``fig.png``): the
  folder it was in is the machine's, not the paper's;
* an archive member (``zip://a/b.html::/in/x.zip``) keeps its member and has its archive
  published so (``zip://a/b.html::x.zip``);
* anything else (``arxiv:2303.17564``, an ``https://`` URL the build fetched, ``<bytes>``)
  is kept as it is: it names no machine.

The same input copied into two folders therefore gives byte-identical shards.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterable
from typing import Optional

from sciga.transforms.common.input_files import is_chain, is_local, local_path

# A URL-like string whose scheme names a place on a web server, not a file the build read.
_KEPT_SCHEMES = ("http", "https", "arxiv", "doi", "data")
_SCHEME_RE = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")


def _norm_local(path: str) -> str:
    return os.path.normpath(os.path.abspath(local_path(path))).replace(os.sep, "/")


def normalize_roots(roots: Iterable[Optional[str]]) -> tuple[str, ...]:
    """The roots as the rewrite compares them: local ones absolute and normalized, object
    store ones without a trailing ``/``; innermost (longest) first, each once."""
    out = set()
    for r in roots:
        if not r:
            continue
        if is_local(r):
            out.add(_norm_local(r))
        else:
            out.add(r.rstrip("/"))
    return tuple(sorted(out, key=lambda r: (-len(r), r)))


def _relative(path: str, roots: tuple[str, ...]) -> Optional[str]:
    for root in roots:
        if root == "/":
            return path.lstrip("/") or path
        if path.startswith(root + "/"):
            return path[len(root) + 1 :]
    return None


def published_uri(uri: Optional[str], roots: tuple[str, ...]) -> Optional[str]:
    """``uri`` as the published shards say it: relative to the root it lies under, else its
    base name when it is a path (see the module docstring). ``roots``: ``normalize_roots``'s."""
    if not uri:
        return uri
    if is_chain(uri):  # an archive chain: the member, then the archive it is in (not a name with "::")
        head, _, outer = uri.rpartition("::")
        return f"{head}::{published_uri(outer, roots)}"
    m = _SCHEME_RE.match(uri)
    if m and m.group(1).lower() in _KEPT_SCHEMES:
        return uri
    if m is None and not uri.startswith("/") and (uri.startswith("<") or ":" in uri.split("/", 1)[0]):
        return uri  # arxiv:2303.17564, <bytes>: names, not paths
    path = _norm_local(uri) if is_local(uri) else uri  # a key's trailing "/" is kept: it is said
    rel = _relative(path, roots)
    if rel is not None:
        return rel
    return posixpath.basename(path.rstrip("/")) or path


def published_text(text: Optional[str], uris: Iterable[Optional[str]], roots: tuple[str, ...]) -> Optional[str]:
    """A message that may quote paths: each of ``uris`` replaced by its published form, then
    any other path under a root cut to its relative form (a message may name a file the row
    does not, such as a missing image)."""
    if not text:
        return text
    for uri in sorted({u for u in uris if u}, key=lambda u: (-len(u), u)):
        if uri in text:
            text = text.replace(uri, published_uri(uri, roots) or "")
    for root in roots:
        if root == "/":
            continue
        for prefix in (f"file://{root}/", f"{root}/"):
            text = text.replace(prefix, "")
    return text


def spec_root(spec: str) -> str:
    """The folder an input spec reads from: a glob's folder before its first wildcard, a
    file's folder, a folder itself."""
    parts = spec.split("/")
    wild = next((i for i, part in enumerate(parts) if any(ch in part for ch in "*?[")), None)
    if wild is not None:
        return "/".join(parts[:wild]) or ("/" if spec.startswith("/") else ".")
    if is_local(spec):
        root = local_path(spec)
        return root if os.path.isdir(root) else os.path.dirname(root) or "."
    last = spec.rstrip("/").rsplit("/", 1)[-1]
    return posixpath.dirname(spec.rstrip("/")) if "." in last else spec.rstrip("/")


# ------------------------------------------------------------------ a shard's rows


def publish_table(config: str, table, roots: tuple[str, ...]):
    """A stored ``papers`` or ``figures`` table with its path columns as published (the
    table itself when there are no roots to cut or nothing to change)."""
    import pyarrow as pa

    if not roots or table.num_rows == 0:
        return table
    if config == "papers" and "provenance" in table.column_names:
        prov = table.column("provenance").combine_chunks()
        names = [f.name for f in prov.type]
        if "input_uri" not in names:
            return table
        children = [prov.field(i) for i in range(len(names))]
        at = names.index("input_uri")
        children[at] = pa.array([published_uri(u, roots) for u in children[at].to_pylist()], pa.string())
        new = pa.StructArray.from_arrays(children, fields=list(prov.type), mask=prov.is_null())
        return table.set_column(table.schema.get_field_index("provenance"), "provenance", new)
    if config == "figures" and "image_uri" in table.column_names:
        uris = table.column("image_uri").to_pylist()
        table = table.set_column(
            table.schema.get_field_index("image_uri"),
            table.schema.field("image_uri"),
            pa.array([published_uri(u, roots) for u in uris], pa.string()),
        )
        if "image_error" in table.column_names:
            errors = table.column("image_error").to_pylist()
            table = table.set_column(
                table.schema.get_field_index("image_error"),
                table.schema.field("image_error"),
                pa.array([published_text(e, [u], roots) for e, u in zip(errors, uris)], pa.string()),
            )
    return table


def publish_dead_letter_row(row: dict, roots: tuple[str, ...]) -> dict:
    """A dead-letter row with its input and its message's paths as published."""
    if not roots:
        return row
    uri = row.get("input_uri")
    return {**row, "input_uri": published_uri(uri, roots), "message": published_text(row.get("message"), [uri], roots)}
