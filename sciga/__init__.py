"""sciga-builder: the open, reproducible dataset builder for scientific figures in context.

The code lives in top-level folders (``pipelines/``, ``transforms/``, ``schemas/``,
``quality/``, ``training/``, ``samples/``) so a newcomer finds a feature by its folder.
They are installed as subpackages of ``sciga`` (``sciga.schemas`` ...) so that generic
names such as ``schemas`` or ``training`` never land at the top of site-packages.

Running from a source checkout (tests, ``python -m sciga``) needs no install: the repository
root is added to this package's search path when it holds the project's ``setup.py``.
"""
import os as _os

__version__ = "0.1.0"

_root = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if _os.path.isfile(_os.path.join(_root, "setup.py")) and _os.path.isdir(
    _os.path.join(_root, "schemas")
):
    __path__.append(_root)  # type: ignore[name-defined]
