"""The build's stages, in the order a paper meets them, each may use only those before it:
common (shared utilities) -> where papers come from (inputs, fetch, metadata, eprints,
latexml) -> parse -> tex_recovery and link -> vision -> write."""
