"""Logging for the `sciga` command: our format and level, and no known library noise.

Apache Beam 2.77 logs "apitools not found, and bigquery client libraries are not available
..." through the *root* logger while it is imported, on every `sciga build`, although no
BigQuery code runs. Worse, a root-logger call with no handler installed makes `logging`
configure itself with its default format, so our ``basicConfig`` afterwards did nothing: our
format was lost and ``-v`` no longer turned INFO on. So the CLI configures logging *before*
it imports any library, and drops the import-time messages listed in ``KNOWN_NOISE``,
matched by logger name and message prefix. Everything else still shows, every warning about
the user's data included.
"""

from __future__ import annotations

import logging

FORMAT = "%(levelname)s %(name)s: %(message)s"

# (logger name, message prefix): messages a library logs on import that say nothing about
# the user's run. Keep each entry exact; never a whole logger.
KNOWN_NOISE = (
    ("root", "apitools not found, and bigquery client libraries are not available"),
    ("apache_beam.io.gcp.bigquery", "No module named google.cloud.bigquery_storage_v1"),
    # INFO, so only under -v: Beam notes every string annotation of our DoFns (modules use
    # `from __future__ import annotations`), a few dozen lines per build.
    ("apache_beam.typehints.native_type_compatibility", "Converting string literal type hint to Any"),
    # gcsfs logs its last retry's exception with the whole traceback (ERROR); the command then
    # says in one sentence which endpoint it could not reach (transforms/common/storage.py).
    ("gcsfs", "_request out of retries on exception"),
)


# Ctrl-C in a one-worker build: Beam logs the worker's KeyboardInterrupt with its traceback
# (``_LOGGER.exception(exn)``) before re-raising it; the `sciga` command says what was kept
# and how to resume, in one sentence.
INTERRUPT_NOISE = ("apache_beam.runners.common",)


class DropKnownNoise(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.msg if isinstance(record.msg, str) else ""
        if record.name in INTERRUPT_NOISE and str(record.msg).startswith("KeyboardInterrupt"):
            return False
        return not any(record.name == name and msg.startswith(prefix) for name, prefix in KNOWN_NOISE)


def configure_logging(verbose: bool = False) -> None:
    """Install our handler (unless the host application or a test harness already put one
    on the root logger), set the level, and filter the known noise. Safe to call again."""
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(format=FORMAT)
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    # A logger's filters see the records logged on that logger itself, which is where these
    # libraries log (``logging.warning(...)`` is the root logger).
    for name in sorted({name for name, _ in KNOWN_NOISE} | set(INTERRUPT_NOISE)):
        logger = logging.getLogger(None if name == "root" else name)
        if not any(isinstance(f, DropKnownNoise) for f in logger.filters):
            logger.addFilter(DropKnownNoise())
