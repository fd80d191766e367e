"""How a build's rows are laid out in shards, fixed before the pipeline starts.

Every config is written by independent *shard groups*: a paper's rows of a config go to
group ``stable_hash(paper id) % groups(config)``, so all rows of a paper share a group and
the same input always gives the same groups. The number of groups depends only on the
number of inputs and the per-shard options, never on a count that has to wait for every
row; a group writes one or more files (a new *part* when a file is full), and the parts are
numbered ``train-NNNNN-of-MMMMM`` once all of them exist.

The figures config has no exact row count before parsing, so its group count comes from
the number of inputs times a typical number of figure rows per paper (SciGA's 1.14M figures
over 145k papers, plus panels: about 10); papers with far more figures simply make more
parts per group. Parts end between papers where they can, so a paper's rows stay together.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sciga.transforms.write.shard_names import DEFAULT_ROWS_PER_SHARD, stable_hash

FIGURE_ROWS_PER_PAPER = 10  # planning estimate only; parts absorb the difference
MENTIONS_PER_PAPER = 40
MAX_PART_BYTES = 1 << 30  # a figures file stops growing at ~1 GiB whatever its row count
ROW_GROUP_ROWS = 256
ROW_GROUP_BYTES = 64 << 20


@dataclass(frozen=True)
class ShardLayout:
    papers_groups: int = 1
    figures_groups: int = 1
    mentions_groups: int = 1
    dead_letter_groups: int = 1
    papers_per_part: int = DEFAULT_ROWS_PER_SHARD["papers"]
    figures_per_part: int = DEFAULT_ROWS_PER_SHARD["figures"]
    mentions_per_part: int = DEFAULT_ROWS_PER_SHARD["mentions"]
    dead_letter_per_part: int = DEFAULT_ROWS_PER_SHARD["dead_letter"]
    max_part_bytes: int = MAX_PART_BYTES
    row_group_rows: int = ROW_GROUP_ROWS
    row_group_bytes: int = ROW_GROUP_BYTES

    def groups(self, config: str) -> int:
        return getattr(self, f"{config}_groups")

    def rows_per_part(self, config: str) -> int:
        return getattr(self, f"{config}_per_part")

    def ends_row_group(self, rows: int, nbytes: int) -> bool:
        """Whether a row group of ``rows`` rows and ``nbytes`` bytes (as the store recorded
        its papers' sizes) is full: the writer closes it there (``PartWriter.add``), and a
        rebuild takes a previous shard's row group only where it would (``WritePartStep``)."""
        return rows >= self.row_group_rows or nbytes >= self.row_group_bytes

    def group_of(self, config: str, paper_id: str) -> int:
        return stable_hash(paper_id or "") % self.groups(config)

    @property
    def total_groups(self) -> int:
        return self.papers_groups + self.figures_groups + self.mentions_groups + self.dead_letter_groups


def layout_for(
    n_inputs: int,
    papers_per_shard: int = DEFAULT_ROWS_PER_SHARD["papers"],
    figures_per_shard: int = DEFAULT_ROWS_PER_SHARD["figures"],
    mentions_per_shard: int = DEFAULT_ROWS_PER_SHARD["mentions"],
) -> ShardLayout:
    n = max(1, n_inputs)
    return ShardLayout(
        papers_groups=math.ceil(n / max(1, papers_per_shard)),
        figures_groups=math.ceil(n * FIGURE_ROWS_PER_PAPER / max(1, figures_per_shard)),
        mentions_groups=math.ceil(n * MENTIONS_PER_PAPER / max(1, mentions_per_shard)),
        dead_letter_groups=1,
        papers_per_part=max(1, papers_per_shard),
        figures_per_part=max(1, figures_per_shard),
        mentions_per_part=max(1, mentions_per_shard),
    )
