"""A dataset's corpus definition, saved with its build (``OUT/corpus.json``), and what it
selects from a fetch cache.

The definition says which papers the dataset holds (arXiv categories, a range of first
version dates, accepted venues), where their metadata is harvested from (OAI-PMH endpoint,
format, set), where pages and e-prints come from (cache folder, parts, endpoints), how the
build is made (its flags) and where it is published (Hub repo). ``sciga update OUT`` reads
it, so the same command brings the dataset up to date every month.

Selection from the cache: every paper whose cached metadata matches the categories, dates
(``corpus_selection``) and, when venues are given, whose accepted venue (parsed from the
author comment, ``comment_venue``) is one of them. Against the papers the build already
holds, a selected paper is *new* (not in the build, nor one of its dead letters) or
*revised* (its version or last-version date differs from the built row): a new version
means a new page and e-print, which the fetch re-checks.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Optional

from sciga.transforms.metadata.corpus_selection import Selection

DEFINITION_FILE = "corpus.json"
DEFINITION_VERSION = 1
PARTS = ("meta", "html", "source")


class DefinitionError(ValueError):
    """A corpus definition that cannot be used (one sentence naming the field)."""


@dataclass(frozen=True)
class CorpusDefinition:
    cache: str  # the fetch cache folder (local): metadata, pages, e-prints
    selection: Selection = field(default_factory=Selection)
    venues: tuple[str, ...] = ()  # accepted venues (comment_venue's canonical names); empty: any
    oai_url: Optional[str] = None  # None: SCIGA_OAI_URL, else arXiv's endpoint
    oai_format: str = "arXivRaw"
    oai_set: Optional[str] = None  # None: the set holding every category
    parts: tuple[str, ...] = PARTS
    arxiv_api_url: Optional[str] = None  # None: the environment variable, else the default
    html_base_url: Optional[str] = None
    eprint_base_url: Optional[str] = None
    rate_limit: Optional[float] = None
    build_args: tuple[str, ...] = ()  # `sciga build` flags (and Beam's), as given
    repo_id: Optional[str] = None  # the Hub dataset repo; None: build and validate only
    hub_endpoint: Optional[str] = None
    private: bool = False

    def __post_init__(self):
        bad = [p for p in self.parts if p not in PARTS]
        if bad or "meta" not in self.parts:
            raise DefinitionError(f"parts {','.join(self.parts)} must be a comma list of meta, html, source with meta.")

    def to_json(self) -> dict:
        return {
            "definition_version": DEFINITION_VERSION,
            "cache": self.cache,
            "selection": {**self.selection.to_json(), "venues": list(self.venues)},
            "harvest": {"oai_url": self.oai_url, "format": self.oai_format, "set": self.oai_set},
            "fetch": {
                "parts": list(self.parts),
                "arxiv_api_url": self.arxiv_api_url,
                "html_base_url": self.html_base_url,
                "eprint_base_url": self.eprint_base_url,
                "rate_limit": self.rate_limit,
            },
            "build": {"args": list(self.build_args)},
            "publish": {"repo_id": self.repo_id, "endpoint": self.hub_endpoint, "private": self.private},
        }

    @classmethod
    def from_json(cls, d: Mapping) -> CorpusDefinition:
        if not isinstance(d, Mapping) or d.get("definition_version") != DEFINITION_VERSION:
            raise DefinitionError(f"it is not a version-{DEFINITION_VERSION} corpus definition")
        sel, harvest, fetch = d.get("selection") or {}, d.get("harvest") or {}, d.get("fetch") or {}
        pub = d.get("publish") or {}
        try:
            return cls(
                cache=str(d["cache"]),
                selection=Selection(
                    categories=tuple(sel.get("categories") or ()),
                    date_from=sel.get("from"),
                    date_until=sel.get("until"),
                ),
                venues=tuple(sel.get("venues") or ()),
                oai_url=harvest.get("oai_url"),
                oai_format=harvest.get("format") or "arXivRaw",
                oai_set=harvest.get("set"),
                parts=tuple(fetch.get("parts") or PARTS),
                arxiv_api_url=fetch.get("arxiv_api_url"),
                html_base_url=fetch.get("html_base_url"),
                eprint_base_url=fetch.get("eprint_base_url"),
                rate_limit=fetch.get("rate_limit"),
                build_args=tuple((d.get("build") or {}).get("args") or ()),
                repo_id=pub.get("repo_id"),
                hub_endpoint=pub.get("endpoint"),
                private=bool(pub.get("private")),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise DefinitionError(f"a field is missing or malformed ({e})") from None


def definition_path(out_dir: str) -> str:
    return out_dir.rstrip("/") + "/" + DEFINITION_FILE


def load_definition(out_dir: str) -> Optional[CorpusDefinition]:
    """The definition saved with the build in ``out_dir``, None when there is none;
    DefinitionError when the file is there but unusable."""
    import fsspec

    fs, path = fsspec.core.url_to_fs(definition_path(out_dir))
    if not fs.exists(path):
        return None
    try:
        with fs.open(path, "rb") as f:
            return CorpusDefinition.from_json(json.loads(f.read()))
    except ValueError as e:
        raise DefinitionError(f"{definition_path(out_dir)} cannot be read: {e}") from None


def save_definition(out_dir: str, definition: CorpusDefinition) -> str:
    """Write ``OUT/corpus.json`` (whole or not at all)."""
    import fsspec

    fs, path = fsspec.core.url_to_fs(definition_path(out_dir))
    fs.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    data = (json.dumps(definition.to_json(), indent=2, sort_keys=True) + "\n").encode("utf-8")
    tmp = path + ".tmp"
    with fs.open(tmp, "wb") as f:
        f.write(data)
    fs.mv(tmp, path)
    return definition_path(out_dir)


# ------------------------------------------------------------------ selection from the cache


def venue_of(meta: Mapping) -> Optional[str]:
    """The accepted venue of a paper's metadata: the sidecar's ``conference``, else parsed
    from its author comment."""
    conf = meta.get("conference")
    if isinstance(conf, Mapping) and conf.get("venue"):
        return str(conf["venue"])
    from sciga.transforms.metadata.comment_venue import parse_comment_venue

    parsed = parse_comment_venue(meta.get("comment"))
    return parsed.venue if parsed else None


def matches(definition: CorpusDefinition, meta: Mapping) -> bool:
    from sciga.transforms.metadata.arxiv_records import first_version_day

    if not definition.selection.matches(meta.get("categories") or [], first_version_day(dict(meta))):
        return False
    if not definition.venues:
        return True
    venue = venue_of(meta)
    return venue is not None and venue.lower() in {v.lower() for v in definition.venues}


@dataclass(frozen=True)
class CachedPaper:
    id: str
    version: Optional[str]
    updated: Optional[str]


def selected_papers(definition: CorpusDefinition) -> Iterator[CachedPaper]:
    """Every paper of the cache whose metadata the definition keeps, in id order. The cache
    is read, never written (its journal index; each paper's ``meta`` part)."""
    from sciga.transforms.fetch.cache import read_journal

    root = definition.cache
    journal = read_journal(root)
    for (pid, part), rec in sorted(journal.items()):
        if part != "meta" or rec.status != "ok" or not rec.sha256:
            continue
        try:
            with open(os.path.join(root, "blobs", rec.sha256[:2], rec.sha256), "rb") as f:
                meta = json.loads(f.read())
        except (OSError, ValueError):
            continue  # a part a kill cut short: the next harvest writes it again
        if isinstance(meta, dict) and matches(definition, meta):
            yield CachedPaper(id=pid, version=meta.get("version"), updated=meta.get("updated"))


@dataclass
class FetchPlan:
    """Of the selected papers: which are new to the build and which have a new version."""

    selected: list = field(default_factory=list)  # ids, sorted
    new: list = field(default_factory=list)
    revised: list = field(default_factory=list)


def plan_fetch(selected: list[CachedPaper], built: Mapping[str, tuple], dead: set) -> FetchPlan:
    """``built``: paper id -> (version, updated) of the rows the build holds; ``dead``: ids
    of its dead letters (tried; a new version is still re-checked only when the paper was
    built)."""
    plan = FetchPlan()
    for p in selected:
        plan.selected.append(p.id)
        row = built.get(p.id)
        if row is None:
            if p.id not in dead:
                plan.new.append(p.id)
        elif (p.version, p.updated) != tuple(row):
            plan.revised.append(p.id)
    return plan
