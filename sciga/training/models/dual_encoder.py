"""CLIP-style dual encoders for Abs2Fig: a text encoder f and an image encoder g into one
space, plus a learnable temperature.

Three kinds, one interface (``tokenize``, ``preprocess``, ``encode_text``,
``encode_image``, ``logit_scale``) and one ``spec`` dict that rebuilds the architecture:

* ``tiny``: a small model defined here (hashed word embeddings, a 3-layer CNN); what the
  tests train, and a from-scratch baseline.
* ``open_clip:<name>``: an OpenCLIP architecture with weights from a local checkpoint file
  (``--checkpoint``); ``--model-config FILE.json`` registers an architecture that OpenCLIP
  does not ship (its name is the file stem).
* ``hf:<dir>``: a Hugging Face ``CLIPModel`` folder on disk (config, weights, tokenizer,
  image processor), read with ``local_files_only``.

Nothing is ever downloaded: the Hub is put offline before any loader runs, and a missing
file is an error that names it.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections.abc import Callable
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from sciga.training.images import square_transform
from sciga.training.offline import hub_offline

_WORD = re.compile(r"\w+", re.U)


class TinyDualEncoder(nn.Module):
    """Hashed bag-of-words text tower and a small CNN image tower."""

    DEFAULTS = {"embed_dim": 64, "buckets": 8192, "context_length": 128, "image_size": 64, "width": 16}

    def __init__(self, **config):
        super().__init__()
        self.config = {**self.DEFAULTS, **config}
        c = self.config
        self.token_emb = nn.Embedding(c["buckets"], c["embed_dim"], padding_idx=0)
        self.text_proj = nn.Linear(c["embed_dim"], c["embed_dim"])
        w = c["width"]
        self.cnn = nn.Sequential(
            nn.Conv2d(3, w, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(w, 2 * w, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(2 * w, 4 * w, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.image_proj = nn.Linear(4 * w, c["embed_dim"])
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))
        self.preprocess = square_transform(c["image_size"])

    def tokenize(self, texts: list[str]) -> torch.Tensor:
        c = self.config
        out = torch.zeros((len(texts), c["context_length"]), dtype=torch.long)
        for i, t in enumerate(texts):
            words = _WORD.findall((t or "").lower())[: c["context_length"]]
            for j, w in enumerate(words):
                h = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=4).digest(), "big")
                out[i, j] = 1 + h % (c["buckets"] - 1)
        return out

    def encode_text(self, tokens: torch.Tensor) -> torch.Tensor:
        e = self.token_emb(tokens)
        mask = (tokens > 0).unsqueeze(-1).to(e.dtype)
        pooled = (e * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return self.text_proj(pooled)

    def encode_image(self, pixels: torch.Tensor) -> torch.Tensor:
        return self.image_proj(self.cnn(pixels))


class OpenClipEncoder(nn.Module):
    def __init__(self, model: nn.Module, tokenizer: Callable, preprocess: Callable):
        super().__init__()
        self.model = model
        self._tokenizer = tokenizer
        self.preprocess = preprocess

    @property
    def logit_scale(self) -> nn.Parameter:
        return self.model.logit_scale

    def tokenize(self, texts: list[str]) -> torch.Tensor:
        return self._tokenizer(list(texts))

    def encode_text(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.model.encode_text(tokens)

    def encode_image(self, pixels: torch.Tensor) -> torch.Tensor:
        return self.model.encode_image(pixels)


class HFClipEncoder(nn.Module):
    def __init__(self, model: nn.Module, tokenizer, processor, max_length: int):
        super().__init__()
        self.model = model
        self._tokenizer = tokenizer
        self._processor = processor
        self.max_length = max_length

    @property
    def logit_scale(self) -> nn.Parameter:
        return self.model.logit_scale

    def preprocess(self, im) -> torch.Tensor:
        return self._processor(images=im, return_tensors="pt")["pixel_values"][0]

    def tokenize(self, texts: list[str]) -> torch.Tensor:
        enc = self._tokenizer(
            list(texts), padding="max_length", truncation=True, max_length=self.max_length, return_tensors="pt"
        )
        return enc["input_ids"]

    def encode_text(self, tokens: torch.Tensor) -> torch.Tensor:
        pad = getattr(self._tokenizer, "pad_token_id", None)
        mask = (tokens != pad).long() if pad is not None else None
        out = self.model.get_text_features(input_ids=tokens, attention_mask=mask)
        return out if isinstance(out, torch.Tensor) else out.pooler_output

    def encode_image(self, pixels: torch.Tensor) -> torch.Tensor:
        out = self.model.get_image_features(pixel_values=pixels)
        return out if isinstance(out, torch.Tensor) else out.pooler_output


def make_spec(
    backbone: str,
    checkpoint: Optional[str] = None,
    model_config: Optional[str] = None,
    tiny_config: Optional[dict] = None,
) -> dict:
    """The ``--backbone`` option -> a spec dict saved with the trained model."""
    if backbone == "tiny":
        return {"kind": "tiny", "config": {**TinyDualEncoder.DEFAULTS, **(tiny_config or {})}}
    if backbone.startswith("open_clip:"):
        return {
            "kind": "open_clip",
            "name": backbone.split(":", 1)[1],
            "checkpoint": checkpoint,
            "model_config": model_config,
        }
    if backbone.startswith("hf:"):
        return {"kind": "hf", "path": backbone.split(":", 1)[1]}
    raise ValueError(f"unknown backbone {backbone!r}: use tiny, open_clip:<ARCH> --checkpoint FILE, or hf:<DIR>.")


def build_dual_encoder(spec: dict, load_weights: bool = True) -> nn.Module:
    """Rebuild the encoder a spec describes; ``load_weights=False`` builds the architecture
    only (a trained state dict is loaded over it afterwards)."""
    kind = spec.get("kind")
    if kind == "tiny":
        return TinyDualEncoder(**spec.get("config", {}))
    if kind == "open_clip":
        with hub_offline():
            return _open_clip_encoder(spec, load_weights)
    if kind == "hf":
        with hub_offline():
            return _hf_clip_encoder(spec, load_weights)
    raise ValueError(f"unknown dual-encoder spec {spec!r}")


def _open_clip_encoder(spec: dict, load_weights: bool) -> nn.Module:
    import open_clip

    name = spec["name"]
    if spec.get("model_config"):
        if not os.path.isfile(spec["model_config"]):
            raise FileNotFoundError(f"model config {spec['model_config']} not found.")
        open_clip.add_model_config(spec["model_config"])
    ckpt = spec.get("checkpoint")
    if load_weights:
        if not ckpt or not os.path.isfile(ckpt):
            raise FileNotFoundError(
                f"open_clip checkpoint {ckpt!r} not found: pass --checkpoint with a local weights file "
                "(weights are never downloaded)."
            )
    model, _, preprocess = open_clip.create_model_and_transforms(
        name, pretrained=ckpt if load_weights else None, pretrained_text=False, weights_only=True
    )
    return OpenClipEncoder(model, open_clip.get_tokenizer(name), preprocess)


def _hf_clip_encoder(spec: dict, load_weights: bool) -> nn.Module:
    path = spec["path"]
    if not os.path.isdir(path):
        raise FileNotFoundError(f"Hugging Face CLIP folder {path} not found (it must be on disk).")
    from transformers import AutoImageProcessor, AutoTokenizer, CLIPConfig, CLIPModel

    if load_weights:
        model = CLIPModel.from_pretrained(path, local_files_only=True)
    else:
        model = CLIPModel(CLIPConfig.from_pretrained(path, local_files_only=True))
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    proc = AutoImageProcessor.from_pretrained(path, local_files_only=True)
    return HFClipEncoder(model, tok, proc, model.config.text_config.max_position_embeddings)


def fuse_caption(image_emb: torch.Tensor, caption_emb: torch.Tensor) -> torch.Tensor:
    """Abs2Fig w/cap (SciGA Sec. 4.2 (iv)): g(I) ⊙ f(C), then L2-normalized."""
    return F.normalize(image_emb * caption_emb, dim=-1)
