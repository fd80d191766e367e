"""Benchmark: linking cost per paper against extraction (parse) cost on the same pages.

    python bench/link.py [--repeat 3] [PAGE.html ...]

For each page (default: the embedded sample and ../shared/corpus) and in the same run:
- parse: ``parse_latexml_html`` (bytes -> Paper), the extraction baseline;
- link: ``link_paper`` as the build runs it (subcaptions, ref spans, pysbd sentences with
  the window + shortcut);
- link, no shortcut: every mention segmented by pysbd in its window;
- link, whole paragraphs: every text with a mention segmented whole by pysbd (the plain
  "only mention paragraphs" rule).
Times are process CPU time, the median of ``--repeat`` runs measured interleaved; the
spaCy/scispaCy load (once per worker) is reported apart. Goal: link / parse < 0.5 over all pages.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout: the ``sciga`` package lives at the root

from sciga.schemas.ids import FIGURE_ID_RE
from sciga.transforms.link.link_paper import link_paper
from sciga.transforms.link.mentions import mention_rows
from sciga.transforms.link.sentences import Sentencizer, protect
from sciga.transforms.parse import parse_latexml_html


def clock() -> float:
    """CPU time of this process: the steps are single-threaded and CPU-bound, and on a
    shared machine wall-clock intervals of a few ms mostly measure other processes."""
    return time.process_time()


def default_pages() -> list[Path]:
    pages = sorted((ROOT / "samples" / "html").glob("*/*.html"))
    from paths import corpus_dir

    corpus = corpus_dir()
    if corpus is not None:
        pages += sorted(corpus.glob("html/*.html")) + sorted(corpus.glob("latexml/*.html"))
    return pages


def whole_paragraph_link(paper, sz: Sentencizer) -> None:
    link_paper(paper, sentencizer=None)
    texts, spans = [], []
    for sec in paper.sections:
        for para in sec.paragraphs:
            fig = [(s.start, s.end) for s in para.ref_spans if FIGURE_ID_RE.match(s.ref_id)]
            if fig:
                texts.append(protect(para.text, fig))
                spans.append(fig)
    if texts:
        sz._segment(texts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pages", nargs="*", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    pages = args.pages or default_pages()

    t0 = clock()
    fast, slow = Sentencizer(), Sentencizer(shortcut=False)
    load_s = clock() - t0
    data = [(p, p.read_bytes()) for p in pages]

    def parse(path, raw):
        return parse_latexml_html(raw, input_uri=str(path), fallback_id=path.stem)

    for path, raw in data:  # warm-up: regex caches, lazy imports
        link_paper(parse(path, raw), sentencizer=fast)

    results = []
    for path, raw in data:
        times = {"parse": [], "link": [], "noshort": [], "whole": []}
        n_mentions = 0
        for _ in range(args.repeat):
            # A collection before each timed step, so no step pays for another's garbage.
            gc.collect()
            a = clock()
            paper = parse(path, raw)
            times["parse"].append(clock() - a)
            gc.collect()
            a = clock()
            link_paper(paper, sentencizer=fast)
            times["link"].append(clock() - a)
            n_mentions = len(mention_rows(paper))
            p2 = parse(path, raw)
            gc.collect()
            a = clock()
            link_paper(p2, sentencizer=slow)
            times["noshort"].append(clock() - a)
            p3 = parse(path, raw)
            gc.collect()
            a = clock()
            whole_paragraph_link(p3, slow)
            times["whole"].append(clock() - a)
        med = {k: statistics.median(v) for k, v in times.items()}
        results.append((path, len(raw), len(paper.figures), n_mentions, med))

    print(f"spaCy + scispaCy pysbd_sentencizer load (once per worker): {load_s * 1000:.0f} ms\n")
    print("| page | KB | figures | mentions | parse ms | link ms | link/parse | no shortcut ms | whole paragraphs ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    tot = {"parse": 0.0, "link": 0.0, "noshort": 0.0, "whole": 0.0}
    for path, size, nfig, nm, med in results:
        for k in tot:
            tot[k] += med[k]
        print(
            f"| {path.name} | {size // 1024} | {nfig} | {nm} | {med['parse'] * 1000:.1f} | {med['link'] * 1000:.1f} | "
            f"{med['link'] / med['parse']:.2f} | {med['noshort'] * 1000:.1f} | {med['whole'] * 1000:.1f} |"
        )
    n_m = sum(r[3] for r in results)
    print(
        f"| **all {len(results)} pages** | {sum(r[1] for r in results) // 1024} | {sum(r[2] for r in results)} | {n_m} | "
        f"{tot['parse'] * 1000:.0f} | {tot['link'] * 1000:.0f} | **{tot['link'] / tot['parse']:.2f}** | "
        f"{tot['noshort'] * 1000:.0f} ({tot['noshort'] / tot['parse']:.2f}) | {tot['whole'] * 1000:.0f} "
        f"({tot['whole'] / tot['parse']:.2f}) |"
    )
    ratio = tot["link"] / tot["parse"]
    print(f"\nlinking adds {ratio * 100:.0f}% to extraction time (goal < 50%): {'met' if ratio < 0.5 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
