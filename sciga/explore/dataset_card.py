"""The dataset card (README.md) of a build: YAML metadata the Hub and `datasets` read
(``configs:`` with ``data_files`` per config, ``dataset_info`` with features and split sizes,
licence, tags) and a Markdown body for people (what is inside, counts, statistics, licences,
how it was built, how to load it).

The card is a pure function of the build folder (manifest and shards): no clock values, no
folder path, no repo id or version. So the build writes it into OUT (``write_dataset_card``),
which makes the folder itself a Hugging Face dataset (``load_dataset(OUT, "figures")``), and
``sciga publish`` uploads that same file; the version lives in the Hub tag and the gate's
result in the commit message.
"""

from __future__ import annotations

import posixpath
from typing import Any, Optional

import duckdb
import fsspec
import pyarrow.parquet as pq
import yaml

from sciga.schemas.arrow import CONFIGS, SCHEMAS
from sciga.schemas.hf_features import yaml_features
from sciga.schemas.manifest import BuildManifest
from sciga.transforms.write.shard_names import SPLIT

CARD = "README.md"
CARD_KEY = ".sciga/card.key"  # beside the card: which build state the card was rendered from
PRETTY_NAME = "Scientific figures in context (sciga-builder)"

CONFIG_DOC = {
    "papers": "one row per paper, nested like SciGA's Listing 1: metadata, sections (with paragraphs and "
    "S2ORC-style figure ref spans), figures with subfigures, tables, teaser, graphical abstract, provenance",
    "figures": "one row per figure or subfigure image, with the image itself (`struct<bytes, path>`, the `datasets` "
    "Image convention; null without bytes, `image_status` says why), caption, subcaption, parent id, "
    "medical filter, GA/teaser role",
    "mentions": "one row per inline reference to a figure: paper, figure (subfigure when named), section, paragraph, "
    "character span, surface text",
    "dead_letter": "one row per input that failed a stage: paper id, stage, error type, message, input URI",
}


def _size_category(n: int) -> str:
    for limit, name in (
        (1_000, "n<1K"),
        (10_000, "1K<n<10K"),
        (100_000, "10K<n<100K"),
        (1_000_000, "100K<n<1M"),
        (10_000_000, "1M<n<10M"),
    ):
        if n < limit:
            return name
    return "10M<n<100M"


def shard_facts(out_dir: str, manifest: BuildManifest) -> dict:
    """config -> {files, rows, parquet_bytes, arrow_bytes} from the manifest and Parquet footers."""
    fs, root = fsspec.core.url_to_fs(out_dir)
    facts = {}
    for config in CONFIGS:
        entries = manifest.shard_files(config)
        arrow_bytes = 0
        for e in entries:
            with fs.open(posixpath.join(root, e.path), "rb") as f:
                md = pq.ParquetFile(f).metadata
                arrow_bytes += sum(md.row_group(i).total_byte_size for i in range(md.num_row_groups))
        facts[config] = {
            "files": entries,
            "rows": sum(e.rows for e in entries),
            "parquet_bytes": sum(e.bytes for e in entries),
            "arrow_bytes": arrow_bytes,
        }
    return facts


def listed_configs(facts: dict) -> list[str]:
    """The configs the card declares: those with rows. `datasets` cannot load a split without
    rows unless streaming (``Instruction "train" corresponds to no data!``, from its reader,
    on disk and from the Hub alike), so a declared empty config (a clean build's dead_letter)
    was a config the card promised and `load_dataset` refused. Its typed, empty shard stays
    in the folder for SQL; the card's body says which configs have no rows."""
    return [c for c in CONFIGS if facts[c]["rows"]]


def card_licence(policy: str, in_full: list[str]) -> dict[str, str]:
    """The card's ``license`` fields for a build under licence ``policy`` whose papers written
    in full carry the licence URLs ``in_full``: the one Hub licence id when they share one
    (``cc-by-4.0``), else ``other`` with ``license_name`` and ``license_details`` naming them
    (and, under ``redistributable-nc``, that the dataset is for non-commercial use)."""
    from sciga.schemas.licences import policy_is_non_commercial, read_licence

    per_paper = {
        "license": "other",
        "license_name": "per-paper-licenses",
        "license_details": "Each paper keeps the licence its authors chose on arXiv (papers.license); "
        "the builder's code is Apache-2.0.",
    }
    if policy == "all":
        return per_paper
    known = [read_licence(u) for u in in_full]
    ids = sorted({k.hub_id for k in known if k is not None and k.hub_id})
    if len(ids) == 1 and all(k is not None for k in known):
        return {"license": ids[0]}
    names = sorted({k.licence.name + (f" {k.version}" if k.version else "") for k in known if k is not None})
    nc = policy_is_non_commercial(policy)
    return {
        "license": "other",
        "license_name": "mixed-cc-non-commercial" if nc else "mixed-cc",
        "license_details": f"Built under the licence policy {policy}: each paper written in full carries "
        f"its own licence (papers.license): {', '.join(names) or 'none'}. "
        + ("Some of them are non-commercial: use the dataset for non-commercial purposes only. " if nc else "")
        + "Papers withheld for their licence keep only their metadata (papers.withheld).",
    }


def card_metadata(facts: dict, papers: int, licence: Optional[dict] = None) -> dict:
    configs: list[dict[str, Any]] = []
    infos: list[dict[str, Any]] = []
    for config in listed_configs(facts):
        entry: dict[str, Any] = {
            "config_name": config,
            "data_files": [{"split": SPLIT, "path": f"data/{config}/{SPLIT}-*.parquet"}],
        }
        if not configs:  # papers, unless it has no rows
            entry["default"] = True
        configs.append(entry)
        info: dict[str, Any] = {"config_name": config}
        info["features"] = yaml_features(SCHEMAS[config])
        info["splits"] = [
            {"name": SPLIT, "num_bytes": facts[config]["arrow_bytes"], "num_examples": facts[config]["rows"]}
        ]
        info["download_size"] = facts[config]["parquet_bytes"]
        info["dataset_size"] = facts[config]["arrow_bytes"]
        infos.append(info)
    return {
        "pretty_name": PRETTY_NAME,
        "language": ["en"],
        **(licence or card_licence("all", [])),
        "tags": ["arxiv", "scientific-figures", "graphical-abstract", "figure-captions", "latexml", "sciga"],
        "task_categories": ["image-to-text", "text-to-image"],
        "size_categories": [_size_category(papers)],
        "configs": configs,
        "dataset_info": infos,
    }


def _facts_sql(con: duckdb.DuckDBPyConnection) -> dict:
    def rows(sql):
        return con.execute(sql).fetchall()

    return {
        "licenses": rows(
            "SELECT coalesce(license, 'unknown') AS l, count(*) FILTER (WHERE withheld IS NULL), "
            "count(*) FILTER (WHERE withheld IS NOT NULL) FROM papers GROUP BY ALL ORDER BY 2 DESC, 3 DESC, 1"
        ),
        "sources": rows(
            "SELECT coalesce(provenance.source, 'unknown'), count(*) FROM papers GROUP BY ALL ORDER BY 2 DESC, 1"
        ),
        "generators": rows(
            "SELECT coalesce(provenance.generator, 'unknown') || ' ' || coalesce(provenance.generator_version, ''), "
            "count(*) FROM papers GROUP BY ALL ORDER BY 2 DESC, 1"
        ),
        "id_sources": rows(
            "SELECT coalesce(provenance.id_source, 'unknown'), count(*) FROM papers GROUP BY ALL ORDER BY 2 DESC, 1"
        ),
        "dead_letter": rows("SELECT error_type, count(*) FROM dead_letter GROUP BY ALL ORDER BY 2 DESC, 1"),
        "image_status": rows(
            "SELECT coalesce(image_status, 'unknown'), count(*) FROM figures GROUP BY ALL ORDER BY 2 DESC, 1"
        ),
    }


def _number(v, fmt: str = ".2f") -> str:
    """A statistic for the card; empty for a missing value (None, NaN, pandas NA: a build
    with no papers has statistics of nothing)."""
    import pandas as pd

    if v is None or pd.isna(v):
        return ""
    return format(v, fmt) if fmt else str(int(v))


def images_section(image_status: list) -> str:
    """How many figures rows have their image, and why the others have none."""
    from sciga.schemas.images import BY_DESIGN, IMAGE_STATUSES, WITH_BYTES, counts_as_missing

    by = dict(image_status)
    expected = sum(n for s, n in by.items() if s not in BY_DESIGN)
    missing = sum(n for s, n in by.items() if counts_as_missing(s))
    if not by:
        return "This build has no figures rows."
    lines = [
        f"{sum(by.get(s, 0) for s in WITH_BYTES)} figures rows have their image embedded (`image` decodes to PIL); "
        f"**figures without an image: {missing} of {expected}**"
        + (f" ({100.0 * missing / expected:.0f}%)" if expected else "")
        + ". A row without image bytes has "
        "`image = null`; `image_status` says why and `image_uri` where the file was or was looked for.",
        "",
        _table(
            ["image_status", "rows", "meaning"],
            [(s, n, IMAGE_STATUSES.get(s, "(not a known status)")) for s, n in image_status],
        ),
    ]
    return "\n".join(lines)


def _table(header: list[str], rows: list) -> str:
    numeric = [
        bool(rows)
        and all(
            isinstance(r[i], (int, float)) or (isinstance(r[i], str) and r[i].replace(".", "", 1).isdigit())
            for r in rows
        )
        for i in range(len(header))
    ]
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" if n else "---" for n in numeric) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(x).replace("|", "\\|") for x in r) + " |")
    return "\n".join(out)


def render_card(out_dir: str, manifest: BuildManifest) -> str:
    """The card of the build in ``out_dir`` (any fsspec path), from its manifest and shards."""
    from sciga.explore.card_stats import kept_paper_rows
    from sciga.explore.stats import compute_stats
    from sciga.explore.views import connect

    facts = shard_facts(out_dir, manifest)
    con = connect(out_dir, tasks=False)
    stats = compute_stats(con, "group", kept_paper_rows(con, out_dir, manifest))
    extra = _facts_sql(con)
    con.close()
    counts = manifest.counts
    policy = str(manifest.options.get("licences") or "all")
    licence = card_licence(policy, [lic for lic, n, _ in extra["licenses"] if n and lic != "unknown"])
    meta = card_metadata(facts, counts.get("papers", facts["papers"]["rows"]), licence)
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=1000)

    empty = [c for c in CONFIGS if c not in listed_configs(facts)]
    empty_note = (
        (
            f"\n\nConfigs without rows in this build ({', '.join(empty)}) are not declared in this card's "
            "`configs`: `datasets` cannot load a split without rows. Each still has a typed, empty shard in "
            f"`data/<config>/`, which SQL reads as an empty table{' (no dead letter: every input became a paper)' if 'dead_letter' in empty else ''}."
        )
        if empty
        else ""
    )

    body = f"""
# Scientific figures in context

Scientific papers from arXiv with their full text, figures, subfigures, captions, inline figure
references, teasers and graphical abstracts, built from LaTeXML HTML (ar5iv / arXiv HTML) by
sciga-builder {manifest.builder_version} (schema {manifest.schema_version}) in the layout of SciGA-145k.

## Configs

{
        _table(
            ["config", "rows", "files", "Parquet bytes", "what a row is"],
            [(c, facts[c]["rows"], len(facts[c]["files"]), facts[c]["parquet_bytes"], CONFIG_DOC[c]) for c in CONFIGS],
        )
    }

Counts: {", ".join(f"{k} {v}" for k, v in sorted(counts.items()))}.{empty_note}

## Load it

The same code reads this folder (a `sciga build` output) and its copy on the Hub, where a
published version is a git tag (`revision`).

```python
from datasets import load_dataset
figures = load_dataset("path/to/build", "figures", split="train")   # `image` decodes to PIL
papers = load_dataset("ORG/NAME", "papers", revision="vX.Y.Z", split="train")  # a published version
mentions = load_dataset("ORG/NAME", "mentions", split="train", streaming=True)
```

```sql
-- DuckDB: the local shards, or hf:// paths for a published version
SELECT id, title FROM 'path/to/build/data/papers/*.parquet' LIMIT 5;
SELECT count(*) FROM 'hf://datasets/ORG/NAME@vX.Y.Z/data/figures/*.parquet';
```

`sciga sql path/to/build "SELECT count(*) FROM figures"` registers every config and task view;
`sciga browse path/to/build` writes a static HTML report of papers, figures and mentions.

## Images

{images_section(extra["image_status"])}

## Statistics

{_statistics_section(stats)}

## Text conventions

Text fields keep SciGA's tokens: `<MATH> alttext </MATH>`, `<NOTE> footnote </NOTE>`,
`<TAG> Figure 2: </TAG>`. Ids are derived from the paper: `2401.13641_S2.1` (section),
`2401.13641_F3` (figure), `2401.13641_F3.2` (subfigure), `2401.13641_GA`. Papers without an
arXiv id carry a local id from their file name (`provenance.id_source = 'stem'`).

## Licence

{_licence_section(policy, licence, extra["licenses"])}

## How it was built

{_build_section(manifest, counts, facts, extra)}"""
    return f"---\n{front}---\n{body}"


def _licence_section(policy: str, licence: dict, licenses: list) -> str:
    """The card's licence section: the policy, what the ``license`` field says, and the
    papers by licence (written in full, withheld)."""
    if policy == "all":
        return (
            "`license: other`: every paper keeps the licence its authors gave it on arXiv, recorded per row\n"
            "in `papers.license`. Check it before redistributing a paper's text or figures.\n\n"
            + _table(["papers.license", "papers"], [(lic, n + w) for lic, n, w in licenses])
        )
    withheld = sum(w for _, _, w in licenses)
    return (
        f"Built under the licence policy `{policy}` (`--licences {policy}`): "
        + (
            "papers whose licence lets anyone share and adapt them (CC0, CC BY, CC BY-SA"
            + (", and the non-commercial CC BY-NC, CC BY-NC-SA" if policy == "redistributable-nc" else "")
            + ") are written in full. "
        )
        + f"`license: {licence['license']}`"
        + (f" ({licence['license_name']})" if "license_name" in licence else "")
        + ".\n"
        + (
            "The policy is non-commercial: it lets in papers under CC BY-NC and CC BY-NC-SA, which may be "
            "used for non-commercial purposes only (see each paper's `papers.license`).\n"
            if policy == "redistributable-nc"
            else ""
        )
        + (
            f"\n{withheld} papers were withheld for their licence: each keeps a metadata row (id, title, authors, "
            "dates, categories, licence) with `papers.withheld` set to its licence, and none of its text, "
            "figures, images or mentions.\n"
            if withheld
            else ""
        )
        + "\n"
        + _table(["papers.license", "written in full", "withheld"], licenses)
    )


def _statistics_section(stats) -> str:
    """The card's statistics: token lengths and counts over all papers and per top-level arXiv
    category, and the graphical-abstract types."""
    from sciga.explore.stats import OVERALL

    per = stats.per_category
    overall = per[per["category"] == OVERALL]
    stat_rows = [(r.label, r.n, _number(r.mean), _number(r.std), _number(r.max, "")) for r in overall.itertuples()]
    cats = sorted(set(per["category"]) - {OVERALL})
    cat_rows = []
    for c in cats:
        part = per[per["category"] == c].set_index("metric")
        cat_rows.append(
            [c, int(part.loc["title_tokens", "n"])]
            + [
                _number(part.loc[m, "mean"], ".1f") if m in part.index else ""
                for m in (
                    "title_tokens",
                    "abstract_tokens",
                    "fulltext_tokens",
                    "caption_tokens",
                    "figures",
                    "subfigures",
                )
            ]
        )
    ga_rows = [
        (r.ga_type, r.papers, _number(r.percent_of_papers, ".1f"), _number(r.percent_of_gas, ".1f"))
        for r in stats.ga_types.itertuples()
    ]
    return f"""Token lengths count whitespace tokens of the stored text, SciGA's special tokens verbatim
(`<MATH>` ... `</MATH>` each one token); full text is all section bodies.

{_table(["statistic (all papers)", "n", "mean", "std", "max"], stat_rows)}

Per top-level arXiv category (means):

{_table(["category", "papers", "title", "abstract", "full text", "caption", "figures", "subfigures"], cat_rows)}

Graphical-abstract types:

{_table(["type", "papers", "% of papers", "% of GAs"], ga_rows)}"""


def _build_section(manifest: BuildManifest, counts: dict, facts: dict, extra: dict) -> str:
    """The card's "How it was built": builder, inputs, sources, dead letters, the quality gate
    and every shard with its sha256."""
    shard_lines = [f"| `{e.path}` | {e.rows} | {e.bytes} | `{e.sha256}` |" for c in CONFIGS for e in facts[c]["files"]]
    section = f"""- builder: sciga-builder {manifest.builder_version}, schema version {manifest.schema_version}
- inputs: {manifest.inputs_count} pages, list sha256 `{manifest.inputs_sha256}`
- sources (`provenance.source`): {", ".join(f"{s} {n}" for s, n in extra["sources"])}
- HTML generator: {", ".join(f"{s.strip()} {n}" for s, n in extra["generators"])}
- paper ids from: {", ".join(f"{s} {n}" for s, n in extra["id_sources"])}
- dead letters (inputs that failed a stage, kept in `dead_letter`): {counts.get("dead_letter", 0)}"""
    if extra["dead_letter"]:
        section += " (" + ", ".join(f"{t} {n}" for t, n in extra["dead_letter"]) + ")"
    section += f"""
- quality gate: `sciga validate` checks a build with Great Expectations; `sciga publish` runs it
  first and uploads nothing that fails it

Same input, same bytes: shards are sorted and assigned by a hash of the paper id, and no
clock value is written into them.

<details><summary>Shards and their sha256</summary>

| file | rows | bytes | sha256 |
|---|---:|---:|---|
{chr(10).join(shard_lines)}

</details>
"""
    return section


def card_path(out_dir: str) -> str:
    return posixpath.join(out_dir.rstrip("/"), CARD)


def dataset_card_text(out_dir: str) -> str:
    """The card the build in ``out_dir`` should carry (reads manifest.json and the shards)."""
    from sciga.transforms.write.manifest import read_manifest

    return render_card(out_dir, read_manifest(out_dir))


def write_dataset_card(out_dir: str) -> str:
    """Write ``OUT/README.md`` for the build in ``out_dir`` (any fsspec path) and return its
    path. Call it once the shards and manifest.json are in place. The file is rewritten only
    when its bytes would change, so a second call on an unchanged build writes nothing."""
    from sciga.transforms.write.manifest import read_manifest

    manifest = read_manifest(out_dir)
    path = card_path(out_dir)
    fs, p = fsspec.core.url_to_fs(path)
    key = card_key(manifest)
    key_path = posixpath.join(posixpath.dirname(p), CARD_KEY)
    if fs.exists(p) and fs.exists(key_path):
        with fs.open(key_path, "r") as f:
            if f.read().strip() == key:
                return path  # same shards, counts and card code: the card it would write is there
    data = render_card(out_dir, manifest).encode("utf-8")
    if not (fs.exists(p) and fs.cat_file(p) == data):
        with fs.open(p, "wb") as f:
            f.write(data)
    fs.makedirs(posixpath.dirname(key_path), exist_ok=True)
    with fs.open(key_path, "w") as f:
        f.write(key + "\n")
    return path


def card_key(manifest: BuildManifest) -> str:
    """What the card is a function of: the manifest without what describes the run (clock,
    workers, what was reused) - shards by sha256, counts, options, versions - and this
    module's and the statistics module's code. An incremental build that rewrote no shard
    has the same key, and does not read its shards again to render the same card."""
    import hashlib
    import json
    from pathlib import Path

    from sciga.explore import card_stats, stats

    content = {k: v for k, v in manifest.to_json().items() if k not in ("run", "incremental")}
    h = hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode())
    for mod in (__file__, stats.__file__, card_stats.__file__):
        h.update(Path(mod).read_bytes())
    return h.hexdigest()


def gate_summary(result) -> dict:
    return {
        "expectations": len(result.checks),
        "passed": len(result.checks) - len(result.failed),
        "max_dead_letter_rate": result.options["max_dead_letter_rate"],
        "image_check": result.options["image_check"],
        "max_missing_image_rate": result.options.get("max_missing_image_rate"),
    }


def gate_sentence(summary: dict) -> str:
    return (
        f"quality gate: {summary['passed']} of {summary['expectations']} Great Expectations expectations met "
        f"(dead-letter rate at most {summary['max_dead_letter_rate']}, missing-image rate at most "
        f"{summary.get('max_missing_image_rate')}, image check {summary['image_check']})"
    )


def read_front_matter(card: str) -> dict:
    if not card.startswith("---\n"):
        return {}
    end = card.index("\n---\n", 4)
    return yaml.safe_load(card[4:end]) or {}
