"""Beam wrappers of the vision stage: thin DoFns / PTransforms around the pure functions.

GPU work goes through ``apache_beam.ml.inference.RunInference`` with
``FigureModelHandler`` (``handlers.py``); decoding and preprocessing run in their own DoFn
before it, so on a GPU worker the CPU cores decode while the GPU runs batches.
"""
from __future__ import annotations

import logging

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.ml.inference.base import KeyedModelHandler, RunInference

from sciga.transforms.vision.decode import DEFAULT_MAX_PIXELS
from sciga.transforms.vision.figure_images import annotate_image, decode_row
from sciga.transforms.vision.medical import MedicalRule

log = logging.getLogger("sciga.vision")

SKIPPED = "skipped"


class DecodeImages(beam.DoFn):
    """FigureRow -> FigureRow with width, height, pHash, or the image error."""

    def __init__(self, max_pixels: int = DEFAULT_MAX_PIXELS):
        self.max_pixels = max_pixels
        self.decoded = Metrics.counter("sciga", "images_decoded")
        self.failed = Metrics.counter("sciga", "images_undecodable")

    def process(self, row):
        had = row.image_bytes is not None
        try:
            row = annotate_image(row, self.max_pixels)
        except Exception as e:  # noqa: BLE001 - a bug on one image must not stop the run
            log.warning("internal error decoding %s: %r", row.id, e)
            row.image_error, row.image_bytes = f"internal: unexpected {type(e).__name__} while decoding ({e}); please report", None
        if had:
            (self.decoded if row.image_bytes is not None else self.failed).inc()
        yield row


class PrepareForModel(beam.DoFn):
    """FigureRow -> (FigureRow, tensor) for RunInference; rows without pixels go to the
    ``skipped`` output unchanged (their classifier is recorded as not run)."""

    def __init__(self, input_size: int, mean, std, max_pixels: int = DEFAULT_MAX_PIXELS):
        self.input_size, self.mean, self.std, self.max_pixels = input_size, tuple(mean), tuple(std), max_pixels

    def process(self, row):
        from sciga.transforms.vision.models import preprocess

        try:
            img = decode_row(row, self.max_pixels, draft_size=(self.input_size * 2, self.input_size * 2))
            x = None if img is None else preprocess(img, self.input_size, self.mean, self.std)
        except Exception as e:  # noqa: BLE001 - the row goes on, its classifier not run
            log.warning("internal error preparing %s for the classifier: %r", row.id, e)
            x = None
        if x is None:
            yield beam.pvalue.TaggedOutput(SKIPPED, row)
            return
        yield row, x


def _apply_rule(rule: MedicalRule):
    from sciga.transforms.vision.handlers import probabilities

    def fn(kv):
        row, result = kv
        return rule.apply(row, probabilities(result))

    return fn


class ClassifyMedical(beam.PTransform):
    """Stage 2 of the medical filter: rows with keyword hits (or all, ``classify_all``)
    that have pixels -> RunInference (DocFigure classifier) -> top-K rule. Every input row
    comes out exactly once."""

    def __init__(self, handler, rule: MedicalRule, input_size: int, mean, std,
                 max_pixels: int = DEFAULT_MAX_PIXELS, classify_all: bool = False):
        super().__init__()
        self.handler, self.rule = handler, rule
        self.input_size, self.mean, self.std = input_size, mean, std
        self.max_pixels, self.classify_all = max_pixels, classify_all

    def expand(self, rows):
        classify_all = self.classify_all

        def wanted(row, _n):
            return 0 if (row.image_bytes is not None and (classify_all or row.medical.keyword_hits)) else 1

        todo, rest = rows | "NeedsClassifier" >> beam.Partition(wanted, 2)
        prepared = todo | "Preprocess" >> beam.ParDo(
            PrepareForModel(self.input_size, self.mean, self.std, self.max_pixels)).with_outputs(SKIPPED, main="ready")
        classified = (
            prepared.ready
            | "RunInference" >> RunInference(KeyedModelHandler(self.handler))
            | "TopK" >> beam.Map(_apply_rule(self.rule))
        )
        return (classified, prepared[SKIPPED], rest) | "AllRows" >> beam.Flatten()


# ------------------------------------------------------------------ graphical abstracts

class LoadGAImages(beam.DoFn):
    """GAEntry -> (paper id, GAInput) with the image bytes or the reason there are none."""

    def __init__(self, max_bytes: int, timeout: float):
        self.max_bytes, self.timeout = max_bytes, timeout
        self.loaded = Metrics.counter("sciga", "ga_images_loaded")
        self.failed = Metrics.counter("sciga", "ga_images_failed")

    def process(self, entry):
        from sciga.transforms.vision.ga import GAInput
        from sciga.transforms.vision.ga_manifest import fetch_ga_bytes

        ga = GAInput(paper_id=entry.paper_id, path=entry.path, source=entry.source, caption=entry.caption)
        try:
            ga.data = fetch_ga_bytes(entry, self.max_bytes, self.timeout)
            self.loaded.inc()
        except OSError as e:
            ga.error = str(e)
            self.failed.inc()
        yield entry.paper_id, ga


class GAEmbeddingInputs(beam.DoFn):
    """Items to embed for GA matching: ((paper id, item id), tensor) for each figure row
    with pixels (item = row id) and for a GA (item "GA" and its tiles "GA#<n>")."""

    def __init__(self, input_size: int, mean, std, max_pixels: int = DEFAULT_MAX_PIXELS):
        self.input_size, self.mean, self.std, self.max_pixels = input_size, tuple(mean), tuple(std), max_pixels

    def process(self, element):
        from sciga.transforms.vision.decode import ImageDecodeError, decode_image
        from sciga.transforms.vision.ga_match import ga_tiles
        from sciga.transforms.vision.models import preprocess

        pid, item = element
        if hasattr(item, "kind"):  # a FigureRow
            img = decode_row(item, self.max_pixels)
            if img is not None:
                yield (pid, item.id), preprocess(img, self.input_size, self.mean, self.std)
            return
        if item.data is None:
            return
        try:
            img = decode_image(item.data, self.max_pixels).image
        except ImageDecodeError:
            return
        yield (pid, "GA"), preprocess(img, self.input_size, self.mean, self.std)
        for i, tile in enumerate(ga_tiles(img)):
            yield (pid, f"GA#{i:02d}"), preprocess(tile, self.input_size, self.mean, self.std)


class AnnotateGA(beam.DoFn):
    """(paper id, {paper, figures, ga, emb}) -> the Paper (main) with its graphical
    abstract, and its figure rows (tagged ``figures``) with GA roles and the GA row."""

    FIGURES = "figures"

    def __init__(self, thresholds, max_pixels: int = DEFAULT_MAX_PIXELS, matcher=None):
        self.thresholds, self.max_pixels, self.matcher = thresholds, max_pixels, matcher
        self.unmatched = Metrics.counter("sciga", "ga_manifest_rows_without_paper")
        self.typed = Metrics.counter("sciga", "ga_typed")

    def process(self, element):
        import numpy as np

        from sciga.transforms.vision.ga import annotate_ga

        pid, groups = element
        papers, rows, gas = list(groups["paper"]), list(groups["figures"]), list(groups["ga"])
        if not papers:
            if gas:
                self.unmatched.inc()
                log.warning("GA manifest names %s, which is not among the built papers; its GA is not used", pid)
            return
        paper = papers[0]
        if gas:
            emb = {item: np.asarray(v, dtype=np.float32) for item, v in groups.get("emb", [])}
            try:
                rows = annotate_ga(paper, rows, gas[0], self.thresholds, self.max_pixels, emb or None, self.matcher)
            except Exception as e:  # noqa: BLE001 - the paper is fine; its GA says what went wrong
                from sciga.schemas.ids import ga_id
                from sciga.schemas.records import GraphicalAbstract

                log.warning("internal error typing the GA of %s: %r", pid, e)
                paper.graphical_abstract = GraphicalAbstract(
                    id=ga_id(pid), paths=[gas[0].path], source=gas[0].source, caption=gas[0].caption,
                    error=f"internal: unexpected {type(e).__name__} while typing the GA ({e}); please report")
            if paper.graphical_abstract and paper.graphical_abstract.type:
                self.typed.inc()
        yield paper
        for r in rows:
            yield beam.pvalue.TaggedOutput(self.FIGURES, r)
