"""Gate defaults, importable without loading Great Expectations (the CLI parser needs them).
Images are checked with the vision stage's pixel limit (``transforms.vision.decode.
DEFAULT_MAX_PIXELS``), the one constant for that decision."""

DEFAULT_MAX_DEAD_LETTER_RATE = 0.10
# figures rows without an image / rows that should have one (not figures made of panels, not
# images left out with --no-images); above it the build is not fit to publish as is.
DEFAULT_MAX_MISSING_IMAGE_RATE = 0.50
IMAGE_CHECKS = ("decode", "header", "none")
