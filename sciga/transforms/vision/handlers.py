"""RunInference model handlers for the figure CNNs.

``FigureModelHandler`` is Beam's ``PytorchModelHandlerTensor`` (batching, metrics, model
sharing) with its own loading and its own idea of where the work happens:

- Loading reads a sciga checkpoint with ``torch.load(..., weights_only=True)``
  (architecture, labels, input size and normalisation come from the file; no
  ``model_class`` to pass, no pickled code executed) from a local path, a Beam filesystem
  path (gs://) or a Hugging Face repo already in the local cache.
- ``load_model`` returns a ``LoadedFigureModel``: the network *and* everything that must
  happen next to it (device placement, normalisation, precision, softmax, splitting a
  batch the device has no memory for). The SDK process only stacks the batch into one
  numpy array on the CPU and calls it.

Why the split matters: with ``share_model=True`` Beam's ``multi_process_shared`` keeps the
model in one process per machine and every other SDK process calls it through a proxy
that pickles the arguments. A CUDA tensor made in the caller cannot be rebuilt there
(``CUDA error: invalid device context``), and the caller may not even see the device it
asked for. So batches cross the process boundary as numpy arrays on the CPU, preferably
compact uint8 NxSxSx3 images (150 KB each at 224 px, a quarter of the float tensor), and
only the process that owns the model moves them to its device and normalises them there.

Two tasks: ``classify`` returns softmax probabilities over the checkpoint's labels,
``embed`` returns unit-norm pooled features (the head removed) for GA matching.

Inputs: uint8 NxSxSx3 (``models.resize_for_model``; normalised on the device) or
float32 3xSxS already normalised (``models.preprocess``; used as is), one kind per batch.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from collections.abc import Iterable, Sequence
from typing import Any, Optional

import numpy as np
import torch
from apache_beam.ml.inference.base import PredictionResult
from apache_beam.ml.inference.pytorch_inference import PytorchModelHandlerTensor

from sciga.transforms.vision.inference_options import PRECISIONS
from sciga.transforms.vision.models import CheckpointMeta, load_model, normalise, pick_device

log = logging.getLogger("sciga.vision")

TASKS = ("classify", "embed")


def _not_used(**_):  # pragma: no cover - Beam's constructor wants a model_class
    raise RuntimeError("FigureModelHandler builds its model from the checkpoint")


def stack_on_cpu(batch: Sequence[Any]) -> np.ndarray:
    """The batch as one numpy array in host memory: what may cross to the model process.
    Torch tensors are brought to the CPU first (a device tensor must never be pickled)."""
    arrays = [t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t) for t in batch]
    return np.stack(arrays)


class LoadedFigureModel:
    """A figure CNN in the process that owns it: ``model(batch) -> numpy (N, K) float32``.

    ``batch`` is a numpy array in host memory: uint8 NxSxSx3 (normalised here, on the
    device, with the checkpoint's mean/std) or float32 Nx3xSxS already normalised. The
    work runs under a lock (with a shared model, calls from many SDK processes arrive on
    threads of this process; the device runs one batch at a time and its memory use stays
    that of one batch). On a CUDA out-of-memory error the chunk size is halved, the failed
    chunk retried, and the smaller size kept for later calls."""

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
        self.mean = torch.tensor(meta.mean, dtype=torch.float32, device=self.device).view(1, 3, 1, 1)
        self.std = torch.tensor(meta.std, dtype=torch.float32, device=self.device).view(1, 3, 1, 1)
        if precision == "bf16":  # tensor-core friendly layout for convolutions under autocast
            self.net = self.net.to(memory_format=torch.channels_last)
        self._lock = threading.Lock()

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        batch = np.asarray(batch)
        if batch.dtype == np.uint8:
            if batch.ndim != 4 or batch.shape[-1] != 3:
                raise ValueError(f"uint8 batches are NxSxSx3 images, got shape {batch.shape}")
        elif batch.dtype == np.float32:
            if batch.ndim != 4 or batch.shape[1] != 3:
                raise ValueError(f"float32 batches are Nx3xSxS normalised tensors, got shape {batch.shape}")
        else:
            raise TypeError(f"batches are uint8 images or float32 tensors, not {batch.dtype}")
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
            if x.dtype == torch.uint8:
                x = normalise(x, self.mean, self.std)
            # the permuted NHWC images are laid out channels_last already: keep that for bf16
            # (channels_last weights), give the fp32 network the NCHW layout it was built with
            x = x.contiguous(memory_format=torch.channels_last if self.precision == "bf16" else torch.contiguous_format)
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.precision == "bf16"):
                y = self.net(x)
            y = y.float()
            if self.task == "classify":
                y = torch.softmax(y, dim=1)
            else:
                y = torch.nn.functional.normalize(torch.flatten(y, 1), dim=1)
            return y.cpu().numpy()


def _run_batch(
    batch: Sequence[Any], model, device=None, inference_args=None, model_id=None
) -> Iterable[PredictionResult]:
    """RunInference's inference fn, in the SDK process. ``device`` (Beam's) is not used:
    the batch stays in host memory here; ``model`` (local, or Beam's proxy to the shared
    one) moves it to its device."""
    out = model(stack_on_cpu(batch))
    return [PredictionResult(None, row, model_id) for row in out]


def claim_cuda_device() -> str:
    """'cuda:i' for the next model copy on this machine: copies loaded one after another
    (by any SDK process) take the GPUs in turn, so ``model_copies`` = number of GPUs puts
    one model on each. The turn is a counter in a file under a cross-process lock."""
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


class FigureModelHandler(PytorchModelHandlerTensor):
    """uint8 SxSx3 images (or float 3xSxS tensors) -> PredictionResult(None, numpy array).
    The example is not echoed back (nobody needs the pixels downstream).

    ``device="cuda"`` is resolved where the model is loaded (on the worker, not on the
    machine that launched the job), falling back to CPU with a log line when no GPU is
    visible. ``precision="bf16"`` runs the network under bfloat16 autocast with
    channels_last weights (on cuda, or on CPUs with bf16 support). ``share_model=True``
    loads one copy per worker machine shared by all its SDK processes (Beam's
    multi_process_shared); ``model_copies`` pins the number of copies (one per GPU)."""

    def __init__(
        self,
        weights: str,
        task: str = "classify",
        device: str = "cpu",
        *,
        min_batch_size: int = 1,
        max_batch_size: int = 32,
        share_model: bool = False,
        model_copies: Optional[int] = None,
        precision: str = "fp32",
    ):
        if task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}")
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, not {precision!r}")
        super().__init__(
            state_dict_path=weights,
            model_class=_not_used,
            device="CPU",  # Beam's device is only what _run_batch is handed; the model picks its own
            inference_fn=_run_batch,
            min_batch_size=min_batch_size,
            max_batch_size=max_batch_size,
            large_model=share_model,
            model_copies=model_copies,
        )
        self.weights = weights
        self.task = task
        self.requested_device = device
        self.precision = precision
        self.min_batch_size, self.max_batch_size = min_batch_size, max_batch_size
        self.share_model, self.copies = share_model, model_copies

    @property
    def options(self):
        """This handler's settings as ``inference.InferenceOptions``."""
        from sciga.transforms.vision.inference_options import InferenceOptions

        return InferenceOptions(
            device=self.requested_device,
            max_batch_size=self.max_batch_size,
            min_batch_size=self.min_batch_size,
            share_model=self.share_model,
            model_copies=self.copies,
            precision=self.precision,
        )

    @classmethod
    def from_options(cls, weights: str, task: str, options) -> FigureModelHandler:
        """From an ``inference.InferenceOptions``."""
        return cls(
            weights,
            task,
            options.device,
            min_batch_size=options.min_batch_size,
            max_batch_size=options.max_batch_size,
            share_model=options.share_model,
            model_copies=options.model_copies,
            precision=options.precision,
        )

    def load_model(self) -> LoadedFigureModel:  # type: ignore[override]  # Beam types it a torch Module; ours wraps one
        device = pick_device(self.requested_device)
        if device == "cuda":
            device = claim_cuda_device()
            torch.backends.cudnn.benchmark = True  # fixed input size: let cuDNN pick its fastest kernels once
            if self.precision == "bf16" and not torch.cuda.is_bf16_supported(including_emulation=False):
                log.warning(
                    "--vision-precision bf16: %s has no bf16 tensor cores, so bf16 will be slow; use fp32 there",
                    torch.cuda.get_device_name(device),
                )
        net, meta = load_model(self.weights, embed=self.task == "embed", device=device)
        self._device = torch.device(device)
        log.info(
            "loaded %s (%s, %d labels) for %s on %s, %s, pid %d",
            self.weights,
            meta.arch,
            len(meta.labels),
            self.task,
            device,
            self.precision,
            os.getpid(),
        )
        return LoadedFigureModel(net, meta, self.task, device, self.precision, self.max_batch_size)

    def get_num_bytes(self, batch: Sequence[Any]) -> int:
        return sum(
            t.element_size() * t.nelement() if isinstance(t, torch.Tensor) else np.asarray(t).nbytes for t in batch
        )

    def get_metrics_namespace(self) -> str:
        return f"sciga_vision_{self.task}"


def probabilities(result: Any) -> np.ndarray:
    """The numpy output of a PredictionResult (or an array given directly)."""
    inf = result.inference if isinstance(result, PredictionResult) else result
    return np.asarray(inf, dtype=np.float32)
