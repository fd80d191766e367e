"""RunInference model handlers for the figure CNNs.

``FigureModelHandler`` is Beam's ``PytorchModelHandlerTensor`` (batching, metrics) around a
``model_step.FigureModelStep``, which owns the model where it runs:

- Loading reads a sciga checkpoint with ``torch.load(..., weights_only=True)``
  (architecture, labels, input size and normalisation come from the file; no
  ``model_class`` to pass, no pickled code executed) from a local path, a Beam filesystem
  path (gs://) or a Hugging Face repo already in the local cache, into a
  ``figure_model.LoadedFigureModel``: the network *and* everything that must happen next to
  it (device placement, normalisation, precision, softmax, splitting a batch the device
  has no memory for). The SDK process only hands it the batch in host memory.
- Without sharing, each SDK process loads its own model (Beam keeps one per process).
- With ``share_model`` (or ``model_copies``), the model of a machine runs in a process of
  its own (``shared_model.py``) and every SDK process writes its batches into a
  memory-mapped file that process reads: not Beam's ``large_model``, whose proxy pickled
  every batch into a thread of one of the decoding SDK processes and made each of them
  wait about as long as it decoded (measured; see ``shared_model.py``). A CUDA tensor never
  crosses processes: batches are numpy arrays in host memory, preferably compact uint8
  NxSxSx3 images (150 KB each at 224 px, a quarter of the float tensor), and only the
  process that owns the model moves them to its device and normalises them there.

Two tasks: ``classify`` returns softmax probabilities over the checkpoint's labels,
``embed`` returns unit-norm pooled features (the head removed) for GA matching.

Inputs: uint8 NxSxSx3 (``models.resize_for_model``; normalised on the device) or
float32 3xSxS already normalised (``models.preprocess``; used as is), one kind per batch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any, Optional

import numpy as np
import torch
from apache_beam.ml.inference.base import PredictionResult
from apache_beam.ml.inference.pytorch_inference import PytorchModelHandlerTensor

from sciga.transforms.vision.figure_model import (  # noqa: F401 - re-exported: where they used to live
    TASKS,
    LoadedFigureModel,
    claim_cuda_device,
    load_figure_model,
    stack_on_cpu,
)
from sciga.transforms.vision.inference_options import PRECISIONS
from sciga.transforms.vision.model_step import FigureModelStep, new_share_tag

log = logging.getLogger("sciga.vision")


def _not_used(**_):  # pragma: no cover - Beam's constructor wants a model_class
    raise RuntimeError("FigureModelHandler builds its model from the checkpoint")


def _run_batch(
    batch: Sequence[Any], model, device=None, inference_args=None, model_id=None
) -> Iterable[PredictionResult]:
    """RunInference's inference fn, in the SDK process. ``device`` (Beam's) is not used:
    the batch stays in host memory here; ``model`` (local, or the machine's shared one)
    stacks it where it reads it and moves it to its device."""
    out = model(batch)
    return [PredictionResult(None, row, model_id) for row in out]


class FigureModelHandler(PytorchModelHandlerTensor):
    """uint8 SxSx3 images (or float 3xSxS tensors) -> PredictionResult(None, numpy array).
    The example is not echoed back (nobody needs the pixels downstream).

    ``device="cuda"`` is resolved where the model is loaded (on the worker, not on the
    machine that launched the job), falling back to CPU with a log line when no GPU is
    visible. ``precision="bf16"`` runs the network under bfloat16 autocast with
    channels_last weights (on cuda, or on CPUs with bf16 support). ``share_model=True``
    loads one copy per worker machine, in a process of its own, shared by all its SDK
    processes (``shared_model.py``); ``model_copies`` pins the number of copies (one per
    GPU). Beam itself sees an unshared model (``share_model_across_processes()`` is False):
    the sharing is the step's."""

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
        )
        self.weights = weights
        self.task = task
        self.requested_device = device
        self.precision = precision
        self.min_batch_size, self.max_batch_size = min_batch_size, max_batch_size
        self.share_model, self.copies = share_model, model_copies
        self.share_tag = new_share_tag()  # made where the run is launched: the same in every worker

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

    def load_local_model(self) -> LoadedFigureModel:
        """The model in this process (with sharing: the machine's model server process)."""
        return load_figure_model(self.weights, self.task, self.requested_device, self.precision, self.max_batch_size)

    def model_step(self) -> FigureModelStep:
        return FigureModelStep(
            self.load_local_model, shared=self.options.shared, copies=self.copies or 1, tag=self.share_tag
        )

    def load_model(self):
        """What this SDK process calls: its own ``LoadedFigureModel``, or with sharing a
        ``shared_model.SharedFigureModel`` connected to the machine's model server."""
        return self.model_step().load()

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
