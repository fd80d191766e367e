"""Images in, class probabilities out: the classifier core of the vision stage as one
reusable PTransform, and the options that tune it for a CPU or a GPU worker.

    (key, payload) --[Reshuffle]--> DecodeForModel --> RunInference(FigureModelHandler)
                                        |                    --> (key, float32 probabilities)
                                        +--> failed: (key, "kind: sentence")

- ``load_bytes(payload) -> bytes`` turns a payload into image bytes (default: the payload
  is the bytes). The build passes ``(key, image reference)`` with a loader that reads the
  file, so only references are shuffled and pixels never travel through a shuffle.
- Decoding and resizing run in the SDK processes, in parallel; what goes on to the model is
  a compact uint8 SxSx3 image (150 KB at 224 px), never a float tensor (600 KB).
- The float conversion and the normalisation happen on the model's device, inside the
  process that owns the model (``figure_model.LoadedFigureModel``); with ``share_model``
  that is the machine's model server (``shared_model.py``), and batches reach it in host
  memory, through a memory-mapped file.
- The same decoding and batching without Beam: ``model_step.ClassifyStep``.
- Every input key comes out exactly once: in ``probabilities``, or in ``failed`` with the
  reason (``decompression_bomb: ...``, ``corrupt: ...``, ``unreadable: ...``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, NamedTuple, Optional

import apache_beam as beam
from apache_beam.metrics import Metrics

from sciga.transforms.vision.defaults import DEFAULT_MAX_PIXELS
from sciga.transforms.vision.handlers import FigureModelHandler, probabilities
from sciga.transforms.vision.inference_options import DEVICES, PRECISIONS, InferenceOptions  # noqa: F401 - re-exported
from sciga.transforms.vision.model_step import (  # noqa: F401 - re-exported: the pure functions live there
    FAILED,
    image_bytes,
    image_to_model_input,
    model_input_or_reason,
    read_image_file,
    ready_model_input,
)

log = logging.getLogger("sciga.vision")


# ------------------------------------------------------------------ Beam


class DecodeForModel(beam.DoFn):
    """(key, payload) -> (key, uint8 SxSx3), or to ``failed``: (key, "kind: sentence"). A
    payload that is already the uint8 SxSx3 input passes through without a decode."""

    def __init__(
        self,
        input_size: int,
        load_bytes: Optional[Callable[[Any], bytes]] = None,
        max_pixels: int = DEFAULT_MAX_PIXELS,
        options: InferenceOptions = InferenceOptions(),
    ):
        self.input_size, self.max_pixels, self.options = input_size, max_pixels, options
        self.load_bytes = load_bytes or image_bytes
        self.decoded = Metrics.counter("sciga", "model_inputs_decoded")
        self.failed = Metrics.counter("sciga", "model_inputs_failed")
        self.ready = Metrics.counter("sciga", "model_inputs_ready")

    def setup(self):
        import torch

        threads = self.options.sdk_torch_threads(torch.cuda.is_available())
        if threads:
            torch.set_num_threads(threads)

    def process(self, element):
        key, payload = element
        if ready_model_input(payload, self.input_size) is not None:  # decoded once already, where measured
            self.ready.inc()
            yield key, payload
            return
        x, why = model_input_or_reason(payload, self.input_size, self.load_bytes, self.max_pixels, key)
        if x is not None:
            self.decoded.inc()
            yield key, x
            return
        self.failed.inc()
        yield beam.pvalue.TaggedOutput(FAILED, (key, why))


def _as_array(kv):
    key, result = kv
    return key, probabilities(result).copy()  # its own small array, not a view of the batch


class Classified(NamedTuple):
    """``probabilities``: (key, float32 array over the checkpoint's labels; for an ``embed``
    handler, the unit-norm embedding). ``failed``: (key, reason) for inputs with no image."""

    probabilities: beam.PCollection
    failed: beam.PCollection


class ClassifyImages(beam.PTransform):
    """(key, payload) -> ``Classified(probabilities, failed)``; every key comes out once.

    Give ``weights`` (+ ``options``), or a ready ``handler`` (a ``FigureModelHandler``).
    ``input_size`` defaults to the checkpoint's (read on the launching machine, which also
    checks that the weights are there and readable). ``reshuffle`` spreads the inputs over
    the workers before decoding (cheap when payloads are references; payloads that are the
    decoded input already are not reshuffled)."""

    def __init__(
        self,
        weights: Optional[str] = None,
        options: Optional[InferenceOptions] = None,
        *,
        handler: Optional[FigureModelHandler] = None,
        input_size: Optional[int] = None,
        load_bytes: Optional[Callable[[Any], bytes]] = None,
        max_pixels: int = DEFAULT_MAX_PIXELS,
        reshuffle: bool = True,
    ):
        super().__init__()
        if handler is None:
            if not weights:
                raise ValueError("ClassifyImages needs weights or a handler")
            options = options or InferenceOptions()
            handler = FigureModelHandler.from_options(weights, "classify", options)
        elif options is None:
            options = handler.options
        if input_size is None:
            from sciga.transforms.vision.models import read_meta

            input_size = read_meta(handler.weights).input_size
        self.handler, self.options, self.input_size = handler, options, input_size
        self.load_bytes, self.max_pixels, self.reshuffle = load_bytes, max_pixels, reshuffle

    def expand(self, items):
        from apache_beam.ml.inference.base import KeyedModelHandler, RunInference

        if self.reshuffle:
            # Spread the references over the workers; inputs decoded already (the build's
            # MeasureFigures sends them) are not shuffled: pixels stay off the shuffle.
            size = self.input_size
            from apache_beam.transforms.core import CallableWrapperPartitionFn

            ready, refs = items | "ReadyOrNot" >> beam.Partition(
                CallableWrapperPartitionFn(
                    lambda kv, n, size=size: 0 if ready_model_input(kv[1], size) is not None else 1
                ),
                2,
            )
            items = (ready, refs | "Spread" >> beam.Reshuffle()) | "AllInputs" >> beam.Flatten()
        prepared = items | "Decode" >> beam.ParDo(
            DecodeForModel(self.input_size, self.load_bytes, self.max_pixels, self.options)
        ).with_outputs(FAILED, main="ready")
        probs = (
            prepared.ready
            | "RunInference" >> RunInference(KeyedModelHandler(self.handler))
            | "AsArrays" >> beam.Map(_as_array)
        )
        return Classified(probs, prepared[FAILED])
