"""`sciga diff OLD NEW` as a user drives it (a subprocess), on real builds: a build against
itself, two builds of the sample that differ in one page, surgical changes of every kind of
field, a schema change between versions, dead letters, builds on gs:// (fake-gcs-server) and
published versions on a loopback Hub; and the changelog `sciga publish` writes from it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hub_fixtures import served_hub
from quality_fixtures import edit_manifest, read_rows, rewrite_shard, shard

from sciga.schemas.version import BUILDER_VERSION

from conftest import SAMPLES, run_cli

TOKEN = "hf_sciga_TEST_diff_token_0c1d2e"
REPO = "sciga-org/living"


def diff(*args: str, env=None):
    res = run_cli("diff", *args, env=env)
    return res.returncode, res.stdout, res.stderr


def diff_json(old, new, *extra, env=None) -> dict:
    rc, out, err = diff(str(old), str(new), "--json", *extra, env=env)
    assert rc == 0, err[-3000:]
    return json.loads(out)


def fix_counts(build: Path) -> None:
    """Manifest counts as the shards now say (after a surgical edit), so the gate passes."""
    from sciga.transforms.write.manifest import count_build

    counts, files = count_build(str(build))

    def change(m):
        m["files"] = {config: [f.to_json() for f in fs] for config, fs in files.items()}
        for k in ("papers", "figures", "subfigures", "teasers", "mentions", "dead_letter", "images_embedded"):
            m["counts"][k] = getattr(counts, k)
        m["counts"]["dead_letter_parts"] = counts.dead_letter_parts
        m["dead_letter_by_type"] = dict(sorted(counts.dead_letter_by_type.items()))
        m["inputs"]["count"] = counts.papers + counts.dead_inputs

    edit_manifest(build, change)


# ------------------------------------------------------------------ real builds


@pytest.mark.e2e
def test_a_build_against_itself_is_empty(sample_build):
    rc, out, err = diff(str(sample_build), str(sample_build), "--exit-code")
    assert rc == 0, err
    assert "no differences" in out and len(out.strip().splitlines()) == 2
    d = diff_json(sample_build, sample_build)
    assert d["empty"] and d["papers"] == {
        "old": 4,
        "new": 4,
        "added": 0,
        "removed": 0,
        "changed": 0,
        "withheld": 0,  # by the licence policy (tests/explore/test_diff_licences.py)
        "released": 0,
    }
    assert d["added_papers"] == d["removed_papers"] == d["changed_papers"] == []
    rc, out, _ = diff(str(sample_build), str(sample_build), "--markdown")
    assert rc == 0 and "No differences" in out


@pytest.mark.e2e
def test_two_builds_differing_in_one_page_name_that_paper_and_its_fields(sample_build, tmp_path):
    """The sample rebuilt from a copy of its pages where one page's caption and one paragraph
    were edited: the diff names exactly that paper, with the fields that changed."""
    from sciga.pipelines.cli import main

    html = tmp_path / "html"
    shutil.copytree(SAMPLES / "html", html)
    page = html / "2511.99002" / "2511.99002.html"
    text = page.read_text(encoding="utf-8")
    for before, after in (
        ("Three sculptures made by participants", "Three edited sculptures made by participants"),
        ("Sculpting in physical clay is a conversation", "Sculpting in clay is a long conversation"),
    ):
        assert text.count(before) == 1, before
        text = text.replace(before, after)
    page.write_text(text, encoding="utf-8")
    edited = tmp_path / "edited"
    assert (
        main(
            [
                "build",
                "--input",
                str(html),
                "--metadata",
                str(SAMPLES / "meta"),
                "--tex-input",
                str(SAMPLES / "tex"),
                "--output",
                str(edited),
                "--quiet",
            ]
        )
        == 0
    )

    rc, out, err = diff(str(sample_build), str(edited), "--exit-code")
    assert rc == 1, err  # --exit-code: they differ
    assert "0 added, 0 removed, 1 changed" in out
    assert "changed     2511.99002: text, figures, mentions, provenance" in out, out
    d = diff_json(sample_build, edited)
    # The caption (figures), a paragraph (text) and the mention sentence in it (mentions) changed,
    # and the page's SHA-256 with them (provenance).
    assert d["changed_papers"] == [{"id": "2511.99002", "fields": ["text", "figures", "mentions", "provenance"]}]
    assert d["added_papers"] == [] and d["removed_papers"] == []
    assert not d["schema_changes"] and d["rows"]["papers"] == {"old": 4, "new": 4}
    # Built from other folders: the input paths are published relative to --input (issue 41
    # item 8), so they are the same, and no change.
    assert {r["provenance"]["input_uri"] for r in read_rows(edited, "papers")} == {
        r["provenance"]["input_uri"] for r in read_rows(sample_build, "papers")
    }


# ------------------------------------------------------------------ every kind of field, surgically


def renamed(value, old: str = "2511.99001", new: str = "2511.99009"):
    """A row of paper ``old`` as a row of paper ``new``: every id inside it renamed."""
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, dict):
        return {k: renamed(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [renamed(v, old, new) for v in value]
    return value


def _edit_everything(build: Path) -> None:
    """One change per kind of field, each in its own paper (ids in the assertions)."""

    def papers(rows):
        out = []
        for r in rows:
            if r["id"] == "q-bio/0601999":
                continue  # removed
            if r["id"] == "2511.99001":
                r["journal_ref"] = "Journal of Edits 1 (2026)"  # metadata
            out.append(r)
        return out + [renamed(r) for r in rows if r["id"] == "2511.99001"]  # added: a copy under a new id

    rewrite_shard(build, "papers", papers)

    def reencoded(png: bytes) -> bytes:
        import io

        from PIL import Image

        out = io.BytesIO()
        Image.open(io.BytesIO(png)).save(out, format="PNG", compress_level=1)  # same pixels, other bytes
        assert out.getvalue() != png
        return out.getvalue()

    def figures(rows):
        with_image = next(
            r["id"]
            for r in rows
            if r["paper_id"] == "2511.99003" and r["image"] and r["image"]["bytes"] and r["id"] != "2511.99003_F2.1"
        )
        copies = [renamed(r) for r in rows if r["paper_id"] == "2511.99001"]
        for r in rows:
            if r["id"] == "2511.99002_F1":
                r["caption"] += " (edited)"  # figures
            elif r["id"] == "2511.99003_F2.1":
                r["subcaption"] = "<TAG> (a) </TAG> an edited panel"  # panels
            elif r["id"] == with_image:
                r["image"] = dict(r["image"], bytes=reencoded(r["image"]["bytes"]))  # images (bytes only)
            elif r["id"] == "2511.99002_F2":
                r["ga_role"] = "ga_component"  # annotations
        return sorted(rows + copies, key=lambda r: (r["paper_id"], r["id"]))

    rewrite_shard(build, "figures", figures)

    def mentions(rows):
        copies = [renamed(r) for r in rows if r["paper_id"] == "2511.99001"]
        first = next(i for i, r in enumerate(rows) if r["paper_id"] == "2511.99003")
        return rows[:first] + rows[first + 1 :] + copies  # mentions of 2511.99003

    rewrite_shard(build, "mentions", mentions)
    table = pq.read_table(shard(build, "dead_letter"))
    row = {
        "paper_id": "2511.99042",
        "stage": "parse",
        "error_type": "not_latexml",
        "message": "2511.99042: not LaTeXML",
        "input_uri": "/x/2511.99042.html",
        "scope": "input",
    }
    pq.write_table(pa.Table.from_pylist(table.to_pylist() + [row], schema=table.schema), shard(build, "dead_letter"))
    fix_counts(build)


@pytest.mark.e2e
def test_every_kind_of_field_rows_and_dead_letters(sample_build, tmp_path):
    new = tmp_path / "new"
    shutil.copytree(sample_build, new)
    _edit_everything(new)
    d = diff_json(sample_build, new)
    assert d["added_papers"] == ["2511.99009"] and d["removed_papers"] == ["q-bio/0601999"]
    assert {c["id"]: c["fields"] for c in d["changed_papers"]} == {
        "2511.99001": ["metadata"],
        "2511.99002": ["figures", "annotations"],
        "2511.99003": ["panels", "mentions", "images"],
    }
    old_rows = {c: len(read_rows(sample_build, c)) for c in ("papers", "figures", "mentions", "dead_letter")}
    assert d["rows"]["papers"] == {"old": old_rows["papers"], "new": old_rows["papers"]}  # one added, one removed
    assert d["rows"]["dead_letter"] == {"old": old_rows["dead_letter"], "new": old_rows["dead_letter"] + 1}
    assert d["dead_letter"]["added"] == 1 and d["dead_letters_added"][0]["paper_id"] == "2511.99042"
    assert d["dead_letter"]["by_type"]["not_latexml"]["new"] >= 1
    assert d["fields"]["metadata"] == 1 and d["fields"]["images"] == 1

    # Without image bytes, the bytes-only change is not seen (and no image byte is read).
    d2 = diff_json(sample_build, new, "--no-image-bytes")
    assert {c["id"]: c["fields"] for c in d2["changed_papers"]}["2511.99003"] == ["panels", "mentions"]
    assert d2["image_bytes_compared"] is False

    # Markdown names every one; the summary the first --max-listed.
    rc, md, _ = diff(str(sample_build), str(new), "--markdown")
    assert rc == 0 and "| `2511.99003` | panels, mentions, images |" in md and "- `2511.99009`" in md
    rc, text, _ = diff(str(sample_build), str(new), "--max-listed", "1")
    assert rc == 0 and "... and 2 more" in text and "dead letters +1 -0" in text

    # Swapped: the same papers, the other way round.
    back = diff_json(new, sample_build)
    assert back["added_papers"] == ["q-bio/0601999"] and back["removed_papers"] == ["2511.99009"]
    assert [c["id"] for c in back["changed_papers"]] == ["2511.99001", "2511.99002", "2511.99003"]


def test_only_shards_that_differ_are_read_and_without_a_manifest_all_are(build_copy, tmp_path):
    from sciga.explore.diff import diff_builds

    old = tmp_path / "old"
    shutil.copytree(build_copy, old)
    rewrite_shard(build_copy, "mentions", lambda rows: rows[:-1])
    with diff_builds(str(old), str(build_copy)) as d:
        assert d.files_read == {"papers": (0, 0), "figures": (0, 0), "mentions": (1, 1), "dead_letter": (0, 0)}
        changed = list(d.changed_papers())
    assert changed == [(read_rows(old, "mentions")[-1]["paper_id"], ["mentions"])]
    (old / "manifest.json").unlink()  # no SHA-256 for the shards: every one is read, same answer
    with diff_builds(str(old), str(build_copy)) as d:
        assert d.files_read["papers"] == (1, 1) and d.files_read["figures"] == (1, 1)
        assert list(d.changed_papers()) == changed
        assert d.builder_versions == ([BUILDER_VERSION], [BUILDER_VERSION]), "the old one from its card"


def test_a_schema_change_is_reported_not_a_crash(build_copy, tmp_path):
    """The next schema adds figures.image_sha256 / image_note and drops image_error (as a
    change in flight does): reported once; no paper looks changed for it."""
    from sciga.explore.diff import diff_builds
    from sciga.explore.diff_report import summary_text
    from sciga.schemas.arrow import SCHEMAS
    from sciga.schemas.version import SCHEMA_VERSION

    old = tmp_path / "old"
    shutil.copytree(build_copy, old)
    path = shard(build_copy, "figures")
    table = pq.read_table(path)
    fields = [f for f in SCHEMAS["figures"] if f.name != "image_error"]
    fields.insert(11, pa.field("image_sha256", pa.string()))
    fields.insert(12, pa.field("image_note", pa.string()))
    schema = pa.schema(fields, metadata={b"sciga.schema_version": b"99.0.0", b"sciga.config": b"figures"})
    rows = [
        {
            **{k: v for k, v in r.items() if k != "image_error"},
            "image_sha256": None,
            "image_note": "ok" if r["image"] else "missing",
        }
        for r in table.to_pylist()
    ]
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    with diff_builds(str(old), str(build_copy)) as d:
        assert [(c.config, c.column, c.change) for c in d.schema] == [
            ("figures", "image_error", "removed"),
            ("figures", "image_sha256", "added"),
            ("figures", "image_note", "added"),
        ]
        assert d.schema_versions == ([SCHEMA_VERSION], sorted([SCHEMA_VERSION, "99.0.0"]))
        assert d.changed == 0 and d.added == 0 and d.removed == 0 and not d.empty
        text = summary_text(d)
    assert "figures.image_sha256 added (string)" in text and "figures.image_error removed (was string)" in text
    rc, out, err = diff(str(old), str(build_copy))
    assert rc == 0 and "image_note added" in out, err


def test_mistakes_are_one_sentence(sample_build, tmp_path):
    for args, needle in (
        ([str(tmp_path / "nope"), str(sample_build)], "OLD"),
        ([str(sample_build), str(tmp_path)], "NEW"),
        ([str(sample_build), str(sample_build), "--max-listed", "-1"], "--max-listed"),
    ):
        rc, out, err = diff(*args)
        assert rc == 2, (args, err)
        assert err.startswith(f"sciga diff: {needle}") or needle in err.splitlines()[0], err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


# ------------------------------------------------------------------ remote builds


@pytest.mark.e2e
def test_a_gs_build_against_its_local_twin_is_empty(gs_sample_build, local_sample_twin):
    rc, out, err = diff(gs_sample_build, str(local_sample_twin))
    assert rc == 0, err[-2000:]
    assert "no differences" in out, out


@pytest.fixture
def hub(monkeypatch, tmp_path):
    with served_hub(monkeypatch, tmp_path, TOKEN) as server:
        yield server


def hub_env(hub, tmp_path) -> dict:
    # Offline mode off whatever this process holds (training code sets TRANSFORMERS_OFFLINE).
    return {
        "HF_ENDPOINT": hub.url,
        "HF_TOKEN": TOKEN,
        "HF_HOME": str(tmp_path / "hf_home_sub"),
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_OFFLINE": "0",
        "TRANSFORMERS_OFFLINE": "0",
    }


def publish(build, version, hub, *extra):
    from sciga.pipelines.cli import main

    return main(
        [
            "publish",
            str(build),
            "--repo-id",
            REPO,
            "--version",
            version,
            "--endpoint",
            hub.url,
            "--image-check",
            "header",
            "--max-dead-letter-rate",
            "0.5",
            "--allow-any-licence",  # the sample build's policy is "all" (tests/publish covers the refusal)
            *extra,
        ]
    )


@pytest.mark.e2e
def test_changelog_of_a_published_version_and_diff_of_two_hub_versions(hub, sample_build, tmp_path, capsys):
    v1 = tmp_path / "v1"
    shutil.copytree(sample_build, v1)
    assert publish(v1, "v1.0.0", hub) == 0
    card1 = hub.files_at(REPO, "v1.0.0")["README.md"].decode()
    assert "## Changes in this version" not in card1, "the first version has nothing to compare with"

    v2 = tmp_path / "v2"
    shutil.copytree(sample_build, v2)
    _edit_everything(v2)
    capsys.readouterr()
    assert publish(v2, "v1.1.0", hub) == 0
    out = capsys.readouterr().out
    assert "since v1.0.0: 1 papers added, 1 removed, 3 changed" in out
    files = hub.files_at(REPO, "v1.1.0")
    card = files["README.md"].decode()
    assert card == (v2 / "README.md").read_text(), "the folder's card is the Hub's card"
    section = card[card.index("## Changes in this version") : card.index("## Configs")]
    assert 'previous version, v1.0.0 (`revision="v1.0.0"`)' in section
    assert "- Added: `2511.99009`" in section and "- Removed: `q-bio/0601999`" in section
    assert (
        "- Changed: `2511.99001` (metadata), `2511.99002` (figures, annotations), `2511.99003` (panels, mentions)"
        in section
    ), section
    assert str(tmp_path) not in card and str(tmp_path) not in files["changes/v1.1.0.md"].decode()
    full = json.loads(files["changes/v1.1.0.json"])
    assert full["old"] == "v1.0.0" and full["new"] == "v1.1.0" and full["image_bytes_compared"] is False
    assert [c["id"] for c in full["changed_papers"]] == ["2511.99001", "2511.99002", "2511.99003"]
    assert "| `2511.99002` | figures, annotations |" in files["changes/v1.1.0.md"].decode()
    assert len(hub.commits(REPO)) == 3  # initial, v1.0.0, v1.1.0: the changelog went into the version's one commit

    # Publishing v1.1.0 again: the same changelog, so nothing to do.
    assert publish(v2, "v1.1.0", hub) == 0
    assert "already published" in capsys.readouterr().out

    # The same diff straight from the Hub: two tags of the published dataset.
    env = hub_env(hub, tmp_path)
    rc, out, err = diff(
        f"hf://datasets/{REPO}@v1.0.0", f"hf://datasets/{REPO}@v1.1.0", "--json", "--no-image-bytes", env=env
    )
    assert rc == 0, err[-3000:]
    d = json.loads(out)
    assert d["added_papers"] == ["2511.99009"] and d["removed_papers"] == ["q-bio/0601999"]
    assert [c["id"] for c in d["changed_papers"]] == ["2511.99001", "2511.99002", "2511.99003"]
    assert d["builder_version"]["old"] == d["builder_version"]["new"] != [], "read from the cards"
    rc, out, err = diff(f"hf://datasets/{REPO}@v9.9.9", str(v2), env=env)
    # A revision that does not exist is named as such (issue 41), not "not a build".
    assert rc == 2 and "the Hub repo sciga-org/living at " in err and "has no revision 'v9.9.9'" in err
    assert "Traceback" not in err and err.count("\n") == 1
