"""Gate defaults, importable without loading Great Expectations (the CLI parser needs them)."""
DEFAULT_MAX_DEAD_LETTER_RATE = 0.10
# The gate checks images with the same pixel limit the vision stage decodes with.
from sciga.transforms.vision.decode import DEFAULT_MAX_PIXELS  # noqa: E402,F401
IMAGE_CHECKS = ("decode", "header", "none")
