"""Beam wrappers of the vision stage: thin DoFns / PTransforms around the pure functions.

GPU work goes through ``inference.ClassifyImages`` (decode in the SDK processes, then
``RunInference`` with ``FigureModelHandler``), so on a GPU worker the CPU cores decode
while the GPU runs batches.
"""
from __future__ import annotations

import logging

import apache_beam as beam
from apache_beam.metrics import Metrics

from sciga.transforms.vision.decode import DEFAULT_MAX_PIXELS
from sciga.transforms.vision.figure_images import annotate_image, decode_row
from sciga.transforms.vision.medical import MedicalRule

log = logging.getLogger("sciga.vision")


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


def _apply_rule(rule: MedicalRule):
    def fn(kv):
        row, probs = kv
        return rule.apply(row, probs)

    return fn


def _row_and_bytes(row):
    return row, row.image_bytes


def _row_of(kv):
    return kv[0]


class ClassifyMedical(beam.PTransform):
    """Stage 2 of the medical filter: rows with keyword hits (or all, ``classify_all``)
    that have pixels -> ``ClassifyImages`` (DocFigure classifier) -> top-K rule. Rows whose
    image does not decode come out unchanged (classifier not run). Every input row comes
    out exactly once.

    ``mean``/``std`` are accepted for existing callers; the handler normalises with the
    checkpoint's own values (the same numbers), on the model's device."""

    def __init__(self, handler, rule: MedicalRule, input_size: int, mean=None, std=None,
                 max_pixels: int = DEFAULT_MAX_PIXELS, classify_all: bool = False):
        super().__init__()
        self.handler, self.rule = handler, rule
        self.input_size = input_size
        self.max_pixels, self.classify_all = max_pixels, classify_all

    def expand(self, rows):
        from sciga.transforms.vision.inference import ClassifyImages

        classify_all = self.classify_all

        def wanted(row, _n):
            return 0 if (row.image_bytes is not None and (classify_all or row.medical.keyword_hits)) else 1

        todo, rest = rows | "NeedsClassifier" >> beam.Partition(wanted, 2)
        result = (
            todo
            | "KeyByRow" >> beam.Map(_row_and_bytes)
            | "Classify" >> ClassifyImages(handler=self.handler, input_size=self.input_size,
                                           max_pixels=self.max_pixels, reshuffle=False)
        )
        classified = result.probabilities | "TopK" >> beam.Map(_apply_rule(self.rule))
        skipped = result.failed | "NotClassified" >> beam.Map(_row_of)
        return (classified, skipped, rest) | "AllRows" >> beam.Flatten()


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
    """Items to embed for GA matching: ((paper id, item id), uint8 SxSx3 image) for each
    figure row with pixels (item = row id) and for a GA (item "GA" and its tiles "GA#<n>").
    The handler normalises them on the model's device with the checkpoint's mean/std
    (``mean``/``std`` are accepted for existing callers)."""

    def __init__(self, input_size: int, mean=None, std=None, max_pixels: int = DEFAULT_MAX_PIXELS):
        self.input_size, self.max_pixels = input_size, max_pixels

    def process(self, element):
        from sciga.transforms.vision.decode import ImageDecodeError, decode_image
        from sciga.transforms.vision.ga_match import ga_tiles
        from sciga.transforms.vision.models import resize_for_model

        pid, item = element
        if hasattr(item, "kind"):  # a FigureRow
            img = decode_row(item, self.max_pixels)
            if img is not None:
                yield (pid, item.id), resize_for_model(img, self.input_size)
            return
        if item.data is None:
            return
        try:
            img = decode_image(item.data, self.max_pixels).image
        except ImageDecodeError:
            return
        yield (pid, "GA"), resize_for_model(img, self.input_size)
        for i, tile in enumerate(ga_tiles(img)):
            yield (pid, f"GA#{i:02d}"), resize_for_model(tile, self.input_size)


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
