"""Arrow schemas of the published configs and the record -> row conversion.

Records become Arrow only here, at the writer. Each config's schema carries the schema
version in its metadata so a shard read on its own still says what contract it follows, and
the Hugging Face `datasets` features derived from its types (schemas/hf_features.py) so that
plain Parquet readers of `datasets` see ``image`` as an ``Image()``. Every writer that builds
tables with ``SCHEMAS[config]`` carries both.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from sciga.schemas.hf_features import with_hf_features
from sciga.schemas.records import DeadLetter, FigureRow, MentionRow, Paper
from sciga.schemas.version import SCHEMA_VERSION

CONFIGS = ("papers", "figures", "mentions", "dead_letter")

_str = pa.string()
_strs = pa.list_(pa.string())

REF_SPAN = pa.struct(
    [
        ("start", pa.int32()),
        ("end", pa.int32()),
        ("text", _str),
        ("ref_id", _str),
        ("resolution", _str),
        ("sentence_start", pa.int32()),
        ("sentence_end", pa.int32()),
        ("panels", _strs),
    ]
)
PARAGRAPH = pa.struct([("text", _str), ("html_id", _str), ("ref_spans", pa.list_(REF_SPAN))])
SECTION = pa.struct(
    [
        ("id", _str),
        ("parent_id", _str),
        ("level", pa.int16()),
        ("number", _str),
        ("title", _str),
        ("body", _str),
        ("paragraphs", pa.list_(PARAGRAPH)),
        ("figure_ids", _strs),
        ("html_id", _str),
        ("title_ref_spans", pa.list_(REF_SPAN)),
    ]
)
IMAGE = pa.struct(
    [
        ("path", _str),
        ("url", _str),
        ("kind", _str),
        ("width", pa.int32()),
        ("height", pa.int32()),
        ("html_id", _str),
        ("source", _str),
    ]
)
SUBFIGURE = pa.struct(
    [
        ("id", _str),
        ("html_id", _str),
        ("label", _str),
        ("caption", _str),
        ("images", pa.list_(IMAGE)),
        ("caption_source", _str),
        ("caption_ref_spans", pa.list_(REF_SPAN)),
    ]
)
FIGURE = pa.struct(
    [
        ("id", _str),
        ("html_id", _str),
        ("index", pa.int32()),
        ("number", _str),
        ("label", _str),
        ("caption", _str),
        ("images", pa.list_(IMAGE)),
        ("subfigures", pa.list_(SUBFIGURE)),
        ("section_id", _str),
        ("is_teaser", pa.bool_()),
        ("caption_ref_spans", pa.list_(REF_SPAN)),
    ]
)
TABLE = pa.struct(
    [
        ("id", _str),
        ("html_id", _str),
        ("index", pa.int32()),
        ("number", _str),
        ("caption", _str),
        ("section_id", _str),
        ("caption_ref_spans", pa.list_(REF_SPAN)),
    ]
)
GRAPHICAL_ABSTRACT = pa.struct(
    [
        ("id", _str),
        ("type", _str),
        ("paths", _strs),
        ("components", _strs),
        ("caption", _str),
        ("de_facto", pa.bool_()),
        ("source", _str),
        ("score", pa.float32()),
        ("error", _str),
    ]
)
PROVENANCE = pa.struct(
    [
        ("source", _str),
        ("url", _str),
        ("input_uri", _str),
        ("content_sha256", _str),
        ("generator", _str),
        ("generator_version", _str),
        ("builder_version", _str),
        ("schema_version", _str),
        ("decode_errors", pa.int32()),
        ("id_source", _str),
        ("latexml_errors", pa.int32()),
    ]
)


def _with_version(schema: pa.Schema, config: str) -> pa.Schema:
    versioned = schema.with_metadata(
        {b"sciga.schema_version": SCHEMA_VERSION.encode(), b"sciga.config": config.encode()}
    )
    return with_hf_features(versioned)


PAPERS = _with_version(
    pa.schema(
        [
            ("id", _str),
            ("version", _str),
            ("title", _str),
            ("authors", pa.list_(pa.struct([("name", _str), ("affiliations", _strs)]))),
            ("published", _str),
            ("updated", _str),
            ("subjects", pa.struct([("arxiv", _strs), ("acm", _strs), ("msc", _strs)])),
            ("primary_category", _str),
            ("comment", _str),
            ("journal_ref", _str),
            ("conference", pa.struct([("venue", _str), ("year", pa.int16()), ("track", _str)])),
            ("dois", _strs),
            ("license", _str),
            ("withheld", _str),
            ("abstract", _str),
            ("sections", pa.list_(SECTION)),
            ("figures", pa.list_(FIGURE)),
            ("tables", pa.list_(TABLE)),
            ("teaser", _strs),
            ("graphical_abstract", GRAPHICAL_ABSTRACT),
            ("provenance", PROVENANCE),
        ]
    ),
    "papers",
)

MEDICAL = pa.struct(
    [
        ("keyword_hits", _strs),
        ("classifier_run", pa.bool_()),
        ("topk_labels", _strs),
        ("topk_scores", pa.list_(pa.float32())),
        ("is_medical", pa.bool_()),
    ]
)

FIGURES = _with_version(
    pa.schema(
        [
            ("id", _str),
            ("paper_id", _str),
            ("parent_id", _str),
            ("kind", _str),
            ("index", pa.int32()),
            ("number", _str),
            ("label", _str),
            ("caption", _str),
            ("subcaption", _str),
            ("subcaption_source", _str),
            # The Hugging Face `datasets` Image convention: struct<bytes, path>.
            # Null when the row has no image bytes (image_status says why, image_uri where
            # the file was): `datasets` would open a path without bytes from the reader's
            # working directory.
            ("image", pa.struct([("bytes", pa.binary()), ("path", _str)])),
            ("image_status", _str),
            ("image_paths", _strs),
            ("image_kind", _str),
            ("image_source", _str),
            ("image_url", _str),
            ("image_uri", _str),
            ("width", pa.int32()),
            ("height", pa.int32()),
            ("phash", _str),
            ("image_error", _str),
            ("section_id", _str),
            ("html_id", _str),
            ("is_teaser", pa.bool_()),
            ("ga_role", _str),
            ("medical", MEDICAL),
        ]
    ),
    "figures",
)

MENTIONS = _with_version(
    pa.schema(
        [
            ("paper_id", _str),
            ("figure_id", _str),
            ("section_id", _str),
            ("paragraph_index", pa.int32()),
            ("char_start", pa.int32()),
            ("char_end", pa.int32()),
            ("surface", _str),
            ("sentence", _str),
            ("sentence_start", pa.int32()),
            ("resolution", _str),
            ("context", _str),
            ("context_id", _str),
            ("panels", _strs),
        ]
    ),
    "mentions",
)

DEAD_LETTER = _with_version(
    pa.schema(
        [
            ("paper_id", _str),
            ("stage", _str),
            ("error_type", _str),
            ("message", _str),
            ("input_uri", _str),
            ("scope", _str),
        ]
    ),
    "dead_letter",
)

SCHEMAS = {"papers": PAPERS, "figures": FIGURES, "mentions": MENTIONS, "dead_letter": DEAD_LETTER}


# Values as_plain returns as they are, tested by exact type before any call: most of a
# paper's values are strings and numbers, and a call per leaf was most of the conversion.
_LEAF_TYPES = frozenset({str, int, float, bool, bytes, type(None)})


def as_plain(obj: Any) -> Any:
    """Dataclass tree -> dicts/lists, faster than dataclasses.asdict (no deep copies)."""
    if type(obj) is list:
        return [v if type(v) in _LEAF_TYPES else as_plain(v) for v in obj]
    if hasattr(obj, "__dataclass_fields__"):
        return {k: (v if type(v) in _LEAF_TYPES else as_plain(v)) for k, v in obj.__dict__.items()}
    if isinstance(obj, list):
        return [as_plain(v) for v in obj]
    return obj


def paper_row(paper: Paper) -> dict:
    d = as_plain(paper)
    d.pop("figure_labels", None)  # transient input of the linking stage, not published
    d.pop("rejected_mentions", None)  # transient output of the linking stage (build stats)
    # The citation spans of paragraphs and captions (transient too) are struct fields the
    # Arrow schema does not name: ``Table.from_pylist`` leaves them out.
    return d


def figure_row(row: FigureRow) -> dict:
    d = as_plain(row)
    d["image"] = (
        None
        if (d["image_bytes"] is None and d["image_path"] is None)
        else {
            "bytes": d.pop("image_bytes"),
            "path": d.pop("image_path"),
        }
    )
    d.pop("image_bytes", None)
    d.pop("image_path", None)
    return d


def mention_row(row: MentionRow) -> dict:
    return as_plain(row)


def dead_letter_row(row: DeadLetter) -> dict:
    return as_plain(row)


TO_ROW = {"papers": paper_row, "figures": figure_row, "mentions": mention_row, "dead_letter": dead_letter_row}

# The key that orders rows inside a shard (and assigns shards): stable and unique.
SORT_KEY = {
    "papers": lambda r: (r["id"],),
    "figures": lambda r: (r["paper_id"], r["index"], r["kind"] != "figure", r["id"]),
    "mentions": lambda r: (
        r["paper_id"],
        r["section_id"] or "",
        r["context"],
        r["context_id"] or "",
        -1 if r["paragraph_index"] is None else r["paragraph_index"],
        r["char_start"],
        r["char_end"],
        r["figure_id"],
    ),
    "dead_letter": lambda r: (r["paper_id"] or "", r["stage"], r["input_uri"] or "", r["message"]),
}


def to_table(config: str, rows: Iterable[dict]) -> pa.Table:
    return rows_table(rows, SCHEMAS[config])


def rows_table(rows: Iterable[dict], schema: pa.Schema) -> pa.Table:
    """``pa.Table.from_pylist(rows, schema=schema)``, the same table, converted as one
    struct array: ``from_pylist`` converts column by column, and setting up the conversion
    of each nested column cost more than the row itself (0.48 ms for no row of ``papers``,
    0.57 ms for a paper; 0.20 and 0.39 ms this way). Keys the schema does not name are left
    out, absent keys are null, as there."""
    table = pa.Table.from_struct_array(pa.array(list(rows), type=_row_type(schema)))
    return table.replace_schema_metadata(schema.metadata)


@functools.lru_cache(maxsize=16)
def _row_type(schema: pa.Schema) -> pa.StructType:
    return pa.struct(list(schema))
