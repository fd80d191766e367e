"""Which arXiv bulk source tar holds a paper, from ``arXiv_src_manifest.xml`` alone.

The manifest lists every ``arXiv_src_YYMM_NNN.tar`` as a ``<file>`` with ``filename``,
``yymm``, ``first_item``, ``last_item``, ``num_items``, ``size`` (and md5s, a sequence
number, a timestamp). Within a month the tars cut one sorted run of items, so a paper is
in the tar whose [first_item, last_item] range holds its item name: ``1501.00001`` for a
new-style id, ``astro-ph0001001`` for ``astro-ph/0001001`` (old-style ids lose the slash,
and the subject class of ``math.GT/0309136``). "Covered" means "in a tar if arXiv has a
source for it": withdrawn papers may have none.

This is all ``sciga fetch --plan`` needs (which papers the bulk tars serve, how many tars
and bytes). The full bulk e-print reader (md5 checks, member extraction) is a separate
module; ``bulk_eprint_coverage`` is the one function to point at it once it exists.
"""
from __future__ import annotations

import bisect
import os
import posixpath
import re
from dataclasses import dataclass
from typing import Optional

MANIFEST = "arXiv_src_manifest.xml"
_NEW_RE = re.compile(r"^(\d{4})\.(\d{4,5})$")
_OLD_ID_RE = re.compile(r"^([a-z]+(?:-[a-z]+)*)(?:\.[A-Z]{2})?/(\d{7})$")
_OLD_ITEM_RE = re.compile(r"^([a-z]+(?:-[a-z]+)*)(\d{7})$")


@dataclass(frozen=True)
class BulkTar:
    filename: str  # relative to the manifest's folder, e.g. src/arXiv_src_2101_001.tar
    yymm: str
    first_item: str
    last_item: str
    num_items: int
    size: int


def item_of(paper_id: str) -> Optional[tuple[str, str]]:
    """A paper id -> (yymm, item name as the manifest writes it); None for a non-arXiv id."""
    pid = (paper_id or "").strip()
    m = _NEW_RE.match(pid)
    if m:
        return m.group(1), pid
    m = _OLD_ID_RE.match(pid)
    if m:
        return m.group(2)[:4], m.group(1) + m.group(2)
    return None


def _manifest_item(item: str) -> Optional[tuple[str, str]]:
    item = (item or "").strip()
    m = _NEW_RE.match(item)
    if m:
        return m.group(1), item
    m = _OLD_ITEM_RE.match(item)
    if m:
        return m.group(2)[:4], item
    return None


class BulkEprintCoverage:
    """Membership of paper ids in the manifest's tars."""

    def __init__(self, tars: list[BulkTar], source: str):
        self.source = source
        self.tars = tars
        self._by_month: dict[str, tuple[list[str], list[BulkTar]]] = {}
        by_month: dict[str, list[BulkTar]] = {}
        for t in tars:
            by_month.setdefault(t.yymm, []).append(t)
        for yymm, ts in by_month.items():
            ts.sort(key=lambda t: t.first_item)
            self._by_month[yymm] = ([t.first_item for t in ts], ts)

    def tar_for(self, paper_id: str) -> Optional[BulkTar]:
        key = item_of(paper_id)
        if key is None:
            return None
        month = self._by_month.get(key[0])
        if month is None:
            return None
        firsts, ts = month
        i = bisect.bisect_right(firsts, key[1]) - 1
        if i >= 0 and ts[i].first_item <= key[1] <= ts[i].last_item:
            return ts[i]
        return None

    def __contains__(self, paper_id: str) -> bool:
        return self.tar_for(paper_id) is not None

    def __call__(self, paper_id: str) -> bool:  # usable as a predicate
        return paper_id in self

    def mean_item_bytes(self, paper_id: str) -> Optional[float]:
        """Mean bytes per item over the tars of the paper's month (an e-print size estimate)."""
        key = item_of(paper_id)
        month = self._by_month.get(key[0]) if key else None
        if not month:
            return None
        ts = month[1]
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


def parse_manifest(data: bytes, source: str) -> list[BulkTar]:
    """The ``<file>`` entries of a manifest (entries missing a field are skipped)."""
    import io

    from lxml import etree

    tars = []
    try:
        for _, el in etree.iterparse(io.BytesIO(data), events=("end",), tag="file",
                                     resolve_entities=False, no_network=True, load_dtd=False):
            f = {c.tag: (c.text or "").strip() for c in el if isinstance(c.tag, str)}
            el.clear()
            first, last = _manifest_item(f.get("first_item", "")), _manifest_item(f.get("last_item", ""))
            try:
                n, size = int(f.get("num_items") or 0), int(f.get("size") or 0)
            except ValueError:
                continue
            if not f.get("filename") or first is None or last is None:
                continue
            yymm = f.get("yymm") or first[0]
            tars.append(BulkTar(filename=f["filename"], yymm=yymm, first_item=first[1], last_item=last[1],
                                num_items=n, size=size))
    except etree.XMLSyntaxError as e:
        raise FileNotFoundError(f"{source} is not a readable arXiv_src_manifest.xml ({e}); download it again.") from None
    return tars


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
    return BulkEprintCoverage(parse_manifest(data, uri), uri)
