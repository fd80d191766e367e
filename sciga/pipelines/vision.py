"""`sciga build` flags of the vision stage, turned into its typed options.

The stage itself (``transforms/vision/stage.py``) and the checks made before a build
starts (``transforms/vision/options.py``) know nothing of argparse.
"""

from __future__ import annotations

import argparse

from sciga.pipelines.arg_types import non_negative_int, positive_float, positive_int
from sciga.transforms.vision.decode import DEFAULT_MAX_PIXELS
from sciga.transforms.vision.ga_manifest import DEFAULT_MAX_GA_BYTES, DEFAULT_TIMEOUT
from sciga.transforms.vision.ga_match import GAThresholds
from sciga.transforms.vision.inference_options import PRECISIONS, InferenceOptions
from sciga.transforms.vision.medical import DEFAULT_TOP_K
from sciga.transforms.vision.options import VisionOptions


def add_vision_arguments(ap: argparse.ArgumentParser) -> None:
    g = ap.add_argument_group("vision (images, medical filter, graphical abstracts)")
    g.add_argument(
        "--max-image-pixels",
        type=positive_int,
        default=DEFAULT_MAX_PIXELS,
        help="images whose header claims more pixels are recorded as decompression bombs (default: %(default)s)",
    )
    g.add_argument(
        "--medical-keywords",
        metavar="FILE",
        default=None,
        help="keyword list for stage 1 of the medical filter (default: MedICaT Appendix B)",
    )
    g.add_argument(
        "--medical-weights",
        metavar="PATH_OR_HF_REPO",
        default=None,
        help="DocFigure classifier written by `sciga train medical-filter` (local/gs:// path, or a HF repo in the local cache)",
    )
    g.add_argument(
        "--medical-top-k",
        type=positive_int,
        default=DEFAULT_TOP_K,
        metavar="K",
        help="a figure is medical when 'Medical' is among the classifier's top K labels (default: %(default)s)",
    )
    g.add_argument(
        "--medical-classify",
        choices=("keyword-hits", "all"),
        default="keyword-hits",
        help="run the classifier on figures with keyword hits (MedICaT) or on all figures",
    )
    g.add_argument(
        "--ga-manifest",
        metavar="FILE.csv",
        default=None,
        help="graphical abstracts: CSV with columns arxiv_id,path[,source,caption]; path local or http(s) URL",
    )
    g.add_argument(
        "--ga-embedding-weights",
        metavar="PATH_OR_HF_REPO",
        default=None,
        help="CNN checkpoint whose pooled features add embedding similarity to GA typing (optional)",
    )
    g.add_argument(
        "--ga-max-mb", type=positive_int, default=DEFAULT_MAX_GA_BYTES // (1 << 20), help="size limit of one GA image"
    )
    g.add_argument("--ga-timeout", type=positive_float, default=DEFAULT_TIMEOUT, help="seconds to wait for a GA URL")
    d = GAThresholds()
    g.add_argument(
        "--ga-reused-ncc",
        type=float,
        default=d.reused_ncc,
        help="whole-image NCC for a Reused GA (default: %(default)s)",
    )
    g.add_argument(
        "--ga-reused-phash-bits",
        type=non_negative_int,
        default=d.reused_phash_bits,
        help="pHash distance for a Reused GA (default: %(default)s)",
    )
    g.add_argument(
        "--ga-part-ncc", type=float, default=d.part_ncc, help="tile NCC for a GA component (default: %(default)s)"
    )
    g.add_argument(
        "--ga-crop-reused-area",
        type=float,
        default=d.crop_reused_area,
        help="a crop keeping this share of a figure's area is Reused, not Modified (default: %(default)s)",
    )
    g.add_argument(
        "--ga-embed-reused",
        type=float,
        default=d.embed_reused,
        help="embedding cosine for a Reused GA (default: %(default)s)",
    )
    g.add_argument(
        "--ga-embed-part",
        type=float,
        default=d.embed_part,
        help="embedding cosine for a GA component (default: %(default)s)",
    )
    g.add_argument(
        "--ga-soft-ncc",
        type=float,
        default=d.soft_ncc,
        help="pixel NCC an embedding match needs beside it (default: %(default)s)",
    )
    g.add_argument(
        "--device", choices=("cpu", "cuda"), default="cpu", help="where the vision models run (cuda falls back to cpu)"
    )
    g.add_argument(
        "--vision-batch-size", type=positive_int, default=32, help="largest RunInference batch (default: %(default)s)"
    )
    g.add_argument(
        "--vision-min-batch-size",
        type=positive_int,
        default=1,
        help="smallest RunInference batch (default: %(default)s)",
    )
    g.add_argument(
        "--vision-share-model",
        action="store_true",
        help="one model copy per worker machine shared by its SDK processes (GPU workers)",
    )
    g.add_argument(
        "--vision-model-copies",
        type=positive_int,
        default=None,
        help="exact number of model copies per worker machine (e.g. its number of GPUs); implies sharing",
    )
    g.add_argument(
        "--vision-precision",
        choices=PRECISIONS,
        default="fp32",
        help="fp32, or bf16: bfloat16 autocast with channels_last (GPUs with bf16, e.g. A100/H100/L4; "
        "top-1 labels agree with fp32 on >= 99%% of figures) (default: %(default)s)",
    )
    g.add_argument(
        "--vision-torch-threads",
        type=positive_int,
        default=None,
        metavar="N",
        help="torch threads per SDK process (default: 1 with --device cuda, torch's default on cpu)",
    )


def thresholds_from_args(args: argparse.Namespace) -> GAThresholds:
    d = GAThresholds()
    return GAThresholds(
        reused_ncc=args.ga_reused_ncc,
        reused_phash_bits=args.ga_reused_phash_bits,
        part_ncc=args.ga_part_ncc,
        crop_reused_area=args.ga_crop_reused_area,
        embed_reused=args.ga_embed_reused,
        embed_part=args.ga_embed_part,
        soft_ncc=args.ga_soft_ncc,
        aspect_tolerance=d.aspect_tolerance,
        min_tile_fraction=d.min_tile_fraction,
        min_tile_area=d.min_tile_area,
    )


def inference_options_from_args(args: argparse.Namespace) -> InferenceOptions:
    """How the vision models run (the flags are documented on ``InferenceOptions``)."""
    try:
        return InferenceOptions(
            device=args.device,
            max_batch_size=args.vision_batch_size,
            min_batch_size=args.vision_min_batch_size,
            share_model=args.vision_share_model,
            model_copies=args.vision_model_copies,
            precision=args.vision_precision,
            torch_threads=args.vision_torch_threads,
        )
    except ValueError as e:
        raise SystemExit(f"sciga build: {e}") from None


def vision_options_from_args(args: argparse.Namespace) -> VisionOptions:
    return VisionOptions(
        max_image_bytes=args.max_image_mb * 1024 * 1024,
        max_pixels=args.max_image_pixels,
        keywords_file=args.medical_keywords,
        medical_weights=args.medical_weights,
        top_k=args.medical_top_k,
        classify_all=args.medical_classify == "all",
        ga_manifest=args.ga_manifest,
        ga_embedding_weights=args.ga_embedding_weights,
        ga_max_bytes=args.ga_max_mb << 20,
        ga_timeout=args.ga_timeout,
        thresholds=thresholds_from_args(args),
        inference=inference_options_from_args(args),
    )
