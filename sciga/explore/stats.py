"""`sciga stats OUT`: the statistics of SciGA's Appendix B (Figure 7) for a build.

Per top-level arXiv category and overall (micro-average over papers, or over figures for
captions): token lengths of titles, abstracts, full texts and captions; figures, subfigures
and figures including subfigures per paper; and the distribution of graphical-abstract types.
Written as Markdown and CSV tables and PNG plots (matplotlib, Agg backend).

How tokens are counted: whitespace-separated tokens of the text exactly as stored, SciGA's
special tokens included verbatim: ``<TAG> Figure 2: </TAG> A cat`` is 6 tokens
(``<TAG>``, ``Figure``, ``2:``, ``</TAG>``, ``A``, ``cat``) and the alttext inside
``<MATH> ... </MATH>`` counts word by word. Full text is the bodies of all sections (section
titles excluded). No subword tokenizer is involved, so the numbers are reproducible anywhere.

The category of a paper is its ``primary_category``, else its first arXiv subject, else the
archive of an old-style id (``q-bio/0601999`` -> ``q-bio``); ``--level group`` maps archives to
arXiv's eight top-level groups (``astro-ph``, ``hep-th``... -> ``physics``), ``--level archive``
keeps the part before the dot (``cs.CV`` -> ``cs``, ``astro-ph.GA`` -> ``astro-ph``).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:  # pandas is imported where it is used: the CLI parser imports this module
    import pandas as pd


TOKEN_RULE = (
    "whitespace-separated tokens of the stored text; <MATH>, </MATH>, <NOTE>, </NOTE>, <TAG>, </TAG> "
    "count as one token each and math alttext counts word by word; full text = all section bodies"
)

# arXiv archives (current and retired) -> the eight top-level groups of arxiv.org/category_taxonomy.
PHYSICS = (
    "astro-ph",
    "cond-mat",
    "gr-qc",
    "hep-ex",
    "hep-lat",
    "hep-ph",
    "hep-th",
    "math-ph",
    "nlin",
    "nucl-ex",
    "nucl-th",
    "physics",
    "quant-ph",
    "chao-dyn",
    "solv-int",
    "patt-sol",
    "adap-org",
    "comp-gas",
    "mtrl-th",
    "supr-con",
    "acc-phys",
    "ao-sci",
    "atom-ph",
    "bayes-an",
    "chem-ph",
    "plasm-ph",
)
RETIRED = {"q-alg": "math", "alg-geom": "math", "dg-ga": "math", "funct-an": "math", "cmp-lg": "cs"}
GROUPS = ("cs", "econ", "eess", "math", "physics", "q-bio", "q-fin", "stat")
OVERALL = "all (micro)"

PAPER_METRICS = [
    ("title_tokens", "tokens per title"),
    ("abstract_tokens", "tokens per abstract"),
    ("fulltext_tokens", "tokens per full text"),
    ("figures", "figures per paper"),
    ("subfigures", "subfigures per paper"),
    ("figures_incl_subfigures", "figures per paper incl. subfigures"),
]
CAPTION_METRIC = ("caption_tokens", "tokens per figure caption")


def _setup_sql(level: str, paper_rows: Optional[str] = None) -> list[str]:
    physics = ", ".join(f"'{a}'" for a in PHYSICS)
    retired = " ".join(f"WHEN a = '{k}' THEN '{v}'" for k, v in RETIRED.items())
    group = f"CASE WHEN a IS NULL OR a = '' THEN 'unknown' WHEN a IN ({physics}) THEN 'physics' {retired} ELSE a END"
    return [
        # Any text: each token with the whitespace around it becomes one 'x' (a text of only
        # whitespace keeps its whitespace, removed by the outer, cheap replace); the count
        # equals len(text.split()) for ASCII whitespace.
        r"CREATE OR REPLACE TEMP MACRO sciga_ntok_any(s) AS "
        r"coalesce(length(regexp_replace(regexp_replace(s, '\s*\S+\s*', 'x', 'g'), '\s+', '', 'g')), 0)",
        # A normalized text (what the parser writes: single spaces, none at either end, no tab,
        # CR or LF) has one token more than it has spaces; counting spaces is a plain string
        # operation, ~5x faster than the regular expressions. Replacing whitespace with
        # whitespace never changes a count, so the blank line between a section's paragraphs
        # becomes a space first. Anything else takes the general macro.
        "CREATE OR REPLACE TEMP MACRO sciga_ntok_normalized(t) AS "
        "CASE WHEN t IS NULL OR t = '' THEN 0 "
        "WHEN NOT (contains(t, '  ') OR contains(t, chr(10)) OR contains(t, chr(9)) OR contains(t, chr(13)) "
        "OR contains(t, chr(12)) OR starts_with(t, ' ') OR ends_with(t, ' ')) "
        "THEN length(t) - length(replace(t, ' ', '')) + 1 "
        "ELSE sciga_ntok_any(t) END",
        "CREATE OR REPLACE TEMP MACRO sciga_ntok(s) AS sciga_ntok_normalized(replace(s, chr(10) || chr(10), ' '))",
        f"CREATE OR REPLACE TEMP MACRO sciga_group(a) AS {group}",
        "CREATE OR REPLACE TEMP MACRO sciga_archive(a) AS CASE WHEN a IS NULL OR a = '' THEN 'unknown' ELSE a END",
        f"""CREATE OR REPLACE TEMP TABLE paper_stats AS
            SELECT * EXCLUDE (archive),
                   sciga_{"group" if level == "group" else "archive"}(archive) AS category
            FROM ({paper_rows or PAPER_ROWS_SQL.format(papers="papers")})""",
    ]


# One row per paper: what the statistics need, small (no text). Computed from a papers
# relation; the dataset card keeps it per shard (``explore/card_stats.py``) so that a build
# that rewrote a few shards counts the tokens of those only.
PAPER_ROWS_SQL = """SELECT id,
       split_part(coalesce(primary_category, subjects.arxiv[1],
           CASE WHEN id LIKE '%/%' THEN split_part(id, '/', 1) END), '.', 1) AS archive,
       sciga_ntok(title) AS title_tokens,
       sciga_ntok(abstract) AS abstract_tokens,
       coalesce(list_sum(list_transform(sections, lambda s: sciga_ntok(s.body))), 0) AS fulltext_tokens,
       len(figures) AS figures,
       coalesce(list_sum(list_transform(figures, lambda f: len(f.subfigures))), 0) AS subfigures,
       len(figures) + coalesce(list_sum(list_transform(figures, lambda f: len(f.subfigures))), 0)
           AS figures_incl_subfigures,
       list_transform(figures, lambda f: sciga_ntok(f.caption)) AS caption_token_list,
       graphical_abstract.type AS ga_type, graphical_abstract IS NOT NULL AS has_ga,
       coalesce(graphical_abstract.de_facto, false) AS ga_de_facto
FROM {papers}"""


def macros_sql() -> list[str]:
    """The token-counting macros ``PAPER_ROWS_SQL`` uses."""
    return _setup_sql("group")[:-1]


def _describe(value: str, unit_sql: str) -> str:
    return f"""count(*) AS n, avg({value}) AS mean, stddev_samp({value}) AS std, min({value}) AS min,
               median({value}) AS median, max({value}) AS max"""


def stats_queries() -> dict[str, str]:
    """name -> SQL (after the setup statements); the benchmark times each one."""
    paper_parts = []
    for metric, label in PAPER_METRICS:
        d = _describe(metric, "paper")
        paper_parts.append(
            f"SELECT '{metric}' AS metric, '{label}' AS label, category, {d} FROM paper_stats GROUP BY category"
        )
        paper_parts.append(f"SELECT '{metric}', '{label}', '{OVERALL}', {d} FROM paper_stats")
    metric, label = CAPTION_METRIC
    captions = "(SELECT category, unnest(caption_token_list) AS caption_tokens FROM paper_stats)"
    d = _describe("caption_tokens", "figure")
    return {
        "per_category": "\nUNION ALL ".join(paper_parts),
        "captions": f"""SELECT '{metric}' AS metric, '{label}' AS label, category, {d} FROM {captions} GROUP BY category
                        UNION ALL
                        SELECT '{metric}', '{label}', '{OVERALL}', {d} FROM {captions}""",
        "ga_types": """SELECT coalesce(ga_type, CASE WHEN has_ga THEN 'untyped' ELSE 'no GA' END) AS ga_type,
                              count(*) AS papers, count(*) FILTER (WHERE ga_de_facto) AS de_facto
                       FROM paper_stats GROUP BY ALL""",
        "ga_types_by_category": """SELECT category, coalesce(ga_type, CASE WHEN has_ga THEN 'untyped' ELSE 'no GA' END) AS ga_type,
                                          count(*) AS papers
                                   FROM paper_stats GROUP BY ALL""",
    }


# The box plots: quartiles as the box, the 5th and 95th percentiles as the whiskers (counts
# are never negative, unlike mean - std, and a few long papers do not stretch the axis).
WHISKERS = (0.05, 0.95)


def distribution_query() -> str:
    """Per metric and category (and overall): n, whiskers, quartiles, median, from DuckDB's
    quantiles (values that occur: counts stay whole numbers), so the plots need no per-paper
    values in memory."""
    lo, hi = WHISKERS

    def q(value: str) -> str:
        return (
            f"count({value}) AS n, quantile_disc({value}, {lo}) AS whislo, quantile_disc({value}, 0.25) AS q1, "
            f"quantile_disc({value}, 0.5) AS med, quantile_disc({value}, 0.75) AS q3, "
            f"quantile_disc({value}, {hi}) AS whishi"
        )

    parts = []
    for metric, _ in PAPER_METRICS:
        parts.append(f"SELECT '{metric}' AS metric, category, {q(metric)} FROM paper_stats GROUP BY category")
        parts.append(f"SELECT '{metric}', '{OVERALL}', {q(metric)} FROM paper_stats")
    captions = "(SELECT category, unnest(caption_token_list) AS caption_tokens FROM paper_stats)"
    parts.append(f"SELECT '{CAPTION_METRIC[0]}', category, {q('caption_tokens')} FROM {captions} GROUP BY category")
    parts.append(f"SELECT '{CAPTION_METRIC[0]}', '{OVERALL}', {q('caption_tokens')} FROM {captions}")
    return "\nUNION ALL ".join(parts)


@dataclass
class Stats:
    per_category: pd.DataFrame  # metric, label, category, n, mean, std, min, median, max
    ga_types: pd.DataFrame  # ga_type, papers, de_facto, percent_of_papers, percent_of_gas
    ga_types_by_category: pd.DataFrame
    papers: int
    level: str
    # metric, category, n, whislo, q1, med, q3, whishi (the box plots)
    distributions: Optional[pd.DataFrame] = None


def compute_stats(con, level: str = "group", paper_rows: Optional[str] = None) -> Stats:
    """``paper_rows``: a query of ``PAPER_ROWS_SQL``'s rows kept elsewhere (the card's
    per-shard cache); by default they are computed from the ``papers`` view."""
    import pandas as pd

    for sql in _setup_sql(level, paper_rows):
        con.execute(sql)
    q = stats_queries()
    per = pd.concat([con.execute(q["per_category"]).df(), con.execute(q["captions"]).df()], ignore_index=True)
    order = {m: i for i, (m, _) in enumerate(PAPER_METRICS + [CAPTION_METRIC])}
    per["_m"] = per["metric"].map(order)
    per["_o"] = (per["category"] == OVERALL).astype(int)
    per = per.sort_values(["_m", "_o", "category"]).drop(columns=["_m", "_o"]).reset_index(drop=True)
    ga = con.execute(q["ga_types"]).df()
    papers = int(ga["papers"].sum()) if len(ga) else 0
    with_ga = int(ga.loc[~ga["ga_type"].isin(["no GA"]), "papers"].sum()) if len(ga) else 0
    ga["percent_of_papers"] = (100.0 * ga["papers"] / papers) if papers else 0.0
    ga["percent_of_gas"] = [
        100.0 * n / with_ga if with_ga and t != "no GA" else None for t, n in zip(ga["ga_type"], ga["papers"])
    ]
    type_order = {"Original": 0, "Reused": 1, "Modified": 2, "untyped": 3, "no GA": 4}
    ga = ga.sort_values("ga_type", key=lambda s: s.map(lambda t: type_order.get(t, 9))).reset_index(drop=True)
    by_cat = con.execute(q["ga_types_by_category"]).df().sort_values(["category", "ga_type"]).reset_index(drop=True)
    dist = con.execute(distribution_query()).df()
    dist["_o"] = (dist["category"] == OVERALL).astype(int)
    dist = dist.sort_values(["metric", "_o", "category"]).drop(columns=["_o"]).reset_index(drop=True)
    return Stats(
        per_category=per, ga_types=ga, ga_types_by_category=by_cat, papers=papers, level=level, distributions=dist
    )


def _num(v, digits: int = 2) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return ""
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def markdown_tables(stats: Stats) -> str:
    lines = [f"Token counting: {TOKEN_RULE}.", f"Category level: {stats.level} (papers: {stats.papers}).", ""]
    for metric, label in PAPER_METRICS + [CAPTION_METRIC]:
        part = stats.per_category[stats.per_category["metric"] == metric]
        lines += [
            f"#### {label}",
            "",
            "| category | n | mean | std | min | median | max |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for r in part.itertuples():
            lines.append(
                f"| {r.category} | {r.n} | {_num(r.mean)} | {_num(r.std)} | {_num(r.min, 0)} | "
                f"{_num(r.median, 1)} | {_num(r.max, 0)} |"
            )
        lines.append("")
    lines += [
        "#### graphical-abstract types",
        "",
        "| type | papers | de facto | % of papers | % of GAs |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in stats.ga_types.itertuples():
        lines.append(
            f"| {r.ga_type} | {r.papers} | {r.de_facto} | {_num(r.percent_of_papers, 1)} | {_num(r.percent_of_gas, 1)} |"
        )
    lines.append("")
    return "\n".join(lines)


def _save_png(fig, path: str) -> None:
    """A figure as PNG at ``path``, a local file or any fsspec path (gs://...)."""
    import fsspec

    with fsspec.open(path, "wb") as f:
        fig.savefig(f, format="png", dpi=110, metadata={"Software": None})


def plot(stats: Stats, folder: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    metrics = [
        ("title_tokens", "(a) title tokens"),
        ("abstract_tokens", "(b) abstract tokens"),
        ("fulltext_tokens", "(c) full-text tokens"),
        ("caption_tokens", "(d) caption tokens"),
        ("figures", "(e) figures per paper"),
        ("subfigures", "(f) subfigures per paper"),
    ]
    fig, axes = plt.subplots(2, 3, figsize=(13, 7.5))
    dist = stats.distributions
    assert dist is not None, "the plots need the per-paper distributions (compute_stats(..., distributions=True))"
    for ax, (metric, title) in zip(axes.flat, metrics):
        part = dist[(dist["metric"] == metric) & (dist["n"] > 0)]
        boxes = [
            {
                "label": f"{r.category}\nn={r.n}",
                "whislo": r.whislo,
                "q1": r.q1,
                "med": r.med,
                "q3": r.q3,
                "whishi": r.whishi,
                "fliers": [],
            }
            for r in part.itertuples()
        ]
        if boxes:
            drawn = ax.bxp(boxes, showfliers=False, patch_artist=True, widths=0.6)
            for box, r in zip(drawn["boxes"], part.itertuples()):
                box.set_facecolor("#bbbbbb" if r.category == OVERALL else "#9db4d8")
            ax.tick_params(axis="x", labelrotation=45 if len(boxes) > 5 else 0, labelsize=7)
            ax.margins(y=0.06)
            ax.set_ylim(bottom=0)
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(title, fontsize=10)
    lo, hi = WHISKERS
    fig.suptitle(
        f"Per top-level arXiv category (grey: all papers): box = quartiles, line = median, whiskers = "
        f"{lo:.0%} to {hi:.0%}; n under each category",
        fontsize=10,
    )
    fig.tight_layout()
    paths.append(posixpath.join(folder, "by_category.png"))
    _save_png(fig, paths[-1])
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    ga = stats.ga_types
    ax.bar(ga["ga_type"], ga["papers"], color="#4c72b0")
    for i, (n, pct) in enumerate(zip(ga["papers"], ga["percent_of_papers"])):
        ax.annotate(f"{n} ({pct:.1f}%)", (i, n), ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("papers")
    ax.set_title("Graphical-abstract types")
    fig.tight_layout()
    paths.append(posixpath.join(folder, "ga_types.png"))
    _save_png(fig, paths[-1])
    plt.close(fig)
    return paths


def write_stats(out: str, output: str | None = None, level: str = "group", plots: bool = True) -> tuple[str, list[str]]:
    """Compute the statistics of build ``out`` and write them into ``output`` (default
    ``OUT/stats``, on any fsspec path: a gs:// build's stats stay on gs://): Markdown, CSV
    tables and PNG plots. Returns (the Markdown, the files written)."""
    import fsspec

    from sciga.explore.build_folder import check_is_build
    from sciga.explore.views import connect

    check_is_build(out)
    folder = (output or posixpath.join(out.rstrip("/"), "stats")).rstrip("/")
    fs, root = fsspec.core.url_to_fs(folder)
    fs.makedirs(root, exist_ok=True)
    con = connect(out)
    try:
        stats = compute_stats(con, level)
    finally:
        con.close()
    md = "# sciga stats\n\n" + markdown_tables(stats)
    written = []
    with fs.open(posixpath.join(root, "stats.md"), "w", encoding="utf-8") as f:
        f.write(md)
    written.append(posixpath.join(folder, "stats.md"))
    for name, df in (
        ("per_category.csv", stats.per_category),
        ("ga_types.csv", stats.ga_types),
        ("ga_types_by_category.csv", stats.ga_types_by_category),
        ("distributions.csv", stats.distributions),
    ):
        if df is None:
            continue
        with fs.open(posixpath.join(root, name), "w", encoding="utf-8", newline="") as f:
            df.to_csv(f, index=False, float_format="%.4f")
        written.append(posixpath.join(folder, name))
    if plots:
        written += plot(stats, folder)
    return md, written
