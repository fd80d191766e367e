"""E-prints read safely: the real tarball, and every hostile or broken archive refused
with a clear per-paper error, quickly and without writing anything."""
from __future__ import annotations

import gzip
import io
import os
import tarfile
import time

import pytest

from sciga.transforms.errors import StageError
from sciga.transforms.sources.eprint import Limits, read_eprint, read_source_dir, safe_extract, safe_member_name
from tests.sources_fixtures import CORPUS, symlink_tarball, tar_gz_of, traversal_tarball, zero_bomb

REAL = CORPUS / "tex" / "1709.07020" / "1709.07020v1.tar.gz"


def refused(data: bytes, **kw) -> StageError:
    with pytest.raises(StageError) as ei:
        read_eprint(data, label="2401.00001 e-print", paper_id="2401.00001", **kw)
    e = ei.value
    assert e.stage == "tex_source" and e.paper_id == "2401.00001"
    assert e.message.startswith("2401.00001 e-print")
    return e


@pytest.mark.skipif(not REAL.exists(), reason="needs the corpus")
def test_real_arxiv_tarball():
    tree = read_eprint(REAL.read_bytes())
    assert tree.kind == "tar" and tree.members == 3
    assert sorted(tree.files) == ["full_article.bbl", "full_article.tex", "preprint_inset.pdf"]
    assert tree.files["preprint_inset.pdf"].startswith(b"%PDF")
    assert len(tree.files["full_article.tex"]) == 23806


def test_single_gzipped_tex_and_pdf_only():
    tree = read_eprint(gzip.compress(b"\\documentclass{article}\\begin{document}Hi\\end{document}"))
    assert tree.kind == "tex" and list(tree.files) == ["main.tex"]
    assert read_eprint(b"%PDF-1.5\n...").kind == "pdf"
    assert read_eprint(gzip.compress(b"%PDF-1.5\n...")).kind == "pdf"


def test_ten_gib_of_zeros_is_refused_quickly():
    bomb = zero_bomb(10)
    assert len(bomb) < 16 << 20, "small on disk"
    t0 = time.monotonic()
    e = refused(bomb)
    assert e.error_type == "size_bomb" and "10240 MiB" in e.message
    assert time.monotonic() - t0 < 2.0


def test_lying_header_bomb_is_cut_at_the_inflated_budget():
    # The header says 1 KiB, the stream inflates to 64 MiB: counted on real bytes.
    ti = tarfile.TarInfo("main.tex")
    ti.size = 1024
    head = gzip.compress(ti.tobuf(format=tarfile.GNU_FORMAT), mtime=0)
    one = gzip.compress(b"\0" * (1 << 20), mtime=0)
    data = head + one * 64
    limits = Limits(max_total_bytes=8 << 20)
    t0 = time.monotonic()
    tree_or_err = None
    try:
        tree_or_err = read_eprint(data, limits=limits)
    except StageError as e:
        tree_or_err = e
    # Either refused as a bomb, or the archive ends after its one declared member: never
    # more than the budget inflated.
    if isinstance(tree_or_err, StageError):
        assert tree_or_err.error_type in ("size_bomb", "corrupt_source")
    else:
        assert tree_or_err.total_bytes <= 8 << 20
    assert time.monotonic() - t0 < 2.0


def test_single_file_gzip_bomb():
    one = gzip.compress(b"\0" * (1 << 20), mtime=0)
    e = refused(one * 600, limits=Limits(max_total_bytes=512 << 20, max_member_bytes=64 << 20))
    assert e.error_type == "size_bomb"


def test_traversal_absolute_and_links_are_refused():
    e = refused(traversal_tarball())
    assert e.error_type == "unsafe_archive" and "'../../etc/evil.tex'" in e.message
    assert "nothing was extracted" in e.message
    e = refused(tar_gz_of({"/etc/passwd": b"x"}))
    assert e.error_type == "unsafe_archive"
    e = refused(symlink_tarball())
    assert e.error_type == "unsafe_archive" and "link" in e.message


def _tar_with(member: tarfile.TarInfo, data: bytes = b"") -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tf:
        tf.addfile(member, io.BytesIO(data) if data else None)
    return gzip.compress(raw.getvalue(), mtime=0)


def test_hardlinks_devices_and_fifos_are_refused():
    hl = tarfile.TarInfo("fig.pdf")
    hl.type = tarfile.LNKTYPE
    hl.linkname = "main.tex"
    assert refused(_tar_with(hl)).error_type == "unsafe_archive"
    dev = tarfile.TarInfo("dev0")
    dev.type = tarfile.CHRTYPE
    assert "device" in refused(_tar_with(dev)).message
    fifo = tarfile.TarInfo("pipe")
    fifo.type = tarfile.FIFOTYPE
    assert "FIFO" in refused(_tar_with(fifo)).message


def test_too_many_members():
    files = {f"f{i}.tex": b"%" for i in range(30)}
    e = refused(tar_gz_of(files), limits=Limits(max_members=20))
    assert e.error_type == "too_many_members"


@pytest.mark.skipif(not REAL.exists(), reason="needs the corpus")
def test_corrupt_gzip_and_truncated_archive():
    data = REAL.read_bytes()
    e = refused(data[: len(data) // 2])
    assert e.error_type == "corrupt_source" and "refetch" in e.message
    e = refused(b"\x1f\x8b\x08\x00" + os.urandom(64))
    assert e.error_type == "corrupt_source"
    assert refused(b"").error_type == "empty_source"


def test_member_names():
    assert safe_member_name("./figs/a.png") == "figs/a.png"
    assert safe_member_name("a//b/./c.tex") == "a/b/c.tex"
    assert safe_member_name("../x") is None and safe_member_name("/x") is None
    assert safe_member_name("a/../../x") is None and safe_member_name("C:/x") is None
    assert safe_member_name("a\x00b") is None


def test_safe_extract_writes_atomically_and_refusals_write_nothing(tmp_path):
    dest = tmp_path / "src"
    tree = safe_extract(tar_gz_of({"main.tex": b"\\documentclass{article}", "figs/a.png": b"\x89PNG"}), str(dest))
    assert sorted(tree.files) == ["figs/a.png", "main.tex"]
    assert (dest / "figs" / "a.png").read_bytes() == b"\x89PNG"
    bad = tmp_path / "bad"
    with pytest.raises(StageError):
        safe_extract(traversal_tarball(), str(bad))
    with pytest.raises(StageError):
        safe_extract(zero_bomb(1), str(bad), limits=Limits(max_member_bytes=16 << 20))
    assert not bad.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"], "no temporary folders left behind"
    assert not (tmp_path.parent / "etc" / "evil.tex").exists()


def test_source_folder_skips_links_that_leave_it(tmp_path):
    (tmp_path / "main.tex").write_text("\\documentclass{article}")
    outside = tmp_path.parent / "outside-secret.tex"
    outside.write_text("secret")
    os.symlink(outside, tmp_path / "leak.tex")
    tree = read_source_dir(str(tmp_path))
    assert list(tree.files) == ["main.tex"] and "leak.tex" in tree.skipped
