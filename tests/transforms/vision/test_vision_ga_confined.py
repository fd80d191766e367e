"""GA manifest paths are confined to the manifest's folder and the input folders by default
(issue 43, items 4 and 5): absolute paths, ``../``, ``file://`` elsewhere, other stores,
archive URLs, NUL bytes and web addresses are refused without being opened or fetched, and
say why on the GA's row; ``VisionOptions.ga_allow_outside`` (``--ga-allow-outside``) reads
paths wherever they point."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hostile_fixtures import CanaryWatch
from PIL import Image
from vision_fixtures import LocalServer, png_bytes

from sciga.transforms.vision.ga_manifest import GAReadError, fetch_ga_bytes, ga_file_dep, read_ga_manifest
from sciga.transforms.vision.options import GAIndex, VisionOptions, ga_fingerprint, resolve_vision


@pytest.fixture
def place(tmp_path) -> dict:
    """The manifest's folder, an input folder beside it, and a private file outside both."""
    man, inp, private = tmp_path / "manifest", tmp_path / "input", tmp_path / "private"
    for d in (man / "ga", inp, private):
        d.mkdir(parents=True)
    img = png_bytes(Image.new("RGB", (24, 16), "red"))
    (man / "ga" / "a.png").write_bytes(img)
    (inp / "b.png").write_bytes(img)
    (private / "secret.png").write_bytes(img)
    (man / "ga" / "link.png").symlink_to(private / "secret.png")
    return {"man": man, "inp": inp, "private": private, "img": img}


def rows(place: dict, paths: list[str], **kw):
    csv = place["man"] / "ga.csv"
    csv.write_text("arxiv_id,path\n" + "".join(f"2401.{i:05d},{p}\n" for i, p in enumerate(paths, start=1)))
    return read_ga_manifest(str(csv), **kw)


def test_paths_inside_the_manifest_folder_and_the_input_folders_are_read(place):
    a, b, rel = rows(place, ["ga/a.png", str(place["inp"] / "b.png"), "ga/../ga/a.png"], roots=(str(place["inp"]),))
    assert [e.refused for e in (a, b, rel)] == [None, None, None]
    assert (a.root, b.root) == (str(place["man"]), str(place["inp"]))
    assert fetch_ga_bytes(a) == fetch_ga_bytes(b) == fetch_ga_bytes(rel) == place["img"]


@pytest.mark.parametrize(
    "path,status",
    [
        ("{private}/secret.png", "outside_input"),
        ("../private/secret.png", "outside_input"),
        ("file://{private}/secret.png", "outside_input"),
        ("/proc/self/environ", "outside_input"),
        ("/etc/passwd", "outside_input"),
        ("zip://x.png::/etc/passwd", "outside_input"),
        ("s3://someone-else/ga.png", "outside_input"),
        ("http://127.0.0.1:9/ga.png", "outside_input"),
        ("ga/a\x00.png", "not_found"),
    ],
)
def test_paths_leading_elsewhere_are_refused_unopened_and_say_why(place, path, status):
    path = path.format(private=place["private"])
    (entry,) = rows(place, [path], roots=(str(place["inp"]),))
    assert entry.refused and entry.refused_status == status
    with CanaryWatch([place["private"] / "secret.png"]) as watch:
        with pytest.raises(GAReadError) as e:
            fetch_ga_bytes(entry)
        assert ga_file_dep(entry) is None
        assert not watch.touched(), "a refused GA path was opened"
    assert e.value.status == status
    assert "--ga-allow-outside" in str(e.value) or "NUL" in str(e.value)


def test_a_link_inside_the_manifest_folder_that_leads_out_is_refused_when_read(place):
    (entry,) = rows(place, ["ga/link.png"])
    assert entry.refused is None and entry.root == str(place["man"])
    with CanaryWatch([place["private"] / "secret.png"]) as watch:
        with pytest.raises(GAReadError, match="is a link that leads outside") as e:
            fetch_ga_bytes(entry)
        assert ga_file_dep(entry) is None
        assert not watch.touched()
    assert e.value.status == "outside_input"


def test_allow_outside_reads_paths_wherever_they_point_and_fetches_urls(place):
    img = place["img"]
    with LocalServer({"/ga.png": [(200, img)]}) as srv:
        secret, url = rows(place, [str(place["private"] / "secret.png"), srv.url("/ga.png")], allow_outside=True)
        assert secret.refused is None and secret.root is None and fetch_ga_bytes(secret) == img
        assert url.refused is None and fetch_ga_bytes(url, timeout=5) == img and srv.hits["/ga.png"] == 1
    with LocalServer({"/ga.png": [(200, img)]}) as srv:
        (url,) = rows(place, [srv.url("/ga.png")])
        with pytest.raises(GAReadError, match="never fetched over the network"):
            fetch_ga_bytes(url, timeout=5)
        assert not srv.hits, "a refused URL was fetched"


def test_an_archive_or_store_error_with_allow_outside_is_the_rows_reason_not_an_internal_error(place):
    (entry,) = rows(place, ["zip://x.png::/etc/passwd"], allow_outside=True)
    with pytest.raises(GAReadError, match="could not be read"):
        fetch_ga_bytes(entry)


def test_bad_ids_and_nul_bytes_in_any_field_never_stop_reading(place, caplog):
    csv = place["man"] / "ga.csv"
    csv.write_text(
        "arxiv_id,path,source,caption\n"
        "2401.00001,ga/a.png,Jour\x00nal,A cap\x00tion\n"
        "../../etc/passwd,ga/a.png,,\n"
        "2401.0\x000002,ga/a.png,,\n"
        "２４０１.００００３,ga/a.png,,\n"
        "2401.00004,ga/a.png,x,y,z,extra\n"
    )
    got = {e.paper_id: e for e in read_ga_manifest(str(csv))}
    assert set(got) == {"2401.00001", "2401.00002", "2401.00003", "2401.00004"}
    assert (got["2401.00001"].source, got["2401.00001"].caption) == ("Journal", "A caption")
    assert "arxiv_id '../../etc/passwd' holds path syntax" in caplog.text


def test_the_options_carry_the_confinement_to_the_staged_entries(place, tmp_path):
    (place["man"] / "ga.csv").write_text(f"arxiv_id,path\n2401.00001,{place['inp'] / 'b.png'}\n")
    staged = tmp_path / "staging"
    default = resolve_vision(VisionOptions(ga_manifest=str(place["man"] / "ga.csv")), str(staged / "1"))
    roots = resolve_vision(
        VisionOptions(ga_manifest=str(place["man"] / "ga.csv"), ga_roots=(str(place["inp"]),)), str(staged / "2")
    )
    anywhere = resolve_vision(
        VisionOptions(ga_manifest=str(place["man"] / "ga.csv"), ga_allow_outside=True), str(staged / "3")
    )
    e1, e2, e3 = (GAIndex(r.ga_entries_uri).get("2401.00001") for r in (default, roots, anywhere))
    assert e1.refused and not e2.refused and not e3.refused
    assert len({ga_fingerprint(e) for e in (e1, e2, e3)}) == 3, "a row read differently is a different result"
    assert Path(os.path.commonpath([e2.root, e2.uri])) == place["inp"]
    assert default.fingerprint_fields() == anywhere.fingerprint_fields()  # the rows carry it, not the options
