"""A Dask cluster for the tests: one ``distributed.LocalCluster`` of 2 worker processes (one
thread each) for the whole session, started when a test first asks for it; builds reach it
with ``--dask-address``, as they reach a user's cluster."""

from __future__ import annotations

import logging

import pytest


@pytest.fixture(scope="session")
def dask_cluster():
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=logging.CRITICAL
    ) as cluster:
        yield cluster
