"""arXiv bulk source archives made here, in arXiv's own layout, and a real S3-compatible
server on 127.0.0.1 to hold them.

``write_bulk(root, tars)`` writes ``root/src/arXiv_src_YYMM_NNN.tar`` (one member per paper,
``YYMM/<item>.gz`` or ``.pdf``, as arXiv packs them) and ``root/src/arXiv_src_manifest.xml``
with each tar's md5, size, first/last item and counts, as arXiv writes it (see
https://info.arxiv.org/help/bulk_data_s3.html for the format). ``S3Server`` runs moto's
server mode (``moto.server.ThreadedMotoServer``: a real HTTP endpoint speaking the S3
protocol) on a free loopback port; ``upload(dir, bucket, prefix)`` copies a folder into it.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import socket
import tarfile
from pathlib import Path
from typing import Optional

from sources_fixtures import tar_gz_of, traversal_tarball

TEX = (
    b"\\documentclass{article}\\usepackage{graphicx}\\begin{document}\\section{Intro}"
    b"See Figure~\\ref{f}.\\begin{figure}\\includegraphics{fig.png}\\caption{A plot.}\\label{f}\\end{figure}"
    b"\\end{document}\n"
)


def paper_tar(pid: str, pad: int = 0) -> bytes:
    """A normal e-print: main.tex + a figure (+ ``pad`` incompressible bytes, for size)."""
    files = {
        "main.tex": TEX.replace(b"Intro", f"Intro of {pid}".encode()),
        "fig.png": b"\x89PNG\r\n\x1a\n" + pid.encode(),
    }
    if pad:
        files["data.bin"] = hashlib.shake_256(pid.encode()).digest(pad)
    return tar_gz_of(files)


def bad_gzip() -> bytes:
    return b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + b"this is not deflate data" * 8


def _item(pid: str) -> str:
    return pid.replace("/", "")


def tar_bytes(members: list[tuple[str, bytes]], *, extra: Optional[list[tarfile.TarInfo]] = None) -> bytes:
    """A deterministic uncompressed tar of (name, bytes) members, padded like GNU tar."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tf:
        dirs = sorted({n.split("/", 1)[0] for n, _ in members if "/" in n and not n.startswith("..")})
        for d in dirs:
            ti = tarfile.TarInfo(d)
            ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, 0o755, 1600000000
            tf.addfile(ti)
        for name, data in members:
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 1600000000
            tf.addfile(ti, io.BytesIO(data))
        for ti in extra or []:
            tf.addfile(ti)
    return raw.getvalue()


def write_bulk(
    root: Path,
    tars: dict[str, list[tuple[str, bytes]]],
    *,
    yymm_of=None,
    corrupt: tuple[str, ...] = (),
    flat: bool = False,
    extra: Optional[dict] = None,
) -> Path:
    """Write tars {"2101_001": [(member name, bytes), ...]} and the manifest. Tars named in
    ``corrupt`` get one byte flipped after their md5 went into the manifest. Returns the
    folder holding the manifest (``root/src``)."""
    src = root / "src"
    src.mkdir(parents=True, exist_ok=True)
    files = []
    for seq_name in sorted(tars):
        yymm, seq = seq_name.split("_")
        members = tars[seq_name]
        data = tar_bytes(members, extra=(extra or {}).get(seq_name))
        name = f"arXiv_src_{seq_name}.tar"
        items = [os.path.basename(n).rsplit(".", 1)[0] for n, _ in members]
        content = hashlib.md5(b"".join(d for _, d in members)).hexdigest()
        files.append((name, yymm, int(seq), hashlib.md5(data).hexdigest(), len(data), items, content))
        if seq_name in corrupt:
            b = bytearray(data)
            b[len(b) // 2] ^= 0xFF
            data = bytes(b)
        (src / name).write_bytes(data)
    xml = ["<?xml version='1.0' standalone='yes'?>", "<arXivSRC>"]
    for name, yymm, seq, md5, size, items, content in files:
        xml += [
            "  <file>",
            f"    <content_md5sum>{content}</content_md5sum>",
            f"    <filename>{name if flat else 'src/' + name}</filename>",
            f"    <first_item>{items[0]}</first_item>",
            f"    <last_item>{items[-1]}</last_item>",
            f"    <md5sum>{md5}</md5sum>",
            f"    <num_items>{len(items)}</num_items>",
            f"    <seq_num>{seq}</seq_num>",
            f"    <size>{size}</size>",
            "    <timestamp>2021-02-03 04:05:06</timestamp>",
            f"    <yymm>{yymm}</yymm>",
            "  </file>",
        ]
    xml.append("</arXivSRC>")
    (src / "arXiv_src_manifest.xml").write_text("\n".join(xml) + "\n")
    return src


def standard_bulk(root: Path) -> Path:
    """The bulk folder the tests share: every case the issue names.

    2101_001: 2101.00001 normal, 2101.00002 PDF-only, 2101.00003 a single gzipped TeX
              file, 2101.00004 a bad gzip, 2101.00005 an e-print with a traversal member
    2101_002: 2101.00006..2101.00008 normal, plus an outer member ``../../2101.00009.gz``
              (traversal in the bulk tar itself)
    2102_001: 2102.00001..2102.00002 normal, but the tar is corrupt (md5 mismatch)
    0601_001: astro-ph/0601001 (old-style id), normal
    """
    tars = {
        "2101_001": [
            ("2101/2101.00001.gz", paper_tar("2101.00001")),
            ("2101/2101.00002.pdf", b"%PDF-1.5\n% a PDF-only submission\n%%EOF\n"),
            ("2101/2101.00003.gz", gzip.compress(TEX, mtime=0)),
            ("2101/2101.00004.gz", bad_gzip()),
            ("2101/2101.00005.gz", traversal_tarball()),
        ],
        "2101_002": [
            ("2101/2101.00006.gz", paper_tar("2101.00006")),
            ("2101/2101.00007.gz", paper_tar("2101.00007")),
            ("2101/2101.00008.gz", paper_tar("2101.00008")),
            ("../../2101.00009.gz", paper_tar("2101.00009")),
        ],
        "2102_001": [("2102/2102.00001.gz", paper_tar("2102.00001")), ("2102/2102.00002.gz", paper_tar("2102.00002"))],
        "0601_001": [("0601/astro-ph0601001.gz", paper_tar("astro-ph/0601001"))],
    }
    return write_bulk(root, tars, corrupt=("2102_001",))


def many_tars(root: Path, n_tars: int, per_tar: int, pad: int) -> tuple[Path, list[str]]:
    """``n_tars`` tars of month 2103, ``per_tar`` normal papers each with ``pad`` bytes of
    incompressible data: for kill/resume tests and the benchmark."""
    tars, pids = {}, []
    k = 1
    for t in range(1, n_tars + 1):
        members = []
        for _ in range(per_tar):
            pid = f"2103.{k:05d}"
            members.append((f"2103/{pid}.gz", paper_tar(pid, pad)))
            pids.append(pid)
            k += 1
        tars[f"2103_{t:03d}"] = members
    return write_bulk(root, tars), pids


# -- a real S3-compatible endpoint on 127.0.0.1 ---------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3Server:
    """moto in server mode on a free loopback port (a real HTTP server speaking S3)."""

    def __init__(self):
        from moto.server import ThreadedMotoServer

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)

    def start(self) -> S3Server:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def storage_options(self) -> dict:
        """What s3fs needs to talk to this server instead of AWS (dummy credentials)."""
        return {
            "key": "testing",
            "secret": "testing",
            "client_kwargs": {"endpoint_url": self.url, "region_name": "us-east-1"},
            "skip_instance_cache": True,
        }

    def upload(self, folder: Path, bucket: str, prefix: str = "") -> None:
        import boto3
        import s3fs

        client = boto3.client(
            "s3",
            endpoint_url=self.url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        if bucket not in {b["Name"] for b in client.list_buckets().get("Buckets", [])}:
            client.create_bucket(Bucket=bucket)
        fs = s3fs.S3FileSystem(**self.storage_options())
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                key = f"{bucket}/{prefix.strip('/') + '/' if prefix else ''}{p.relative_to(folder).as_posix()}"
                fs.put_file(str(p), key)
