"""sciga-builder: the open, reproducible dataset builder for scientific figures in context.

The code lives in top-level folders (``pipelines/``, ``transforms/``, ``schemas/``,
``quality/``, ``training/``, ``explore/``, ``publish/``, ``samples/``) so a newcomer finds a
feature by its folder. They are subpackages of ``sciga`` (``sciga.schemas`` ...) through
committed links ``sciga/<folder> -> ../<folder>``, so that generic names such as ``schemas``
or ``training`` never land at the top of site-packages, and so that every tool (Python from
a checkout, mypy, import-linter, an IDE's go-to-definition) resolves ``sciga.<folder>`` by
ordinary means. An installed wheel holds real folders.
"""

__version__ = "0.1.0"
