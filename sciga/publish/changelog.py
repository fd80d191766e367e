"""What a new version changed, written where its users look: the dataset card of the version
(a short summary) and the full diff as files in the same commit (``changes/<version>.md`` and
``.json``), against the previous published version of the repo (the highest version tag
below the one being published).

The diff is ``explore/diff.py`` between ``hf://datasets/ORG/NAME@<previous>`` and the build
folder. Images are compared by path, size and perceptual hash (reading the previous
version's image bytes would download it). When the data did not change at all, the new
version is the previous one's commit with a new tag, so its card is the previous card.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from typing import Optional

from sciga.explore.diff import DiffOptions, diff_builds
from sciga.explore.diff_report import markdown, write_json

SEMVER = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.\-]+))?(?:\+[0-9A-Za-z.\-]+)?$")
CHANGES_DIR = "changes"
CARD_LISTED = 50  # papers of each kind the card names; the files name all
SECTION = "## Changes in this version"


def version_key(version: str) -> Optional[tuple]:
    """A sort key for ``v1.2.3`` (a pre-release sorts before its release); None for a tag
    that is not a version."""
    m = SEMVER.match(version)
    if not m:
        return None
    major, minor, patch, pre = m.groups()
    return (int(major), int(minor), int(patch), 0 if pre else 1, pre or "")


def previous_version(tags, version: str) -> Optional[str]:
    """The highest version tag below ``version`` (None for the first version)."""
    key = version_key(version)
    below = [(k, t) for t in tags if (k := version_key(t)) is not None and t != version]
    below = [(k, t) for k, t in below if key is None or k < key]
    return max(below)[1] if below else None


def latest_version(tags) -> Optional[str]:
    versions = [(version_key(t), t) for t in tags if version_key(t) is not None]
    return max(versions)[1] if versions else None


def bump(version: Optional[str], part: str) -> str:
    """``v1.2.3`` bumped by ``patch`` / ``minor`` / ``major`` (``v1.0.0`` when there is none)."""
    if version is None:
        return "v1.0.0"
    m = SEMVER.match(version)
    if m is None:
        raise ValueError(f"{version!r} is not a version (vMAJOR.MINOR.PATCH)")
    major, minor, patch = (int(x) for x in m.groups()[:3])
    if part == "major":
        return f"v{major + 1}.0.0"
    if part == "minor":
        return f"v{major}.{minor + 1}.0"
    return f"v{major}.{minor}.{patch + 1}"


@dataclass
class Changelog:
    previous: str
    version: str
    empty: bool  # the data is the previous version's
    summary: str = ""  # one line, for the terminal
    section: str = ""  # Markdown for the card
    files: dict = field(default_factory=dict)  # path in repo -> bytes
    added: list = field(default_factory=list)  # the ids the card names (tests, update's report)
    changed: list = field(default_factory=list)


def changelog_against(
    out_dir: str, repo_id: str, previous: str, version: str, endpoint: Optional[str] = None
) -> Changelog:
    """The diff of the build in ``out_dir`` against ``previous`` on the Hub."""
    from sciga.transforms.common.storage import hub_filesystem

    fs = hub_filesystem(endpoint)
    old = f"hf://datasets/{repo_id}@{previous}"
    with diff_builds(old, out_dir, DiffOptions(image_bytes=False), old_fs=fs) as d:
        d.old.location, d.new.location = previous, version  # labels: never a local path in the repo
        log = Changelog(previous=previous, version=version, empty=not d.data_changed and not d.schema)
        if log.empty:
            log.summary = f"no changes to the data since {previous}"
            return log
        log.summary = f"since {previous}: {d.added:,} papers added, {d.removed:,} removed, {d.changed:,} changed"
        full_md = markdown(d, title=f"Changes in {version} (since {previous})")
        buf = io.StringIO()
        write_json(d, buf)
        base = f"{CHANGES_DIR}/{version}"
        log.files = {f"{base}.md": full_md.encode("utf-8"), f"{base}.json": buf.getvalue().encode("utf-8")}
        log.section = card_section(d, previous, version, base)
        log.added = [pid for pid, _ in zip(d.added_ids(), range(CARD_LISTED))]
        log.changed = [pid for (pid, _), _ in zip(d.changed_papers(), range(CARD_LISTED))]
    return log


def card_section(d, previous: str, version: str, base: str) -> str:
    """The card's short changelog: counts, rows, versions, and up to ``CARD_LISTED`` papers
    of each kind by id."""
    from sciga.explore.diff_report import FIELD_HELP, take_first
    from sciga.schemas.arrow import CONFIGS

    p_old, p_new = d.papers
    lines = [
        SECTION,
        "",
        f'Compared with the previous version, {previous} (`revision="{previous}"`); the full list is in '
        f"[`{base}.md`]({base}.md) and [`{base}.json`]({base}.json).",
        "",
        f"- papers: {d.added:,} added, {d.removed:,} removed, {d.changed:,} changed ({p_old:,} -> {p_new:,})",
        "- rows: " + ", ".join(f"{c} {b - a:+,}" for c, (a, b) in d.rows.items() if c in CONFIGS),
    ]
    (sv_old, sv_new), (bv_old, bv_new) = d.schema_versions, d.builder_versions
    if sv_old != sv_new or d.schema:
        lines.append(
            f"- schema: {', '.join(sv_old) or 'unknown'} -> {', '.join(sv_new) or 'unknown'}"
            + "".join(f"; {c.text()}" for c in d.schema)
        )
    if bv_old != bv_new:
        lines.append(f"- builder: sciga-builder {', '.join(bv_old) or 'unknown'} -> {', '.join(bv_new) or 'unknown'}")
    if d.dead_letters_added or d.dead_letters_removed:
        lines.append(f"- dead letters: +{d.dead_letters_added:,} / -{d.dead_letters_removed:,}")
    for label, it in (("Added", d.added_ids()), ("Removed", d.removed_ids())):
        shown, total = take_first(it, CARD_LISTED)
        if total:
            more = f" ... and {total - len(shown):,} more" if total > len(shown) else ""
            lines.append(f"- {label}: " + ", ".join(f"`{pid}`" for pid in shown) + more)
    for label, it in (("Withheld for their licence", d.withheld_papers()), ("Released", d.released_papers())):
        shown, total = take_first(it, CARD_LISTED)
        if total:
            more = f" ... and {total - len(shown):,} more" if total > len(shown) else ""
            lines.append(f"- {label}: " + ", ".join(f"`{pid}` ({lic})" for pid, lic in shown) + more)
    shown, total = take_first(d.changed_papers(), CARD_LISTED)
    if total:
        more = f" ... and {total - len(shown):,} more" if total > len(shown) else ""
        lines.append("- Changed: " + ", ".join(f"`{pid}` ({', '.join(f)})" for pid, f in shown) + more)
        used = [c for c in FIELD_HELP if d.field_counts.get(c)]
        lines.append("  (" + "; ".join(f"{c}: {FIELD_HELP[c]}" for c in used) + ")")
    return "\n".join(lines) + "\n"


def card_with_changes(card: str, section: str) -> str:
    """The card with the changelog section placed before its "## Configs" (at the end when
    the card has none)."""
    marker = "\n## Configs"
    i = card.find(marker)
    if i < 0:
        return card.rstrip("\n") + "\n\n" + section
    return card[:i] + "\n" + section + card[i:]
