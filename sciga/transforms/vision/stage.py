"""The vision stage of a build: figure rows measured from their images, by reference.

    PaperWork -> MeasureFigures (per paper: rows, keyword stage, de-facto GA, each image
                 read once, hashed, decoded: size, pHash or the image error)
              -> papers (rows carry where their bytes are: ImageRef, never the bytes)
              -> medical requests -> ClassifyFigures (RunInference) -> MedicalResult
              -> GA requests -> LoadGA -> [embeddings: RunInference + CoGroupByKey]
                             -> TypeGA -> GAResult (+ a medical request for the GA image)

Each figure is decoded once per build, in MeasureFigures (``measure.py``), at the small scale its size,
pHash and classifier input need (``decode.decode_reduced``); of its pixels only the
classifier's compact uint8 input (150 KB at 224 px) leaves that step, for the figures
the classifier sees (keyword hits by default). The model steps send back small
annotations, which the write stage merges into the stored results; no pixels are stored.
"""

from __future__ import annotations

import logging
from typing import Optional

import apache_beam as beam

from sciga.schemas.build import GAResult, MedicalResult
from sciga.schemas.records import FigureRow, Paper
from sciga.transforms.common.counters import Counter
from sciga.transforms.common.dead_letter import DEAD_LETTER_TAG
from sciga.transforms.common.progress import Progress
from sciga.transforms.common.stage_fn import StepDoFn
from sciga.transforms.inputs.page_images import read_image_ref
from sciga.transforms.vision.ga import GAInput, annotate_ga
from sciga.transforms.vision.measure import (
    CLASSIFY,
    GA_REQUESTS,
    ClassifyKey,
    GAFigure,
    GARequest,
    MeasureStep,
    Payload,
)
from sciga.transforms.vision.medical import KeywordMatcher, MedicalRule
from sciga.transforms.vision.options import ResolvedVision

__all__ = [
    "CLASSIFY",
    "GA_REQUESTS",
    "ClassifyFigures",
    "ClassifyKey",
    "GAFigure",
    "GARequest",
    "MeasureFigures",
    "Payload",
    "TypeGraphicalAbstracts",
    "Vision",
]

log = logging.getLogger("sciga.vision")


class MeasureFigures(StepDoFn):
    """``MeasureStep`` (``measure.py``) as a DoFn: the build chain's step, else a new one."""

    def __init__(self, vision: ResolvedVision, progress: Optional[Progress] = None, step: Optional[MeasureStep] = None):
        super().__init__(step or MeasureStep(vision, progress))


# ------------------------------------------------------------------ medical classifier


class ClassifyFigures(beam.PTransform):
    """(ClassifyKey, payload) -> MedicalResult: ``ClassifyImages`` (decode in parallel,
    RunInference on uint8 images normalised on the model's device) and the top-K rule. A
    figure whose image cannot be read keeps ``classifier_run = false``."""

    def __init__(self, vision: ResolvedVision):
        super().__init__()
        self.vision = vision

    def expand(self, requests):
        import functools

        from sciga.transforms.vision.inference import ClassifyImages

        v, o = self.vision, self.vision.options
        m = v.medical_meta
        rule = MedicalRule(tuple(m.labels), o.top_k)

        def to_result(kv):
            key, probs = kv
            return MedicalResult(
                key=key.key, paper_id=key.paper_id, row_id=key.row_id, medical=rule.decide(key.keyword_hits, probs)
            )

        classified = requests | "ClassifyImages" >> ClassifyImages(
            handler=model_handler(v, o.medical_weights, "classify"),
            input_size=m.input_size,
            load_bytes=functools.partial(read_image_ref, max_bytes=o.max_image_bytes),
            max_pixels=o.max_pixels,
        )
        return classified.probabilities | "TopK" >> beam.Map(to_result)


def model_handler(vision: ResolvedVision, weights: str, task: str):
    from sciga.transforms.vision.handlers import FigureModelHandler

    return FigureModelHandler.from_options(weights, task, vision.inference)


# ------------------------------------------------------------------ graphical abstracts


class LoadGA(beam.DoFn):
    """GARequest -> the same request with the GA image bytes (or the reason there are none)."""

    def __init__(self, max_bytes: int, timeout: float):
        self.max_bytes, self.timeout = max_bytes, timeout
        self.loaded = Counter("ga_images_loaded")
        self.failed = Counter("ga_images_failed")

    def process(self, req: GARequest):
        from sciga.transforms.vision.ga_manifest import fetch_ga_bytes

        e = req.entry
        req.ga = GAInput(paper_id=e.paper_id, path=e.path, source=e.source, caption=e.caption, uri=e.uri)
        try:
            req.ga.data = fetch_ga_bytes(e, self.max_bytes, self.timeout)
            self.loaded.inc()
        except OSError as err:
            req.ga.error = str(err)
            req.ga.status = getattr(err, "status", None)
            self.failed.inc()
        yield req


class GAEmbeddingInputs(beam.DoFn):
    """GARequest -> ((result key, item id), uint8 SxSx3 image) for each figure with pixels
    (item = row id) and for the GA (item "GA") and its tiles ("GA#<n>"); the model's
    handler normalises them on its device."""

    def __init__(self, input_size: int, max_pixels: int, max_bytes: int):
        self.input_size, self.max_pixels, self.max_bytes = input_size, max_pixels, max_bytes

    def process(self, req: GARequest):
        from sciga.transforms.vision.decode import ImageDecodeError, decode_image
        from sciga.transforms.vision.ga_match import ga_tiles
        from sciga.transforms.vision.models import resize_for_model

        def decoded(data):
            try:
                return decode_image(data, self.max_pixels).image
            except ImageDecodeError:
                return None

        for f in req.figures:
            if f.payload is None:
                continue
            try:
                img = decoded(read_image_ref(f.payload, self.max_bytes))
            except OSError:
                img = None
            if img is not None:
                yield (req.key, f.id), resize_for_model(img, self.input_size)
        if req.ga is None or req.ga.data is None:
            return
        img = decoded(req.ga.data)
        if img is None:
            return
        yield (req.key, "GA"), resize_for_model(img, self.input_size)
        for i, tile in enumerate(ga_tiles(img)):
            yield (req.key, f"GA#{i:02d}"), resize_for_model(tile, self.input_size)


class TypeGA(beam.DoFn):
    """GARequest (or (key, {req, emb}) after the embedding join) -> GAResult; the GA image
    row's medical request (keyword hits on its caption) goes to ``classify``."""

    def __init__(self, vision: ResolvedVision):
        self.vision = vision
        self.typed = Counter("ga_typed")

    def setup(self):
        self.matcher = KeywordMatcher(list(self.vision.keywords))

    def process(self, element):
        import numpy as np

        if isinstance(element, GARequest):
            req, emb = element, None
        else:
            _, groups = element
            reqs = list(groups["req"])
            if not reqs:
                return
            req = reqs[0]
            emb = {item: np.asarray(vec, dtype=np.float32) for item, vec in groups.get("emb", [])} or None
        v, o = self.vision, self.vision.options
        rows = []
        for f in req.figures:
            r = FigureRow(
                id=f.id,
                paper_id=req.paper_id,
                parent_id=f.parent_id,
                kind=f.kind,
                index=0,
                number=None,
                label=None,
                caption="",
                subcaption=None,
                subcaption_source=None,
                image_bytes=None,
                image_path=None,
                image_paths=[],
                image_kind=None,
                image_source=None,
                ga_role=f.ga_role,
            )
            if f.payload is not None:
                try:
                    r.image_bytes = read_image_ref(f.payload, o.max_image_bytes)
                except OSError:
                    pass
            rows.append(r)
        stub = Paper(id=req.paper_id, title="", abstract="")
        try:
            rows = annotate_ga(
                stub, rows, req.ga, o.thresholds, o.max_pixels, emb, self.matcher, getattr(req, "de_facto", None)
            )
        except Exception as e:  # noqa: BLE001 - the paper is fine; its GA says what went wrong
            from sciga.schemas.ids import ga_id
            from sciga.schemas.records import GraphicalAbstract
            from sciga.transforms.vision.ga import ga_row

            log.warning("internal error typing the GA of %s: %r", req.paper_id, e)
            stub.graphical_abstract = GraphicalAbstract(
                id=ga_id(req.paper_id),
                paths=[req.ga.path],
                source=req.ga.source,
                caption=req.ga.caption,
                error=f"internal: unexpected {type(e).__name__} while typing the GA ({e}); please report",
            )
            rows = rows + [ga_row(stub, req.ga)]
        ga = next(r for r in rows if r.kind == "graphical_abstract")
        if stub.graphical_abstract and stub.graphical_abstract.type:
            self.typed.inc()
        roles = {r.id: r.ga_role for r in rows if r.kind != "graphical_abstract"}
        if ga.image_bytes is not None and v.medical_meta is not None and (o.classify_all or ga.medical.keyword_hits):
            yield beam.pvalue.TaggedOutput(
                CLASSIFY, (ClassifyKey(req.key, req.paper_id, ga.id, tuple(ga.medical.keyword_hits)), ga.image_bytes)
            )
        yield GAResult(
            key=req.key, paper_id=req.paper_id, graphical_abstract=stub.graphical_abstract, roles=roles, ga_row=ga
        )


class TypeGraphicalAbstracts(beam.PTransform):
    """GARequest -> {``results``: GAResult, ``classify``: medical requests of GA images}."""

    def __init__(self, vision: ResolvedVision):
        super().__init__()
        self.vision = vision

    def expand(self, requests):
        from apache_beam.ml.inference.base import KeyedModelHandler, RunInference

        from sciga.transforms.vision.handlers import probabilities

        v, o = self.vision, self.vision.options
        loaded = requests | "LoadGA" >> beam.ParDo(LoadGA(o.ga_max_bytes, o.ga_timeout))
        if v.embed_meta is None:
            typed_in = loaded
        else:
            m = v.embed_meta
            emb = (
                loaded
                | "EmbedPrep" >> beam.ParDo(GAEmbeddingInputs(m.input_size, o.max_pixels, o.max_image_bytes))
                | "Embed" >> RunInference(KeyedModelHandler(model_handler(v, o.ga_embedding_weights, "embed")))
                | "EmbedByKey" >> beam.Map(lambda kv: (kv[0][0], (kv[0][1], probabilities(kv[1]).tolist())))
            )
            typed_in = {
                "req": loaded | "KeyReq" >> beam.Map(lambda r: (r.key, r)),
                "emb": emb,
            } | "JoinEmbeddings" >> beam.CoGroupByKey()
        return typed_in | "TypeGA" >> beam.ParDo(TypeGA(v)).with_outputs(CLASSIFY, main="results")


# ------------------------------------------------------------------ the stage


class Vision(beam.PTransform):
    """PCollection[PaperWork] -> {``papers``: PaperWork with figure rows, ``dead_letter``,
    ``annotations``: MedicalResult / GAResult}. ``measure``: the build chain's measure step
    (``executors/chain.py``), which this stage runs, adding the models around it."""

    def __init__(
        self, vision: ResolvedVision, progress: Optional[Progress] = None, measure: Optional[MeasureStep] = None
    ):
        super().__init__()
        self.vision = vision
        self.progress = progress
        self.measure = measure

    def expand(self, works):
        v = self.vision
        measured = works | "MeasureFigures" >> beam.ParDo(MeasureFigures(v, self.progress, self.measure)).with_outputs(
            DEAD_LETTER_TAG, CLASSIFY, GA_REQUESTS, main="papers"
        )
        annotations = []
        classify = [measured[CLASSIFY]]
        if v.ga_entries_uri:
            ga = measured[GA_REQUESTS] | "GraphicalAbstracts" >> TypeGraphicalAbstracts(v)
            annotations.append(ga.results)
            classify.append(ga[CLASSIFY])
        if v.medical_meta is not None:
            annotations.append(
                tuple(classify) | "AllClassifyRequests" >> beam.Flatten() | "MedicalClassifier" >> ClassifyFigures(v)
            )
        if annotations:
            ann = tuple(annotations) | "AllAnnotations" >> beam.Flatten()
        else:
            ann = works.pipeline | "NoAnnotations" >> beam.Create([])
        return {"papers": measured.papers, DEAD_LETTER_TAG: measured[DEAD_LETTER_TAG], "annotations": ann}
