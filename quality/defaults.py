"""Gate defaults, importable without loading Great Expectations (the CLI parser needs them).
Images are checked with the vision stage's pixel limit (``transforms.vision.decode.
DEFAULT_MAX_PIXELS``), the one constant for that decision."""
DEFAULT_MAX_DEAD_LETTER_RATE = 0.10
IMAGE_CHECKS = ("decode", "header", "none")
