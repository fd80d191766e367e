"""Abs2Fig and Abs2Fig w/cap (SciGA Sec. 4.2 (iii), (iv)): a dual encoder scores each
figure by the cosine similarity of the abstract f(T) and the figure g(I) -- or, with
captions, g(I) ⊙ f(C) -- trained with the intra loss (Eq. 4) or the inter loss (Eq. 5).

Figure sampling keeps ids, images and captions together: a training item is built from
candidate indices, and every unit (image) carries the slot of the candidate it belongs to,
so the ids reported for a slot are always those of the images embedded in it (the
official loader takes the ids of all figures but the images of a random sample).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Optional

import torch
import torch.nn.functional as F

from sciga.training.ground_truth import Example
from sciga.training.losses import inter_info_nce, intra_info_nce, units_to_candidates
from sciga.training.models.dual_encoder import fuse_caption
from sciga.training.runtime import autocast


@dataclass
class IntraItem:
    paper_id: str
    abstract: str
    candidate_ids: list[str]  # slot -> figure id; slot 0 is the GA (the positive)
    unit_ids: list[str] = field(default_factory=list)
    unit_slot: list[int] = field(default_factory=list)
    unit_images: list = field(default_factory=list)
    unit_captions: list[str] = field(default_factory=list)


@dataclass
class InterItem:
    paper_id: str
    abstract: str
    unit_ids: list[str]
    unit_images: list
    unit_captions: list[str]


def _units(ex: Example, j: int, images: dict, rng: Optional[random.Random], max_units: int):
    units = [u for u in ex.candidates[j].units if u.id in images]
    if len(units) > max_units:
        keep = sorted(rng.sample(range(len(units)), max_units)) if rng else list(range(max_units))
        units = [units[i] for i in keep]
    return units


def sample_intra_item(ex: Example, images: dict, m: int, rng: random.Random, max_units: int = 8) -> Optional[IntraItem]:
    """The GA plus up to m-1 sampled non-GT figures of one paper (other GT figures are
    neither positives nor negatives). None when the GA has no readable image."""
    pos = ex.ga_index
    if pos is None:
        return None
    pos_units = _units(ex, pos, images, rng, max_units)
    if not pos_units:
        return None
    gt = set(ex.gt)
    negatives = [
        j for j in range(len(ex.candidates)) if j not in gt and any(u.id in images for u in ex.candidates[j].units)
    ]
    chosen = [pos] + (rng.sample(negatives, min(m - 1, len(negatives))) if m > 1 else [])
    item = IntraItem(ex.paper_id, ex.abstract, [ex.candidates[j].figure_id for j in chosen])
    for slot, j in enumerate(chosen):
        for u in pos_units if j == pos else _units(ex, j, images, rng, max_units):
            item.unit_ids.append(u.id)
            item.unit_slot.append(slot)
            item.unit_images.append(images[u.id])
            item.unit_captions.append(u.caption)
    return item


def inter_item(ex: Example, images: dict, max_units: int = 8) -> Optional[InterItem]:
    pos = ex.ga_index
    if pos is None:
        return None
    units = _units(ex, pos, images, None, max_units)
    if not units:
        return None
    return InterItem(
        ex.paper_id, ex.abstract, [u.id for u in units], [images[u.id] for u in units], [u.caption for u in units]
    )


# ---------------------------------------------------------------------------------------
# forward passes


def embed_units(model, pixels: torch.Tensor, caption_tokens: Optional[torch.Tensor]) -> torch.Tensor:
    """L2-normalized figure embeddings: g(I), or g(I) ⊙ f(C) for w/cap."""
    img = model.encode_image(pixels)
    if caption_tokens is not None:
        return fuse_caption(img.float(), model.encode_text(caption_tokens).float())
    return F.normalize(img.float(), dim=-1)


def embed_text(model, texts: Sequence[str], device) -> torch.Tensor:
    return F.normalize(model.encode_text(model.tokenize(list(texts)).to(device)).float(), dim=-1)


def intra_batch(items: Sequence[IntraItem], model, use_captions: bool):
    """Collate on CPU: abstract tokens, flat unit pixels with their (paper, slot), caption
    tokens, and the candidate mask."""
    m = max(len(it.candidate_ids) for it in items)
    pixels = torch.stack([model.preprocess(im) for it in items for im in it.unit_images])
    unit_batch = torch.tensor([b for b, it in enumerate(items) for _ in it.unit_ids])
    unit_slot = torch.tensor([s for it in items for s in it.unit_slot])
    mask = torch.zeros((len(items), m), dtype=torch.bool)
    for b, it in enumerate(items):
        mask[b, : len(it.candidate_ids)] = True
    return {
        "text": model.tokenize([it.abstract for it in items]),
        "pixels": pixels,
        "captions": model.tokenize([c for it in items for c in it.unit_captions]) if use_captions else None,
        "unit_batch": unit_batch,
        "unit_slot": unit_slot,
        "mask": mask,
    }


def intra_loss(model, batch: dict, device) -> torch.Tensor:
    q = F.normalize(model.encode_text(batch["text"].to(device)).float(), dim=-1)
    caps = batch["captions"].to(device) if batch["captions"] is not None else None
    u = embed_units(model, batch["pixels"].to(device), caps)
    ub = batch["unit_batch"].to(device)
    sims = (q[ub] * u).sum(-1) * model.logit_scale.exp().float()
    b, m = batch["mask"].shape
    cand = units_to_candidates(sims, ub, batch["unit_slot"].to(device), b, m)
    mask = batch["mask"].to(device) & torch.isfinite(cand)
    return intra_info_nce(cand, mask, torch.zeros(b, dtype=torch.long, device=device))


def inter_batch(items: Sequence[InterItem], model, use_captions: bool) -> dict:
    return {
        "text": model.tokenize([it.abstract for it in items]),
        "pixels": torch.stack([model.preprocess(im) for it in items for im in it.unit_images]),
        "captions": model.tokenize([c for it in items for c in it.unit_captions]) if use_captions else None,
        "unit_batch": torch.tensor([b for b, it in enumerate(items) for _ in it.unit_ids]),
        "n": len(items),
    }


def pool_units(u: torch.Tensor, unit_batch: torch.Tensor, n: int) -> torch.Tensor:
    """One embedding per GA: the normalized mean of its units' embeddings."""
    out = torch.zeros((n, u.shape[1]), dtype=u.dtype, device=u.device).index_add_(0, unit_batch, u)
    return F.normalize(out, dim=-1)


def inter_loss(model, batch: dict, device) -> torch.Tensor:
    q = model.encode_text(batch["text"].to(device))
    caps = batch["captions"].to(device) if batch["captions"] is not None else None
    u = embed_units(model, batch["pixels"].to(device), caps)
    g = pool_units(u, batch["unit_batch"].to(device), batch["n"])
    return inter_info_nce(q, g, model.logit_scale)


# ---------------------------------------------------------------------------------------
# scoring


@torch.no_grad()
def score_intra(
    model, decoded: Iterable[tuple[Example, dict]], use_captions: bool, device, amp: bool = True, chunk: int = 64
) -> Iterator[tuple[Example, list[float]]]:
    """Per paper: cosine(abstract, figure) for every candidate, max over subfigures;
    a candidate with no readable image ranks last."""
    model.eval()
    for ex, images in decoded:
        with autocast(device, amp):
            q = embed_text(model, [ex.abstract], device)[0]
            units = [(j, u) for j, c in enumerate(ex.candidates) for u in c.units if u.id in images]
            best = [None] * len(ex.candidates)
            for start in range(0, len(units), chunk):
                part = units[start : start + chunk]
                pixels = torch.stack([model.preprocess(images[u.id]) for _, u in part]).to(device)
                caps = model.tokenize([u.caption for _, u in part]).to(device) if use_captions else None
                sims = (embed_units(model, pixels, caps) @ q).tolist()
                for (j, _), s in zip(part, sims):
                    best[j] = s if best[j] is None else max(best[j], s)
        yield ex, fill_missing(best)


def fill_missing(scores: list) -> list[float]:
    """Unscorable candidates (None) get a score below every real one."""
    real = [s for s in scores if s is not None]
    low = (min(real) - 1.0) if real else 0.0
    return [float(s) if s is not None else low for s in scores]


@torch.no_grad()
def embed_gas(
    model, decoded: Iterable[tuple[Example, dict]], use_captions: bool, device, amp: bool = True, max_units: int = 8
) -> tuple[list[str], torch.Tensor]:
    """(paper ids, GA embeddings) for the examples whose GA has a readable image."""
    model.eval()
    ids, embs = [], []
    for ex, images in decoded:
        it = inter_item(ex, images, max_units)
        if it is None:
            continue
        with autocast(device, amp):
            pixels = torch.stack([model.preprocess(im) for im in it.unit_images]).to(device)
            caps = model.tokenize(it.unit_captions).to(device) if use_captions else None
            u = embed_units(model, pixels, caps)
            embs.append(F.normalize(u.mean(0), dim=-1).cpu())
        ids.append(ex.paper_id)
    return ids, (torch.stack(embs) if embs else torch.zeros((0, 1)))


@torch.no_grad()
def embed_abstracts(model, examples: Sequence[Example], device, amp: bool = True, batch_size: int = 64) -> torch.Tensor:
    model.eval()
    out = []
    for start in range(0, len(examples), batch_size):
        with autocast(device, amp):
            out.append(embed_text(model, [e.abstract for e in examples[start : start + batch_size]], device).cpu())
    return torch.cat(out) if out else torch.zeros((0, 1))
