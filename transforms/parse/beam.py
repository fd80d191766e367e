"""Beam wrappers of the parse stage: thin DoFns around the pure functions."""
from __future__ import annotations

import apache_beam as beam
from apache_beam.metrics import Metrics

from sciga.transforms.dead_letter import DEAD_LETTER_TAG, dead_letter_from
from sciga.transforms.parse.decode import DEFAULT_MAX_BYTES
from sciga.transforms.parse.dedupe import choose
from sciga.transforms.parse.latexml_html import parse_latexml_html
from sciga.transforms.sources.local_files import fallback_paper_id, read_bytes, read_sidecar


class ParsePage(beam.DoFn):
    """input URI -> Paper, or one dead-letter row (stage read or parse)."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES, source: str | None = None, metadata_dir: str | None = None):
        self.max_bytes = max_bytes
        self.source = source
        self.metadata_dir = metadata_dir
        self.parsed = Metrics.counter("sciga", "papers_parsed")
        self.failed = Metrics.counter("sciga", "papers_dead_lettered_parse")

    def process(self, uri: str):
        stage = "read"
        try:
            data = read_bytes(uri, self.max_bytes)
            meta = read_sidecar(uri, self.metadata_dir)
            stage = "parse"
            fid, how = fallback_paper_id(uri)
            paper = parse_latexml_html(data, meta, input_uri=uri, fallback_id=fid, fallback_id_source=how,
                                       source=self.source, max_bytes=self.max_bytes)
        except Exception as e:  # noqa: BLE001 - every failure becomes a dead letter
            self.failed.inc()
            yield beam.pvalue.TaggedOutput(DEAD_LETTER_TAG, dead_letter_from(e, stage, uri, fallback_paper_id(uri)[0]))
            return
        self.parsed.inc()
        yield paper


class KeepOnePerPaper(beam.DoFn):
    """(paper_id, [Paper...]) -> the kept Paper; the other copies become dead letters."""

    def __init__(self):
        self.dups = Metrics.counter("sciga", "duplicates_dead_lettered")

    def process(self, element):
        _, papers = element
        papers = list(papers)
        if len(papers) == 1:
            yield papers[0]
            return
        kept, dead = choose(papers)
        for d in dead:
            self.dups.inc()
            yield beam.pvalue.TaggedOutput(DEAD_LETTER_TAG, d)
        yield kept
