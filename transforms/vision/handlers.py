"""RunInference model handlers for the figure CNNs.

``FigureModelHandler`` is Beam's ``PytorchModelHandlerTensor`` (batching, metrics, model
sharing, GPU placement) with one change: loading reads a sciga checkpoint with
``torch.load(..., weights_only=True)`` (architecture and labels come from the file; no
``model_class`` to pass, no pickled code executed) from a local path, a Beam filesystem
path (gs://) or a Hugging Face repo already in the local cache.

Two tasks: ``classify`` returns softmax probabilities over the checkpoint's labels,
``embed`` returns unit-norm pooled features (the head removed) for GA matching.

On Dataflow GPU workers: ``device="cuda"`` places model and batches on the GPU (falling
back to CPU with a log line when none is visible); ``share_model=True`` loads one copy per
worker VM shared by all SDK processes (Beam's multi_process_shared), which is what you want
with one GPU per VM and several SDK processes; ``model_copies`` pins the number of copies
(e.g. one per GPU).
"""
from __future__ import annotations

import logging
from typing import Any, Iterable, Optional, Sequence

import numpy as np
import torch
from apache_beam.ml.inference.base import PredictionResult
from apache_beam.ml.inference.pytorch_inference import PytorchModelHandlerTensor

from sciga.transforms.vision.models import load_model, pick_device

log = logging.getLogger("sciga.vision")

TASKS = ("classify", "embed")


def _not_used(**_):  # pragma: no cover - Beam's constructor wants a model_class
    raise RuntimeError("FigureModelHandler builds its model from the checkpoint")


def _classify_fn(batch: Sequence[torch.Tensor], model, device, inference_args=None, model_id=None) -> Iterable[PredictionResult]:
    with torch.no_grad():
        x = torch.stack(list(batch)).to(device)
        probs = torch.softmax(model(x).float(), dim=1).cpu().numpy()
    return [PredictionResult(None, p, model_id) for p in probs]


def _embed_fn(batch: Sequence[torch.Tensor], model, device, inference_args=None, model_id=None) -> Iterable[PredictionResult]:
    with torch.no_grad():
        x = torch.stack(list(batch)).to(device)
        f = torch.flatten(model(x).float(), 1)
        f = torch.nn.functional.normalize(f, dim=1).cpu().numpy()
    return [PredictionResult(None, v, model_id) for v in f]


class FigureModelHandler(PytorchModelHandlerTensor):
    """Tensors (3 x S x S, already preprocessed) -> PredictionResult(None, numpy array).
    The example is not echoed back (it is a large tensor nobody needs downstream)."""

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
    ):
        if task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}")
        super().__init__(
            state_dict_path=weights,
            model_class=_not_used,
            device="GPU" if device == "cuda" else "CPU",
            inference_fn=_classify_fn if task == "classify" else _embed_fn,
            min_batch_size=min_batch_size,
            max_batch_size=max_batch_size,
            large_model=share_model,
            model_copies=model_copies,
        )
        self.weights = weights
        self.task = task
        self.requested_device = device

    def load_model(self) -> torch.nn.Module:
        device = pick_device(self.requested_device)
        model, meta = load_model(self.weights, embed=self.task == "embed", device=device)
        self._device = torch.device(device)
        log.info("loaded %s (%s, %d labels) for %s on %s", self.weights, meta.arch, len(meta.labels), self.task, device)
        return model

    def get_num_bytes(self, batch: Sequence[torch.Tensor]) -> int:
        return sum(t.element_size() * t.nelement() for t in batch)

    def get_metrics_namespace(self) -> str:
        return f"sciga_vision_{self.task}"


def probabilities(result: Any) -> np.ndarray:
    """The numpy output of a PredictionResult (or an array given directly)."""
    inf = result.inference if isinstance(result, PredictionResult) else result
    return np.asarray(inf, dtype=np.float32)
