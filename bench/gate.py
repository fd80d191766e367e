"""Benchmark: quality-gate time per million figure rows against the time to write them, and
DuckDB latency of the `sciga stats` queries, on one generated build (same run).

    python bench/gate.py                       # 1,000,000 figure rows (125,000 papers)
    python bench/gate.py --figures 200000      # smaller; the table then says it extrapolates

What is generated: papers shaped like the sample's (4 sections x 2 paragraphs with MATH
tokens and figure references, 5 figures of which one has 3 subfigures = 8 figure rows per
paper, a teaser, a graphical abstract on 1 paper in 10), one figure row per figure or
subfigure with a small distinct 32x32 PNG (no big images), and one mention per reference.
Rows go through the project's own writer (``transforms/write/parquet_shards.table_bytes``:
sort, Arrow, zstd Parquet) with the default shard sizes, then the manifest is written as
`sciga build` does. "write" below is that writer time; the gate then runs over the result.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from PIL import Image

from sciga.schemas.version import BUILDER_VERSION, SCHEMA_VERSION
from sciga.transforms.write import manifest as mf
from sciga.transforms.write.shard_names import DEFAULT_ROWS_PER_SHARD, empty_table_bytes, shard_name, table_bytes

CATEGORIES = ["cs.CV", "cs.CL", "astro-ph.GA", "math.AP", "physics.optics", "q-bio.NC", "stat.ML", "eess.IV", "econ.EM"]
WORDS = (
    "we propose a method that routes tokens through a shallow path when consecutive frames are similar and "
    "keeps the deep path for keyframes which preserves accuracy at a fraction of the compute"
).split()
FIGS_PER_PAPER, SUBFIGS = 5, 3  # figure F5 has 3 subfigures: 8 figure rows per paper


def _pngs(n=256):
    out = []
    for i in range(n):
        b = io.BytesIO()
        Image.new("RGB", (32, 32), (i % 256, (i * 7) % 256, (i * 13) % 256)).save(b, "PNG")
        out.append(b.getvalue())
    return out


PNGS = _pngs()


def _text(i: int, n: int) -> str:
    return " ".join(WORDS[(i + k) % len(WORDS)] for k in range(n))


def paper_rows(i: int):
    pid = f"{2401 + i // 100000:04d}.{i % 100000:05d}"
    fig_ids = [f"{pid}_F{k}" for k in range(1, FIGS_PER_PAPER + 1)]
    sub_ids = [f"{pid}_F{FIGS_PER_PAPER}.{s}" for s in range(1, SUBFIGS + 1)]
    sections, mentions = [], []
    for s in range(1, 5):
        sid = f"{pid}_S{s}"
        paras = []
        for p in range(2):
            k = (s * 2 + p) % FIGS_PER_PAPER + 1
            head = f"{_text(i + s + p, 12)} <MATH> x_{{{s}}} + y </MATH> {_text(i + p, 10)} Figure "
            text = head + f"{k} shows the result. {_text(i + s, 20)}"
            start = len(head)
            ref = {"start": start, "end": start + 1, "text": str(k), "ref_id": fig_ids[k - 1]}
            paras.append({"text": text, "html_id": f"S{s}.p{p + 1}", "ref_spans": [ref]})
            mentions.append(
                {
                    "paper_id": pid,
                    "figure_id": fig_ids[k - 1],
                    "section_id": sid,
                    "paragraph_index": p,
                    "char_start": start,
                    "char_end": start + 1,
                    "surface": str(k),
                    "sentence": None,
                    "sentence_start": None,
                    "resolution": "anchor",
                }
            )
        sections.append(
            {
                "id": sid,
                "parent_id": None,
                "level": 1,
                "number": str(s),
                "title": f"<TAG> {s} </TAG> Section {s}",
                "body": "\n\n".join(x["text"] for x in paras),
                "paragraphs": paras,
                "figure_ids": [fig_ids[s % FIGS_PER_PAPER]],
                "html_id": f"S{s}",
            }
        )
    figures, figure_rows = [], []
    for k, fid in enumerate(fig_ids, 1):
        caption = f"<TAG> Figure {k}: </TAG> {_text(i + k, 22)}"
        subs = []
        if k == FIGS_PER_PAPER:
            subs = [
                {
                    "id": sub,
                    "html_id": None,
                    "label": f"({'abc'[j]})",
                    "caption": f"<TAG> ({'abc'[j]}) </TAG> {_text(j, 5)}",
                    "images": [],
                    "caption_source": "html",
                }
                for j, sub in enumerate(sub_ids)
            ]
        figures.append(
            {
                "id": fid,
                "html_id": f"F{k}",
                "index": k,
                "number": str(k),
                "label": None,
                "caption": caption,
                "images": [],
                "subfigures": subs,
                "section_id": sections[k % 4]["id"],
                "is_teaser": k == 1,
            }
        )
        rows = [(fid, None, "figure", None)] + [(s["id"], fid, "subfigure", s["caption"]) for s in subs]
        for rid, parent, kind, subcap in rows:
            png = PNGS[(i * 8 + len(figure_rows)) % len(PNGS)]
            figure_rows.append(
                {
                    "id": rid,
                    "paper_id": pid,
                    "parent_id": parent,
                    "kind": kind,
                    "index": k,
                    "number": str(k),
                    "label": None,
                    "caption": caption,
                    "subcaption": subcap,
                    "subcaption_source": None,
                    "image": {"bytes": png, "path": f"figs/{rid}.png"},
                    "image_paths": [f"figs/{rid}.png"],
                    "image_kind": "raster",
                    "image_source": "html",
                    "width": 32,
                    "height": 32,
                    "section_id": sections[k % 4]["id"],
                    "is_teaser": k == 1,
                    "medical": {
                        "keyword_hits": [],
                        "classifier_run": False,
                        "topk_labels": [],
                        "topk_scores": [],
                        "is_medical": None,
                    },
                }
            )
    ga = (
        {
            "id": f"{pid}_GA",
            "type": "Reused",
            "paths": [],
            "components": [fig_ids[1]],
            "caption": None,
            "de_facto": False,
            "source": "synthetic",
        }
        if i % 10 == 0
        else None
    )
    cat = CATEGORIES[i % len(CATEGORIES)]
    paper = {
        "id": pid,
        "title": f"A synthetic paper number {i} on token routing",
        "abstract": _text(i, 120),
        "subjects": {"arxiv": [cat], "acm": [], "msc": []},
        "primary_category": cat,
        "sections": sections,
        "figures": figures,
        "tables": [],
        "teaser": [fig_ids[0]],
        "graphical_abstract": ga,
        "authors": [{"name": "A. Author", "affiliations": []}],
        "dois": [],
        "provenance": {
            "source": "synthetic",
            "builder_version": BUILDER_VERSION,
            "schema_version": SCHEMA_VERSION,
            "decode_errors": 0,
            "id_source": "metadata",
        },
    }
    return paper, figure_rows, mentions


def write_build(out: str, n_papers: int, rows=None) -> dict:
    """Generate and write; returns seconds spent in the writer (generation excluded).
    ``rows(i) -> (paper, figure rows, mentions)`` is paper ``i`` of the build (default:
    ``paper_rows``; bench/diff.py passes its own, with changed papers)."""
    rows = rows or paper_rows
    spent = {"papers": 0.0, "figures": 0.0, "mentions": 0.0, "dead_letter": 0.0}
    per = {
        "papers": DEFAULT_ROWS_PER_SHARD["papers"],
        "figures": DEFAULT_ROWS_PER_SHARD["figures"],
        "mentions": DEFAULT_ROWS_PER_SHARD["mentions"],
    }
    fig_rows_per_paper = FIGS_PER_PAPER + SUBFIGS
    n_shards = {
        "papers": -(-n_papers // per["papers"]),
        "figures": -(-n_papers * fig_rows_per_paper // per["figures"]),
        "mentions": -(-n_papers * 8 // per["mentions"]),
    }
    # Papers are generated in blocks that fill whole shards of each config.
    block = per["figures"] // fig_rows_per_paper  # papers per figures shard
    buffers = {"papers": [], "mentions": []}
    index = {"papers": 0, "figures": 0, "mentions": 0}

    def flush(config, rows):
        path = os.path.join(out, "data", config, shard_name(index[config], n_shards[config]))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        t = time.perf_counter()
        data = table_bytes(config, rows)
        with open(path, "wb") as f:
            f.write(data)
        spent[config] += time.perf_counter() - t
        index[config] += 1

    for start in range(0, n_papers, block):
        figs = []
        for i in range(start, min(n_papers, start + block)):
            p, fr, m = rows(i)
            buffers["papers"].append(p)
            buffers["mentions"].extend(m)
            figs.extend(fr)
        flush("figures", figs)
        for config in ("papers", "mentions"):
            while len(buffers[config]) >= per[config]:
                flush(config, buffers[config][: per[config]])
                buffers[config] = buffers[config][per[config] :]
    for config in ("papers", "mentions"):
        if buffers[config]:
            flush(config, buffers[config])
    t = time.perf_counter()
    path = os.path.join(out, "data", "dead_letter", shard_name(0, 1))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(empty_table_bytes("dead_letter"))
    spent["dead_letter"] = time.perf_counter() - t
    t = time.perf_counter()
    counts, files = mf.count_build(out)
    counts.inputs = n_papers
    mf.write_manifest(out, counts, files, "synthetic", {"bench": True})
    spent["manifest"] = time.perf_counter() - t
    return spent


def parse_seconds_per_paper(repeats: int = 5) -> float:
    """The real parser on the embedded sample pages (read + parse, no Beam), per paper. The
    sample papers are short (a few hundred tokens; real papers average ~6,400), so this
    underestimates a real build's parse time: the estimate below is a lower bound."""
    from sciga.samples import sample_dir
    from sciga.transforms.inputs.pages import fallback_paper_id, list_inputs, read_bytes, read_sidecar
    from sciga.transforms.parse.latexml_html import parse_latexml_html

    uris = list_inputs([sample_dir()])
    t = time.perf_counter()
    for _ in range(repeats):
        for uri in uris:
            fid, how = fallback_paper_id(uri)
            parse_latexml_html(
                read_bytes(uri, 1 << 27), read_sidecar(uri), input_uri=uri, fallback_id=fid, fallback_id_source=how
            )
    return (time.perf_counter() - t) / (repeats * len(uris))


def time_queries(out: str, repeats: int = 3) -> dict:
    from sciga.explore.stats import _setup_sql, stats_queries
    from sciga.explore.views import connect

    con = connect(out)
    for sql in _setup_sql("group"):
        con.execute(sql)
    extra = {
        "figures per paper (figures config)": "SELECT paper_id, count(*) FROM figures GROUP BY paper_id",
        "caption search (ILIKE)": "SELECT count(*) FROM figures WHERE caption ILIKE '%keyframes%'",
    }
    res = {}
    for name, sql in list(stats_queries().items()) + list(extra.items()):
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            con.execute(sql).fetchall()
            times.append(time.perf_counter() - t)
        res[name] = statistics.median(times)
    t = time.perf_counter()
    from sciga.explore.stats import compute_stats

    compute_stats(con)
    res["compute_stats (all of `sciga stats` tables)"] = time.perf_counter() - t
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--figures", type=int, default=1_000_000, help="figure rows to generate (8 per paper)")
    ap.add_argument("--out", default=None, help="build folder (default: a temp folder, removed afterwards)")
    ap.add_argument("--image-checks", default="none,header,decode", help="gate image-check levels to time")
    ap.add_argument("--image-workers", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()

    n_papers = max(1, args.figures // (FIGS_PER_PAPER + SUBFIGS))
    n_rows = n_papers * (FIGS_PER_PAPER + SUBFIGS)
    out = args.out or tempfile.mkdtemp(prefix="sciga-bench-gate-")
    try:
        print(f"generating and writing {n_papers:,} papers / {n_rows:,} figure rows into {out} ...", flush=True)
        t0 = time.perf_counter()
        spent = write_build(out, n_papers)
        total_gen = time.perf_counter() - t0
        write = sum(v for k, v in spent.items() if k != "manifest")
        print(
            f"  writer {write:.1f}s ("
            + ", ".join(f"{k} {v:.1f}s" for k, v in spent.items())
            + f"); with generation {total_gen:.1f}s"
        )

        from sciga.quality.gate import run_gate

        scale = 1_000_000 / n_rows
        rows = []
        for level in [x.strip() for x in args.image_checks.split(",") if x.strip()]:
            t = time.perf_counter()
            result = run_gate(out, image_check=level, image_workers=args.image_workers)
            gate = time.perf_counter() - t
            assert result.success, [(c.table, c.description, c.examples[:2], c.error) for c in result.failed]
            slow = sorted(result.timings.items(), key=lambda kv: -kv[1])[:4]
            rows.append((level, gate, slow))
            print(
                f"  gate (--image-check {level}): {gate:.1f}s; slowest: " + ", ".join(f"{k} {v:.1f}s" for k, v in slow)
            )

        q = time_queries(out)
        parse = parse_seconds_per_paper() * n_papers
        print(
            f"  parse (real parser, sample pages) {parse / n_papers * 1000:.1f} ms/paper -> {parse:.1f}s for {n_papers:,} papers"
        )
        print()
        how = "measured" if n_rows >= 1_000_000 else f"extrapolated x{scale:.2f} from {n_rows:,} rows"
        print(
            f"| {n_rows:,} figure rows ({n_papers:,} papers), {os.cpu_count()} cores | seconds | per 1M figure rows ({how}) | gate share |"
        )
        print("|---|---:|---:|---:|")
        base = write + spent["manifest"]
        print(f"| write shards (project writer: sort, Arrow, zstd Parquet) | {write:.1f} | {write * scale:.1f} | |")
        print(
            f"| manifest (counts + sha256 of every shard) | {spent['manifest']:.1f} | {spent['manifest'] * scale:.1f} | |"
        )
        print(f"| parse, lower bound (real parser on the short sample pages) | {parse:.1f} | {parse * scale:.1f} | |")
        for level, gate, _ in rows:
            print(
                f"| gate, --image-check {level} ({args.image_workers} image workers) | {gate:.1f} | {gate * scale:.1f} | "
                f"{gate / base:.0%} of write; {gate / (base + parse):.0%} of parse + write |"
            )
        print()
        print("| DuckDB query on the same build | median seconds |")
        print("|---|---:|")
        for name, s in q.items():
            print(f"| {name} | {s:.3f} |")
    finally:
        if args.out is None:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
