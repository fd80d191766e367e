"""Beam wrapper of our LaTeXML conversion (``latexml_convert.convert_eprint``)."""
from __future__ import annotations

import apache_beam as beam
from apache_beam.metrics import Metrics

from sciga.transforms.sources.latexml_convert import LatexmlOptions


class ConvertWithLatexml(beam.DoFn):
    """(paper id, e-print bytes) -> (paper id, LatexmlResult), or one dead letter (stage
    ``latexml``: no_main_file, pdf_only, latexml_timeout, latexml_memory, latexml_fatal,
    latexml_missing; or the e-print stage's reason when the e-print itself is refused).
    Each conversion is one latexmlc process with the options' time and memory limits, so
    a worker runs as many at once as it has Beam threads."""

    def __init__(self, options: LatexmlOptions = LatexmlOptions(), input_uri_prefix: str = "eprint:"):
        self.options = options
        self.input_uri_prefix = input_uri_prefix
        self.converted = Metrics.counter("sciga", "latexml_converted")
        self.failed = Metrics.counter("sciga", "latexml_failed")
        self.seconds = Metrics.distribution("sciga", "latexml_ms_per_paper")

    def process(self, element):
        from sciga.transforms.common.dead_letter import DEAD_LETTER_TAG, dead_letter_from
        from sciga.transforms.sources.latexml_convert import convert_eprint

        paper_id, data = element
        uri = f"{self.input_uri_prefix}{paper_id}"
        try:
            result = convert_eprint(data, paper_id=paper_id, options=self.options)
        except Exception as e:  # noqa: BLE001 - every failure becomes a dead letter
            self.failed.inc()
            yield beam.pvalue.TaggedOutput(DEAD_LETTER_TAG, dead_letter_from(e, "latexml", uri, paper_id))
            return
        self.converted.inc()
        self.seconds.update(int(result.seconds * 1000))
        yield paper_id, result
