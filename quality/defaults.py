"""Gate defaults, importable without loading Great Expectations (the CLI parser needs them)."""
DEFAULT_MAX_DEAD_LETTER_RATE = 0.10
DEFAULT_MAX_PIXELS = 89_478_485  # Pillow's MAX_IMAGE_PIXELS, the limit the vision stage decodes with
IMAGE_CHECKS = ("decode", "header", "none")
