"""Beam wrapper of the bulk e-print reader: one verified pass per tar, tars side by side."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.metrics import Metrics


class ScanBulkTar(beam.DoFn):
    """(tar name, [paper ids]) -> (tar name, error type or None): one verified pass over a
    tar of arXiv's bulk sources, writing the wanted e-prints into the bulk cache
    (``BulkEprints.scan``). The unit of work of the extraction pipeline: tars are scanned
    side by side on as many workers as there are."""

    def __init__(self, bulk):
        self.bulk = bulk
        self.scanned = Metrics.counter("sciga", "bulk_tars_scanned")

    def process(self, element):
        name, wanted = element
        idx, _ = self.bulk.scan(name, sorted(wanted))
        self.scanned.inc()
        yield name, idx.error_type


class ExtractBulkEprints(beam.PTransform):
    """PCollection[(tar name, [paper ids])] -> (tar name, error type or None)."""

    def __init__(self, bulk):
        super().__init__()
        self.bulk = bulk

    def expand(self, groups):
        return groups | "SpreadTars" >> beam.Reshuffle() | "ScanTar" >> beam.ParDo(ScanBulkTar(self.bulk))
