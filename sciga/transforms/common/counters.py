"""Named counts of a step, without importing Apache Beam.

Where Beam runs a step, a count is a Beam metric (namespace ``sciga``, what Dataflow shows).
Where the step runs without Beam (the in-process executor of small rebuilds,
``executors/in_process.py``), there is no metrics system, and importing Beam only to count
would cost that executor more than a second: the count then goes nowhere. The Beam metric is
looked up when the count is first incremented, so a ``Counter`` made on the launcher and
pickled to a worker counts on the worker.
"""

from __future__ import annotations

import sys
from typing import Any

NAMESPACE = "sciga"


class Counter:
    def __init__(self, name: str):
        self.name = name
        self._metric: Any = None

    def __getstate__(self):
        return {"name": self.name}

    def __setstate__(self, state):
        self.name, self._metric = state["name"], None

    def inc(self, n: int = 1) -> None:
        metric = self._metric
        if metric is None:
            # Imported by whoever runs the step on Beam; outside a Beam bundle a Beam counter
            # is a no-op too, so a process that merely has Beam loaded loses nothing.
            metrics = sys.modules.get("apache_beam.metrics")
            if metrics is None:
                return
            metric = self._metric = metrics.Metrics.counter(NAMESPACE, self.name)
        metric.inc(n)
