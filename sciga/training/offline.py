"""Hugging Face libraries in offline mode while a model is loaded from local files.

Weights are never downloaded at run time: every load passes ``local_files_only=True``, and
``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` make sure no library reaches for the Hub on its
own. The variables are set only while the model loads and put back afterwards: left set, they
would put every later Hub call of the same process (``sciga publish`` in a notebook, a test)
and every process it starts into offline mode.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from sciga.transforms.common.environ import restore_environ

OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


@contextlib.contextmanager
def hub_offline() -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in OFFLINE_VARIABLES}
    os.environ.update({k: "1" for k in OFFLINE_VARIABLES})
    try:
        yield
    finally:
        restore_environ(saved)
