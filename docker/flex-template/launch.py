"""The Flex Template launcher's entry point (FLEX_TEMPLATE_PYTHON_PY_FILE in the launcher
image): `sciga build` with the template's parameters, returning once the job is submitted.
It lives alone in its folder so that running it as a script puts no module of the package
in front of installed ones on sys.path."""
from sciga.pipelines.flex_template import main

if __name__ == "__main__":
    raise SystemExit(main())
