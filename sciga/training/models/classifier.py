"""GA-BC: a torchvision backbone with a two-class head (GA / not GA).

Any ``torchvision.models`` architecture name works (SciGA used EfficientNetV2, ViT,
SwinTransformerV2, ConvNeXtV2, a CLIP image tower). Pretrained weights are a local
state-dict file (``--weights``, e.g. torchvision's ImageNet file the user downloaded),
loaded with ``weights_only=True`` into the 1000-class model before its last linear layer
is replaced; without it the backbone starts from random initialisation. Nothing is
downloaded.
"""

from __future__ import annotations

import os
from typing import Optional

import torch
from torch import nn


def _last_linear(model: nn.Module) -> tuple[nn.Module, str, nn.Linear]:
    found = None
    for parent in model.modules():
        for name, child in parent.named_children():
            if isinstance(child, nn.Linear):
                found = (parent, name, child)
    if found is None:
        raise ValueError(f"{type(model).__name__} has no linear head to replace.")
    return found


def build_classifier(arch: str, weights: Optional[str] = None, num_classes: int = 2) -> nn.Module:
    import torchvision  # imported here: several seconds, and only GA-BC needs it

    try:
        model = torchvision.models.get_model(arch, weights=None)
    except ValueError as e:
        raise ValueError(f"unknown torchvision architecture {arch!r}; see torchvision.models.list_models().") from e
    if weights:
        if not os.path.isfile(weights):
            raise FileNotFoundError(
                f"backbone weights {weights} not found; give a local state-dict file (nothing is downloaded)."
            )
        state = torch.load(weights, map_location="cpu", weights_only=True)
        state = state.get("state_dict", state) if isinstance(state, dict) else state
        model.load_state_dict(state)
    parent, name, head = _last_linear(model)
    setattr(parent, name, nn.Linear(head.in_features, num_classes))
    return model
