"""Beam wrappers of the sources stage."""
from __future__ import annotations

import apache_beam as beam
from apache_beam.metrics import Metrics

from sciga.transforms.sources.assets import DEFAULT_MAX_IMAGE_BYTES, read_asset


class AttachLocalImages(beam.DoFn):
    """(page URI, FigureRow) -> FigureRow with the image bytes read from beside the page.
    A missing or unreadable image is recorded on the row; the paper is not failed."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_IMAGE_BYTES):
        self.max_bytes = max_bytes
        self.found = Metrics.counter("sciga", "images_read")
        self.missing = Metrics.counter("sciga", "images_missing")

    def process(self, element):
        page_uri, row = element
        if row.image_source == "tex":
            # Taken from the TeX source (AttachTexImages) or failed there with a reason.
            yield row
            return
        if row.image_path and row.image_bytes is None and page_uri and "://" not in page_uri.split("/", 1)[0]:
            data, _, err = read_asset(page_uri, row.image_path, self.max_bytes)
            if data is not None:
                row.image_bytes = data
                self.found.inc()
            elif err:
                row.image_error = err
                self.missing.inc()
        yield row


# -- TeX-source figure recovery ---------------------------------------------------------------
class RecoverTexFigures(beam.DoFn):
    """Paper -> Paper whose lost / absent / blank figure images point at the TeX source,
    or one dead letter (stage ``tex_source``) when the source is unsafe or unreadable.
    Papers without a source pass through untouched."""

    def __init__(self, tex_dirs=(), threshold: float = 0.8, number_min_jaccard: float = 0.3, check_blank: bool = True):
        self.tex_dirs = tuple(tex_dirs)
        self.threshold = threshold
        self.number_min_jaccard = number_min_jaccard
        self.check_blank = check_blank
        self.with_source = Metrics.counter("sciga", "tex_sources_found")
        self.recovered = Metrics.counter("sciga", "tex_images_recovered")
        self.matched = Metrics.counter("sciga", "tex_figures_matched")
        self.failed = Metrics.counter("sciga", "papers_dead_lettered_tex_source")

    def process(self, paper):
        from sciga.transforms.dead_letter import DEAD_LETTER_TAG, dead_letter_from
        from sciga.transforms.sources.tex_graphics import parse_document
        from sciga.transforms.sources.tex_recovery import image_problem, load_source, locate_source, recover_figures

        uri = paper.provenance.input_uri
        try:
            src = locate_source(uri, paper.id, self.tex_dirs)
            if src is None:
                yield paper
                return
            self.with_source.inc()
            doc = parse_document(load_source(src, paper_id=paper.id))
            rep = recover_figures(paper, doc, lambda img: image_problem(img, uri, self.check_blank),
                                  threshold=self.threshold, number_min_jaccard=self.number_min_jaccard)
        except Exception as e:  # noqa: BLE001 - every failure becomes a dead letter
            self.failed.inc()
            yield beam.pvalue.TaggedOutput(DEAD_LETTER_TAG, dead_letter_from(e, "tex_source", uri, paper.id))
            return
        self.matched.inc(rep.matched)
        self.recovered.inc(rep.recovered)
        yield paper


class _AttachTexImagesFn(beam.DoFn):
    """(paper id, [(page URI, FigureRow)]) -> (page URI, FigureRow) with the bytes of
    every ``image_source == "tex"`` row read from the source (one read per paper) and
    rasterized to PNG when it is PDF / EPS. Failures are recorded on the row."""

    def __init__(self, tex_dirs=(), dpi: int = 150, max_side: int = 2048, timeout: float = 60.0):
        self.tex_dirs = tuple(tex_dirs)
        self.dpi = dpi
        self.max_side = max_side
        self.timeout = timeout
        self.attached = Metrics.counter("sciga", "tex_images_attached")
        self.failed = Metrics.counter("sciga", "tex_images_failed")

    def process(self, element):
        from sciga.transforms.errors import StageError
        from sciga.transforms.sources.rasterize import to_png_many
        from sciga.transforms.sources.tex_recovery import load_source, locate_source

        paper_id, items = element
        items = sorted(items, key=lambda kv: (kv[1].index, kv[1].kind != "figure", kv[1].id))
        tree, load_err = None, None
        page_uri = items[0][0] if items else None
        try:
            src = locate_source(page_uri, paper_id, self.tex_dirs)
            if src is None:
                load_err = "its TeX source is no longer where the figure stage found it"
            else:
                tree = load_source(src, paper_id=paper_id)
        except StageError as e:
            load_err = e.message
        todo: dict[str, list] = {}  # source file -> rows showing it (a file can back several rows)
        for uri, row in items:
            if row.image_bytes is not None or row.image_source != "tex":
                continue
            if tree is None:
                row.image_error = f"{row.image_path}: {load_err}"
                self.failed.inc()
            elif (row.image_path or "") not in tree.files:
                row.image_error = f"{row.image_path} is not in the e-print."
                self.failed.inc()
            else:
                todo.setdefault(row.image_path, []).append(row)
        names = sorted(todo)
        results = to_png_many([(n, tree.files[n]) for n in names], dpi=self.dpi, max_side=self.max_side,
                              timeout=self.timeout) if names else []
        for name, (png, err) in zip(names, results):
            for row in todo[name]:
                if png is not None:
                    row.image_bytes = png
                    self.attached.inc()
                else:
                    row.image_error = err.message
                    self.failed.inc()
        for uri, row in items:
            yield uri, row


class AttachTexImages(beam.PTransform):
    """Figure rows -> figure rows; only rows whose image comes from the TeX source are
    grouped by paper (so each e-print is opened once), the rest pass straight through."""

    def __init__(self, tex_dirs=(), dpi: int = 150, max_side: int = 2048, timeout: float = 60.0):
        super().__init__()
        self.fn = _AttachTexImagesFn(tex_dirs, dpi, max_side, timeout)

    def expand(self, rows):
        tex = rows | "TexRows" >> beam.Filter(lambda kv: kv[1].image_source == "tex" and kv[1].image_bytes is None)
        rest = rows | "OtherRows" >> beam.Filter(lambda kv: not (kv[1].image_source == "tex" and kv[1].image_bytes is None))
        attached = (
            tex
            | "KeyByPaper" >> beam.Map(lambda kv: (kv[1].paper_id, kv))
            | "GroupByPaper" >> beam.GroupByKey()
            | "ReadSource" >> beam.ParDo(self.fn)
        )
        return (attached, rest) | "AllRows" >> beam.Flatten()


# -- fetching inside the pipeline (sciga build --ids) ----------------------------------------
class _FetchGroupFn(beam.DoFn):
    """(group, [id ...]) -> page URI in the fetch store, or a dead letter per id (stage
    ``metadata`` or ``fetch_html``). One polite client per worker; ids of a group are
    fetched one after the other, so ``--fetch-workers`` bounds the requests in flight."""

    def __init__(self, store_uri: str, endpoints, max_retries: int = 4, timeout: float = 60.0, backoff: float = 1.0):
        self.store_uri = store_uri
        self.endpoints = endpoints
        self.max_retries = max_retries
        self.timeout = timeout
        self.backoff = backoff
        self.fetched = Metrics.counter("sciga", "papers_fetched")
        self.failed = Metrics.counter("sciga", "papers_dead_lettered_fetch")

    def setup(self):
        from sciga.transforms.sources.arxiv_api import ArxivMetadata
        from sciga.transforms.sources.fetch_cache import FsspecStore
        from sciga.transforms.sources.http_client import PoliteClient

        self.http = PoliteClient(self.endpoints.rate_limit, max_retries=self.max_retries, read_timeout=self.timeout,
                                 backoff_base=self.backoff)
        self.api = ArxivMetadata(self.http, self.endpoints.arxiv_api_url)
        self.store = FsspecStore(self.store_uri)

    def process(self, element):
        from sciga.schemas.records import DeadLetter
        from sciga.transforms.dead_letter import DEAD_LETTER_TAG
        from sciga.transforms.sources import fetcher as fx
        from sciga.transforms.sources.arxiv_api import normalize_id

        _, raw_ids = element
        wanted = []
        for raw in sorted(set(raw_ids)):
            pid, ver = normalize_id(raw)
            wanted.append((pid or raw, raw, ver))
        metas = {}
        for start in range(0, len(wanted), self.api.page_size):
            batch = wanted[start:start + self.api.page_size]
            for o in fx.fetch_meta_batch(self.store, self.api, [(pid, raw) for pid, raw, _ in batch]):
                metas[o.paper_id] = o
        for pid, raw, ver in wanted:
            rec = self.store.record(pid, "meta")
            if rec is None or rec.status != "ok":
                o = metas.get(pid)
                self.failed.inc()
                yield beam.pvalue.TaggedOutput(DEAD_LETTER_TAG, DeadLetter(
                    paper_id=pid, stage="metadata", error_type=(o.error_type if o else None) or "failed",
                    message=(o.message if o else None) or f"{raw}: no metadata", input_uri=f"arxiv:{raw}"))
                continue
            had_sidecar = self.store.fs.exists(self.store._path(pid, ".meta.json"))
            h = fx.fetch_html_part(self.store, self.http, self.endpoints, pid, ver)
            if h.status == fx.FAILED:
                self.failed.inc()
                yield beam.pvalue.TaggedOutput(DEAD_LETTER_TAG, DeadLetter(
                    paper_id=pid, stage="fetch_html", error_type=h.error_type or "failed", message=h.message or "",
                    input_uri=self.endpoints.html_url(pid, ver)))
                continue
            s = fx.fetch_source_part(self.store, self.http, self.endpoints, pid, ver)
            if not (had_sidecar and h.status == fx.CACHED and s.status == fx.CACHED):
                fx.finalize(self.store, pid)
            self.fetched.inc()
            yield self.store.page_path(pid)


class FetchPapers(beam.PTransform):
    """arXiv ids -> page URIs in a fetch store (main output ``uris``) + dead letters."""

    def __init__(self, store_uri: str, endpoints, workers: int = 1, max_retries: int = 4, timeout: float = 60.0,
                 backoff: float = 1.0):
        super().__init__()
        self.workers = max(1, int(workers))
        self.fn = _FetchGroupFn(store_uri, endpoints, max_retries, timeout, backoff)

    def expand(self, ids):
        from sciga.transforms.dead_letter import DEAD_LETTER_TAG

        n = self.workers
        return (
            ids
            | "SpreadIds" >> beam.Map(lambda i: (_stable_bucket(i, n), i))
            | "GroupIds" >> beam.GroupByKey()
            | "FetchIds" >> beam.ParDo(self.fn).with_outputs(DEAD_LETTER_TAG, main="uris")
        )


def _stable_bucket(value: str, n: int) -> int:
    import hashlib

    return int(hashlib.sha256(value.encode()).hexdigest()[:8], 16) % n
