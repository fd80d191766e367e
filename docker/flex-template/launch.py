"""The Flex Template launcher's entry point (FLEX_TEMPLATE_PYTHON_PY_FILE in the launcher
image): `sciga build` with the template's parameters, returning once the job is submitted.
The template's metadata.json lies beside this file (in the checkout and in the image). It
lives alone in its folder so that running it as a script puts no module of the package in
front of installed ones on sys.path."""

import os

from sciga.pipelines.flex_template import main

if __name__ == "__main__":
    raise SystemExit(main(metadata_path=os.path.join(os.path.dirname(os.path.abspath(__file__)), "metadata.json")))
