"""E-prints read safely: the real tarball, and every hostile or broken archive refused
with a clear per-paper error, quickly and without writing anything."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import time

import pytest
from sources_fixtures import CORPUS, symlink_tarball, tar_gz_of, traversal_tarball, zero_bomb

from sciga.transforms.common.errors import StageError
from sciga.transforms.eprints.eprint import Limits, read_eprint, read_source_dir, safe_extract, safe_member_name

REAL = CORPUS / "tex" / "1709.07020" / "1709.07020v1.tar.gz"


def refused(data: bytes, **kw) -> StageError:
    with pytest.raises(StageError) as ei:
        read_eprint(data, label="2401.00001 e-print", paper_id="2401.00001", **kw)
    e = ei.value
    assert e.stage == "tex_source" and e.paper_id == "2401.00001"
    assert e.message.startswith("2401.00001 e-print")
    return e


@pytest.mark.corpus
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


@pytest.mark.corpus
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


# -- bounded memory while refusing (a 200 MiB member must not be read whole first) ----------
_PEAK_CHILD = r"""
import sys
import psutil
from sciga.transforms.common.errors import StageError
from sciga.transforms.eprints.eprint import Limits, read_eprint
data = open(sys.argv[1], "rb").read()
limits = Limits(max_member_bytes=int(sys.argv[2]) << 20) if len(sys.argv) > 2 else Limits()
def hwm():  # the kernel's peak RSS of this process (VmHWM), in bytes
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset VmHWM to the current RSS: the peak below is the read's own
base = psutil.Process().memory_info().rss
try:
    read_eprint(data, limits=limits)
    outcome = "accepted"
except StageError as e:
    outcome = e.error_type
print(outcome, base, hwm())
"""


def _peak_rss_of_read(path, *args) -> tuple[str, int, int]:
    """Run ``read_eprint`` on ``path`` in a fresh interpreter: (outcome, MiB above the
    baseline at the child's peak (the kernel's VmHWM, reset just before the read), MiB
    above it as psutil saw it, polling the child's RSS every 5 ms)."""
    import subprocess
    import sys

    import psutil

    from conftest import ROOT

    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = psutil.Popen(
        [sys.executable, "-c", _PEAK_CHILD, str(path), *map(str, args)], stdout=subprocess.PIPE, env=env, text=True
    )
    polled = 0
    while proc.poll() is None:
        try:
            polled = max(polled, proc.memory_info().rss)
        except psutil.Error:
            break
        time.sleep(0.005)
    out = proc.stdout.read().split()
    assert proc.returncode == 0 and len(out) == 3, out
    outcome, base, peak = out[0], int(out[1]), int(out[2])
    return outcome, (peak - base) >> 20, (polled - base) >> 20


def _gzip_of_repeated(head: bytes, mib: int, byte: bytes = b"a") -> bytes:
    one = gzip.compress(byte * (1 << 20), compresslevel=9, mtime=0)
    return gzip.compress(head, mtime=0) + one * mib


def test_a_200_mib_long_name_member_is_refused_without_reading_it(tmp_path):
    # A GNU long-name header declaring 200 MiB: tarfile reads such a name whole (and joins
    # it: ~400 MB RSS) before our name check ran. Now its 512-byte header refuses it.
    ti = tarfile.TarInfo("././@LongLink")
    ti.type = tarfile.GNUTYPE_LONGNAME
    ti.size = 200 << 20
    header = ti._create_header(ti.get_info(), tarfile.GNU_FORMAT, "utf-8", "surrogateescape")
    path = tmp_path / "longname.tar.gz"
    named = tarfile.TarInfo("main.tex")  # the member the long name belongs to, then the end
    tail = gzip.compress(named.tobuf(format=tarfile.GNU_FORMAT) + b"\0" * 1024, mtime=0)
    path.write_bytes(_gzip_of_repeated(header, 200) + tail)
    outcome, peak_mib, polled_mib = _peak_rss_of_read(path)
    assert peak_mib < 40 and polled_mib < 40, (peak_mib, polled_mib)
    assert outcome == "unsafe_archive"
    e = refused(path.read_bytes())
    assert "extension header" in e.message and "209715200 bytes" in e.message


def test_an_oversized_single_file_is_cut_at_the_limit_while_streaming(tmp_path):
    # A single gzipped file of 200 MiB against a 64 MiB limit: counted while it streams
    # and stopped at 64 MiB + one chunk (was: the limit read in one call, twice over).
    path = tmp_path / "single.gz"
    path.write_bytes(_gzip_of_repeated(b"", 200, b"%"))
    outcome, peak_mib, polled_mib = _peak_rss_of_read(path, 64)
    assert outcome == "size_bomb"
    assert peak_mib < 64 + 24, (peak_mib, polled_mib)


@pytest.mark.e2e  # reads a 200 MiB archive member
def test_an_accepted_200_mib_member_is_held_once_not_twice(tmp_path):
    # a figure, not TeX text: TeX text is bounded at 64 MiB per e-print since issue 43 (item 9)
    ti = tarfile.TarInfo("figures/plot.png")
    ti.size = 200 << 20
    path = tmp_path / "big.tar.gz"
    path.write_bytes(_gzip_of_repeated(ti.tobuf(format=tarfile.GNU_FORMAT), 200, b"%"))
    outcome, peak_mib, _ = _peak_rss_of_read(path)
    assert outcome == "accepted"
    assert peak_mib < 200 + 40, peak_mib  # the kept bytes plus a chunk (was ~400 MiB)
