"""Paper metadata: arXiv records, bulk harvests (OAI-PMH, the snapshot) into the fetch cache,
classifications, venues and the corpus definition."""
