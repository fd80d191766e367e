"""Linking: figure references in the text (S2ORC-style spans), sentences, subcaptions.
The pure per-paper step is ``link_paper.py``; its Beam wrapper is ``stage.py``."""
