"""A figure "CNN" that costs nothing: the same fixed probabilities for every image.

``arch = "null"`` in a sciga checkpoint. It reads no pixel, so a run with it measures
everything of the vision stage except the network: reading, decoding, resizing, batching,
the hand-over to the model and back (``bench/vision.py --arch null``: the feed against the
decode floor, on CPU, without a GPU). Its output depends on the checkpoint only, never on
the image, so a build with it has the same keys, rows and failure rows as with a real
model, and only the scores differ.

Its shape follows the torchvision models ``models.build_model`` knows: a "backbone" (a
fixed feature vector of ``FEATURES`` numbers) and a linear ``fc`` head, which
``_replace_head`` and ``_strip_head`` treat as they treat a ResNet's (without its head, the
features are the embedding).
"""

from __future__ import annotations

import torch
from torch import nn

ARCH = "null"
FEATURES = 16


class NullFigureNet(nn.Module):
    """(N, 3, S, S) images -> (N, K) fixed logits (or N fixed features without a head)."""

    reads_pixels = False  # ``figure_model.LoadedFigureModel`` hands it the batch unnormalised

    def __init__(self) -> None:
        super().__init__()
        # Distinct, fixed features: the head's random init gives distinct logits.
        self.features = nn.Parameter(torch.linspace(-1.0, 1.0, FEATURES), requires_grad=False)
        self.fc: nn.Module = nn.Linear(FEATURES, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features.to(x.device).expand(x.shape[0], FEATURES))
