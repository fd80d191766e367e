"""arXiv's bulk source archives: the manifest, which paper lives in which tar, and one
verified streaming pass over a tar.

arXiv publishes every e-print in monthly chunks ``arXiv_src_YYMM_NNN.tar`` (about 500 MB
each) listed in ``arXiv_src_manifest.xml``::

    <arXivSRC>
      <file>
        <content_md5sum>...</content_md5sum>      md5 of the members' bytes, concatenated
        <filename>src/arXiv_src_2101_001.tar</filename>
        <first_item>2101.00001</first_item>        first and last paper in the tar
        <last_item>2101.01234</last_item>          (old style: astro-ph0601001)
        <md5sum>...</md5sum>                       md5 of the tar itself
        <num_items>1234</num_items> <seq_num>1</seq_num> <size>524288000</size>
        <timestamp>2021-02-03 04:05:06</timestamp> <yymm>2101</yymm>
      </file> ...
    </arXivSRC>

A tar holds one member per paper: ``2101/2101.00001.gz`` (a gzipped tar, or a single
gzipped TeX file) or ``2101/2101.00002.pdf`` (a PDF-only submission).

``scan_tar`` reads a tar once, front to back, as a stream: it hashes every byte with md5
(compared with the manifest's ``md5sum``), records each member's offset, size and sha256
(so that later reads are range reads checked against the index), and hands the bytes of
the members a build wants to a sink. Nothing it hands over may be used before the scan
says the tar is intact: the caller stages the bytes and commits them only when
``TarIndex.ok``. The outer tar gets the same rules as an e-print (``eprint.py``): names
that climb out or are absolute, links, devices and FIFOs, oversized members and oversized
extension headers are refused, per member, with a reason the paper inherits.
"""

from __future__ import annotations

import hashlib
import io
import posixpath
import queue
import re
import tarfile
import threading
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Optional

from lxml import etree

from sciga.schemas import ids
from sciga.transforms.common.errors import StageError
from sciga.transforms.eprints.eprint import CHUNK, DEFAULT_LIMITS, Limits, guarded_tarinfo, safe_member_name

STAGE = "tex_source"
MANIFEST_NAME = "arXiv_src_manifest.xml"
INDEX_FORMAT = 1

_NEW_ITEM_RE = re.compile(r"^(?P<yymm>\d{4})\.(?P<num>\d{4,5})$")
_OLD_ITEM_RE = re.compile(r"^(?P<arch>[a-z]+(?:-[a-z]+)*)(?P<yymm>\d{4})(?P<num>\d{3})$")


# -- the manifest ------------------------------------------------------------------------------
@dataclass(frozen=True)
class TarEntry:
    """One ``<file>`` of the manifest."""

    filename: str  # as the manifest writes it: "src/arXiv_src_2101_001.tar"
    md5sum: str
    size: int
    first_item: str
    last_item: str
    num_items: int
    seq_num: int
    yymm: str
    content_md5sum: str = ""
    timestamp: str = ""

    @property
    def name(self) -> str:
        """``arXiv_src_2101_001``: the tar's stable name in our cache."""
        base = posixpath.basename(self.filename)
        return base[:-4] if base.endswith(".tar") else base


def parse_manifest(xml: bytes, *, label: str = MANIFEST_NAME) -> tuple[TarEntry, ...]:
    """``arXiv_src_manifest.xml`` -> its entries, in the manifest's order. A manifest that
    is not XML, has no ``<file>`` or a ``<file>`` without its name, md5 or size is refused
    with one sentence saying so."""

    def bad(why: str) -> StageError:
        return StageError(
            "eprint_bulk",
            "bad_manifest",
            f"{label} {why}; fetch arXiv_src_manifest.xml again "
            "(it lies beside the tars, e.g. s3://arxiv/src/arXiv_src_manifest.xml).",
        )

    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True, remove_comments=True)
    try:
        root = etree.fromstring(xml, parser)
    except etree.XMLSyntaxError as e:
        raise bad(f"is not XML ({e})") from None
    if root is None or not isinstance(root.tag, str) or root.tag not in ("arXivSRC", "arXivPDF"):
        raise bad("is not an arXiv bulk manifest (its root element is not <arXivSRC>)")
    out = []
    for i, f in enumerate(root.iter("file"), 1):

        def get(tag: str, f=f) -> str:
            return (f.findtext(tag) or "").strip()

        try:
            entry = TarEntry(
                filename=get("filename"),
                md5sum=get("md5sum").lower(),
                size=int(get("size")),
                first_item=get("first_item"),
                last_item=get("last_item"),
                num_items=int(get("num_items") or 0),
                seq_num=int(get("seq_num") or 0),
                yymm=get("yymm"),
                content_md5sum=get("content_md5sum").lower(),
                timestamp=get("timestamp"),
            )
        except ValueError:
            raise bad(f"has a <file> (number {i}) whose size, num_items or seq_num is not a number") from None
        if not entry.filename or not re.fullmatch(r"[0-9a-f]{32}", entry.md5sum):
            raise bad(f"has a <file> (number {i}) without a filename or a valid md5sum")
        out.append(entry)
    if not out:
        raise bad("lists no <file>")
    return tuple(out)


def item_name(paper_id: str) -> str:
    """The name arXiv's bulk tars use for a paper: ``2101.00001`` stays, ``astro-ph/0601001``
    (or ``math.GT/0309136``: the subject class is not part of the id) -> ``astro-ph0601001``."""
    pid, _ = ids.split_version(paper_id)
    if "/" in pid:
        arch, num = pid.split("/", 1)
        return arch.split(".", 1)[0] + num
    return pid


def yymm_of(item: str) -> Optional[str]:
    m = _NEW_ITEM_RE.match(item) or _OLD_ITEM_RE.match(item)
    return m.group("yymm") if m else None


def _order_key(item: str):
    """Where an item sorts inside its month: new-style ids by number, old-style ids as the
    tars list them (by name: archive, then number)."""
    m = _NEW_ITEM_RE.match(item)
    return (0, int(m.group("num")), "") if m else (1, 0, item)


class Manifest:
    """The manifest's entries with a lookup from paper id to the tar that holds it,
    by the manifest's first/last item ranges inside the paper's month."""

    def __init__(self, entries: Iterable[TarEntry]):
        self.entries = tuple(entries)
        self._by_yymm: dict[str, list[TarEntry]] = {}
        for e in self.entries:
            self._by_yymm.setdefault(e.yymm, []).append(e)
        for v in self._by_yymm.values():
            v.sort(key=lambda e: (e.seq_num, e.name))
        self.by_name = {e.name: e for e in self.entries}

    def locate(self, paper_id: str) -> Optional[TarEntry]:
        item = item_name(paper_id)
        yymm = yymm_of(item)
        if yymm is None:
            return None
        key = _order_key(item)
        for e in self._by_yymm.get(yymm, ()):
            try:
                if _order_key(e.first_item) <= key <= _order_key(e.last_item):
                    return e
            except TypeError:  # a range of the other id style: not this one
                continue
        return None

    def group(self, paper_ids: Iterable[str]) -> tuple[dict[str, list[str]], list[str]]:
        """({tar name: [paper ids it holds]}, [paper ids no tar's range covers])."""
        by_tar: dict[str, list[str]] = {}
        missing = []
        for pid in sorted(set(paper_ids)):
            e = self.locate(pid)
            if e is None:
                missing.append(pid)
            else:
                by_tar.setdefault(e.name, []).append(pid)
        return by_tar, missing


# -- members and the tar index -----------------------------------------------------------------
def member_paper_id(name: str) -> tuple[Optional[str], str]:
    """``2101/2101.00001.gz`` -> (``2101.00001``, ``gz``); ``0601/astro-ph0601001.pdf`` ->
    (``astro-ph/0601001``, ``pdf``). Anything else is (None or an id, ``other``)."""
    base = posixpath.basename(name.replace("\\", "/"))
    stem, dot, ext = base.rpartition(".")
    if not dot:
        stem, ext = base, ""
    kind = {"gz": "gz", "pdf": "pdf"}.get(ext.lower(), "other")
    pid, _ = ids.paper_id_from_filename(stem)
    return pid, kind


@dataclass
class MemberRecord:
    name: str
    paper_id: Optional[str]
    kind: str  # "gz" | "pdf" | "other"
    offset: int  # of the member's data in the tar
    size: int
    sha256: Optional[str] = None
    error_type: Optional[str] = None  # why the member may not be used (unsafe_archive, size_bomb)
    message: Optional[str] = None


@dataclass
class TarIndex:
    """The verdict of one full pass over one tar, kept in the cache so that a build never
    scans a tar twice and later reads are range reads."""

    name: str
    filename: str
    expected_md5: str
    expected_size: int
    md5: Optional[str] = None
    size: int = 0
    ok: bool = False
    error_type: Optional[str] = None  # md5_mismatch | bulk_tar_unreadable | unsafe_archive
    message: Optional[str] = None
    members: list[MemberRecord] = field(default_factory=list)
    format: int = INDEX_FORMAT

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> TarIndex:
        d = dict(d)
        d["members"] = [MemberRecord(**m) for m in d.get("members", [])]
        return cls(**d)

    def by_paper(self) -> dict[str, MemberRecord]:
        """Paper id -> its member (the last one, should a tar hold a paper twice)."""
        return {m.paper_id: m for m in self.members if m.paper_id}


class _HashingRaw(io.RawIOBase):
    """The tar's bytes as they arrive from storage, md5-hashed on a helper thread
    (hashlib drops the GIL for large buffers, so hashing runs beside tar parsing and
    writing instead of after it). Every byte read from ``raw`` is hashed exactly once."""

    def __init__(self, raw, on_bytes: Optional[Callable[[int], None]] = None):
        self.raw = raw
        self.count = 0
        self.on_bytes = on_bytes
        self._md5 = hashlib.md5()
        self._q: queue.Queue[Optional[bytes]] = queue.Queue(maxsize=16)
        self._thread = threading.Thread(target=self._hash, name="md5", daemon=True)
        self._thread.start()
        self._done = False

    def _hash(self) -> None:
        while True:
            block = self._q.get()
            if block is None:
                return
            self._md5.update(block)

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        data = self.raw.read(len(b))
        n = len(data)
        if n:
            b[:n] = data
            self.count += n
            self._q.put(data)
            if self.on_bytes is not None:
                self.on_bytes(n)
        return n

    def digest(self) -> str:
        if not self._done:
            self._done = True
            self._q.put(None)
            self._thread.join()
        return self._md5.hexdigest()


class _ForwardReader:
    """What ``tarfile`` needs of a seekable file (read, tell, seek), over a stream read
    once front to back: a seek forward reads through the gap (so it is hashed too); a
    seek backward is an error, which the tar walk never needs."""

    def __init__(self, buffered):
        self.f = buffered
        self.pos = 0

    def read(self, n: int = -1) -> bytes:
        data = self.f.read(n)
        self.pos += len(data)
        return data

    def tell(self) -> int:
        return self.pos

    def seek(self, pos: int, whence: int = 0) -> int:
        if whence == 1:
            pos += self.pos
        elif whence != 0:
            raise OSError("the bulk tar is read front to back; it cannot seek from its end")
        if pos < self.pos:
            raise OSError(f"the bulk tar is read front to back; cannot seek back from {self.pos} to {pos}")
        while self.pos < pos:
            if not self.read(min(CHUNK, pos - self.pos)):
                break
        return self.pos

    def drain(self) -> None:
        """Read whatever the tar walk left: the padding after the end-of-archive blocks."""
        while self.read(CHUNK):
            pass


Sink = Callable[[MemberRecord], "object"]  # member -> a binary file object to write its bytes into


def _outer_problem(m: tarfile.TarInfo, limits: Limits) -> Optional[tuple[str, str]]:
    """Why a member of the outer tar may not be used, or None."""
    if len(m.name) > limits.max_name_chars or safe_member_name(m.name) is None:
        return "unsafe_archive", f"member {m.name[:200]!r} is an absolute path or climbs out with '..'"
    if m.issym() or m.islnk():
        return "unsafe_archive", f"member {m.name!r} is a link (to {m.linkname!r})"
    if not m.isreg():
        what = "device" if (m.ischr() or m.isblk()) else ("FIFO" if m.isfifo() else "special file")
        return "unsafe_archive", f"member {m.name!r} is a {what}"
    if m.size > limits.max_total_bytes:
        return (
            "size_bomb",
            f"member {m.name!r} is {m.size // (1 << 20)} MiB, above the "
            f"{limits.max_total_bytes // (1 << 20)} MiB e-print limit",
        )
    return None


def scan_tar(
    raw,
    entry: TarEntry,
    *,
    label: Optional[str] = None,
    wanted: Iterable[str] = (),
    sink: Optional[Sink] = None,
    limits: Limits = DEFAULT_LIMITS,
    hash_members: bool = True,
    on_bytes: Optional[Callable[[int], None]] = None,
) -> TarIndex:
    """Read the tar ``raw`` (a binary stream, read front to back) once and return its
    index. Members of papers in ``wanted`` are written to ``sink(member)`` as they stream
    by; they are only trustworthy if the returned index is ``ok`` (md5 and size match the
    manifest), which the caller must check before committing them."""
    label = label or entry.filename
    wanted = frozenset(wanted)
    idx = TarIndex(name=entry.name, filename=entry.filename, expected_md5=entry.md5sum, expected_size=entry.size)
    hashing = _HashingRaw(raw, on_bytes)
    reader = _ForwardReader(io.BufferedReader(hashing, buffer_size=CHUNK))
    try:
        try:
            # Seekable mode over a forward-only reader: headers are 512-byte reads from a
            # 1 MiB buffer and unwanted data is read through in chunks (tarfile's stream
            # mode re-slices its buffer on every small read, which costs more than md5).
            with tarfile.open(fileobj=reader, mode="r:", tarinfo=guarded_tarinfo(label, None, limits)) as tf:
                for m in tf:
                    if m.isdir():
                        continue
                    pid, kind = member_paper_id(m.name)
                    rec = MemberRecord(name=m.name, paper_id=pid, kind=kind, offset=m.offset_data, size=m.size)
                    idx.members.append(rec)
                    problem = _outer_problem(m, limits)
                    if problem is not None:
                        rec.error_type, rec.message = problem
                        continue  # tarfile skips (and so hashes) its data
                    take = pid in wanted and kind == "gz" and sink is not None
                    if not (take or hash_members):
                        continue
                    f = tf.extractfile(m)
                    out = sink(rec) if take else None
                    h = hashlib.sha256()
                    left = m.size
                    while left > 0:
                        block = f.read(min(CHUNK, left))
                        if not block:
                            raise tarfile.ReadError(f"member {m.name!r} is truncated")
                        left -= len(block)
                        h.update(block)
                        if out is not None:
                            out.write(block)
                    rec.sha256 = h.hexdigest()
                    if out is not None:
                        out.close()
            reader.drain()
        except StageError as e:
            idx.error_type, idx.message = "unsafe_archive", e.message
        except (OSError, EOFError, tarfile.TarError) as e:
            idx.error_type = "bulk_tar_unreadable"
            idx.message = (
                f"{label} could not be read to its end ({type(e).__name__}: {e}); its papers were not "
                "used. Check the file (or the connection) and run again."
            )
    finally:
        idx.md5 = hashing.digest()
        idx.size = hashing.count
    if idx.error_type is None:
        if idx.md5 != entry.md5sum or idx.size != entry.size:
            idx.error_type = "md5_mismatch"
            idx.message = (
                f"{label} does not match arXiv_src_manifest.xml (md5 {idx.md5}, {idx.size} bytes; the "
                f"manifest says md5 {entry.md5sum}, {entry.size} bytes): it is corrupt or from another "
                "release, so none of its e-prints were used. Fetch the tar and the manifest again."
            )
        else:
            idx.ok = True
    return idx


def paper_problem(idx: TarIndex, paper_id: str, label: str) -> Optional[StageError]:
    """Why paper ``paper_id`` cannot be taken from the scanned tar ``idx``, or None."""
    if not idx.ok:
        return StageError(
            STAGE, idx.error_type or "bulk_tar_unreadable", idx.message or f"{label} is unusable.", paper_id
        )
    rec = idx.by_paper().get(paper_id)
    if rec is None:
        return StageError(
            STAGE,
            "not_in_bulk",
            f"{label} does not hold {paper_id} although the manifest's range "
            "covers it (withdrawn, or never had a source); fetch it per paper instead.",
            paper_id,
        )
    if rec.error_type:
        return StageError(
            STAGE,
            rec.error_type,
            f"{label}: {rec.message}; the e-print of {paper_id} was refused and nothing was extracted.",
            paper_id,
        )
    if rec.kind == "pdf":
        return StageError(
            STAGE,
            "pdf_only",
            f"{paper_id} was submitted as a PDF only ({label} holds {rec.name}): "
            "it has no TeX source, so its figures cannot be recovered from TeX nor converted "
            "with LaTeXML.",
            paper_id,
        )
    if rec.kind != "gz":
        return StageError(
            STAGE,
            "unsupported_source",
            f"{label} holds {rec.name} for {paper_id}, which is neither a gzipped source nor a PDF.",
            paper_id,
        )
    return None
