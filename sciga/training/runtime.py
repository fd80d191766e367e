"""Device, mixed precision and seeding for the training jobs: the same code on CPU (here,
tests, CI) and on a GPU when one is present."""

from __future__ import annotations

import contextlib
import logging
import random

import numpy as np
import torch

log = logging.getLogger("sciga.training")


def pick_device(name: str = "auto") -> torch.device:
    """``auto`` -> cuda when available, else cpu; an unavailable cuda request falls back to
    cpu with one log line instead of failing."""
    name = (name or "auto").lower()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        log.warning("device %s requested but no GPU is available: running on cpu", name)
        return torch.device("cpu")
    return torch.device(name)


def autocast(device: torch.device, enabled: bool = True):
    """fp16 autocast on GPU (AMP); a no-op context on CPU."""
    if enabled and device.type == "cuda":
        return torch.autocast(device_type="cuda", dtype=torch.float16)
    return contextlib.nullcontext()


def grad_scaler(device: torch.device, enabled: bool = True):
    return torch.amp.GradScaler("cuda", enabled=enabled and device.type == "cuda")


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
