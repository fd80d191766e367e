"""Beam wrappers of the in-pipeline fetch (`sciga build --ids`): one paper's parts fetched on a worker."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.metrics import Metrics


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
        from sciga.transforms.fetch.arxiv_api import ArxivMetadata
        from sciga.transforms.fetch.cache import FsspecStore
        from sciga.transforms.fetch.http_client import PoliteClient

        self.http = PoliteClient(
            self.endpoints.rate_limit,
            max_retries=self.max_retries,
            read_timeout=self.timeout,
            backoff_base=self.backoff,
        )
        self.api = ArxivMetadata(self.http, self.endpoints.arxiv_api_url)
        self.store = FsspecStore(self.store_uri)

    def process(self, element):
        from sciga.schemas.records import DeadLetter
        from sciga.transforms.common.dead_letter import DEAD_LETTER_TAG
        from sciga.transforms.fetch import paper_parts as fx
        from sciga.transforms.fetch.arxiv_api import normalize_id

        _, raw_ids = element
        wanted = []
        for raw in sorted(set(raw_ids)):
            pid, ver = normalize_id(raw)
            wanted.append((pid or raw, raw, ver))
        metas = {}
        for start in range(0, len(wanted), self.api.page_size):
            batch = wanted[start : start + self.api.page_size]
            for o in fx.fetch_meta_batch(self.store, self.api, [(pid, raw) for pid, raw, _ in batch]):
                metas[o.paper_id] = o
        for pid, raw, ver in wanted:
            rec = self.store.record(pid, "meta")
            if rec is None or rec.status != "ok":
                failed = metas.get(pid)
                self.failed.inc()
                yield beam.pvalue.TaggedOutput(
                    DEAD_LETTER_TAG,
                    DeadLetter(
                        paper_id=pid,
                        stage="metadata",
                        error_type=(failed.error_type if failed else None) or "failed",
                        message=(failed.message if failed else None) or f"{raw}: no metadata",
                        input_uri=f"arxiv:{raw}",
                    ),
                )
                continue
            had_sidecar = self.store.fs.exists(self.store.path_of(pid, ".meta.json"))
            h = fx.fetch_html_part(self.store, self.http, self.endpoints, pid, ver)
            if h.status == fx.FAILED:
                self.failed.inc()
                yield beam.pvalue.TaggedOutput(
                    DEAD_LETTER_TAG,
                    DeadLetter(
                        paper_id=pid,
                        stage="fetch_html",
                        error_type=h.error_type or "failed",
                        message=h.message or "",
                        input_uri=self.endpoints.html_url(pid, ver),
                    ),
                )
                continue
            s = fx.fetch_source_part(self.store, self.http, self.endpoints, pid, ver)
            if not (had_sidecar and h.status == fx.CACHED and s.status == fx.CACHED):
                fx.finalize(self.store, pid)
            self.fetched.inc()
            yield self.store.page_path(pid)


class FetchPapers(beam.PTransform):
    """arXiv ids -> page URIs in a fetch store (main output ``uris``) + dead letters."""

    def __init__(
        self,
        store_uri: str,
        endpoints,
        workers: int = 1,
        max_retries: int = 4,
        timeout: float = 60.0,
        backoff: float = 1.0,
    ):
        super().__init__()
        self.workers = max(1, int(workers))
        self.fn = _FetchGroupFn(store_uri, endpoints, max_retries, timeout, backoff)

    def expand(self, ids):
        from sciga.transforms.common.dead_letter import DEAD_LETTER_TAG

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
