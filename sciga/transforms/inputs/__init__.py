"""A build's inputs: listing pages, sidecars, TeX folders and dumps, reading them inside their
folders, and the build plan (what to compute, what to reuse)."""
