"""Beam wrapper of the bulk e-print reader (``bulk_eprints.BulkEprints.source``)."""
from __future__ import annotations

import apache_beam as beam
from apache_beam.metrics import Metrics


class ReadBulkEprint(beam.DoFn):
    """paper id -> (paper id, e-print bytes) read from arXiv's bulk tars through a
    ``BulkEprints`` built on the launcher (pickled to workers: it holds the manifest and
    paths, and opens its file systems lazily), or one dead letter (stage ``tex_source``:
    not_in_bulk, pdf_only, md5_mismatch, unsafe_archive, size_bomb, bulk_tar_unreadable,
    bulk_not_scanned)."""

    def __init__(self, bulk):
        self.bulk = bulk
        self.read = Metrics.counter("sciga", "bulk_eprints_read")
        self.failed = Metrics.counter("sciga", "bulk_eprints_failed")

    def process(self, paper_id):
        from sciga.transforms.common.dead_letter import DEAD_LETTER_TAG, dead_letter_from

        try:
            data = self.bulk.source(paper_id)
        except Exception as e:  # noqa: BLE001 - every failure becomes a dead letter
            self.failed.inc()
            yield beam.pvalue.TaggedOutput(DEAD_LETTER_TAG, dead_letter_from(e, "tex_source", self.bulk.label(paper_id),
                                                                             paper_id))
            return
        self.read.inc()
        yield paper_id, data


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
