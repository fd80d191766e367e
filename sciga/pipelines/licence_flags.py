"""The licence policy's flags (``--licences``, ``--assume-licence``), shared by `sciga build`
and `sciga update`; what they mean is ``schemas/licences.py``."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import ClassVar, Optional

from sciga.pipelines.flags import flag
from sciga.schemas.licences import DEFAULT_POLICY, POLICIES, read_licence


def licence_url(text: str) -> str:
    """A licence URL this builder knows (``--assume-licence``), in its canonical form."""
    known = read_licence(text)
    if known is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a licence URL arXiv uses; give one such as "
            "http://creativecommons.org/licenses/by/4.0/ (see docs/how-to/licences.md)"
        )
    return known.url


@dataclass(frozen=True)
class LicenceFlags:
    GROUP: ClassVar[str] = "licences (what may be redistributed)"

    licences: Optional[str] = flag(
        "--licences",
        default=None,
        choices=POLICIES,
        metavar="POLICY",
        help=f"which papers are written in full: {', '.join(POLICIES)} (build default: {DEFAULT_POLICY}; "
        "update default: redistributable for a public repository); the others keep a metadata row "
        "with papers.withheld set",
    )
    assume_licence: Optional[str] = flag(
        "--assume-licence",
        default=None,
        type=licence_url,
        metavar="URL",
        help="the licence of pages that carry none (pages you own), e.g. http://creativecommons.org/licenses/by/4.0/",
    )

    @property
    def policy(self) -> str:
        return self.licences or DEFAULT_POLICY
