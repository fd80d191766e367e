"""Benchmark: evaluation metrics vectorized over a batch vs. a per-query Python loop, and
Abs2Cap's per-paper BM25 (index + query) time.

    python bench/metrics.py [--queries 100000] [--papers 2000]

Both metric paths compute R@1, R@2, R@3, MRR and CAR@5 for the same synthetic rankings
(candidates per paper drawn like SciGA's 6.16 +- 5.86 figures, scores with ties), checks
that they agree, and prints queries/s and the ratio. Measured in one run, same machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sciga.training import abs2cap
from sciga.training import metrics as M


def synthetic_rankings(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    sizes = np.clip(np.rint(rng.gamma(1.1, 5.6, size=n)), 2, 40).astype(int)
    lists, gts = [], []
    for i, k in enumerate(sizes):
        s = rng.random(k)
        if i % 4 == 0:
            s = np.round(s, 1)  # ties
        lists.append(s.tolist())
        gts.append(int(rng.integers(0, k)) if i % 10 else [int(rng.integers(0, k)), int(rng.integers(0, k))])
    return lists, gts


def per_query(lists, gts) -> dict:
    r = {1: 0.0, 2: 0.0, 3: 0.0}
    mrr = car = above = 0.0
    for s, g in zip(lists, gts):
        for k in r:
            r[k] += M.recall_at_k(s, g, k)
        mrr += M.reciprocal_rank(s, g)
        c = M.car_at_k(s, g, 5)
        car += c
        above += c > 0.5
    n = len(lists)
    return {"R@1": r[1] / n, "R@2": r[2] / n, "R@3": r[3] / n, "MRR": mrr / n, "CAR@5": car / n, "CAR@5>0.5": above / n}


def vectorized(lists, gts, chunk: int = 20000) -> dict:
    """intra_summary in chunks (bounded padding memory), combined by query counts."""
    tot: dict = {}
    for start in range(0, len(lists), chunk):
        part = M.intra_summary(lists[start : start + chunk], gts[start : start + chunk])
        n = part.pop("queries")
        for k, v in part.items():
            tot[k] = tot.get(k, 0.0) + v * n
    return {k: v / len(lists) for k, v in tot.items()}


WORDS = (
    "model network training image video segmentation graph learning diffusion token attention transformer "
    "accuracy benchmark dataset results method baseline feature encoder decoder loss performance architecture "
    "overview pipeline experiment ablation comparison qualitative quantitative robot policy reward simulation "
    "sensor haptic user study interaction query retrieval caption figure abstract language vision physics "
    "quantum spin lattice energy galaxy star spectrum cell protein gene molecule"
).split()


def synthetic_papers(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, len(WORDS) + 1)
    p /= p.sum()

    def text(k):
        return " ".join(rng.choice(WORDS, size=k, p=p))

    papers = []
    for _ in range(n):
        n_caps = int(np.clip(rng.gamma(1.1, 5.6), 2, 40))
        papers.append((text(200), [text(int(np.clip(rng.normal(48, 30), 5, 200))) for _ in range(n_caps)]))
    return papers


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=100_000)
    ap.add_argument("--papers", type=int, default=2000)
    args = ap.parse_args()

    lists, gts = synthetic_rankings(args.queries)
    t0 = time.perf_counter()
    a = per_query(lists, gts)
    t_loop = time.perf_counter() - t0
    t0 = time.perf_counter()
    b = vectorized(lists, gts)
    t_vec = time.perf_counter() - t0
    for k in a:
        assert abs(a[k] - b[k]) < 1e-9, (k, a[k], b[k])
    print(
        f"metrics over {args.queries} rankings (R@1-3, MRR, CAR@5), candidates per query "
        f"mean {np.mean([len(x) for x in lists]):.2f}"
    )
    print("| path | seconds | queries/s |\n|---|---|---|")
    print(f"| per-query Python loop | {t_loop:.2f} | {args.queries / t_loop:,.0f} |")
    print(f"| vectorized batch (numpy) | {t_vec:.2f} | {args.queries / t_vec:,.0f} |")
    print(f"speed-up: {t_loop / t_vec:.1f}x  (identical results)")

    papers = synthetic_papers(args.papers)
    abs2cap.bm25_scores("warm up", ["warm up"])
    t0 = time.perf_counter()
    for abstract, caps in papers:
        abs2cap.bm25_scores(abstract, caps)
    t_bm25 = time.perf_counter() - t0
    n_rouge = min(args.papers, 500)
    t0 = time.perf_counter()
    for abstract, caps in papers[:n_rouge]:
        abs2cap.rouge_l_scores(abstract, caps)
    t_rouge = time.perf_counter() - t0
    caps = np.mean([len(c) for _, c in papers])
    print(f"\nAbs2Cap per paper ({args.papers} papers, {caps:.1f} captions each, 200-word abstracts)")
    print("| scorer | ms / paper | papers/s |\n|---|---|---|")
    print(
        f"| BM25 (bm25s, index + query per paper) | {1000 * t_bm25 / args.papers:.2f} | {args.papers / t_bm25:,.0f} |"
    )
    print(f"| ROUGE-L (rouge-score), {n_rouge} papers | {1000 * t_rouge / n_rouge:.2f} | {n_rouge / t_rouge:,.0f} |")


if __name__ == "__main__":
    main()
