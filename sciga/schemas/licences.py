"""The licences arXiv gives papers, in one table, and the licence policies a build applies.

A paper's licence is the URL arXiv records for it (``papers.license``: the API's, OAI-PMH's
or a sidecar's ``license``). What each licence lets a third party do with the paper's text
and figures is a fact of its text:

- CC0 1.0 and the Creative Commons public-domain dedication: anything.
- CC BY and CC BY-SA (any version): share and adapt, with attribution (BY-SA: adaptations
  under the same licence).
- CC BY-NC and CC BY-NC-SA: share and adapt, for non-commercial purposes only.
- CC BY-ND and CC BY-NC-ND: share unchanged only; cutting panels out of a figure adapts it.
- arXiv's non-exclusive distribution licence 1.0 and arXiv's "assumed" 1991-2003 licence:
  rights granted to arXiv alone, nothing to a third party.
- no licence at all (a local page without a sidecar): nothing is known.

A build's policy (``--licences``) says which of these are written in full:

- ``all``: every paper (the default of ``sciga build``: a local build is private).
- ``redistributable``: what may be shared and adapted, commercially too (CC0, public
  domain, CC BY, CC BY-SA).
- ``redistributable-nc``: adds CC BY-NC and CC BY-NC-SA; the dataset is then
  non-commercial.

A paper outside the policy is *withheld*: its papers row keeps its metadata (id, title,
authors, dates, categories, licence) with ``withheld`` set to its licence (``unknown`` for
none), and none of its text, figures, image bytes or mentions is written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

POLICIES = ("all", "redistributable", "redistributable-nc")
DEFAULT_POLICY = "all"
UNKNOWN = "unknown"  # ``withheld`` of a paper with no licence, or one this table does not know


@dataclass(frozen=True)
class Licence:
    """One kind of licence (a Creative Commons kind covers every version of it)."""

    kind: str  # "cc-by", "cc-by-nc-sa", "cc0", "arxiv-nonexclusive", ...
    name: str  # what a person reads
    share: bool  # the text and figures may be redistributed by a third party
    adapt: bool  # ... and adapted (panels cut out of a figure, text re-segmented)
    non_commercial: bool  # ... for non-commercial purposes only
    hub_id: Optional[str] = None  # the Hugging Face card's ``license:`` id, versioned below


# Every licence URL arXiv uses (arxiv.org/help/license), the older ones included, by kind.
LICENCES: dict[str, Licence] = {
    lic.kind: lic
    for lic in (
        Licence("cc0", "CC0 1.0 (public domain dedication)", True, True, False, "cc0-1.0"),
        Licence("cc-publicdomain", "Creative Commons public domain dedication", True, True, False, "cc0-1.0"),
        Licence("cc-by", "CC BY", True, True, False, "cc-by"),
        Licence("cc-by-sa", "CC BY-SA", True, True, False, "cc-by-sa"),
        Licence("cc-by-nc", "CC BY-NC", True, True, True, "cc-by-nc"),
        Licence("cc-by-nc-sa", "CC BY-NC-SA", True, True, True, "cc-by-nc-sa"),
        Licence("cc-by-nd", "CC BY-ND", True, False, False, "cc-by-nd"),
        Licence("cc-by-nc-nd", "CC BY-NC-ND", True, False, True, "cc-by-nc-nd"),
        Licence("arxiv-nonexclusive", "arXiv non-exclusive distribution licence 1.0", False, False, False),
        Licence("arxiv-assumed", "arXiv assumed licence (1991-2003)", False, False, False),
    )
}

# The canonical URL of each kind (a CC kind: with its version, see ``canonical_url``).
_FIXED_URLS = {
    "cc0": "http://creativecommons.org/publicdomain/zero/1.0/",
    "cc-publicdomain": "http://creativecommons.org/licenses/publicdomain/",
    "arxiv-nonexclusive": "http://arxiv.org/licenses/nonexclusive-distrib/1.0/",
    "arxiv-assumed": "http://arxiv.org/licenses/assumed-1991-2003/",
}
_CC = re.compile(r"^creativecommons\.org/licenses/(by(?:-nc)?(?:-sa|-nd)?)/(\d+(?:\.\d+)?)(?:/.*)?$")


@dataclass(frozen=True)
class KnownLicence:
    """A licence URL as this table reads it."""

    url: str  # canonical: http://, lower case, trailing slash
    licence: Licence
    version: Optional[str] = None  # a Creative Commons licence's version ("4.0")

    @property
    def hub_id(self) -> Optional[str]:
        base = self.licence.hub_id
        if base is None or base == "cc0-1.0" or self.version is None:
            return base
        return f"{base}-{self.version}"


def _bare(url: str) -> str:
    u = url.strip().lower()
    u = re.sub(r"^https?://", "", u)
    u = re.sub(r"^www\.", "", u)
    u = u.split("#", 1)[0].split("?", 1)[0]
    return u.rstrip("/")


def read_licence(url: Optional[str]) -> Optional[KnownLicence]:
    """The licence a URL names (http or https, with or without ``www.`` and the trailing
    slash, any Creative Commons version); None for none or an unknown one."""
    if not url or not url.strip():
        return None
    bare = _bare(url)
    for kind, fixed in _FIXED_URLS.items():
        if bare == _bare(fixed):
            return KnownLicence(fixed, LICENCES[kind])
    m = _CC.match(bare)
    if m:
        kind, version = "cc-" + m.group(1), m.group(2)
        if "." not in version:
            version += ".0"
        return KnownLicence(f"http://creativecommons.org/licenses/{m.group(1)}/{version}/", LICENCES[kind], version)
    return None


def canonical_url(url: Optional[str]) -> str:
    """The licence's canonical URL, or ``unknown`` (how ``withheld`` and the counts name it)."""
    known = read_licence(url)
    return known.url if known else UNKNOWN


def admits(policy: str, url: Optional[str]) -> bool:
    """Whether a paper of licence ``url`` is written in full under ``policy``."""
    if policy == "all":
        return True
    known = read_licence(url)
    if known is None or not (known.licence.share and known.licence.adapt):
        return False
    if policy == "redistributable":
        return not known.licence.non_commercial
    if policy == "redistributable-nc":
        return True
    raise ValueError(f"unknown licence policy {policy!r}: use one of {', '.join(POLICIES)}")


def withheld_reason(policy: str, url: Optional[str]) -> Optional[str]:
    """None when the paper is written in full under ``policy``, else what ``withheld`` says:
    its licence's canonical URL, or ``unknown``."""
    return None if admits(policy, url) else canonical_url(url)


def policy_allows_restricted(policy: str) -> bool:
    """Whether ``policy`` lets in papers a third party may not redistribute (``all``)."""
    return policy not in ("redistributable", "redistributable-nc")


def policy_is_non_commercial(policy: str) -> bool:
    return policy == "redistributable-nc"


def licence_kind_sql(column: str) -> str:
    """A DuckDB expression giving the kind (``Licence.kind``) of the licence URL in
    ``column``, or ``unknown``: the same reading as ``read_licence``, for checks that run
    over the shards."""
    bare = rf"rtrim(regexp_replace(lower(trim(coalesce({column}, ''))), '^https?://(www\.)?', ''), '/')"
    fixed = " ".join(f"WHEN {bare} = '{_bare(url)}' THEN '{kind}'" for kind, url in _FIXED_URLS.items())
    cc = rf"regexp_extract({bare}, '^creativecommons\.org/licenses/(by(-nc)?(-sa|-nd)?)/\d+(\.\d+)?(/.*)?$', 1)"
    return f"(CASE {fixed} WHEN {cc} <> '' THEN 'cc-' || {cc} ELSE '{UNKNOWN}' END)"


def admitted_kinds(policy: str) -> list[str]:
    """The licence kinds written in full under ``policy`` (``unknown`` too under ``all``)."""
    kinds = [k for k, lic in LICENCES.items() if admits(policy, _FIXED_URLS.get(k) or _example_url(k))]
    return sorted(kinds + ([UNKNOWN] if policy == "all" else []))


def _example_url(kind: str) -> str:
    return f"http://creativecommons.org/licenses/{kind[3:]}/4.0/"
