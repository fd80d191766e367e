"""The `datasets` features every shard carries (schemas/hf_features.py): derived from the Arrow
types, read back by `datasets` as the same features it would build itself (with ``image`` an
``Image()``), kept beside the sciga metadata, and invisible to DuckDB."""

from __future__ import annotations

import json

import datasets
import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from quality_fixtures import shard

from sciga.schemas.arrow import CONFIGS, SCHEMAS
from sciga.schemas.hf_features import HF_METADATA_KEY, feature_of, hf_features, with_hf_features, yaml_features
from sciga.schemas.version import SCHEMA_VERSION


def _datasets_own(config: str) -> datasets.Features:
    """What `datasets` builds from the bare Arrow types, with the one intended difference."""
    features = datasets.Features.from_arrow_schema(SCHEMAS[config].remove_metadata())
    if config == "figures":
        features["image"] = datasets.Image()
    return features


@pytest.mark.parametrize("config", CONFIGS)
def test_schema_metadata_round_trips_through_datasets(config):
    schema = SCHEMAS[config]
    meta = schema.metadata
    assert meta[b"sciga.schema_version"] == SCHEMA_VERSION.encode() and meta[b"sciga.config"] == config.encode()
    assert set(json.loads(meta[HF_METADATA_KEY])) == {"info"}
    features = datasets.Features.from_arrow_schema(schema)
    assert features == _datasets_own(config)
    assert features.arrow_schema == schema.remove_metadata()  # the features describe exactly these columns
    assert yaml_features(schema) == features._to_yaml_list()  # the card's YAML is what `datasets` writes


def test_image_only_for_the_bytes_path_struct():
    assert feature_of(SCHEMAS["figures"].field("image").type) == {"_type": "Image"}
    other = pa.struct([("path", pa.string()), ("bytes", pa.binary())])  # wrong order: not the convention
    assert feature_of(other) == {
        "path": {"dtype": "string", "_type": "Value"},
        "bytes": {"dtype": "binary", "_type": "Value"},
    }
    assert feature_of(pa.list_(pa.float32())) == [{"dtype": "float32", "_type": "Value"}]
    with pytest.raises(TypeError, match="no Hugging Face feature rule"):
        feature_of(pa.dictionary(pa.int8(), pa.string()))


def test_older_datasets_list_form_is_used():
    """Lists are ``[feature]``: `datasets` 2.x/3.x read it as a list; ``{"_type": "List"}`` (4.x) they cannot."""
    f = hf_features(SCHEMAS["papers"])
    assert f["dois"] == [{"dtype": "string", "_type": "Value"}]
    assert isinstance(f["sections"], list) and isinstance(f["sections"][0], dict) and "_type" not in f["sections"][0]
    assert "List" not in json.dumps(f) and "Sequence" not in json.dumps(f)


def test_with_hf_features_keeps_other_metadata():
    s = pa.schema([("a", pa.int32())]).with_metadata({b"k": b"v"})
    out = with_hf_features(s)
    assert out.metadata[b"k"] == b"v" and HF_METADATA_KEY in out.metadata


def test_plain_parquet_shards_load_image_as_image(sample_build, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    for config in ("papers", "figures", "mentions"):
        assert pq.read_schema(shard(sample_build, config)).metadata == SCHEMAS[config].metadata  # the writer kept it
    ds = datasets.load_dataset(
        "parquet",
        data_files=str(sample_build / "data" / "figures" / "*.parquet"),
        split="train",
        cache_dir=str(tmp_path / "cache"),
    )
    assert isinstance(ds.features["image"], datasets.Image)
    img = next(r["image"] for r in ds if r["image"] is not None)
    assert type(img).__name__ == "PngImageFile" and img.size[0] > 0


def test_duckdb_reads_the_shards_as_before(sample_build, tmp_path):
    """The extra key is schema metadata only: DuckDB's column types equal those of the same
    rows written without it."""
    con = duckdb.connect()
    for config in ("papers", "figures", "mentions", "dead_letter"):
        path = shard(sample_build, config)
        table = pq.read_table(path)
        bare = tmp_path / f"{config}.parquet"
        pq.write_table(table.replace_schema_metadata(None), bare)
        q = "SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet('{}'))"
        assert con.execute(q.format(path)).fetchall() == con.execute(q.format(bare)).fetchall()
        n = con.execute(f"SELECT count(*) FROM read_parquet('{path}')").fetchone()[0]
        assert n == table.num_rows
    types = dict(
        con.execute(
            f"SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet('{shard(sample_build, 'figures')}'))"
        ).fetchall()
    )
    assert types["image"] == "STRUCT(bytes BLOB, path VARCHAR)"
