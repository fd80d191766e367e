"""The build's stages, in the order a paper meets them, each may use only those before it:
common (shared utilities) -> sources -> parse -> link -> vision -> write."""
