"""Which arXiv bulk source tar holds a paper, from ``arXiv_src_manifest.xml`` alone.

The manifest lists every ``arXiv_src_YYMM_NNN.tar`` as a ``<file>`` with ``filename``,
``yymm``, ``first_item``, ``last_item``, ``num_items``, ``size`` (and md5s, a sequence
number, a timestamp). Within a month the tars cut one sorted run of items, so a paper is
in the tar whose [first_item, last_item] range holds its item name: ``1501.00001`` for a
new-style id, ``astro-ph0001001`` for ``astro-ph/0001001`` (old-style ids lose the slash,
and the subject class of ``math.GT/0309136``). "Covered" means "in a tar if arXiv has a
source for it": withdrawn papers may have none.

This is what ``sciga fetch --plan`` needs (which papers the bulk tars serve, how many tars
and bytes). It reads the manifest with the bulk e-print reader's parser and asks its
``Manifest`` where a paper is, so planning and extraction never disagree.
"""

from __future__ import annotations

import os
import posixpath
from typing import Optional

from sciga.transforms.common.errors import StageError
from sciga.transforms.eprints.bulk_tar import MANIFEST_NAME as MANIFEST
from sciga.transforms.eprints.bulk_tar import Manifest, TarEntry, item_name, parse_manifest, yymm_of

BulkTar = TarEntry  # what planning sees of a tar: filename, yymm, first/last item, num_items, size


def item_of(paper_id: str) -> Optional[tuple[str, str]]:
    """A paper id -> (yymm, item name as the manifest writes it); None for a non-arXiv id."""
    item = item_name((paper_id or "").strip())
    yymm = yymm_of(item)
    return (yymm, item) if yymm else None


class BulkEprintCoverage:
    """Membership of paper ids in the manifest's tars."""

    def __init__(self, manifest: Manifest, source: str):
        self.source = source
        self.manifest = manifest
        self.tars = list(manifest.entries)
        self._by_month: dict[str, list[TarEntry]] = {}
        for t in self.tars:
            self._by_month.setdefault(t.yymm, []).append(t)

    def tar_for(self, paper_id: str) -> Optional[TarEntry]:
        return self.manifest.locate(paper_id) if item_of(paper_id) else None

    def __contains__(self, paper_id: str) -> bool:
        return self.tar_for(paper_id) is not None

    def __call__(self, paper_id: str) -> bool:  # usable as a predicate
        return paper_id in self

    def mean_item_bytes(self, paper_id: str) -> Optional[float]:
        """Mean bytes per item over the tars of the paper's month (an e-print size estimate)."""
        key = item_of(paper_id)
        ts = self._by_month.get(key[0]) if key else None
        if not ts:
            return None
        n = sum(t.num_items for t in ts)
        return sum(t.size for t in ts) / n if n else None

    @property
    def months(self) -> list[str]:
        return sorted(self._by_month)

    @property
    def total_bytes(self) -> int:
        return sum(t.size for t in self.tars)


def manifest_uri(dir_or_uri: str) -> str:
    """``DIR_OR_URL`` of ``--eprints-bulk`` -> the manifest inside it (or itself if it is one)."""
    u = dir_or_uri.rstrip("/")
    if u.endswith(".xml"):
        return u
    return posixpath.join(u, MANIFEST) if "://" in u else os.path.join(u, MANIFEST)


def is_remote(uri: str) -> bool:
    """True for a URL that reaches the network (s3://, gs://, https://...), not file://."""
    proto = uri.split("://", 1)[0].lower() if "://" in uri else "file"
    return proto not in ("file", "local")


def bulk_eprint_coverage(manifest_or_dir: str) -> BulkEprintCoverage:
    """The coverage of the bulk tars listed by ``arXiv_src_manifest.xml`` in ``manifest_or_dir``
    (a folder or the manifest itself, any fsspec path; a remote one is read, so ``--plan``
    only passes local ones)."""
    import fsspec

    uri = manifest_uri(manifest_or_dir)
    try:
        with fsspec.open(uri, "rb") as f:
            data = f.read()
    except (OSError, ValueError) as e:
        raise FileNotFoundError(f"--eprints-bulk: {uri} could not be read ({e}); it should hold {MANIFEST}.") from None
    try:
        return BulkEprintCoverage(Manifest(parse_manifest(data, label=uri)), uri)
    except StageError as e:
        raise FileNotFoundError(e.message) from None
