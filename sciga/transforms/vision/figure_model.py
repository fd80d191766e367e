"""A figure CNN in the process that owns it: batches of host arrays in, numpy out.

Beam-free: the Beam handler (``handlers.FigureModelHandler``), the shared-model server
(``shared_model.py``) and any executor that runs the vision stage without Beam call the same
``LoadedFigureModel``.

``load_figure_model`` reads a sciga checkpoint (``models.load_model``: ``torch.load(...,
weights_only=True)``), picks the device where it is called (``--device cuda`` falls back to
the CPU, with a log line, on a machine without a GPU) and returns a ``LoadedFigureModel``:
the network *and* everything that must happen next to it (device placement,
normalisation, precision, softmax, splitting a batch the device has no memory for). Its
caller only hands it a batch in host memory: preferably compact uint8 NxSxSx3 images
(150 KB each at 224 px, a quarter of the float tensor), normalised on the device.

Two tasks: ``classify`` returns softmax probabilities over the checkpoint's labels,
``embed`` returns unit-norm pooled features (the head removed) for GA matching.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from sciga.transforms.vision.inference_options import PRECISIONS
from sciga.transforms.vision.models import CheckpointMeta, load_model, normalise, pick_device

log = logging.getLogger("sciga.vision")

TASKS = ("classify", "embed")


def stack_on_cpu(batch: Sequence[Any]) -> np.ndarray:
    """The batch as one numpy array in host memory: what may cross to the model process.
    Torch tensors are brought to the CPU first (a device tensor must never be pickled)."""
    return np.stack(host_arrays(batch))


def host_arrays(batch: Sequence[Any]) -> list[np.ndarray]:
    """The batch's items as numpy arrays in host memory (torch tensors brought to the CPU)."""
    return [t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t) for t in batch]


def check_batch(batch: np.ndarray) -> None:
    """Raises unless ``batch`` is uint8 NxSxSx3 images or float32 Nx3xSxS tensors."""
    if batch.dtype == np.uint8:
        if batch.ndim != 4 or batch.shape[-1] != 3:
            raise ValueError(f"uint8 batches are NxSxSx3 images, got shape {batch.shape}")
    elif batch.dtype == np.float32:
        if batch.ndim != 4 or batch.shape[1] != 3:
            raise ValueError(f"float32 batches are Nx3xSxS normalised tensors, got shape {batch.shape}")
    else:
        raise TypeError(f"batches are uint8 images or float32 tensors, not {batch.dtype}")


class LoadedFigureModel:
    """A figure CNN in the process that owns it: ``model(batch) -> numpy (N, K) float32``.

    ``batch`` is a numpy array in host memory (or a sequence of per-image arrays): uint8
    NxSxSx3 (normalised here, on the device, with the checkpoint's mean/std) or float32
    Nx3xSxS already normalised. The work runs under a lock (a model shared by several
    threads or processes runs one batch at a time on its device, and its memory use stays
    that of one batch). On a CUDA out-of-memory error the chunk size is halved, the failed
    chunk retried, and the smaller size kept for later calls.

    A network whose ``reads_pixels`` is False (the zero-cost ``null`` architecture) is
    handed the batch as it reached the device: normalising is device work, which such a
    network stands in for."""

    def __init__(
        self,
        net,
        meta: CheckpointMeta,
        task: str = "classify",
        device: str = "cpu",
        precision: str = "fp32",
        max_chunk: int = 32,
    ):
        if task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}")
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, not {precision!r}")
        self.net, self.meta, self.task, self.precision = net, meta, task, precision
        self.device = torch.device(device)
        self.chunk = max(1, int(max_chunk))
        self.reads_pixels = bool(getattr(net, "reads_pixels", True))
        self.mean = torch.tensor(meta.mean, dtype=torch.float32, device=self.device).view(1, 3, 1, 1)
        self.std = torch.tensor(meta.std, dtype=torch.float32, device=self.device).view(1, 3, 1, 1)
        if precision == "bf16":  # tensor-core friendly layout for convolutions under autocast
            self.net = self.net.to(memory_format=torch.channels_last)
        self._lock = threading.Lock()

    def __call__(self, batch) -> np.ndarray:
        batch = batch if isinstance(batch, np.ndarray) else stack_on_cpu(batch)
        check_batch(batch)
        x = torch.from_numpy(np.ascontiguousarray(batch))
        if self.device.type == "cuda":
            x = x.pin_memory()  # lets the copy to the GPU run without a staging copy
        out, i, n = [], 0, len(x)
        with self._lock:
            while i < n:
                part = x[i : i + self.chunk]
                try:
                    out.append(self._forward(part))
                except torch.OutOfMemoryError:
                    if len(part) == 1:
                        raise
                    self.chunk = len(part) // 2
                    if self.device.type == "cuda":
                        torch.cuda.empty_cache()
                    log.warning(
                        "vision model on %s: out of memory at a batch of %d; using %d from now on",
                        self.device,
                        len(part),
                        self.chunk,
                    )
                    continue
                i += len(part)
        if not out:
            return np.zeros((0, 0), dtype=np.float32)
        return np.concatenate(out) if len(out) > 1 else out[0]

    def _forward(self, x: torch.Tensor) -> np.ndarray:
        with torch.inference_mode():
            x = x.to(self.device, non_blocking=True)
            bf16 = self.precision == "bf16"
            if x.dtype == torch.uint8 and self.reads_pixels:
                x = normalise(x, self.mean, self.std, channels_last=bf16)
            # channels_last weights want channels_last inputs; the fp32 network the NCHW
            # layout it was built with (both no-ops for what ``normalise`` returns)
            x = x.contiguous(memory_format=torch.channels_last if bf16 else torch.contiguous_format)
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=bf16):
                y = self.net(x)
            y = y.float()
            if self.task == "classify":
                y = torch.softmax(y, dim=1)
            else:
                y = torch.nn.functional.normalize(torch.flatten(y, 1), dim=1)
            return y.cpu().numpy()


def claim_cuda_device() -> str:
    """'cuda:i' for the next model copy on this machine: copies loaded one after another
    (by any process) take the GPUs in turn, so ``model_copies`` = number of GPUs puts one
    model on each. The turn is a counter in a file under a cross-process lock."""
    n = torch.cuda.device_count()
    if n <= 1:
        return "cuda:0"
    import fasteners  # a Beam dependency (its multi_process_shared locks use it)

    path = os.path.join(tempfile.gettempdir(), "sciga-vision-gpu-turn")
    with fasteners.InterProcessLock(path + ".lock"):
        try:
            with open(path) as f:
                turn = int(f.read().strip() or 0)
        except (OSError, ValueError):
            turn = 0
        with open(path, "w") as f:
            f.write(str(turn + 1))
    return f"cuda:{turn % n}"


def load_figure_model(
    weights: str, task: str = "classify", device: str = "cpu", precision: str = "fp32", max_chunk: int = 32
) -> LoadedFigureModel:
    """The checkpoint at ``weights`` as a ``LoadedFigureModel`` in this process, on
    ``device`` when this machine has it (cuda falls back to the CPU, saying so once)."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}")
    dev = pick_device(device)
    if dev == "cuda":
        dev = claim_cuda_device()
        torch.backends.cudnn.benchmark = True  # fixed input size: let cuDNN pick its fastest kernels once
        if precision == "bf16" and not torch.cuda.is_bf16_supported(including_emulation=False):
            log.warning(
                "--vision-precision bf16: %s has no bf16 tensor cores, so bf16 will be slow; use fp32 there",
                torch.cuda.get_device_name(dev),
            )
    net, meta = load_model(weights, embed=task == "embed", device=dev)
    log.info(
        "loaded %s (%s, %d labels) for %s on %s, %s, pid %d",
        weights,
        meta.arch,
        len(meta.labels),
        task,
        dev,
        precision,
        os.getpid(),
    )
    return LoadedFigureModel(net, meta, task, dev, precision, max_chunk)
