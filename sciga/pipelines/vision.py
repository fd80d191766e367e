"""`sciga build` flags of the vision stage (``VisionFlags``, each declared once), turned into
its typed options.

The stage itself (``transforms/vision/stage.py``) and the checks made before a build
starts (``transforms/vision/options.py``) know nothing of argparse.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import ClassVar, Optional

from sciga.pipelines.arg_types import non_negative_int, positive_float, positive_int
from sciga.pipelines.flags import add_flags, flag, from_args
from sciga.transforms.vision.defaults import DEFAULT_MAX_PIXELS, DEFAULT_TOP_K, GAThresholds
from sciga.transforms.vision.ga_manifest import DEFAULT_MAX_GA_BYTES, DEFAULT_TIMEOUT
from sciga.transforms.vision.inference_options import PRECISIONS, InferenceOptions
from sciga.transforms.vision.options import VisionOptions

_GA = GAThresholds()


@dataclass(frozen=True)
class VisionFlags:
    GROUP: ClassVar[str] = "vision (images, medical filter, graphical abstracts)"

    max_image_pixels: int = flag(
        "--max-image-pixels",
        default=DEFAULT_MAX_PIXELS,
        type=positive_int,
        help="images whose header claims more pixels are recorded as decompression bombs (default: %(default)s)",
    )
    medical_keywords: Optional[str] = flag(
        "--medical-keywords",
        metavar="FILE",
        help="keyword list for stage 1 of the medical filter (default: MedICaT Appendix B)",
    )
    medical_weights: Optional[str] = flag(
        "--medical-weights",
        metavar="PATH_OR_HF_REPO",
        help="DocFigure classifier written by `sciga train medical-filter` (local/gs:// path, or a HF repo in the local cache)",
    )
    medical_top_k: int = flag(
        "--medical-top-k",
        default=DEFAULT_TOP_K,
        type=positive_int,
        metavar="K",
        help="a figure is medical when 'Medical' is among the classifier's top K labels (default: %(default)s)",
    )
    medical_classify: str = flag(
        "--medical-classify",
        default="keyword-hits",
        choices=("keyword-hits", "all"),
        help="run the classifier on figures with keyword hits (MedICaT) or on all figures",
    )
    ga_manifest: Optional[str] = flag(
        "--ga-manifest",
        metavar="FILE.csv",
        help="graphical abstracts: CSV with columns arxiv_id,path[,source,caption]; paths are read from the "
        "manifest's folder and the --input folders only (see --ga-allow-outside)",
    )
    ga_allow_outside: bool = flag(
        "--ga-allow-outside",
        default=False,
        action="store_true",
        help="read --ga-manifest paths wherever they point (absolute, ../, other buckets) and fetch http(s) "
        "URLs; only for a manifest you trust (default: confined to its folder and the --input folders)",
    )
    ga_embedding_weights: Optional[str] = flag(
        "--ga-embedding-weights",
        metavar="PATH_OR_HF_REPO",
        help="CNN checkpoint whose pooled features add embedding similarity to GA typing (optional)",
    )
    ga_max_mb: int = flag(
        "--ga-max-mb", default=DEFAULT_MAX_GA_BYTES // (1 << 20), type=positive_int, help="size limit of one GA image"
    )
    ga_timeout: float = flag(
        "--ga-timeout", default=DEFAULT_TIMEOUT, type=positive_float, help="seconds to wait for a GA URL"
    )
    ga_reused_ncc: float = flag(
        "--ga-reused-ncc",
        default=_GA.reused_ncc,
        type=float,
        help="whole-image NCC for a Reused GA (default: %(default)s)",
    )
    ga_reused_phash_bits: int = flag(
        "--ga-reused-phash-bits",
        default=_GA.reused_phash_bits,
        type=non_negative_int,
        help="pHash distance for a Reused GA (default: %(default)s)",
    )
    ga_part_ncc: float = flag(
        "--ga-part-ncc", default=_GA.part_ncc, type=float, help="tile NCC for a GA component (default: %(default)s)"
    )
    ga_crop_reused_area: float = flag(
        "--ga-crop-reused-area",
        default=_GA.crop_reused_area,
        type=float,
        help="a crop keeping this share of a figure's area is Reused, not Modified (default: %(default)s)",
    )
    ga_embed_reused: float = flag(
        "--ga-embed-reused",
        default=_GA.embed_reused,
        type=float,
        help="embedding cosine for a Reused GA (default: %(default)s)",
    )
    ga_embed_part: float = flag(
        "--ga-embed-part",
        default=_GA.embed_part,
        type=float,
        help="embedding cosine for a GA component (default: %(default)s)",
    )
    ga_soft_ncc: float = flag(
        "--ga-soft-ncc",
        default=_GA.soft_ncc,
        type=float,
        help="pixel NCC an embedding match needs beside it (default: %(default)s)",
    )
    device: str = flag(
        "--device",
        default="cpu",
        choices=("cpu", "cuda"),
        help="where the vision models run (cuda falls back to cpu)",
    )
    vision_batch_size: int = flag(
        "--vision-batch-size", default=32, type=positive_int, help="largest RunInference batch (default: %(default)s)"
    )
    vision_min_batch_size: int = flag(
        "--vision-min-batch-size",
        default=1,
        type=positive_int,
        help="smallest RunInference batch (default: %(default)s)",
    )
    vision_share_model: bool = flag(
        "--vision-share-model",
        default=False,
        action="store_true",
        help="one model copy per worker machine shared by its SDK processes (GPU workers)",
    )
    vision_model_copies: Optional[int] = flag(
        "--vision-model-copies",
        type=positive_int,
        help="exact number of model copies per worker machine (e.g. its number of GPUs); implies sharing",
    )
    vision_precision: str = flag(
        "--vision-precision",
        default="fp32",
        choices=PRECISIONS,
        help="fp32, or bf16: bfloat16 autocast with channels_last (GPUs with bf16, e.g. A100/H100/L4; "
        "top-1 labels agree with fp32 on >= 99%% of figures) (default: %(default)s)",
    )
    vision_torch_threads: Optional[int] = flag(
        "--vision-torch-threads",
        type=positive_int,
        metavar="N",
        help="torch threads per SDK process (default: 1 with --device cuda, torch's default on cpu)",
    )

    def thresholds(self) -> GAThresholds:
        return GAThresholds(
            reused_ncc=self.ga_reused_ncc,
            reused_phash_bits=self.ga_reused_phash_bits,
            part_ncc=self.ga_part_ncc,
            crop_reused_area=self.ga_crop_reused_area,
            embed_reused=self.ga_embed_reused,
            embed_part=self.ga_embed_part,
            soft_ncc=self.ga_soft_ncc,
            aspect_tolerance=_GA.aspect_tolerance,
            min_tile_fraction=_GA.min_tile_fraction,
            min_tile_area=_GA.min_tile_area,
        )

    def inference(self) -> InferenceOptions:
        """How the vision models run (the flags are documented on ``InferenceOptions``)."""
        try:
            return InferenceOptions(
                device=self.device,
                max_batch_size=self.vision_batch_size,
                min_batch_size=self.vision_min_batch_size,
                share_model=self.vision_share_model,
                model_copies=self.vision_model_copies,
                precision=self.vision_precision,
                torch_threads=self.vision_torch_threads,
            )
        except ValueError as e:
            raise SystemExit(f"sciga build: {e}") from None

    def options(self, max_image_mb: int, input_roots: tuple[str, ...] = ()) -> VisionOptions:
        """The vision stage's options (``--max-image-mb`` is a build flag: the writer uses it
        too; ``input_roots``: the build's --input folders, where GA paths may also lie)."""
        return VisionOptions(
            max_image_bytes=max_image_mb * 1024 * 1024,
            max_pixels=self.max_image_pixels,
            keywords_file=self.medical_keywords,
            medical_weights=self.medical_weights,
            top_k=self.medical_top_k,
            classify_all=self.medical_classify == "all",
            ga_manifest=self.ga_manifest,
            ga_roots=tuple(input_roots),
            ga_allow_outside=self.ga_allow_outside,
            ga_embedding_weights=self.ga_embedding_weights,
            ga_max_bytes=self.ga_max_mb << 20,
            ga_timeout=self.ga_timeout,
            thresholds=self.thresholds(),
            inference=self.inference(),
        )


def add_vision_arguments(ap: argparse.ArgumentParser) -> None:
    add_flags(ap, VisionFlags)


def inference_options_from_args(args: argparse.Namespace) -> InferenceOptions:
    return from_args(VisionFlags, args).inference()
