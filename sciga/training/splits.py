"""Train / validation / test split by paper id, and SciGA's experiment subset.

The split of a paper is a pure function of its id: a salted BLAKE2b hash mapped to [0, 1)
and cut at 0.8 and 0.9 (SciGA's 8:1:1). Adding or removing papers never moves another
paper to a different split, and every machine, run and shard layout agrees. The salt
(``--split-salt``) lets a user draw a different, equally stable split.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Optional

SPLITS = ("train", "val", "test")
DEFAULT_RATIOS = (0.8, 0.1, 0.1)
DEFAULT_SALT = "sciga-split-v1"


def split_fraction(paper_id: str, salt: str = DEFAULT_SALT) -> float:
    """The paper's position in [0, 1), uniform over ids."""
    h = hashlib.blake2b(f"{salt}\x00{paper_id}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") / 2.0**64


def split_of(paper_id: str, ratios: Sequence[float] = DEFAULT_RATIOS, salt: str = DEFAULT_SALT) -> str:
    if len(ratios) != 3 or any(r < 0 for r in ratios) or sum(ratios) <= 0:
        raise ValueError(f"split ratios must be three non-negative numbers, got {tuple(ratios)}.")
    total = float(sum(ratios))
    x = split_fraction(paper_id, salt)
    cut_train = ratios[0] / total
    cut_val = (ratios[0] + ratios[1]) / total
    if x < cut_train:
        return "train"
    if x < cut_val:
        return "val"
    return "test"


def assign_splits(
    paper_ids: Iterable[str], ratios: Sequence[float] = DEFAULT_RATIOS, salt: str = DEFAULT_SALT
) -> dict[str, str]:
    return {pid: split_of(pid, ratios, salt) for pid in paper_ids}


def in_experiment_subset(example, min_candidates: int = 2, category_prefix: Optional[str] = None) -> bool:
    """SciGA's experiment set: papers with a GA or a de-facto GA (``example.gt`` not
    empty), with at least ``min_candidates`` figures to choose from (one figure is no
    recommendation), optionally restricted to a field (SciGA used ``cs.``)."""
    if not example.gt or len(example.candidates) < min_candidates:
        return False
    if category_prefix:
        cats = [example.primary_category or ""] + list(example.fields or [])
        if not any(c.startswith(category_prefix) for c in cats if c):
            return False
    return True
