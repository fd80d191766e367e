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
        if row.image_path and row.image_bytes is None and page_uri and "://" not in page_uri.split("/", 1)[0]:
            data, _, err = read_asset(page_uri, row.image_path, self.max_bytes)
            if data is not None:
                row.image_bytes = data
                self.found.inc()
            elif err:
                row.image_error = err
                self.missing.inc()
        yield row
