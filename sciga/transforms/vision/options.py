"""Options of the vision stage, and the checks made on them before a build starts.

``VisionOptions`` is what a person chooses (flags); ``resolve_vision`` turns it into a
``ResolvedVision`` on the launching machine: the keyword list read, the checkpoints'
metadata read (found, readable, with a Medical class), the GA manifest parsed and staged as
JSON lines beside the build so that every worker reads the same entries. A problem there
stops the build with one sentence (``VisionConfigError``); a problem with one image or one
GA later is recorded on its row.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import posixpath
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

import fsspec

from sciga.schemas.build import FileDep
from sciga.transforms.inputs.page_images import DEFAULT_MAX_IMAGE_BYTES
from sciga.transforms.vision.defaults import DEFAULT_MAX_PIXELS, DEFAULT_TOP_K, GAThresholds
from sciga.transforms.vision.ga_manifest import DEFAULT_MAX_GA_BYTES, DEFAULT_TIMEOUT, GAEntry

if TYPE_CHECKING:
    from sciga.transforms.vision.inference_options import InferenceOptions

log = logging.getLogger("sciga.vision")


class VisionConfigError(ValueError):
    """Vision options that cannot work; the message is one sentence for the person."""


@dataclass(frozen=True)
class VisionOptions:
    max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES  # image files above this are not embedded
    max_pixels: int = DEFAULT_MAX_PIXELS  # images claiming more pixels are decompression bombs
    keywords_file: Optional[str] = None  # stage 1 of the medical filter (default: MedICaT Appendix B)
    medical_weights: Optional[str] = None  # DocFigure classifier (stage 2)
    top_k: int = DEFAULT_TOP_K
    classify_all: bool = False  # classify every figure, not only keyword hits
    ga_manifest: Optional[str] = None  # CSV arxiv_id,path[,source,caption]
    # Folders besides the manifest's own that its paths may lie in: the build's --input
    # folders (the CLI passes them). Paths elsewhere are refused unless ga_allow_outside.
    ga_roots: tuple[str, ...] = ()
    # --ga-allow-outside: read manifest paths wherever they point (absolute, ../, other
    # buckets) and fetch http(s) URLs; off by default (``ga_manifest.resolve_ga_path``).
    ga_allow_outside: bool = False
    ga_embedding_weights: Optional[str] = None
    ga_max_bytes: int = DEFAULT_MAX_GA_BYTES
    ga_timeout: float = DEFAULT_TIMEOUT
    thresholds: GAThresholds = field(default_factory=GAThresholds)
    # How the models run (device, batches, sharing, precision).
    inference: Optional[InferenceOptions] = None


# Options that change how fast results come, never what they are (files are in by content).
# (the GA manifest's options reach a result through its row's dependency, ``ga_fingerprint``)
_NOT_IN_RESULTS = (
    "inference",
    "ga_manifest",
    "ga_roots",
    "ga_allow_outside",
    "keywords_file",
    "medical_weights",
    "ga_embedding_weights",
)


@dataclass(frozen=True)
class ResolvedVision:
    options: VisionOptions
    keywords: tuple[str, ...]
    medical_meta: Optional[object] = None  # models.CheckpointMeta
    embed_meta: Optional[object] = None
    ga_entries_uri: Optional[str] = None  # staged JSON lines of the manifest's entries
    ga_count: int = 0
    weights_sha256: tuple = ()  # ((role, sha256), ...)

    def fingerprint_fields(self) -> dict:
        """What of the vision options a paper's result depends on (for its result key)."""
        d = {k: v for k, v in dataclasses.asdict(self.options).items() if k not in _NOT_IN_RESULTS}
        d["keywords"] = list(self.keywords)
        d["weights"] = [list(x) for x in self.weights_sha256]
        if self.weights_sha256:  # GPU and bf16 scores differ in the last digits from CPU fp32 ones
            inf = self.inference
            d["model_numerics"] = [inf.device, inf.precision]
        return d

    @property
    def inference(self):
        from sciga.transforms.vision.inference_options import InferenceOptions

        return self.options.inference or InferenceOptions()


def _sha256_of(uri: str) -> str:
    from sciga.transforms.vision.models import resolve_weights

    h = hashlib.sha256()
    with fsspec.open(resolve_weights(uri), "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def warn_keywords_only(options: VisionOptions) -> None:
    """The notice that the medical filter runs stage 1 only. Said by the build when it is about
    to compute papers, not when the options are checked: a build that is up to date runs no
    stage, so it has nothing to warn about."""
    if not options.medical_weights:
        log.warning(
            "medical filter: no --medical-weights given, so only stage 1 (keywords) runs; the DocFigure "
            "classifier is not run (classifier_run=false, is_medical=null for figures with keyword hits)"
        )


def resolve_vision(options: VisionOptions, staging_dir: Optional[str] = None) -> ResolvedVision:
    """Check the options where the build is launched; raises ``VisionConfigError``."""
    from sciga.transforms.vision.ga_manifest import ManifestError, read_ga_manifest
    from sciga.transforms.vision.medical import MedicalRule, load_keywords

    try:
        keywords = tuple(load_keywords(options.keywords_file))
    except (OSError, ValueError) as e:
        raise VisionConfigError(str(e)) from None
    if options.top_k < 1:
        raise VisionConfigError("--medical-top-k must be 1 or more")
    medical_meta = embed_meta = None
    weights = []
    if options.medical_weights or options.ga_embedding_weights:
        # The device is chosen on the workers (a laptop launching GPU workers has no GPU).
        from sciga.transforms.vision.models import WeightsError, read_meta

        try:
            if options.medical_weights:
                medical_meta = read_meta(options.medical_weights)
                _ = MedicalRule(tuple(medical_meta.labels), options.top_k).medical  # raises without a Medical class
                weights.append(("medical", _sha256_of(options.medical_weights)))
            if options.ga_embedding_weights:
                embed_meta = read_meta(options.ga_embedding_weights)
                weights.append(("ga_embedding", _sha256_of(options.ga_embedding_weights)))
        except (WeightsError, ValueError, OSError) as e:
            raise VisionConfigError(str(e)) from None
    ga_uri, n_ga = None, 0
    if options.ga_manifest:
        try:
            entries = read_ga_manifest(options.ga_manifest, options.ga_roots, options.ga_allow_outside)
        except ManifestError as e:
            raise VisionConfigError(str(e)) from None
        n_ga = len(entries)
        log.info("GA manifest %s: %d papers with a graphical abstract", options.ga_manifest, n_ga)
        if staging_dir is not None:
            ga_uri = posixpath.join(staging_dir, "ga_manifest.jsonl")
            fs, p = fsspec.core.url_to_fs(ga_uri)
            fs.makedirs(posixpath.dirname(p), exist_ok=True)
            with fs.open(p, "w") as f:
                for entry in entries:
                    f.write(json.dumps(dataclasses.asdict(entry), sort_keys=True) + "\n")
    return ResolvedVision(
        options=options,
        keywords=keywords,
        medical_meta=medical_meta,
        embed_meta=embed_meta,
        ga_entries_uri=ga_uri,
        ga_count=n_ga,
        weights_sha256=tuple(weights),
    )


# ------------------------------------------------------------------ GA manifest on workers


def ga_fingerprint(entry: Optional[GAEntry]) -> Optional[str]:
    if entry is None:
        return None
    fields = [entry.path, entry.uri, entry.source, entry.caption]
    if entry.refused or entry.root:  # where it may be read from, and why not: part of the GA's result
        fields += [entry.root, entry.refused]
    blob = json.dumps(fields, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


class GAIndex:
    """The staged manifest entries by paper id, loaded once per worker."""

    def __init__(self, uri: Optional[str]):
        self.uri = uri
        self._entries: Optional[dict[str, GAEntry]] = None

    def __getstate__(self):
        return {"uri": self.uri, "_entries": None}

    def entries(self) -> dict[str, GAEntry]:
        if self._entries is None:
            out: dict[str, GAEntry] = {}
            if self.uri:
                with fsspec.open(self.uri, "rt", encoding="utf-8") as f:
                    for line in f:
                        if line.strip():
                            d = json.loads(line)
                            out[d["paper_id"]] = GAEntry(**d)
            self._entries = out
        return self._entries

    def get(self, paper_id: str) -> Optional[GAEntry]:
        return self.entries().get(paper_id)

    def dep(self, paper_id: str) -> FileDep:
        """The result's dependency on the paper's manifest row (or on there being none)."""
        return FileDep(uri=paper_id, token=ga_fingerprint(self.get(paper_id)), kind="ga")

    # As a dependency checker for the plan stage (kind "ga").
    def setup(self) -> None:
        self.entries()

    def __call__(self, dep: FileDep) -> bool:
        return ga_fingerprint(self.get(dep.uri)) == dep.token
