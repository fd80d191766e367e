"""Figure CNNs: architecture, the checkpoint file, where weights come from, preprocessing.

One checkpoint format serves the medical classifier (``sciga train medical-filter`` writes
it, ``sciga build --medical-weights`` reads it) and the GA embedding model (the same file
read without its head gives embeddings). It is a plain dict saved with ``torch.save`` and
read back with ``torch.load(..., weights_only=True)`` (no pickled code runs on load)::

    {"format": "sciga-figure-cnn/1", "arch": "resnet101", "labels": [...28 names...],
     "input_size": 224, "mean": [...], "std": [...], "dropout": 0.1,
     "state_dict": {...}, "metrics": {...}}

Weights are named by a local path (or any path Beam's FileSystems can open, e.g. gs://)
or by a Hugging Face repo id that the user has already downloaded into the local HF cache
(``repo`` or ``repo:file.pt``; ``huggingface_hub`` with ``local_files_only=True``). Nothing
is ever downloaded at run time.
"""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

log = logging.getLogger("sciga.vision")

FORMAT = "sciga-figure-cnn/1"
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
DEFAULT_INPUT_SIZE = 224
_CKPT_EXT = (".pt", ".pth", ".bin", ".ckpt")


class WeightsError(Exception):
    """Weights that cannot be found or read; the message says what to do."""


@dataclass
class CheckpointMeta:
    arch: str
    labels: list[str]
    input_size: int = DEFAULT_INPUT_SIZE
    mean: tuple = IMAGENET_MEAN
    std: tuple = IMAGENET_STD
    dropout: float = 0.1
    metrics: dict = field(default_factory=dict)


# ---------------------------------------------------------------- architecture


def _replace_head(model, num_classes: Optional[int], dropout: float):
    """Dropout + linear head over the backbone's pooled features (num_classes None: no
    head, the model returns the pooled features: an embedding)."""
    import torch.nn as nn

    def head(in_f):
        return (
            nn.Identity() if num_classes is None else nn.Sequential(nn.Dropout(dropout), nn.Linear(in_f, num_classes))
        )

    if isinstance(getattr(model, "fc", None), nn.Linear):  # resnet, resnext, wide_resnet, regnet, googlenet
        model.fc = head(model.fc.in_features)
        return model
    cls = getattr(model, "classifier", None)
    if isinstance(cls, nn.Linear):  # densenet
        model.classifier = head(cls.in_features)
        return model
    if isinstance(cls, nn.Sequential):  # efficientnet, mobilenet, convnext: last Linear is the head
        idx = max(i for i, m in enumerate(cls) if isinstance(m, nn.Linear))
        in_f = cls[idx].in_features
        keep = [m for i, m in enumerate(cls) if i < idx and not isinstance(m, nn.Dropout)]
        model.classifier = nn.Sequential(*keep, head(in_f))
        return model
    heads = getattr(model, "heads", None)  # vision transformers
    if isinstance(heads, nn.Sequential) and isinstance(heads[-1], nn.Linear):
        model.heads = head(heads[-1].in_features)
        return model
    raise WeightsError(f"architecture {type(model).__name__} has no head sciga knows how to replace; use a resnet")


def _strip_head(model):
    """Our dropout + linear head -> identity: the model returns pooled features."""
    import torch.nn as nn

    if hasattr(model, "fc"):
        model.fc = nn.Identity()
    elif isinstance(getattr(model, "classifier", None), nn.Sequential):
        model.classifier[-1] = nn.Identity()
    elif hasattr(model, "heads"):
        model.heads = nn.Identity()
    return model


def build_model(arch: str, num_classes: Optional[int], dropout: float = 0.1, init_weights: Optional[str] = None):
    """A torchvision ``arch`` with random weights, or initialised from a local ImageNet
    state dict (``init_weights``, e.g. torchvision's ``resnet101-*.pth`` you downloaded),
    then given a dropout + linear head with ``num_classes`` outputs."""
    import torchvision

    from sciga.transforms.vision import null_model

    try:
        model = (
            null_model.NullFigureNet() if arch == null_model.ARCH else torchvision.models.get_model(arch, weights=None)
        )
    except ValueError:
        raise WeightsError(
            f"unknown architecture {arch!r}; use a torchvision classification model such as resnet101 or resnet18"
        ) from None
    if init_weights:
        import torch

        sd = torch.load(resolve_weights(init_weights), map_location="cpu", weights_only=True)
        if isinstance(sd, dict) and "state_dict" in sd and isinstance(sd["state_dict"], dict):
            sd = sd["state_dict"]
        missing, unexpected = model.load_state_dict(sd, strict=False)
        if len(missing) > 10:
            raise WeightsError(
                f"{init_weights} does not fit {arch}: {len(missing)} weights missing; give ImageNet weights of the same architecture"
            )
        log.info(
            "initialised %s from %s (%d missing, %d unexpected keys)", arch, init_weights, len(missing), len(unexpected)
        )
    return _replace_head(model, num_classes, dropout)


# ---------------------------------------------------------------- checkpoint file


def save_checkpoint(path: str, model, meta: CheckpointMeta) -> None:
    import torch

    blob = {
        "format": FORMAT,
        "arch": meta.arch,
        "labels": list(meta.labels),
        "input_size": int(meta.input_size),
        "mean": [float(x) for x in meta.mean],
        "std": [float(x) for x in meta.std],
        "dropout": float(meta.dropout),
        "metrics": meta.metrics,
        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
    }
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    tmp = path + ".tmp"
    torch.save(blob, tmp)
    os.replace(tmp, path)


def _read_blob(spec: str, mmap: bool = False) -> dict:
    import torch

    local = resolve_weights(spec)
    try:
        if os.path.exists(local):
            blob = torch.load(local, map_location="cpu", weights_only=True, mmap=mmap)
        else:  # gs:// or another Beam filesystem
            from apache_beam.io.filesystems import FileSystems

            with FileSystems.open(local) as f:
                blob = torch.load(io.BytesIO(f.read()), map_location="cpu", weights_only=True)
    except WeightsError:
        raise
    except Exception as e:  # noqa: BLE001 - unpickling refused, truncated file ...
        raise WeightsError(
            f"weights {spec} could not be read as a sciga checkpoint ({type(e).__name__}: {e}); "
            "write them with `sciga train medical-filter`"
        ) from None
    if not isinstance(blob, dict) or blob.get("format") != FORMAT or "state_dict" not in blob:
        raise WeightsError(
            f"weights {spec} are not a sciga checkpoint (format {FORMAT}); write them with `sciga train medical-filter`"
        )
    return blob


def _meta(blob: dict) -> CheckpointMeta:
    return CheckpointMeta(
        arch=str(blob["arch"]),
        labels=[str(x) for x in blob.get("labels", [])],
        input_size=int(blob.get("input_size", DEFAULT_INPUT_SIZE)),
        mean=tuple(blob.get("mean", IMAGENET_MEAN)),
        std=tuple(blob.get("std", IMAGENET_STD)),
        dropout=float(blob.get("dropout", 0.1)),
        metrics=dict(blob.get("metrics") or {}),
    )


def read_meta(spec: str) -> CheckpointMeta:
    """The checkpoint's architecture, labels and preprocessing, without building the model
    (memory-mapped: cheap even for ResNet-101)."""
    return _meta(_read_blob(spec, mmap=True))


def load_model(spec: str, embed: bool = False, device: str = "cpu"):
    """(model in eval mode on ``device``, meta). ``embed``: drop the head, return features."""
    blob = _read_blob(spec)
    meta = _meta(blob)
    model = build_model(meta.arch, len(meta.labels), meta.dropout)
    model.load_state_dict(blob["state_dict"])
    if embed:
        model = _strip_head(model)
    model.requires_grad_(False)
    model.eval()
    return model.to(device), meta


# ---------------------------------------------------------------- where weights come from


def resolve_weights(spec: str) -> str:
    """A local file for ``spec``: the path itself, a remote path (returned as is, read
    with Beam's FileSystems), or a file of a Hugging Face repo in the local cache."""
    if not spec:
        raise WeightsError("no weights named")
    if "://" in spec:
        return spec
    if os.path.exists(spec):
        if os.path.isdir(spec):
            return _pick_file(spec, spec)
        return spec
    looks_like_repo = spec.count("/") == 1 and not spec.startswith((".", "/")) and not spec.endswith(_CKPT_EXT)
    repo, _, filename = spec.partition(":")
    if not looks_like_repo and not (":" in spec and repo.count("/") == 1):
        raise WeightsError(
            f"weights file {spec} does not exist; give a local path or a Hugging Face repo id you downloaded"
        )
    try:
        from huggingface_hub import snapshot_download

        folder = snapshot_download(repo_id=repo, local_files_only=True)
    except Exception:  # noqa: BLE001 - LocalEntryNotFoundError, bad repo id ...
        raise WeightsError(
            f"weights {spec}: not a local file, and Hugging Face repo {repo} is not in the local cache; "
            f"download it first (huggingface-cli download {repo}); builds never download weights"
        ) from None
    if filename:
        path = os.path.join(folder, filename)
        if not os.path.isfile(path):
            raise WeightsError(f"weights {spec}: the cached repo {repo} has no file {filename}")
        return path
    return _pick_file(folder, spec)


def _pick_file(folder: str, spec: str) -> str:
    cands = sorted(
        os.path.relpath(os.path.join(r, f), folder) for r, _, fs in os.walk(folder) for f in fs if f.endswith(_CKPT_EXT)
    )
    if len(cands) == 1:
        return os.path.join(folder, cands[0])
    for name in ("model.pt", "sciga.pt", "pytorch_model.pt"):
        if name in cands:
            return os.path.join(folder, name)
    raise WeightsError(f"weights {spec}: expected one .pt file in {folder}, found {len(cands)}; name it as REPO:FILE")


# ---------------------------------------------------------------- preprocessing


def resize_for_model(image, input_size: int) -> np.ndarray:
    """RGB PIL image -> uint8 HxWx3 array of ``input_size`` squared: the whole figure
    squeezed to a square (no crop: a figure's corners carry axes and labels). This compact
    form (150 KB at 224 px, a quarter of the float tensor) is what crosses processes; the
    float conversion and normalisation happen next to the model (``normalise``)."""
    from PIL import Image

    im = image if image.mode == "RGB" else image.convert("RGB")
    if im.size != (input_size, input_size):
        im = im.resize((input_size, input_size), Image.Resampling.BILINEAR, reducing_gap=2.0)
    return np.asarray(im, dtype=np.uint8)


def preprocess_array(image, input_size: int, mean: Sequence[float], std: Sequence[float]) -> np.ndarray:
    """RGB PIL image -> float32 CHW array, ImageNet-normalised (``resize_for_model`` then
    the same arithmetic ``normalise`` does on the model's device). Training and inference
    share this function, so they see identical inputs."""
    a = resize_for_model(image, input_size).astype(np.float32) * (1.0 / 255.0)
    a = (a - np.asarray(mean, dtype=np.float32)) / np.asarray(std, dtype=np.float32)
    return np.ascontiguousarray(a.transpose(2, 0, 1))


def normalise(batch, mean, std, channels_last: bool = False):
    """uint8 NxHxWx3 torch tensor (on any device) -> float32 Nx3xHxW, ImageNet-normalised on
    that device: the arithmetic of ``preprocess_array`` in the same order, so CPU results are
    the same numbers. ``mean``/``std`` are float32 tensors of shape (1, 3, 1, 1) on the same
    device. The result is contiguous NCHW, or with ``channels_last`` laid out NHWC (what
    channels_last weights want)."""
    import torch

    # The layout is settled on the uint8 images (a quarter of the bytes to move), then each
    # operation runs in place on one contiguous float tensor: the same numbers, element by
    # element, as ``(permuted.float() * (1 / 255) - mean) / std``, and 3x faster on a CPU.
    if channels_last:
        x = batch.to(torch.float32)
        x.mul_(1.0 / 255.0)
        x.sub_(mean.view(1, 1, 1, -1))
        return x.div_(std.view(1, 1, 1, -1)).permute(0, 3, 1, 2)
    x = batch.permute(0, 3, 1, 2).contiguous().to(torch.float32)
    x.mul_(1.0 / 255.0)
    x.sub_(mean)
    return x.div_(std)


def preprocess(image, input_size: int, mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD):
    import torch

    return torch.from_numpy(preprocess_array(image, input_size, mean, std))


def pick_device(requested: str) -> str:
    """'cuda' when asked for and present; otherwise 'cpu', saying so once."""
    if requested == "cuda":
        import torch

        if torch.cuda.is_available():
            return "cuda"
        log.warning("--device cuda: no usable CUDA GPU on this machine; running the vision models on CPU")
    return "cpu"
