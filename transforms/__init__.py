"""The pipeline's steps, grouped by concern: sources -> parse -> link -> vision."""
