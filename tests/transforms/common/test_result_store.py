"""The result store records each table's size as the shard writer will read it back."""

from __future__ import annotations

from sciga.pipelines.cli import main
from sciga.transforms.common.result_store import ResultStore, store_root, table_size


def test_the_sizes_a_result_is_stored_with_are_those_of_its_tables_read_back(tmp_path):
    """The store takes each table's size from the table it was given, without reading the
    stream it wrote back; the part cuts depend on it, so it must be the size of the table
    read back (a built table holds no validity buffer without nulls and no slack): checked
    on every result of the sample (papers, figures with their image bytes, mentions)."""
    out = tmp_path / "out"
    assert main(["build", "--sample", "--output", str(out), "--workers", "1", "--quiet"]) == 0
    store = ResultStore(store_root(str(out)))
    checked = 0
    for key in store.keys():
        stored = store.read(key)
        assert stored is not None
        for name, table in stored.tables.items():
            assert stored.header.sizes[name] == table_size(table), (key, name)
            checked += table.num_rows > 0
    assert checked >= 8


def test_a_stored_results_members_read_in_place_are_what_zipfile_reads(tmp_path):
    """``stored_member`` reads the layout the store writes, byte for byte what ``zipfile``
    reads; a damaged or cut file is refused (and then refused by ``zipfile`` too: the
    result reads as missing, so the paper is computed again); a zip laid out otherwise
    (compressed members) is still read, through ``zipfile``."""
    import io
    import shutil
    import zipfile
    from pathlib import Path

    import pytest

    from sciga.transforms.common.result_store import HEADER, stored_member

    out = tmp_path / "out"
    assert main(["build", "--sample", "--output", str(out), "--workers", "1", "--quiet"]) == 0
    store = ResultStore(store_root(str(out)))
    keys = sorted(store.keys())
    for key in keys:
        with zipfile.ZipFile(store.path(key)) as zf:
            for name in zf.namelist():
                assert stored_member(store.path(key), name) == zf.read(name), (key, name)
    key = keys[0]
    path = store.path(key)
    with pytest.raises(KeyError):
        stored_member(path, "no_such.arrow")
    good = Path(path).read_bytes()

    damaged = bytearray(good)
    damaged[200] ^= 0xFF  # inside the header's bytes
    Path(path).write_bytes(bytes(damaged))
    assert stored_member(path, HEADER) is None and store.header(key) is None
    Path(path).write_bytes(good[: len(good) // 2])  # a write cut short
    assert stored_member(path, "papers.arrow") is None and store.read_table(key, "papers") is None

    deflated = tmp_path / "deflated.zip"
    with zipfile.ZipFile(deflated, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        with zipfile.ZipFile(io.BytesIO(good)) as src:
            for name in src.namelist():
                zf.writestr(name, src.read(name))
    assert stored_member(str(deflated), HEADER) is None
    shutil.copy(deflated, path)
    assert store.header(key) is not None and store.read_table(key, "papers") is not None


def test_prune_deletes_unreferenced_results_and_leftovers_locally_and_on_a_bucket(tmp_path):
    """``prune`` lists the store once (``os.scandir`` for a local one, fsspec elsewhere):
    results not kept and ``.tmp`` leftovers of killed writers go, the kept ones stay, and a
    symlinked folder inside the store is not walked into."""
    import os
    import shutil
    from pathlib import Path

    import fsspec

    out = tmp_path / "out"
    assert main(["build", "--sample", "--output", str(out), "--workers", "1", "--quiet"]) == 0
    root = store_root(str(out))
    keys = sorted(ResultStore(root).keys())
    assert len(keys) >= 4
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / ("f" * 64 + ".zip")).write_bytes(b"not the store's")
    os.symlink(outside, Path(root) / "results" / "zz")
    leftover = Path(ResultStore(root).path(keys[0]) + ".123.tmp")
    leftover.write_bytes(b"killed")
    mem_root = "memory://store-prune"
    fs = fsspec.filesystem("memory")
    for p in Path(root).rglob("*.zip"):
        if p.parent.name != "zz":
            fs.pipe(f"{mem_root}/results/{p.parent.name}/{p.name}", p.read_bytes())
    fs.pipe(f"{mem_root}/results/00/x.zip.9.tmp", b"killed")
    for store in (ResultStore(root), ResultStore(mem_root)):
        assert store.prune(set(keys[:2])) == len(keys) - 2
        assert sorted(store.keys()) == keys[:2]
    assert not leftover.exists() and not fs.exists(f"{mem_root}/results/00/x.zip.9.tmp")
    assert (outside / ("f" * 64 + ".zip")).exists()  # nothing outside the store is touched
    shutil.rmtree(outside)
