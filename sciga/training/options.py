"""Typed options of the training and evaluation jobs.

The jobs in ``training/`` take these objects, never an argparse namespace: a notebook or a
script builds one by hand (``TrainOptions(data="out/", output="m/")``), the command line
builds one from its flags (``pipelines/train.py``, ``pipelines/evaluate.py``) with
``options_from``. Defaults are the command line's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Optional, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")


@dataclass(frozen=True, kw_only=True)
class DataOptions:
    """Which papers of a build a job reads, and where it runs."""

    data: str  # output folder of `sciga build` (local or gs:// / s3://)
    device: str = "auto"  # auto (cuda when present), cpu, cuda, cuda:1 ...
    amp: bool = True  # mixed precision on GPU
    seed: int = 0
    split_salt: str = "sciga-split-v1"  # salt of the hash-based 8:1:1 split
    min_candidates: int = 2  # papers need this many figures to be a query
    category_prefix: Optional[str] = None  # keep papers of one field, e.g. "cs."


@dataclass(frozen=True, kw_only=True)
class TrainOptions(DataOptions):
    """`sciga train ga-bc | abs2fig | abs2fig-cap`."""

    output: str  # folder for model.pt and model.json
    epochs: int = 1
    max_steps: Optional[int] = None
    batch_size: int = 16
    lr: float = 1e-4
    weight_decay: float = 0.01
    image_size: int = 224
    shuffle_buffer: int = 512  # streaming shuffle buffer (items)
    check_batches: int = 4  # batches scored before/after training in the model card
    # GA-BC
    arch: str = "efficientnet_v2_s"
    weights: Optional[str] = None  # local torchvision state dict; random init without
    # Abs2Fig (w/cap)
    backbone: str = "tiny"  # tiny | open_clip:<ARCH> | hf:<DIR>
    checkpoint: Optional[str] = None
    model_config: Optional[str] = None
    task: str = "intra"  # Eq. 4 (intra) or Eq. 5 (inter)
    figures_per_paper: int = 8
    max_units: int = 8


@dataclass(frozen=True, kw_only=True)
class EvalOptions(DataOptions):
    """`sciga evaluate <method>`."""

    results: str  # folder of results.json / results.md / predictions
    model: Optional[str] = None  # trained model folder (ga-bc, abs2fig, abs2fig-cap)
    split: str = "test"
    task: Optional[str] = None  # default: the model's task, else intra
    scorer: str = "bm25"  # Abs2Cap lexical scorer: bm25 | rouge-l
    alpha: float = 0.5  # CAR@k confidence threshold h = alpha * Hmax
    inter_k: tuple[int, ...] = (5, 10)
    sbert_model: Optional[str] = None  # all-MiniLM-L6-v2 folder; "none" skips SBERT@k
    clip_backbone: Optional[str] = None  # metric encoder for GA2GA CLIP-S@k
    clip_checkpoint: Optional[str] = None
    clip_model_config: Optional[str] = None


@dataclass(frozen=True, kw_only=True)
class MedicalFilterOptions:
    """`sciga train medical-filter`: the DocFigure classifier of the MedICaT filter."""

    data: str  # ImageFolder or DocFigure list-file layout
    output: str  # checkpoint to write (.pt)
    arch: str = "resnet101"
    init_weights: Optional[str] = None  # local ImageNet state dict of `arch`
    epochs: int = 20
    batch_size: int = 32
    lr: float = 1e-4
    patience: int = 3
    input_size: int = 224
    dropout: float = 0.1
    test_share: float = 0.2
    val_share: float = 0.1
    top_k: int = 4
    seed: int = 0
    workers: int = 0
    device: str = "cpu"
    report: Optional[str] = None


def options_from(cls: type[T], source: Any) -> T:
    """``cls`` from the attributes of ``source`` (a parsed command line, a dict) that name
    its fields; fields ``source`` lacks keep their defaults. Other attributes are ignored."""
    values = source if isinstance(source, dict) else vars(source)
    kw = {f.name: values[f.name] for f in fields(cls) if f.name in values}
    if "inter_k" in kw and kw["inter_k"] is not None:
        kw["inter_k"] = tuple(kw["inter_k"])
    return cls(**kw)
