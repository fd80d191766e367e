"""The expectation suites: one flat table per concern, each with its Great Expectations suite.

Great Expectations validates flat columns; the configs are nested (papers hold sections,
paragraphs, figures, subfigures, a graphical abstract). So each check first flattens what it
needs with DuckDB (``sql``) or reads file facts in Python (``quality/facts.py``), and the
suite then states the rule on plain columns. Every flat table has index columns naming the
row (an id, a mention span, a shard path) so failures come with example ids.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

import great_expectations.expectations as gxe

from sciga.quality.tokens import BALANCED_SKELETON, skeleton_sql
from sciga.schemas.arrow import CONFIGS
from sciga.schemas.ids import ARXIV_ID_RE, SECTION_ID_RE
from sciga.schemas.images import BY_DESIGN, IMAGE_STATUSES, ON_REQUEST, WITH_BYTES
from sciga.schemas.licences import admitted_kinds, licence_kind_sql
from sciga.schemas.records import FIGURE_ROW_KINDS, IMAGE_KINDS
from sciga.schemas.version import SCHEMA_VERSION
from sciga.transforms.common.sql_text import sql_string

STEM_ID = r"^[A-Za-z0-9](?:[A-Za-z0-9.\-]*[A-Za-z0-9])?$"  # schemas.ids.local_id_from_stem
SECTION_ID = SECTION_ID_RE.pattern.replace("(?P<paper>", "(?:").replace("(?P<local>", "(?:")


@dataclass
class FlatTable:
    name: str  # flat table (and suite) name
    config: str  # the config it is about ("build" for manifest/file facts)
    what: str  # one line for the report
    expectations: Callable[[dict], list]  # options -> GX expectations
    sql: Optional[str] = None  # DuckDB SELECT over the config views; None: built in Python
    # (group column, checked boolean column): failures are also counted per group
    breakdown: Optional[tuple] = None
    # columns naming a row in examples (building one "record" string per row costs time on
    # tables with millions of rows), and how to join them into one label
    index: tuple = ("record",)
    label: Optional[Callable[[dict], str]] = None
    # For a check that never spans papers: the table as SELECTs cut to the papers a predicate
    # on paper_id selects. The gate then computes it one range of papers at a time, so that
    # DuckDB holds one range's joins, never the whole build's (``sql`` stays the whole table).
    per_papers: Optional[Callable[[str], list[str]]] = None


def _d(exp, description: str):
    exp.description = description
    return exp


def _true(column: str, description: str):
    return _d(gxe.ExpectColumnValuesToBeInSet(column=column, value_set=[True]), description)


# ---------------------------------------------------------------------------------------
# Temp tables shared by several checks, built once per gate run: each config is scanned as
# few times as possible and long texts are kept only as their token skeletons (paragraph
# texts stay, for the span checks).
def _sk(col: str) -> str:
    return skeleton_sql(col)


# A (sub)caption that is nothing but its tag ("<TAG> (a) </TAG>") carries no text: the
# parser empties such captions, so one in a build means a stage wrote a label as a caption.
TAG_ONLY = r"coalesce(regexp_full_match({col}, '(?s)\s*<TAG>.*?</TAG>\s*'), false)"


# Every paragraph of every section, with its index in the section.
PARAGRAPHS = """SELECT paper_id, s.id AS section_id, unnest(s.paragraphs) AS para, unnest(range(len(s.paragraphs))) AS pi
    FROM (SELECT p.id AS paper_id, unnest(p.sections) AS s FROM papers p)"""


SETUP_SQL = [
    f"""CREATE OR REPLACE TEMP TABLE _pap AS
        SELECT id, provenance.input_uri AS input_uri, coalesce(provenance.id_source, '') AS id_source,
               length(trim(coalesce(title, ''))) AS title_chars,
               CASE WHEN withheld IS NULL THEN length(trim(coalesce(abstract, ''))) END AS abstract_chars,
               provenance.schema_version AS schema_version, {_sk("title")} AS title_sk, {_sk("abstract")} AS abstract_sk,
               {_sk("graphical_abstract.caption")} AS ga_sk, teaser, graphical_abstract.components AS ga_components
        FROM papers""",
    # Every figure and subfigure a paper defines.
    f"""CREATE OR REPLACE TEMP TABLE _fig AS
        WITH f AS (SELECT p.id AS paper_id, unnest(p.figures) AS f FROM papers p)
        SELECT f.id AS id, paper_id, 'figure' AS kind, CAST(NULL AS VARCHAR) AS parent_id, {_sk("f.caption")} AS caption_sk,
               false AS caption_tag_only FROM f
        UNION ALL
        SELECT s.id, paper_id, 'subfigure', fid, {_sk("s.caption")}, {TAG_ONLY.format(col="s.caption")} FROM
          (SELECT paper_id, f.id AS fid, unnest(f.subfigures) AS s FROM f)""",
    f"""CREATE OR REPLACE TEMP TABLE _tab AS
        SELECT t.id AS id, paper_id, {_sk("t.caption")} AS caption_sk
        FROM (SELECT p.id AS paper_id, unnest(p.tables) AS t FROM papers p)""",
    # Sections and paragraphs straight from the shards (measured faster than materializing
    # the unnested sections once and deriving both from that copy).
    f"""CREATE OR REPLACE TEMP TABLE _sec AS
        SELECT s.id AS id, paper_id, s.parent_id AS parent_id, {_sk("s.title")} AS title_sk, {_sk("s.body")} AS body_sk,
               s.figure_ids AS figure_ids FROM (SELECT p.id AS paper_id, unnest(p.sections) AS s FROM papers p)""",
    # Paragraph texts are most of a build's bytes and no check needs them whole: a span needs
    # its text's length and the piece at the span. Those are computed where the paragraph is
    # read, so no temp table or join holds paragraph text (which made DuckDB hold, or spill,
    # the corpus' full text). Ref spans: per paragraph, with the piece in each span.
    f"""CREATE OR REPLACE TEMP TABLE _para AS
        SELECT paper_id, section_id, pi, length(para.text) AS text_len,
               list_transform(para.ref_spans, lambda rs: struct_pack(start := rs.start, "end" := rs."end",
                   ref_id := rs.ref_id, text := rs.text,
                   piece := substring(para.text, rs.start + 1, rs."end" - rs.start))) AS ref_spans
        FROM ({PARAGRAPHS})""",
    # The mentions, in their order: a temp table's rowid numbers its rows in the order they
    # were inserted (the spans table lists them so). A window's row_number() would hold every
    # mention in memory at once, beyond DuckDB's limit on a large build.
    """CREATE OR REPLACE TEMP TABLE _men AS
        SELECT paper_id, section_id, context, context_id, paragraph_index,
               char_start, char_end, figure_id, surface FROM mentions""",
    # Per mention in a paragraph: its paragraph's length and the piece at its span, one row per
    # matching paragraph (a section id twice in a paper gives two). The paragraphs stream past
    # the mentions, which the hash join holds: DuckDB's planner guesses the unnested
    # paragraphs fewer than the mentions and would hold them, every paragraph's text, beyond
    # its limit on a large build (as joining the mentions to whole paper rows did). So the
    # join is planned as written here, the mentions its build side.
    "SET disabled_optimizers = 'join_order,build_side_probe_side'",
    f"""CREATE OR REPLACE TEMP TABLE _mention_texts AS
        SELECT m.rowid AS mention_row, length(pp.para.text) AS text_len,
               substring(pp.para.text, m.char_start + 1, m.char_end - m.char_start) AS piece
        FROM ({PARAGRAPHS}) pp
        JOIN (SELECT rowid, * FROM _men WHERE coalesce(context, 'paragraph') = 'paragraph' AND paragraph_index >= 0) m
          ON pp.paper_id = m.paper_id AND pp.section_id = m.section_id AND pp.pi = m.paragraph_index""",
    "RESET disabled_optimizers",
    # Texts other than paragraphs that can hold a mention (linking stage), those a mention points
    # at: section titles (keyed by section id) and captions of figures, subfigures and tables
    # (keyed by id).
    """CREATE OR REPLACE TEMP TABLE _ctx AS
       SELECT * FROM (
       WITH f AS (SELECT p.id AS paper_id, unnest(p.figures) AS f FROM papers p)
       SELECT paper_id, 'title' AS context, s.id AS key, s.title AS text
         FROM (SELECT p.id AS paper_id, unnest(p.sections) AS s FROM papers p)
       UNION ALL SELECT paper_id, 'caption', f.id, f.caption FROM f
       UNION ALL SELECT paper_id, 'caption', s.id, s.caption FROM (SELECT paper_id, unnest(f.subfigures) AS s FROM f)
       UNION ALL SELECT paper_id, 'caption', t.id, t.caption FROM (SELECT p.id AS paper_id, unnest(p.tables) AS t FROM papers p)) c
       WHERE EXISTS (SELECT 1 FROM _men m WHERE m.context = c.context AND m.paper_id = c.paper_id
                     AND CASE WHEN m.context = 'title' THEN m.section_id ELSE m.context_id END = c.key)""",
    # The graphical abstracts that have a row of their own in the figures config: those given
    # by --ga-manifest (a de-facto GA is one of the paper's figures; one with an error stands
    # in for a manifest GA whose image could not be read, and that GA has its row).
    """CREATE OR REPLACE TEMP TABLE _ga AS
       SELECT graphical_abstract.id AS id, id AS paper_id FROM papers
       WHERE graphical_abstract IS NOT NULL
         AND (NOT coalesce(graphical_abstract.de_facto, false) OR graphical_abstract.error IS NOT NULL)""",
    # The figures config, without image bytes.
    f"""CREATE OR REPLACE TEMP TABLE _figrows AS
        SELECT id, paper_id, parent_id, kind, image_kind, {_sk("caption")} AS caption_sk, {_sk("subcaption")} AS subcaption_sk,
               coalesce(octet_length(image.bytes) > 0, false) AS has_image, {TAG_ONLY.format(col="subcaption")} AS subcaption_tag_only,
               image IS NOT NULL AS image_not_null, image_status
        FROM figures""",
]


def _sql_set(values) -> str:
    return "(" + ", ".join("'" + v + "'" for v in sorted(values)) + ")"


# One row: how many figures rows should have an image (not figures made of panels), how many
# have none, and why (counts per image_status). Images left out with --no-images were found:
# they count among the rows, not among the missing.
MISSING_IMAGES_SQL = f"""
    WITH counted AS (SELECT image_status, has_image OR coalesce(image_status, '') IN {_sql_set(ON_REQUEST)} AS has_image
                     FROM _figrows WHERE coalesce(image_status, '') NOT IN {_sql_set(BY_DESIGN)}),
         totals AS (SELECT count(*) AS expected, count(*) FILTER (WHERE NOT has_image) AS missing FROM counted),
         reasons AS (SELECT string_agg(s || ' ' || n, ', ' ORDER BY n DESC, s) AS why FROM
                       (SELECT coalesce(image_status, 'NULL') AS s, count(*) AS n FROM counted WHERE NOT has_image GROUP BY ALL))
    SELECT 'figures without an image: ' || missing || ' of ' || expected || coalesce(' (' || why || ')', '') AS record,
           expected, missing, CASE WHEN expected = 0 THEN 0.0 ELSE missing / expected END AS missing_rate
    FROM totals, reasons"""


# Names of rows in failure examples. A name is never NULL: a row that lacks the field that
# names it (a paper without an id) is named by what it still has, so "e.g." always shows
# which row failed.
MENTION_NAME = (
    "coalesce(paper_id, '?') || ':' || coalesce(section_id, '?') || "
    "CASE WHEN coalesce(context, 'paragraph') = 'paragraph' THEN '#p' || coalesce(CAST(paragraph_index AS VARCHAR), '?') "
    "ELSE ' ' || context || ' ' || coalesce(context_id, section_id, '?') END"
)


def _name(id_col: str, paper_col: str, what: str) -> str:
    return f"coalesce({id_col}, '(' || '{what} without an id, in paper ' || coalesce({paper_col}, '?') || ')')"


def _ref_sql(relation: str, source: str, universe: str, papers: str = "true") -> str:
    """One relation's references: each row one (referrer, target) pair; ``resolved`` is the
    target found in ``universe`` within the same paper, NULL when dangling. ``papers``: a
    predicate on ``paper_id`` that both sides are cut to (a reference never leaves its paper,
    so the union over a partition of the papers is the whole relation)."""
    return f"""
        SELECT '{relation}' AS relation, r.referrer, r.target, u.id IS NOT NULL AS resolved
        FROM (SELECT * FROM ({source}) WHERE {papers}) r
        LEFT JOIN (SELECT * FROM ({universe}) WHERE {papers}) u ON u.id = r.target AND u.paper_id = r.paper_id"""


# The figures config and the figures/subfigures papers define (plus each paper's manifest
# GA) must be the same set, with the same parents: one full outer join instead of three
# one-way relations.
FIGURE_ROWS_SQL = """
    SELECT CASE WHEN r.id IS NULL THEN 'papers.figures (has no row in the figures config)'
                WHEN f.id IS NULL THEN 'figures.id (not a figure of its paper)'
                WHEN r.parent_id IS DISTINCT FROM f.parent_id THEN 'figures.parent_id (not the parent papers.figures gives)'
                ELSE 'figures <-> papers.figures' END AS relation,
           coalesce(r.paper_id, f.paper_id) AS referrer, coalesce(r.id, f.id) AS target,
           r.id IS NOT NULL AND f.id IS NOT NULL AND r.parent_id IS NOT DISTINCT FROM f.parent_id AS resolved
    FROM (SELECT id, paper_id, parent_id FROM _figrows WHERE {papers}) r
    FULL OUTER JOIN (SELECT * FROM (SELECT id, paper_id, parent_id FROM _fig
                                    UNION ALL SELECT id, paper_id, NULL FROM _ga) WHERE {papers}) f
      ON f.id = r.id AND f.paper_id = r.paper_id"""


def papers_between(low: str, high: Optional[str]) -> str:
    """The predicate on ``paper_id`` for the papers whose id is in [low, high) (no upper
    bound when ``high`` is None). A row without a paper id counts as id '': the first range
    (low '') holds it."""
    key = "coalesce(paper_id, '')"
    return f"{key} >= {sql_string(low)}" + (f" AND {key} < {sql_string(high)}" if high is not None else "")


def references_parts(papers: str = "true") -> list[str]:
    """The references flat table as its relations' SELECTs, whose UNION ALL in this order is
    the table; each is cut to the papers the predicate ``papers`` selects."""
    return [_ref_sql(*r, papers=papers) for r in REFERENCES] + [FIGURE_ROWS_SQL.format(papers=papers)]


def references_sql() -> str:
    return "\nUNION ALL ".join(references_parts())


FIGS = "SELECT id, paper_id FROM _fig"
FIGS_AND_TABLES = "SELECT id, paper_id FROM _fig UNION ALL SELECT id, paper_id FROM _tab"

SECTIONS = "SELECT id, paper_id FROM _sec"

# (relation, referrer rows with paper_id/referrer/target, universe)
REFERENCES = [
    ("sections.figure_ids", "SELECT paper_id, id AS referrer, unnest(figure_ids) AS target FROM _sec", FIGS),
    ("mentions.figure_id", f"SELECT paper_id, {MENTION_NAME} AS referrer, figure_id AS target FROM mentions", FIGS),
    ("papers.teaser", "SELECT id AS paper_id, id AS referrer, unnest(teaser) AS target FROM _pap", FIGS),
    (
        "graphical_abstract.components",
        "SELECT id AS paper_id, id AS referrer, unnest(ga_components) AS target FROM _pap WHERE ga_components IS NOT NULL",
        FIGS,
    ),
    (
        "paragraphs.ref_spans",
        "SELECT paper_id, section_id || '#p' || pi AS referrer, rs.ref_id AS target FROM "
        "(SELECT paper_id, section_id, pi, unnest(ref_spans) AS rs FROM _para)",
        FIGS_AND_TABLES,
    ),
    (
        "sections.parent_id",
        "SELECT paper_id, id AS referrer, parent_id AS target FROM _sec WHERE parent_id IS NOT NULL",
        SECTIONS,
    ),
]
# figures.paper_id and mentions.paper_id need no relation of their own: the figure id must
# resolve *within the same paper*, which only a paper in the papers config can provide.


def _texts_sql() -> str:
    """Every text field that may carry tokens, as (record, skeleton), skipping token-free
    texts (an empty skeleton is trivially balanced). Skeletons come from the temp tables."""
    parts = [
        ("papers.title", "id", "title_sk", "_pap"),
        ("papers.abstract", "id", "abstract_sk", "_pap"),
        ("graphical_abstract.caption", "id", "ga_sk", "_pap"),
        ("sections.title", "id", "title_sk", "_sec"),
        ("sections.body", "id", "body_sk", "_sec"),
        ("papers.figures[.subfigures].caption", "id", "caption_sk", "_fig"),
        ("papers.tables.caption", "id", "caption_sk", "_tab"),
        ("figures.caption", "id", "caption_sk", "_figrows"),
        ("figures.subcaption", "id", "subcaption_sk", "_figrows"),
        (
            "mentions.sentence",
            MENTION_NAME + " || '[' || char_start || ':' || char_end || ']'",
            _sk("sentence"),
            "mentions",
        ),
        ("dead_letter.message", "coalesce(paper_id, input_uri)", _sk("message"), "dead_letter"),
    ]
    selects = [
        f"SELECT '{field}: ' || coalesce(CAST({rid} AS VARCHAR), '?') AS record, sk AS skeleton "
        f"FROM (SELECT *, {col} AS sk FROM {src}) WHERE sk <> ''"
        for field, rid, col, src in parts
    ]
    return "\nUNION ALL ".join(selects)


SPANS_SQL = """
    SELECT * FROM (
    SELECT 'mentions' AS source,
           m.paper_id || ':' || coalesce(m.section_id, '?') || CASE WHEN coalesce(m.context, 'paragraph') = 'paragraph'
             THEN '' ELSE ' ' || m.context || ' ' || coalesce(m.context_id, m.section_id, '?') END AS section,
           m.paragraph_index AS paragraph,
           m.char_start AS span_start, m.char_end AS span_end, m.figure_id AS target,
           t.text_len IS NOT NULL AS paragraph_found,
           coalesce(m.char_start >= 0 AND m.char_end > m.char_start AND m.char_end <= t.text_len, false) AS span_inside,
           m.surface AS surface,
           t.piece AS paragraph_text
    FROM _men m
    LEFT JOIN _mention_texts pa ON pa.mention_row = m.rowid
    LEFT JOIN _ctx c
      ON m.context IN ('title', 'caption') AND c.paper_id = m.paper_id AND c.context = m.context
     AND c.key = CASE WHEN m.context = 'title' THEN m.section_id ELSE m.context_id END
    CROSS JOIN LATERAL (SELECT coalesce(pa.text_len, length(c.text)) AS text_len,
                               coalesce(pa.piece, substring(c.text, m.char_start + 1, m.char_end - m.char_start)) AS piece) t
    ORDER BY m.rowid)
    UNION ALL
    SELECT 'paragraphs.ref_spans', section_id, pi, rs.start, rs."end", rs.ref_id,
           true,
           coalesce(rs.start >= 0 AND rs."end" > rs.start AND rs."end" <= text_len, false),
           rs.text,
           rs.piece
    FROM (SELECT section_id, pi, text_len, unnest(ref_spans) AS rs FROM _para)"""


def _papers(o):
    return [
        _d(gxe.ExpectColumnValuesToNotBeNull(column="id"), "every paper has an id"),
        _d(gxe.ExpectColumnValuesToBeUnique(column="id"), "paper ids are unique"),
        _d(
            gxe.ExpectColumnValuesToMatchRegex(
                column="id", regex=ARXIV_ID_RE.pattern, row_condition='id_source != "stem"', condition_parser="pandas"
            ),
            "paper ids are arXiv ids (2401.13641, astro-ph/0601001) unless taken from a file stem",
        ),
        _d(
            gxe.ExpectColumnValuesToMatchRegex(
                column="id", regex=STEM_ID, row_condition='id_source == "stem"', condition_parser="pandas"
            ),
            "local stem ids use only letters, digits, '.' and '-'",
        ),
        _d(gxe.ExpectColumnValuesToBeBetween(column="title_chars", min_value=1), "every paper has a non-empty title"),
        _d(
            gxe.ExpectColumnValuesToBeBetween(column="abstract_chars", min_value=1),
            "every paper has a non-empty abstract (a paper withheld for its licence has none)",
        ),
        _d(
            gxe.ExpectColumnValuesToBeInSet(column="schema_version", value_set=[SCHEMA_VERSION]),
            f"provenance.schema_version is {SCHEMA_VERSION}",
        ),
    ]


def _paper_figures(o):
    return [
        _d(gxe.ExpectColumnValuesToNotBeNull(column="id"), "every figure and subfigure has an id"),
        _d(gxe.ExpectColumnValuesToBeUnique(column="id"), "figure and subfigure ids are unique"),
        _d(
            gxe.ExpectColumnPairValuesToBeEqual(column_A="id_paper", column_B="paper_id"),
            "figure ids are <paper id>_F<n> (subfigures <paper id>_F<n>.<m>)",
        ),
        _d(
            gxe.ExpectColumnPairValuesToBeEqual(
                column_A="id_parent", column_B="parent_id", ignore_row_if="both_values_are_missing"
            ),
            "subfigure ids extend their parent figure's id",
        ),
        _true(
            "caption_has_text",
            "a subfigure caption is never only its tag (<TAG> (a) </TAG> alone); no text is an empty caption",
        ),
    ]


def _sections(o):
    return [
        _d(gxe.ExpectColumnValuesToBeUnique(column="id"), "section ids are unique"),
        _d(
            gxe.ExpectColumnValuesToMatchRegex(column="id", regex=SECTION_ID),
            "section ids are <paper id>_S<n>[.<m>...]",
        ),
        _d(
            gxe.ExpectColumnPairValuesToBeEqual(column_A="id_paper", column_B="paper_id"),
            "section ids start with their paper's id",
        ),
    ]


def _figures(o):
    return [
        _d(gxe.ExpectColumnValuesToNotBeNull(column="id"), "every figures row has an id"),
        _d(gxe.ExpectColumnValuesToBeUnique(column="id"), "figures rows have unique ids"),
        _d(
            gxe.ExpectColumnPairValuesToBeEqual(column_A="id_paper", column_B="paper_id"),
            "figures ids are <paper id>_F<n>[.<m>] of the row's paper (a graphical_abstract row: <paper id>_GA)",
        ),
        _d(
            gxe.ExpectColumnValuesToBeInSet(column="kind", value_set=list(FIGURE_ROW_KINDS)),
            "kind is " + ", ".join(FIGURE_ROW_KINDS[:-1]) + " or " + FIGURE_ROW_KINDS[-1],
        ),
        _true("parent_consistent", "subfigures (and only they) have a parent_id"),
        _true(
            "subcaption_has_text",
            "a subcaption is never only its tag (<TAG> (a) </TAG> alone); no text is a NULL subcaption",
        ),
        _d(
            gxe.ExpectColumnValuesToBeInSet(column="image_kind", value_set=list(IMAGE_KINDS)),
            f"image_kind is one of {', '.join(IMAGE_KINDS)}",
        ),
        _d(
            gxe.ExpectColumnValuesToBeInSet(column="image_status", value_set=list(IMAGE_STATUSES)),
            "image_status is one of the closed set in schemas/images.py (never NULL)",
        ),
        _true(
            "image_matches_status",
            "image holds bytes exactly when image_status is 'embedded' or 'rasterized_svg', and is NULL otherwise "
            "(a path without bytes makes `datasets` open a file from the reader's folder)",
        ),
    ]


def _missing_images(o):
    r = o["max_missing_image_rate"]
    return [
        _d(
            gxe.ExpectColumnValuesToBeBetween(column="missing_rate", min_value=0, max_value=r),
            f"figures without an image are at most {r:.0%} of the figures rows that should have one "
            "(--max-missing-image-rate; figures made of panels do not count, images left out with --no-images are not missing): "
            "each page's images must sit where its img src points, relative to the page",
        )
    ]


def _mentions(o):
    return [
        _d(gxe.ExpectColumnValuesToBeUnique(column="record"), "no mention is listed twice"),
        _d(gxe.ExpectColumnValuesToNotBeNull(column="surface"), "every mention has its surface text"),
    ]


def _spans(o):
    return [
        _true(
            "paragraph_found",
            "every mention points at an existing text: a paragraph (section id + index), a section title or a caption",
        ),
        _true("span_inside", "mention spans lie inside their text (0 <= start < end <= length)"),
        _d(
            gxe.ExpectColumnPairValuesToBeEqual(
                column_A="surface", column_B="paragraph_text", ignore_row_if="either_value_is_missing"
            ),
            "the mention's surface text equals the paragraph's text at its span",
        ),
    ]


def _texts(o):
    return [
        _d(
            gxe.ExpectColumnValuesToMatchRegex(column="skeleton", regex=BALANCED_SKELETON),
            "<MATH>, <NOTE>, <TAG> open and close in pairs; only MATH nests, inside NOTE "
            "(skeleton letters: m/M MATH, n/N NOTE, t/T TAG)",
        ),
    ]


def _dead_letter(o):
    return [
        _d(gxe.ExpectColumnValuesToNotBeNull(column="stage"), "every dead letter names its stage"),
        _d(gxe.ExpectColumnValuesToNotBeNull(column="error_type"), "every dead letter names its error type"),
        _d(
            gxe.ExpectColumnValuesToBeBetween(column="message_chars", min_value=1),
            "every dead letter says what went wrong",
        ),
    ]


def _references(o):
    return [
        _true(
            "resolved",
            "every referenced id exists in the same paper ("
            + "; ".join(r[0] for r in REFERENCES)
            + "; figures rows = papers.figures and subfigures, same parents)",
        )
    ]


def _shards(o):
    return [
        _true("on_disk", "every shard listed in manifest.json exists"),
        _true("listed", "every shard on disk is listed in manifest.json"),
        _true("name_ok", "shards follow data/<config>/<split>-NNNNN-of-MMMMM.parquet"),
        _true("readable", "every shard is a readable Parquet file"),
        _d(
            gxe.ExpectColumnValuesToBeInSet(column="schema_version", value_set=[SCHEMA_VERSION]),
            f"each shard's Arrow metadata says sciga.schema_version = {SCHEMA_VERSION}",
        ),
        _d(
            gxe.ExpectColumnPairValuesToBeEqual(column_A="config_meta", column_B="config"),
            "each shard's Arrow metadata names the config of its folder",
        ),
        _true("schema_matches", "each shard has exactly the config's Arrow schema (names, types, nesting)"),
        _true("sha256_matches", "each shard's sha256 equals the one in manifest.json"),
        _true("rows_match", "each shard's row count equals the one in manifest.json"),
    ]


def _counts(o):
    return [
        _d(
            gxe.ExpectColumnPairValuesToBeEqual(column_A="manifest", column_B="actual", ignore_row_if="neither"),
            "manifest.json counts equal the rows in the shards",
        )
    ]


def _build(o):
    r = o["max_dead_letter_rate"]
    return [
        _d(
            gxe.ExpectColumnValuesToBeInSet(column="schema_version", value_set=[SCHEMA_VERSION]),
            f"manifest.json says schema_version {SCHEMA_VERSION}",
        ),
        _d(
            gxe.ExpectColumnValuesToBeBetween(column="dead_letter_rate", min_value=0, max_value=r),
            f"dead-letter rate (dead letters / inputs) is at most {r:g}",
        ),
    ]


def _images(o):
    return [
        _d(
            gxe.ExpectColumnValuesToBeNull(column="decode_error"),
            f"embedded image bytes decode ({o['image_check']}, pixel limit {o['max_pixels']:,})",
        ),
        _d(
            gxe.ExpectColumnPairValuesToBeEqual(
                column_A="decoded_width", column_B="width", ignore_row_if="either_value_is_missing"
            ),
            "decoded image width equals the recorded width",
        ),
        _d(
            gxe.ExpectColumnPairValuesToBeEqual(
                column_A="decoded_height", column_B="height", ignore_row_if="either_value_is_missing"
            ),
            "decoded image height equals the recorded height",
        ),
    ]


# One row per paper: its licence's kind, whether the policy withheld it, and whether any of
# its content is in the shards (for a withheld paper there must be none).
LICENCES_SQL = f"""
    WITH fig AS (SELECT paper_id, count(*) AS n FROM figures GROUP BY ALL),
         men AS (SELECT paper_id, count(*) AS n FROM mentions GROUP BY ALL)
    SELECT p.id || ' (' || coalesce(p.license, 'no licence') || ')' AS record,
           {licence_kind_sql("p.license")} AS licence_kind, p.withheld IS NOT NULL AS withheld,
           p.withheld IS NULL OR (p.abstract IS NULL AND len(coalesce(p.sections, [])) = 0
             AND len(coalesce(p.figures, [])) = 0 AND len(coalesce(p.tables, [])) = 0
             AND len(coalesce(p.teaser, [])) = 0 AND p.graphical_abstract IS NULL
             AND fig.n IS NULL AND men.n IS NULL) AS content_absent
    FROM papers p LEFT JOIN fig ON fig.paper_id = p.id LEFT JOIN men ON men.paper_id = p.id"""


def _licences(o):
    policy = o.get("licences") or "all"
    return [
        _true(
            "content_absent",
            "a paper withheld for its licence has no text, figures, figures rows, images or mentions in the shards",
        ),
        _d(
            gxe.ExpectColumnValuesToBeInSet(
                column="licence_kind",
                value_set=admitted_kinds(policy),
                row_condition="withheld == False",
                condition_parser="pandas",
            ),
            f"every paper written in full has a licence the build's policy ({policy}) lets in",
        ),
    ]


def _missing(v) -> bool:
    return v is None or str(v) in ("<NA>", "nan", "NaN")  # None, NaN, pandas NA


def _span_label(r: dict) -> str:
    """'mentions: P:S#p2[10:18] -> F3'; no '#p' for captions and titles (no paragraph)."""
    para = "" if _missing(r.get("paragraph")) else f"#p{r.get('paragraph')}"
    return (
        f"{r.get('source')}: {r.get('section')}{para}[{r.get('span_start')}:{r.get('span_end')}] -> {r.get('target')}"
    )


def flat_tables() -> list[FlatTable]:
    tables = [
        FlatTable(
            "shards",
            "build",
            "shard files: presence, names, schema version, Arrow schema, sha256 and rows vs manifest",
            _shards,
        ),
        FlatTable("manifest_counts", "build", "manifest.json counts vs rows in the shards", _counts),
        FlatTable("build", "build", "build-level facts: schema version, dead-letter rate", _build),
        FlatTable(
            "papers",
            "papers",
            "one row per paper: id format and uniqueness, title/abstract, schema version",
            _papers,
            sql="""SELECT coalesce(id, '(paper without an id: ' || coalesce(input_uri, 'input unknown') || ')') AS record,
                                id, id_source, title_chars, abstract_chars, schema_version
                         FROM _pap""",
        ),
        FlatTable(
            "paper_figures",
            "papers",
            "papers.figures and their subfigures, unnested",
            _paper_figures,
            sql=r"""SELECT """
            + _name("id", "paper_id", "figure")
            + r""" AS record, id, paper_id, parent_id,
                                 CASE WHEN kind = 'figure' THEN regexp_extract(id, '^(.+)_F\d+$', 1)
                                      ELSE regexp_extract(id, '^(.+)_F\d+\.\d+$', 1) END AS id_paper,
                                 CASE WHEN kind = 'subfigure' THEN regexp_extract(id, '^(.+_F\d+)\.\d+$', 1) END AS id_parent,
                                 NOT caption_tag_only AS caption_has_text
                          FROM _fig""",
        ),
        FlatTable(
            "sections",
            "papers",
            "papers.sections, unnested",
            _sections,
            sql=r"""SELECT """
            + _name("id", "paper_id", "section")
            + r""" AS record, id, paper_id,
                                 regexp_extract(id, '^(.+)_(?:Pt\d+\.)?(?:S|A|Sx|Ch|P)[\w.]*$', 1) AS id_paper FROM _sec""",
        ),
        FlatTable(
            "figures",
            "figures",
            "one row per figure or subfigure image, and one per manifest graphical abstract",
            _figures,
            sql=r"""SELECT """
            + _name("id", "paper_id", "figures row")
            + r""" AS record, id, paper_id, parent_id, kind, image_kind,
                                 CASE WHEN kind = 'graphical_abstract' THEN regexp_extract(id, '^(.+)_GA$', 1)
                                      ELSE regexp_extract(id, '^(.+)_F\d+(?:\.\d+)?$', 1) END AS id_paper,
                                 coalesce((kind = 'subfigure') = (parent_id IS NOT NULL), false) AS parent_consistent,
                                 NOT subcaption_tag_only AS subcaption_has_text, coalesce(image_status, 'NULL') AS image_status,
                                 (has_image AND image_not_null) = (coalesce(image_status, '') IN """
            + _sql_set(WITH_BYTES)
            + r""")
                                   AND image_not_null = has_image AS image_matches_status
                          FROM _figrows""",
        ),
        FlatTable(
            "missing_images",
            "figures",
            "figures rows without an image, against the rows that should have one",
            _missing_images,
            sql=MISSING_IMAGES_SQL,
        ),
        FlatTable("images", "figures", "embedded image bytes, decoded with a pixel limit", _images),
        FlatTable(
            "mentions",
            "mentions",
            "one row per inline figure reference",
            _mentions,
            sql=f"""SELECT {MENTION_NAME} || '[' || coalesce(CAST(char_start AS VARCHAR), '?') || ':'
                                || coalesce(CAST(char_end AS VARCHAR), '?') || '] -> ' || coalesce(figure_id, '?') AS record,
                                surface FROM mentions""",
        ),
        FlatTable(
            "spans",
            "mentions",
            "mention and ref-span offsets checked against their paragraph's text",
            _spans,
            sql=SPANS_SQL,
            index=("source", "section", "paragraph", "span_start", "span_end", "target"),
            label=_span_label,
        ),
        FlatTable(
            "texts",
            "papers+figures+mentions",
            "token skeletons of every text field that holds a token",
            _texts,
            sql=_texts_sql(),
        ),
        FlatTable(
            "dead_letter",
            "dead_letter",
            "one row per failed input",
            _dead_letter,
            sql="""SELECT coalesce(paper_id, input_uri, '?') || ' @ ' || coalesce(stage, '?') AS record, stage, error_type,
                                length(trim(coalesce(message, ''))) AS message_chars FROM dead_letter""",
        ),
    ]
    tables.append(
        FlatTable(
            "licences",
            "papers+figures+mentions",
            "the licence policy: withheld papers have no content, the others a licence it lets in",
            _licences,
            sql=LICENCES_SQL,
        )
    )
    tables.append(
        FlatTable(
            "references",
            "papers+figures+mentions",
            "every id one record gives for another (figure, table, section, paper), one row per reference",
            _references,
            sql=references_sql(),
            per_papers=references_parts,
            breakdown=("relation", "resolved"),
            index=("relation", "referrer", "target"),
            label=lambda r: f"{r.get('relation')}: {r.get('referrer') or '?'} -> {r.get('target') or 'NULL'}",
        )
    )
    assert {t.config for t in tables} >= set(CONFIGS)
    return tables


def expectation_count(options: Optional[dict] = None) -> int:
    """How many expectations the gate checks (the docs quote this number; it comes from here)."""
    from sciga.quality.defaults import DEFAULT_MAX_DEAD_LETTER_RATE, DEFAULT_MAX_MISSING_IMAGE_RATE
    from sciga.transforms.vision.defaults import DEFAULT_MAX_PIXELS

    o = {
        "max_dead_letter_rate": DEFAULT_MAX_DEAD_LETTER_RATE,
        "max_missing_image_rate": DEFAULT_MAX_MISSING_IMAGE_RATE,
        "image_check": "decode",
        "max_pixels": DEFAULT_MAX_PIXELS,
        **(options or {}),
    }
    return sum(len(t.expectations(o)) for t in flat_tables())
