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
  process that owns the model (``handlers.LoadedFigureModel``); with ``share_model`` that
  is one process per machine, and batches reach it on the CPU.
- Every input key comes out exactly once: in ``probabilities``, or in ``failed`` with the
  reason (``decompression_bomb: ...``, ``corrupt: ...``, ``unreadable: ...``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, NamedTuple, Optional

import apache_beam as beam
import numpy as np
from apache_beam.metrics import Metrics

from sciga.transforms.vision.decode import DEFAULT_MAX_PIXELS, ImageDecodeError, decode_reduced, model_input
from sciga.transforms.vision.handlers import FigureModelHandler, probabilities
from sciga.transforms.vision.inference_options import DEVICES, PRECISIONS, InferenceOptions  # noqa: F401 - re-exported

log = logging.getLogger("sciga.vision")

FAILED = "failed"


# ------------------------------------------------------------------ pure functions


def image_bytes(payload: Any) -> bytes:
    """The default ``load_bytes``: the payload is the image file's bytes."""
    return payload


def read_image_file(path: str) -> bytes:
    """A ``load_bytes`` for image references: a local path, or any path Beam's
    FileSystems can open (gs://)."""
    if "://" not in path:
        with open(path, "rb") as f:
            return f.read()
    from apache_beam.io.filesystems import FileSystems

    with FileSystems.open(path) as f:
        return f.read()


def image_to_model_input(data: bytes, input_size: int, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """Image bytes -> uint8 ``input_size`` x ``input_size`` x 3 (raises ImageDecodeError):
    ``models.resize_for_model`` of the whole picture, from one decode at reduced scale
    (JPEG DCT scaling, box reduction before colour conversion)."""
    if data is None:
        raise ImageDecodeError("no_image", "there are no image bytes")
    return model_input(decode_reduced(data, max_pixels, 2 * input_size), input_size)


def ready_model_input(payload: Any, input_size: int) -> Optional[np.ndarray]:
    """The payload itself when it is an already decoded model input (uint8
    ``input_size`` squared x 3, as the build's MeasureFigures sends), else None."""
    if isinstance(payload, np.ndarray) and payload.dtype == np.uint8 and payload.shape == (input_size, input_size, 3):
        return payload
    return None


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
        ready = ready_model_input(payload, self.input_size)
        if ready is not None:  # decoded once already, where the figure was measured
            self.ready.inc()
            yield key, ready
            return
        try:
            x = image_to_model_input(self.load_bytes(payload), self.input_size, self.max_pixels)
        except ImageDecodeError as e:
            why = str(e)
        except OSError as e:
            why = f"unreadable: could not read the image ({type(e).__name__}: {e})"
        except Exception as e:  # noqa: BLE001 - one bad image must not stop the run
            log.warning("internal error preparing %r for the model: %r", key, e)
            why = f"internal: unexpected {type(e).__name__} while preparing the image ({e}); please report"
        else:
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
