"""The embedded sample corpus, written by us: LaTeXML pages with their images (``html``),
metadata sidecars (``meta``) and the TeX sources the pages were made from (``tex``)."""

import os as _os


def sample_dir(part: str = "html") -> str:
    """A folder of the sample (installed with the package, or in the checkout)."""
    return _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), part)
