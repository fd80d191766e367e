"""Linking: figure references in the text (S2ORC-style spans), sentences, TeX<->HTML."""
