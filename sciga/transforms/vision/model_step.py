"""The model steps of the vision stage, without Apache Beam.

- ``FigureModelStep`` owns a figure model where it runs and runs batches through it: the
  model in this process (``figure_model.LoadedFigureModel``), or the machine's shared one
  in its own process (``shared_model.SharedFigureModel``, with ``share_model`` or
  ``model_copies``). Beam's RunInference handler (``handlers.FigureModelHandler``) loads
  and calls it; an executor without Beam calls it directly.
- ``ClassifyStep``: (key, payload) pairs in, ``(key, probabilities)`` or
  ``Tagged("failed", (key, reason))`` out, every key exactly once: each payload made into
  the model's input (``model_input_or_reason``: the same function Beam's ``DecodeForModel``
  calls), batches of ``max_batch_size`` run through a ``FigureModelStep``. It is what
  ``inference.ClassifyImages`` does on Beam, for an executor that runs the vision stage in
  one process.

Model inputs: a payload is image bytes, or what ``load_bytes`` turns into bytes (a path,
an ``ImageRef``), or the model input itself (uint8 ``input_size`` squared x 3, as the
build's measuring step sends it, decoded once already).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Optional, Union

import numpy as np

from sciga.transforms.common.steps import Tagged
from sciga.transforms.vision.decode import ImageDecodeError, decode_reduced, model_input
from sciga.transforms.vision.defaults import DEFAULT_MAX_PIXELS
from sciga.transforms.vision.inference_options import InferenceOptions

log = logging.getLogger("sciga.vision")

FAILED = "failed"


# ------------------------------------------------------------------ model inputs


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


def model_input_or_reason(
    payload: Any,
    input_size: int,
    load_bytes: Callable[[Any], bytes] = image_bytes,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    key: Any = None,
) -> tuple[Optional[np.ndarray], Optional[str]]:
    """(model input, None), or (None, "kind: sentence") when the payload has no usable
    pixels (``decompression_bomb: ...``, ``corrupt: ...``, ``unreadable: ...``). Never
    raises: one bad image must not stop the run."""
    ready = ready_model_input(payload, input_size)
    if ready is not None:  # decoded once already, where the figure was measured
        return ready, None
    try:
        return image_to_model_input(load_bytes(payload), input_size, max_pixels), None
    except ImageDecodeError as e:
        return None, str(e)
    except OSError as e:
        return None, f"unreadable: could not read the image ({type(e).__name__}: {e})"
    except Exception as e:  # noqa: BLE001 - one bad image must not stop the run
        log.warning("internal error preparing %r for the model: %r", key, e)
        return None, f"internal: unexpected {type(e).__name__} while preparing the image ({e}); please report"


# ------------------------------------------------------------------ the model


class FigureModelStep:
    """A figure model where it runs: ``load()`` once per process, then ``run(batch)``.

    ``load_local`` builds the ``LoadedFigureModel`` (in this process, or with ``shared`` in
    the machine's model server, where it is called). ``tag`` names the shared servers of
    one run: make the step once (where the run is launched) and hand the same step (or
    its tag) to every process of the run."""

    def __init__(self, load_local: Callable[[], Any], shared: bool = False, copies: int = 1, tag: Optional[str] = None):
        self.load_local, self.shared, self.copies = load_local, shared, max(1, int(copies))
        self.tag = tag or new_share_tag()
        self._model: Any = None

    @classmethod
    def from_options(cls, weights: str, task: str, options: InferenceOptions) -> FigureModelStep:
        import functools

        from sciga.transforms.vision.figure_model import load_figure_model

        load = functools.partial(
            load_figure_model, weights, task, options.device, options.precision, options.max_batch_size
        )
        return cls(load, shared=options.shared, copies=options.model_copies or 1)

    def load(self):
        """The model as this process calls it: ``model(batch) -> numpy (N, K) float32``."""
        if self.shared:
            from sciga.transforms.vision.shared_model import SharedFigureModel

            return SharedFigureModel(self.load_local, self.tag, self.copies).connect()
        return self.load_local()

    def run(self, batch) -> np.ndarray:
        """The model's output for ``batch`` (an array, or a sequence of per-image arrays)."""
        if self._model is None:
            self._model = self.load()
        return self._model(batch)

    def __getstate__(self):
        return {**self.__dict__, "_model": None}


def new_share_tag() -> str:
    """A name for the shared model servers of one run."""
    return f"sciga-model-{uuid.uuid4().hex[:16]}"


# ------------------------------------------------------------------ classifying images


class ClassifyStep:
    """(key, payload) pairs -> ``(key, float32 probabilities)`` (or, with an ``embed``
    model, the unit-norm embedding) and ``Tagged(FAILED, (key, reason))`` for a payload
    with no usable pixels; every key comes out once, in input order within a batch."""

    def __init__(
        self,
        model: FigureModelStep,
        input_size: int,
        load_bytes: Optional[Callable[[Any], bytes]] = None,
        max_pixels: int = DEFAULT_MAX_PIXELS,
        max_batch_size: int = 32,
    ):
        self.model, self.input_size, self.max_pixels = model, input_size, max_pixels
        self.load_bytes = load_bytes or image_bytes
        self.max_batch_size = max(1, int(max_batch_size))

    def run(self, items: Iterable[tuple[Any, Any]]) -> Iterator[Union[tuple[Any, np.ndarray], Tagged]]:
        keys: list = []
        inputs: list = []
        for key, payload in items:
            x, why = model_input_or_reason(payload, self.input_size, self.load_bytes, self.max_pixels, key)
            if x is None:
                yield Tagged(FAILED, (key, why))
                continue
            keys.append(key)
            inputs.append(x)
            if len(inputs) == self.max_batch_size:
                yield from self._flush(keys, inputs)
        yield from self._flush(keys, inputs)

    def _flush(self, keys: list, inputs: list):
        if inputs:
            out = self.model.run(inputs)
            for k, row in zip(keys, out):
                yield k, np.array(row, dtype=np.float32)  # its own small array, not a view of the batch
            keys.clear()
            inputs.clear()
