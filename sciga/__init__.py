"""sciga-builder: the open, reproducible dataset builder for scientific figures in context.

The code is the package itself: ``sciga/pipelines``, ``sciga/transforms``, ``sciga/schemas``,
``sciga/quality``, ``sciga/training``, ``sciga/explore``, ``sciga/publish``, ``sciga/samples``.
Each is also reachable at the top of the repository through a committed link
(``pipelines -> sciga/pipelines`` ...), so a newcomer finds a feature by its folder from the
root, while every tool (Python from a checkout, mypy, import-linter, an import-graph viewer,
an IDE's go-to-definition) resolves ``sciga.<folder>`` to real files by ordinary means.
"""

__version__ = "0.1.3"  # 0.1.3: results carry their tables' digests, which shard member lists name; 0.1.2: row groups cut by recorded sizes, written one chunk per column; 0.1.1: figures decoded once at reduced scale
