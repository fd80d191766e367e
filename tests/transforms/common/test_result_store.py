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
