"""The vision part of `sciga build`: its options and how its transforms compose.

    FigureRows (+ keyword stage, de-facto GA roles) -> ReadImages -> DecodeImages
      -> [GA: LoadGAImages, (embeddings: RunInference), CoGroupByKey, AnnotateGA]
      -> [medical classifier: Preprocess -> RunInference -> top-K rule] -> rows

Everything that can be checked before the pipeline starts is checked here, on the
launching machine: the keyword list, the weights (found, readable, with a Medical class),
the GA manifest (columns). A problem there stops the build with one sentence; a problem
with one image or one GA later is recorded on its row.
"""
from __future__ import annotations

import argparse
import copy
import logging
from dataclasses import dataclass, field
from typing import Optional

import apache_beam as beam

from sciga.transforms.parse.figure_rows import figure_rows
from sciga.transforms.vision.decode import DEFAULT_MAX_PIXELS
from sciga.transforms.vision.ga import apply_de_facto
from sciga.transforms.vision.ga_manifest import DEFAULT_MAX_GA_BYTES, DEFAULT_TIMEOUT, GAEntry
from sciga.transforms.vision.ga_match import GAThresholds
from sciga.transforms.vision.medical import DEFAULT_TOP_K, KeywordMatcher, MedicalRule, annotate_keywords, load_keywords

log = logging.getLogger("sciga.vision")


def add_vision_arguments(ap: argparse.ArgumentParser) -> None:
    g = ap.add_argument_group("vision (images, medical filter, graphical abstracts)")
    g.add_argument("--max-image-pixels", type=int, default=DEFAULT_MAX_PIXELS,
                   help="images whose header claims more pixels are recorded as decompression bombs (default: %(default)s)")
    g.add_argument("--medical-keywords", metavar="FILE", default=None,
                   help="keyword list for stage 1 of the medical filter (default: MedICaT Appendix B)")
    g.add_argument("--medical-weights", metavar="PATH_OR_HF_REPO", default=None,
                   help="DocFigure classifier written by `sciga train medical-filter` (local/gs:// path, or a HF repo in the local cache)")
    g.add_argument("--medical-top-k", type=int, default=DEFAULT_TOP_K, metavar="K",
                   help="a figure is medical when 'Medical' is among the classifier's top K labels (default: %(default)s)")
    g.add_argument("--medical-classify", choices=("keyword-hits", "all"), default="keyword-hits",
                   help="run the classifier on figures with keyword hits (MedICaT) or on all figures")
    g.add_argument("--ga-manifest", metavar="FILE.csv", default=None,
                   help="graphical abstracts: CSV with columns arxiv_id,path[,source,caption]; path local or http(s) URL")
    g.add_argument("--ga-embedding-weights", metavar="PATH_OR_HF_REPO", default=None,
                   help="CNN checkpoint whose pooled features add embedding similarity to GA typing (optional)")
    g.add_argument("--ga-max-mb", type=int, default=DEFAULT_MAX_GA_BYTES // (1 << 20), help="size limit of one GA image")
    g.add_argument("--ga-timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds to wait for a GA URL")
    d = GAThresholds()
    g.add_argument("--ga-reused-ncc", type=float, default=d.reused_ncc, help="whole-image NCC for a Reused GA (default: %(default)s)")
    g.add_argument("--ga-reused-phash-bits", type=int, default=d.reused_phash_bits, help="pHash distance for a Reused GA (default: %(default)s)")
    g.add_argument("--ga-part-ncc", type=float, default=d.part_ncc, help="tile NCC for a GA component (default: %(default)s)")
    g.add_argument("--ga-crop-reused-area", type=float, default=d.crop_reused_area,
                   help="a crop keeping this share of a figure's area is Reused, not Modified (default: %(default)s)")
    g.add_argument("--ga-embed-reused", type=float, default=d.embed_reused, help="embedding cosine for a Reused GA (default: %(default)s)")
    g.add_argument("--ga-embed-part", type=float, default=d.embed_part, help="embedding cosine for a GA component (default: %(default)s)")
    g.add_argument("--ga-soft-ncc", type=float, default=d.soft_ncc,
                   help="pixel NCC an embedding match needs beside it (default: %(default)s)")
    g.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where the vision models run (cuda falls back to cpu)")
    g.add_argument("--vision-batch-size", type=int, default=32, help="largest RunInference batch (default: %(default)s)")
    g.add_argument("--vision-min-batch-size", type=int, default=1, help="smallest RunInference batch (default: %(default)s)")
    g.add_argument("--vision-share-model", action="store_true",
                   help="one model copy per worker machine shared by its SDK processes (GPU workers)")
    g.add_argument("--vision-model-copies", type=int, default=None,
                   help="exact number of model copies per worker machine (e.g. its number of GPUs); implies sharing")


def thresholds_from_args(args) -> GAThresholds:
    d = GAThresholds()
    return GAThresholds(
        reused_ncc=getattr(args, "ga_reused_ncc", d.reused_ncc),
        reused_phash_bits=getattr(args, "ga_reused_phash_bits", d.reused_phash_bits),
        part_ncc=getattr(args, "ga_part_ncc", d.part_ncc),
        crop_reused_area=getattr(args, "ga_crop_reused_area", d.crop_reused_area),
        embed_reused=getattr(args, "ga_embed_reused", d.embed_reused),
        embed_part=getattr(args, "ga_embed_part", d.embed_part),
        soft_ncc=getattr(args, "ga_soft_ncc", d.soft_ncc),
        aspect_tolerance=d.aspect_tolerance, min_tile_fraction=d.min_tile_fraction, min_tile_area=d.min_tile_area,
    )


@dataclass
class VisionStage:
    """The vision options resolved on the launching machine."""

    matcher: KeywordMatcher
    max_pixels: int = DEFAULT_MAX_PIXELS
    ga_entries: list[GAEntry] = field(default_factory=list)
    thresholds: GAThresholds = field(default_factory=GAThresholds)
    medical_weights: Optional[str] = None
    medical_meta: object = None
    top_k: int = DEFAULT_TOP_K
    classify_all: bool = False
    embed_weights: Optional[str] = None
    embed_meta: object = None
    device: str = "cpu"
    batch: tuple = (1, 32)
    share_model: bool = False
    model_copies: Optional[int] = None
    ga_max_bytes: int = DEFAULT_MAX_GA_BYTES
    ga_timeout: float = DEFAULT_TIMEOUT
    no_images: bool = False

    @classmethod
    def from_args(cls, args) -> "VisionStage":
        from sciga.transforms.vision.ga_manifest import ManifestError, read_ga_manifest
        from sciga.transforms.vision.models import WeightsError

        try:
            matcher = KeywordMatcher(load_keywords(getattr(args, "medical_keywords", None)))
        except (OSError, ValueError) as e:
            raise SystemExit(f"sciga build: {e}") from None
        st = cls(matcher=matcher, max_pixels=getattr(args, "max_image_pixels", DEFAULT_MAX_PIXELS),
                 thresholds=thresholds_from_args(args), top_k=getattr(args, "medical_top_k", DEFAULT_TOP_K),
                 classify_all=getattr(args, "medical_classify", "keyword-hits") == "all",
                 batch=(getattr(args, "vision_min_batch_size", 1), getattr(args, "vision_batch_size", 32)),
                 share_model=getattr(args, "vision_share_model", False), model_copies=getattr(args, "vision_model_copies", None),
                 ga_max_bytes=getattr(args, "ga_max_mb", DEFAULT_MAX_GA_BYTES >> 20) << 20,
                 ga_timeout=getattr(args, "ga_timeout", DEFAULT_TIMEOUT), no_images=getattr(args, "no_images", False))
        if st.top_k < 1:
            raise SystemExit("sciga build: --medical-top-k must be 1 or more")
        if getattr(args, "ga_manifest", None):
            try:
                st.ga_entries = read_ga_manifest(args.ga_manifest)
            except ManifestError as e:
                raise SystemExit(f"sciga build: {e}") from None
            log.info("GA manifest %s: %d papers with a graphical abstract", args.ga_manifest, len(st.ga_entries))
        want_model = getattr(args, "medical_weights", None) or getattr(args, "ga_embedding_weights", None)
        if want_model:
            from sciga.transforms.vision.models import pick_device, read_meta

            st.device = pick_device(getattr(args, "device", "cpu"))
            try:
                if args.medical_weights:
                    st.medical_weights, st.medical_meta = args.medical_weights, read_meta(args.medical_weights)
                    MedicalRule(tuple(st.medical_meta.labels), st.top_k).medical  # has a Medical class?
                if getattr(args, "ga_embedding_weights", None):
                    st.embed_weights, st.embed_meta = args.ga_embedding_weights, read_meta(args.ga_embedding_weights)
            except (WeightsError, ValueError) as e:
                raise SystemExit(f"sciga build: {e}") from None
        if not st.medical_weights:
            log.warning("medical filter: no --medical-weights given, so only stage 1 (keywords) runs; the DocFigure "
                        "classifier is not run (classifier_run=false, is_medical=null for figures with keyword hits)")
        return st

    # ------------------------------------------------------------ pure per-paper steps

    @property
    def ga_ids(self) -> frozenset:
        return frozenset(e.paper_id for e in self.ga_entries)

    def figure_rows(self, paper):
        """Paper -> [(page URI, FigureRow)] with keyword hits and de-facto GA roles."""
        rows = annotate_keywords(paper, figure_rows(paper), self.matcher)
        if paper.id not in self.ga_ids:
            apply_de_facto(copy.copy(paper), rows)
        return [(paper.provenance.input_uri, r) for r in rows]

    def with_de_facto(self, paper):
        if paper.id in self.ga_ids:
            return paper
        paper = copy.copy(paper)
        apply_de_facto(paper, [])
        return paper

    def _handler(self, weights: str, task: str):
        from sciga.transforms.vision.handlers import FigureModelHandler

        return FigureModelHandler(weights, task, self.device, min_batch_size=self.batch[0], max_batch_size=self.batch[1],
                                  share_model=self.share_model or bool(self.model_copies), model_copies=self.model_copies)

    # ------------------------------------------------------------ composition

    def apply(self, papers, figures):
        """(papers, figure rows with image bytes) -> (papers, figure rows), annotated."""
        from sciga.transforms.vision.beam import AnnotateGA, ClassifyMedical, DecodeImages, GAEmbeddingInputs, LoadGAImages

        figures = figures | "DecodeImages" >> beam.ParDo(DecodeImages(self.max_pixels))
        if self.ga_entries:
            ga_ids = self.ga_ids
            papers_ga, papers_rest = papers | "HasGA" >> beam.Partition(lambda p, _n: 0 if p.id in ga_ids else 1, 2)
            figs_ga, figs_rest = figures | "FigHasGA" >> beam.Partition(lambda r, _n: 0 if r.paper_id in ga_ids else 1, 2)
            gas = (
                papers.pipeline
                | "GAManifest" >> beam.Create(self.ga_entries)
                | "SpreadGA" >> beam.Reshuffle()
                | "LoadGA" >> beam.ParDo(LoadGAImages(self.ga_max_bytes, self.ga_timeout))
            )
            figs_keyed = figs_ga | "KeyFigByPaper" >> beam.Map(lambda r: (r.paper_id, r))
            groups = {
                "paper": papers_ga | "KeyPaper" >> beam.Map(lambda p: (p.id, p)),
                "figures": figs_keyed,
                "ga": gas,
            }
            if self.embed_weights:
                from apache_beam.ml.inference.base import KeyedModelHandler, RunInference

                from sciga.transforms.vision.handlers import probabilities

                m = self.embed_meta
                groups["emb"] = (
                    (figs_keyed, gas) | "EmbedItems" >> beam.Flatten()
                    | "EmbedPrep" >> beam.ParDo(GAEmbeddingInputs(m.input_size, m.mean, m.std, self.max_pixels))
                    | "Embed" >> RunInference(KeyedModelHandler(self._handler(self.embed_weights, "embed")))
                    | "EmbedByPaper" >> beam.Map(lambda kv: (kv[0][0], (kv[0][1], probabilities(kv[1]).tolist())))
                )
            out = (
                groups
                | "JoinGA" >> beam.CoGroupByKey()
                | "AnnotateGA" >> beam.ParDo(AnnotateGA(self.thresholds, self.max_pixels, self.matcher)).with_outputs(AnnotateGA.FIGURES, main="papers")
            )
            papers = (out.papers, papers_rest | "DeFactoGA" >> beam.Map(self.with_de_facto)) | "AllPapers" >> beam.Flatten()
            figures = (out[AnnotateGA.FIGURES], figs_rest) | "AllFigures" >> beam.Flatten()
        else:
            papers = papers | "DeFactoGA" >> beam.Map(self.with_de_facto)
        if self.medical_weights:
            m = self.medical_meta
            rule = MedicalRule(tuple(m.labels), self.top_k)
            figures = figures | "MedicalClassifier" >> ClassifyMedical(
                self._handler(self.medical_weights, "classify"), rule, m.input_size, m.mean, m.std,
                self.max_pixels, self.classify_all)
        if self.no_images:
            figures = figures | "NoImages" >> beam.Map(_drop_bytes)
        return papers, figures


def _drop_bytes(row):
    row.image_bytes = None
    return row
