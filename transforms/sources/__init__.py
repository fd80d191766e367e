"""Where papers come from, and what a build starts from.

- a build's inputs: ``plan.py`` (what to compute, what to reuse), ``local_files.py`` (pages
  and sidecars on any fsspec path), ``ar5iv_dump.py``, ``assets.py`` (images beside a page);
- fetching per paper: ``fetch_job.py`` (the job), ``fetcher.py``, ``fetch_cache.py``,
  ``arxiv_api.py``, ``html_pages.py``, ``http_client.py``, ``endpoints.py``, ``beam.py``;
- bulk metadata: ``metadata_snapshot.py``, ``oai_pmh.py``, ``metadata_sink.py``,
  ``arxiv_records.py``, ``corpus_selection.py``, ``classifications.py``, ``comment_venue.py``;
  and the plan of a fetch: ``fetch_plan.py``;
- e-prints: ``eprint.py`` (safe reading), ``eprint_bulk.py`` / ``bulk_eprints.py`` /
  ``bulk_eprints_beam.py`` / ``eprint_coverage.py`` (arXiv's bulk tars), ``tex_sources.py``
  (where a paper's source is), ``tex_graphics.py`` (its figures), ``rasterize.py``;
- pages from e-prints: ``latexml_convert.py``, ``pages_from_eprints.py``.
"""
