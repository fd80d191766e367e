"""Gate defaults, importable without loading Great Expectations (the CLI parser needs them)."""
DEFAULT_MAX_DEAD_LETTER_RATE = 0.10
DEFAULT_MAX_PIXELS = 178_956_970  # Pillow's own decompression-bomb threshold
IMAGE_CHECKS = ("decode", "header", "none")
