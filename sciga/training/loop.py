"""Pieces every training job shares: streaming shuffle buffer, decoded-image examples,
the optimisation loop with AMP, and the model file (weights + a JSON card)."""

from __future__ import annotations

import json
import logging
import os
import random
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Optional

import torch

from sciga.training.data import iter_example_images
from sciga.training.ground_truth import Example
from sciga.training.images import decode_image
from sciga.training.runtime import autocast, grad_scaler
from sciga.transforms.vision.defaults import DEFAULT_MAX_PIXELS

log = logging.getLogger("sciga.training")

MODEL_FILE = "model.pt"
CARD_FILE = "model.json"


def shuffled(items: Iterable, buffer_size: int, rng: random.Random) -> Iterator:
    """Streaming shuffle: keep ``buffer_size`` items, emit a random one per new item."""
    buf: list = []
    for it in items:
        if len(buf) < buffer_size:
            buf.append(it)
            continue
        j = rng.randrange(len(buf))
        yield buf[j]
        buf[j] = it
    rng.shuffle(buf)
    yield from buf


def batched(items: Iterable, size: int) -> Iterator[list]:
    batch: list = []
    for it in items:
        batch.append(it)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


@dataclass
class ImageStats:
    papers: int = 0
    papers_without_images: int = 0
    units: int = 0
    units_unreadable: int = 0  # missing bytes or not decodable within the pixel limit


def decoded_examples(
    data_dir: str, examples: Sequence[Example], max_pixels: int = DEFAULT_MAX_PIXELS, stats: Optional[ImageStats] = None
) -> Iterator[tuple[Example, dict]]:
    """(example, {unit id: RGB image}) streamed from the shards; unreadable images are
    left out (their unit cannot be scored) and counted in ``stats``."""
    st = stats if stats is not None else ImageStats()
    for ex, raw in iter_example_images(data_dir, examples):
        images = {}
        for uid, data in raw.items():
            im = decode_image(data, max_pixels)
            if im is not None:
                images[uid] = im
        n_units = sum(len(c.units) for c in ex.candidates)
        st.papers += 1
        st.units += n_units
        st.units_unreadable += n_units - len(images)
        if not images:
            st.papers_without_images += 1
        yield ex, images


@dataclass
class TrainResult:
    steps: int = 0
    losses: list = field(default_factory=list)
    initial_loss: Optional[float] = None
    final_loss: Optional[float] = None
    seconds: float = 0.0


def optimise(
    model: torch.nn.Module,
    epoch_batches: Callable[[int], Iterable],
    loss_fn: Callable,
    *,
    epochs: int,
    max_steps: Optional[int],
    lr: float,
    weight_decay: float,
    device: torch.device,
    amp: bool = True,
    check_batches: Optional[Callable[[], Iterable]] = None,
) -> TrainResult:
    """AdamW over ``epoch_batches(epoch)``; ``loss_fn(model, batch)`` returns a scalar.
    ``check_batches`` (a fixed, deterministic set) is scored before and after training so
    the model card says whether training lowered the loss."""
    res = TrainResult()
    t0 = time.time()
    model.to(device)
    if check_batches is not None:
        res.initial_loss = evaluate_loss(model, check_batches(), loss_fn, device, amp)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    scaler = grad_scaler(device, amp)
    done = False
    for epoch in range(epochs):
        model.train()
        for batch in epoch_batches(epoch):
            with autocast(device, amp):
                loss = loss_fn(model, batch)
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            res.steps += 1
            res.losses.append(float(loss.detach()))
            if res.steps % 50 == 0:
                log.info("step %d loss %.4f", res.steps, res.losses[-1])
            if max_steps and res.steps >= max_steps:
                done = True
                break
        if done:
            break
    if check_batches is not None:
        res.final_loss = evaluate_loss(model, check_batches(), loss_fn, device, amp)
    res.seconds = time.time() - t0
    return res


@torch.no_grad()
def evaluate_loss(model, batches: Iterable, loss_fn: Callable, device: torch.device, amp: bool = True) -> float:
    """Mean training loss over ``batches``, computed as training computes it (train mode:
    batch-norm uses batch statistics) but without gradients, with a fixed dropout seed,
    and with the model's buffers (running statistics) restored afterwards."""
    saved = {k: v.detach().clone() for k, v in model.named_buffers()}
    rng_state = torch.random.get_rng_state()
    torch.manual_seed(0)
    model.train()
    total, n = 0.0, 0
    for batch in batches:
        with autocast(device, amp):
            total += float(loss_fn(model, batch))
        n += 1
    with torch.no_grad():
        for k, v in model.named_buffers():
            v.copy_(saved[k])
    torch.random.set_rng_state(rng_state)
    return total / max(n, 1)


def save_model(out_dir: str, model: torch.nn.Module, card: dict) -> str:
    os.makedirs(out_dir, exist_ok=True)
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    torch.save(state, os.path.join(out_dir, MODEL_FILE))
    with open(os.path.join(out_dir, CARD_FILE), "w", encoding="utf-8") as f:
        json.dump(card, f, indent=2, sort_keys=True)
        f.write("\n")
    return out_dir


def read_card(model_dir: str) -> dict:
    path = os.path.join(model_dir, CARD_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{model_dir} holds no {CARD_FILE}; give the folder `sciga train` wrote (--model).")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def load_state(model: torch.nn.Module, model_dir: str) -> torch.nn.Module:
    state = torch.load(os.path.join(model_dir, MODEL_FILE), map_location="cpu", weights_only=True)
    model.load_state_dict(state)
    return model
