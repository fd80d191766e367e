"""The data contract is written once per side and the two sides agree: the record types
(``schemas/records.py``, what the stages fill in) and the Arrow schemas (``schemas/arrow.py``,
what the shards hold) name the same fields with matching types, at every level of nesting,
and every field a record may leave empty (``Optional``) is nullable in Arrow. (Arrow
columns are nullable throughout, so a field added later reads as null in older shards;
which fields must not be null is the record's and the quality gate's business. The order
of columns is the shard's own: readers select by name.) Fields that exist only while a
paper is being built are listed here, so adding one is a decision, not an accident.
"""

from __future__ import annotations

import dataclasses
import typing

import pyarrow as pa
import pytest

from sciga.schemas import records
from sciga.schemas.arrow import SCHEMAS

# Record fields that never reach a shard (the stage that fills them says what they are for).
TRANSIENT = {
    "Paper": {"figure_labels", "rejected_mentions"},
    # citation elements in a text, read by the linking stage (other works' figures)
    "Paragraph": {"citation_spans"},
    "Figure": {"caption_citation_spans"},
    "Subfigure": {"caption_citation_spans"},
    "Table": {"caption_citation_spans"},
    "FigureRow": {"image_bytes", "image_path", "image_sha256", "image_size", "svg_source"},
    # an inline SVG drawing, carried from the parser to the vision stage's rasterizer
    "Image": {"svg"},
}
# The figures config stores the image as the `datasets` Image struct, made from two record fields.
STRUCT_FROM_FIELDS = {("FigureRow", "image"): ("image_bytes", "image_path")}

CONFIG_RECORD = {
    "papers": records.Paper,
    "figures": records.FigureRow,
    "mentions": records.MentionRow,
    "dead_letter": records.DeadLetter,
}


def _unwrap(tp):
    """(inner type, optional?) of an annotation."""
    origin = typing.get_origin(tp)
    if origin is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return (args[0] if len(args) == 1 else tp), True
    return tp, False


def _check(tp, arrow_type: pa.DataType, where: str) -> None:
    inner, _ = _unwrap(tp)
    origin = typing.get_origin(inner)
    if inner is str:
        assert arrow_type == pa.string(), where
    elif inner is bool:
        assert arrow_type == pa.bool_(), where
    elif inner is int:
        assert pa.types.is_integer(arrow_type), where
    elif inner is float:
        assert pa.types.is_floating(arrow_type), where
    elif inner is bytes:
        assert pa.types.is_binary(arrow_type), where
    elif origin is list:
        assert pa.types.is_list(arrow_type), where
        _check(typing.get_args(inner)[0], arrow_type.value_type, where + "[]")
    elif origin is dict:
        raise AssertionError(f"{where}: a dict field has no Arrow counterpart; list it as TRANSIENT or use a record")
    elif dataclasses.is_dataclass(inner):
        assert pa.types.is_struct(arrow_type), where
        _compare(inner, list(arrow_type), where)
    else:
        raise AssertionError(f"{where}: no rule for {inner!r}")


def _compare(cls, arrow_fields: list, where: str) -> None:
    hints = typing.get_type_hints(cls)
    skip = TRANSIENT.get(cls.__name__, set())
    rec_names = [f.name for f in dataclasses.fields(cls) if f.name not in skip]
    arrow_names = [f.name for f in arrow_fields]
    made = {name: parts for (c, name), parts in STRUCT_FROM_FIELDS.items() if c == cls.__name__}
    expected = set(rec_names) | set(made)
    assert set(arrow_names) == expected, (
        f"{where}: only in Arrow {sorted(set(arrow_names) - expected)}, "
        f"only in the record {sorted(expected - set(arrow_names))}"
    )
    assert len(arrow_names) == len(set(arrow_names)), f"{where}: a field twice"
    for af in arrow_fields:
        if af.name in made:
            continue
        tp = hints[af.name]
        _, optional = _unwrap(tp)
        assert af.nullable or not optional, f"{where}.{af.name}: Optional in the record, not nullable in Arrow"
        _check(tp, af.type, f"{where}.{af.name}")


@pytest.mark.parametrize("config", sorted(CONFIG_RECORD))
def test_record_types_and_arrow_schemas_agree(config):
    _compare(CONFIG_RECORD[config], list(SCHEMAS[config]), config)


def test_a_drifted_field_is_caught():
    """The check itself: a field renamed on one side fails it."""
    broken = pa.schema([f if f.name != "stage" else pa.field("step", f.type) for f in SCHEMAS["dead_letter"]])
    with pytest.raises(AssertionError, match="step"):
        _compare(records.DeadLetter, list(broken), "dead_letter")
