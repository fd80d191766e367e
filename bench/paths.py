"""Where the benchmarks find the repository and the development corpus."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def corpus_dir() -> Optional[Path]:
    """``$SCIGA_CORPUS``, else ``../shared/corpus`` beside the checkout (as CI lays it out),
    else the development machine's copy; None when none exists."""
    for cand in (os.environ.get("SCIGA_CORPUS"), ROOT.parent / "shared" / "corpus", Path("/work/shared/corpus")):
        if cand and Path(cand).is_dir():
            return Path(cand)
    return None
