"""The quality gate: Great Expectations suites over a finished build, and its reports."""
