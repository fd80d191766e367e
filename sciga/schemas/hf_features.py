"""The Hugging Face `datasets` features of an Arrow schema, derived from its types.

`datasets` reads a Parquet file's features from the ``huggingface`` key of the Arrow schema
metadata (``{"info": {"features": {...}}}``) and falls back to the plain Arrow types
without it. The fallback turns ``image`` (``struct<bytes: binary, path: string>``) into a
plain struct; with the key it is an ``Image()`` that decodes to PIL. So every shard carries
the key, computed here from the Arrow types alone: one function, no `datasets` import (Beam
workers and the schema module do not need `datasets` installed).

Rules, in the order `datasets` itself maps Arrow types (``generate_from_arrow_type``):
- a struct of exactly ``bytes: binary, path: string`` is the ``Image`` convention;
- any other struct is a dict of features, field order kept;
- a list is written ``[feature]``: the form every `datasets` version reads as a list
  (2.x/3.x do not know the ``{"_type": "List"}`` that 4.x writes, and ``Sequence`` of a
  struct would turn into a struct of lists there); 4.x and 5.x read it as ``List(feature)``;
- a primitive is a ``Value`` with `datasets`' dtype name (``float32``, not Arrow's ``float``).

The card's ``dataset_info.features`` YAML list is derived from the same features.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

HF_METADATA_KEY = b"huggingface"

_DTYPES = {
    pa.bool_(): "bool",
    pa.int8(): "int8",
    pa.int16(): "int16",
    pa.int32(): "int32",
    pa.int64(): "int64",
    pa.uint8(): "uint8",
    pa.uint16(): "uint16",
    pa.uint32(): "uint32",
    pa.uint64(): "uint64",
    pa.float16(): "float16",
    pa.float32(): "float32",
    pa.float64(): "float64",
    pa.string(): "string",
    pa.large_string(): "large_string",
    pa.binary(): "binary",
    pa.large_binary(): "large_binary",
}


def is_image_struct(t: pa.DataType) -> bool:
    """The `datasets` Image storage: struct<bytes: binary, path: string>, in that order."""
    return (
        pa.types.is_struct(t)
        and t.num_fields == 2
        and t.field(0).name == "bytes"
        and t.field(0).type == pa.binary()
        and t.field(1).name == "path"
        and t.field(1).type == pa.string()
    )


def feature_of(t: pa.DataType) -> Any:
    """One Arrow type -> its `datasets` feature in the JSON form of ``Features.to_dict``."""
    if is_image_struct(t):
        return {"_type": "Image"}
    if pa.types.is_struct(t):
        return {t.field(i).name: feature_of(t.field(i).type) for i in range(t.num_fields)}
    if pa.types.is_list(t):
        return [feature_of(t.value_type)]
    dtype = _DTYPES.get(t)
    if dtype is None:
        raise TypeError(f"no Hugging Face feature rule for Arrow type {t}; add one to schemas/hf_features.py")
    return {"dtype": dtype, "_type": "Value"}


def hf_features(schema: pa.Schema) -> dict:
    """column -> feature (JSON form), in schema order."""
    return {f.name: feature_of(f.type) for f in schema}


def hf_metadata(schema: pa.Schema) -> bytes:
    """The value of the ``huggingface`` schema metadata key, as `datasets` writes it."""
    return json.dumps({"info": {"features": hf_features(schema)}}).encode("utf-8")


def with_hf_features(schema: pa.Schema) -> pa.Schema:
    """``schema`` with the ``huggingface`` key added to (not replacing) its metadata."""
    meta = dict(schema.metadata or {})
    meta[HF_METADATA_KEY] = hf_metadata(schema)
    return schema.with_metadata(meta)


def _yaml_inner(feature: Any) -> dict:
    if isinstance(feature, list):
        inner = _yaml_inner(feature[0])
        # `datasets` shortens {list: {dtype: x}} to {list: x} and {list: {struct: [...]}} to {list: [...]}
        if list(inner) == ["dtype"]:
            return {"list": inner["dtype"]}
        if list(inner) == ["struct"]:
            return {"list": inner["struct"]}
        return {"list": inner}
    if feature.get("_type") == "Value":
        return {"dtype": feature["dtype"]}
    if feature.get("_type") == "Image":
        return {"dtype": "image"}
    return {"struct": [{"name": name, **_yaml_inner(sub)} for name, sub in feature.items()]}


def yaml_features(schema: pa.Schema) -> list:
    """The dataset card's ``dataset_info.features`` list (what ``Features._to_yaml_list`` gives)."""
    return [{"name": name, **_yaml_inner(feature)} for name, feature in hf_features(schema).items()]
