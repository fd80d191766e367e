"""The Flex Template launcher's entry point (FLEX_TEMPLATE_PYTHON_PY_FILE in the launcher
image): `sciga build` with the template's parameters, returning once the job is submitted.
The template's metadata.json lies beside this file (in the checkout and in the image). It
lives alone in its folder so that running it as a script puts no module of the package in
front of installed ones on sys.path."""

import os
import sys
from collections.abc import Sequence
from typing import Optional

from sciga.executors.flex_template import build_argv, load_metadata


def main(argv: Optional[Sequence[str]] = None, metadata_path: Optional[str] = None) -> int:
    """The launcher: `sciga build` with the template's parameters (returns once the job is
    submitted)."""
    from sciga.pipelines.cli import main as sciga

    return sciga(["build", *build_argv(sys.argv[1:] if argv is None else argv, load_metadata(metadata_path))])


if __name__ == "__main__":
    raise SystemExit(main(metadata_path=os.path.join(os.path.dirname(os.path.abspath(__file__)), "metadata.json")))
