"""Losses of the SciGA baselines (Sec. 4.2), as pure torch functions.

* :func:`intra_info_nce` -- Eq. (4): per paper, InfoNCE of the abstract against its GA
  (positive) and the paper's other figures (negatives). Papers have different numbers of
  figures, so candidates are padded to a common width; padded slots are MASKED out of the
  softmax (the official code scores zero images as real negatives). Other GT figures
  (components of the GA, a second teaser) are masked too: they are not negatives.
* :func:`inter_info_nce` -- Eq. (5): symmetric in-batch InfoNCE, abstract -> its GA against
  the other papers' GAs, and GA -> its abstract against the other abstracts.
* :func:`units_to_candidates` -- a figure's score is the max over its subfigures.
* :func:`class_weights` -- GA-BC's inverse-frequency class weights (Appendix C).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

NEG_INF = float("-inf")


def units_to_candidates(
    unit_logits: torch.Tensor, unit_batch: torch.Tensor, unit_slot: torch.Tensor, n_papers: int, n_slots: int
) -> torch.Tensor:
    """Flat unit scores (T,) of images belonging to paper ``unit_batch`` and candidate slot
    ``unit_slot`` -> (B, M) candidate scores, each the max over its units (subfigure
    max-pooling); slots without a unit (padding) are -inf."""
    flat = torch.full((n_papers * n_slots,), NEG_INF, dtype=unit_logits.dtype, device=unit_logits.device)
    idx = unit_batch.long() * n_slots + unit_slot.long()
    flat = flat.scatter_reduce(0, idx, unit_logits, reduce="amax", include_self=True)
    return flat.view(n_papers, n_slots)


def intra_info_nce(
    candidate_logits: torch.Tensor, candidate_mask: torch.Tensor, positive: torch.Tensor
) -> torch.Tensor:
    """Mean over papers of -log softmax(logits)[positive] with masked slots excluded.

    ``candidate_logits`` (B, M) are already scaled similarities (rho / tau);
    ``candidate_mask`` (B, M) is True for the positive and the real negatives;
    ``positive`` (B,) is the index of the GA."""
    logits = candidate_logits.masked_fill(~candidate_mask, NEG_INF)
    return F.cross_entropy(logits.float(), positive)


def inter_info_nce(text_emb: torch.Tensor, image_emb: torch.Tensor, logit_scale: torch.Tensor) -> torch.Tensor:
    """Symmetric InfoNCE over a batch of (abstract, GA) pairs; embeddings L2-normalized here."""
    t = F.normalize(text_emb.float(), dim=-1)
    g = F.normalize(image_emb.float(), dim=-1)
    logits = logit_scale.exp().float() * t @ g.t()
    target = torch.arange(t.shape[0], device=t.device)
    return 0.5 * (F.cross_entropy(logits, target) + F.cross_entropy(logits.t(), target))


def class_weights(labels: torch.Tensor, num_classes: int = 2) -> torch.Tensor:
    """Inverse class frequency, N / (C * N_c); a class absent from ``labels`` gets 1."""
    counts = torch.bincount(labels.long(), minlength=num_classes).float()
    n = counts.sum()
    w = torch.where(counts > 0, n / (num_classes * counts.clamp(min=1)), torch.ones_like(counts))
    return w
