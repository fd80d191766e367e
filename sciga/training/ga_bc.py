"""GA-BC (SciGA Sec. 4.2 (ii)): every figure image is classified GA / not GA on its own; the
GA probability is the relevance score. Cross-entropy with inverse-frequency class weights
(GAs are rare), figure-level probability = max over the figure's subfigures. It sees no
text, so it applies to Intra-GA recommendation only.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch
import torch.nn.functional as F

from sciga.training.abs2fig import fill_missing
from sciga.training.ground_truth import Example
from sciga.training.runtime import autocast


def unit_labels(examples: Iterable[Example]) -> list[int]:
    """Labels of every scoreable image (1 = its figure is a GT), from metadata alone."""
    out = []
    for ex in examples:
        gt = set(ex.gt)
        for j, c in enumerate(ex.candidates):
            out.extend([1 if j in gt else 0] * len(c.units))
    return out


def unit_items(decoded: Iterable[tuple[Example, dict]], transform) -> Iterator[tuple[torch.Tensor, int]]:
    for ex, images in decoded:
        gt = set(ex.gt)
        for j, c in enumerate(ex.candidates):
            for u in c.units:
                if u.id in images:
                    yield transform(images[u.id]), (1 if j in gt else 0)


def collate(items) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.stack([x for x, _ in items]), torch.tensor([y for _, y in items], dtype=torch.long)


def make_loss(weights: torch.Tensor, device):
    w = weights.to(device)

    def loss_fn(model, batch):
        x, y = batch
        return F.cross_entropy(model(x.to(device)).float(), y.to(device), weight=w)

    return loss_fn


@torch.no_grad()
def score_intra(
    model, decoded: Iterable[tuple[Example, dict]], transform, device, amp: bool = True, chunk: int = 64
) -> Iterator[tuple[Example, list[float]]]:
    model.eval()
    for ex, images in decoded:
        units = [(j, u) for j, c in enumerate(ex.candidates) for u in c.units if u.id in images]
        best = [None] * len(ex.candidates)
        for start in range(0, len(units), chunk):
            part = units[start : start + chunk]
            x = torch.stack([transform(images[u.id]) for _, u in part]).to(device)
            with autocast(device, amp):
                p = torch.softmax(model(x).float(), dim=-1)[:, 1].tolist()
            for (j, _), s in zip(part, p):
                best[j] = s if best[j] is None else max(best[j], s)
        yield ex, fill_missing(best)
