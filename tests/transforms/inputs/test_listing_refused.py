"""Every input the listing meets is listed (issue 43, items 1-3): pages behind a folder link
out of the input, paths of 4,096 bytes or more, names that are not UTF-8 and unsafe ar5iv dump
members are refused inputs (``RefusedInput``), counted and dead-lettered with a reason,
never read and never dropped; names with ``::`` are one name on every store."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest

from sciga.transforms.common import input_files
from sciga.transforms.inputs.build_inputs import input_list_lines, planned_input_from_line
from sciga.transforms.inputs.page_index import page_hashes
from sciga.transforms.inputs.pages import input_list_hash, list_inputs
from sciga.transforms.inputs.plan_step import REUSED, PlanOptions, PlanStep
from sciga.transforms.inputs.refused import RefusedInput, from_element

PAGE = b'<html><head><title>x</title></head><body class="ltx_document">x</body></html>'


def long_folder(base: Path, depth: int = 20) -> bytes:
    """A folder whose path is over 4,096 bytes (made through descriptors), as bytes."""
    fd = os.open(base, os.O_RDONLY)
    path = os.fsencode(base)
    try:
        for i in range(depth):
            name = b"d%02d" % i + b"x" * 240
            os.mkdir(name, dir_fd=fd)
            nfd = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nfd
            path += b"/" + name
        f = os.open(b"2490.00004.html", os.O_WRONLY | os.O_CREAT, dir_fd=fd)
        os.write(f, PAGE)
        os.close(f)
    finally:
        os.close(fd)
    return path + b"/2490.00004.html"


@pytest.fixture
def tree(tmp_path) -> dict:
    inp, outside = tmp_path / "in", tmp_path / "outside"
    (inp / "a").mkdir(parents=True)
    (outside / "pages" / "deeper").mkdir(parents=True)
    (inp / "a" / "2490.00001.html").write_bytes(PAGE)
    (outside / "pages" / "2490.00002.html").write_bytes(PAGE)
    (outside / "pages" / "deeper" / "2490.00005.html").write_bytes(PAGE)
    (outside / "pages" / "figure.png").write_bytes(b"png")
    (inp / "a" / "linked").symlink_to(outside / "pages")
    (inp / "b").mkdir()
    (inp / "b" / "inside").symlink_to(inp / "a")  # a link that stays inside: walked, pages listed once
    (inp / "c").mkdir()
    with open(os.fsencode(inp / "c") + b"/2490.00003-\xff.html", "wb") as f:
        f.write(PAGE)
    (inp / "d").mkdir()
    long = long_folder(inp / "d")
    return {"inp": inp, "outside": outside, "long": os.fsdecode(long)}


def test_what_the_listing_meets_is_listed_or_refused_with_a_reason(tree):
    inp = tree["inp"]
    got = list_inputs([str(inp)])
    refused = {str(u): (u.kind, u.message) for u in got if isinstance(u, RefusedInput)}
    plain = [u for u in got if not isinstance(u, RefusedInput)]
    assert plain == [str(inp / "a" / "2490.00001.html")]  # the link inside the input adds no second copy
    linked = inp / "a" / "linked"
    assert refused[str(linked / "2490.00002.html")][0] == "outside_input"
    assert refused[str(linked / "deeper" / "2490.00005.html")][0] == "outside_input"
    assert "lies behind a link to a folder outside the input" in refused[str(linked / "2490.00002.html")][1]
    assert str(tree["outside"]) not in refused[str(linked / "2490.00002.html")][1], "the link's target is not named"
    bad = str(inp / "c" / "2490.00003-\\xff.html")
    assert refused[bad][0] == "bad_name" and "not valid UTF-8" in refused[bad][1]
    assert refused[tree["long"]][0] == "path_too_long" and "4,095" in refused[tree["long"]][1]
    assert len(got) == 5 and got == sorted(got)


def test_two_links_to_one_outside_folder_each_list_its_pages(tree):
    """The fuzz run's ``link_loops`` inputs: a second link to an outside folder the listing
    had already met behind a first one made that folder "seen", and its pages vanished
    (neither papers nor dead letters)."""
    inp = tree["inp"]
    (inp / "b" / "again").symlink_to(tree["outside"] / "pages")
    refused = {str(u): u.kind for u in list_inputs([str(inp)]) if isinstance(u, RefusedInput)}
    for link in (inp / "a" / "linked", inp / "b" / "again"):
        assert refused.get(str(link / "2490.00002.html")) == "outside_input"
        assert refused.get(str(link / "deeper" / "2490.00005.html")) == "outside_input"


def test_nothing_behind_a_link_out_is_opened_and_a_huge_folder_is_one_row(tree, monkeypatch):
    """Listing reads names only; a link to a folder of more entries than the listing looks at
    becomes one refused input, the link's, instead of a walk of the whole machine."""
    from hostile_fixtures import CanaryWatch

    page = tree["outside"] / "pages" / "2490.00002.html"
    with CanaryWatch([page]) as watch:
        list_inputs([str(tree["inp"])])
        assert not watch.touched()
    for i in range(30):
        (tree["outside"] / "pages" / f"{i:03d}.html").write_bytes(PAGE)
    monkeypatch.setattr(input_files, "MAX_OUTSIDE_ENTRIES", 10)
    got = [u for u in list_inputs([str(tree["inp"])]) if isinstance(u, RefusedInput) and u.kind == "outside_input"]
    link = str(tree["inp"] / "a" / "linked")
    assert link in got and "more than 10 entries" in got[got.index(link)].message
    assert len(got) <= 11


def test_a_refused_input_travels_to_the_plan_step_and_becomes_its_dead_letter(tree, tmp_path):
    got = list_inputs([str(tree["inp"])])
    lines = input_list_lines(got, {str(tree["inp"] / "a" / "2490.00001.html"): "ab" * 32})
    elements = [planned_input_from_line(line) for line in lines]
    gone = [e for e in elements if from_element(e) is not None]
    assert len(gone) == 4 and all(isinstance(e, str) and e.startswith("\x00") for e in gone)  # no file has such a name
    step = PlanStep(PlanOptions(store_root=str(tmp_path / "store"), fingerprint="f"))
    step.setup()
    refs = [x for e in gone for x in step.process(e)]
    assert all(x.tag == REUSED and not x.value.is_paper and x.value.key is None for x in refs)
    rows = {x.value.uri: x.value.dead[0] for x in refs}
    assert set(rows) == {str(u) for u in got if isinstance(u, RefusedInput)}
    assert {(d.stage, d.scope) for d in rows.values()} == {("read", "input")}
    assert rows[tree["long"]].paper_id == "2490.00004" and rows[tree["long"]].error_type == "path_too_long"


def test_refused_inputs_are_never_stat_ed_or_hashed_by_the_launcher(tree, tmp_path):
    got = list_inputs([str(tree["inp"])])
    hashes = page_hashes(got, str(tmp_path / "store"), 1 << 20)
    assert list(hashes.sha256) == [str(tree["inp"] / "a" / "2490.00001.html")]
    assert input_list_hash(got) == input_list_hash(list(got))  # the same input set, the same hash


def test_unsafe_dump_members_are_refused_inputs(tmp_path):
    dump = tmp_path / "dump.zip"
    with zipfile.ZipFile(dump, "w") as z:
        for name in ("2401/2490.00001.html", "../2490.00002.html", "/abs/2490.00003.html", "2401/a::b.html"):
            z.writestr(name, PAGE)
    got = list_inputs([str(dump)])
    kinds = {str(u): getattr(u, "kind", None) for u in got}
    assert kinds == {
        f"zip://2401/2490.00001.html::{dump}": None,
        f"zip://../2490.00002.html::{dump}": "unsafe_member",
        f"zip:///abs/2490.00003.html::{dump}": "unsafe_member",
        f"zip://2401/a::b.html::{dump}": "unsafe_member",
    }


def test_a_name_with_double_colons_is_one_name_on_object_stores():
    fs, path = input_files.fs_and_path("memory://bucket/in/2490.00002::x.html")
    assert path.endswith("bucket/in/2490.00002::x.html") and "memory" in fs.protocol
    fs.pipe_file(path, b"page")
    assert input_files.read_input("memory://bucket/in/2490.00002::x.html") == b"page"
    assert input_files.file_size("memory://bucket/in/2490.00002::x.html") == 4
    assert input_files.split_chain("s3://b/a::b.html") == ("s3://b/a::b.html", None)
    assert input_files.split_chain("zip://a/b.html::/x::y.zip") == ("zip://a/b.html", "/x::y.zip")
    assert input_files.split_chain("/local/a::b.html") == ("/local/a::b.html", None)


def test_a_nul_byte_names_no_file_and_opens_nothing(tmp_path):
    with pytest.raises(input_files.BadNameError):
        input_files.open_input(str(tmp_path / "a\x00.png"))
    with pytest.raises(input_files.BadNameError):
        input_files.file_size("memory://b/a\x00.png")


def test_a_line_round_trips_a_refused_input_with_its_reason():
    r = RefusedInput("/in/x\n::y.html", "bad_name", "why")
    (line,) = input_list_lines([r])
    assert json.loads(line) == ["/in/x\n::y.html", None, "bad_name", "why"]
    back = from_element(planned_input_from_line(line))
    assert (str(back), back.kind, back.message) == ("/in/x\n::y.html", "bad_name", "why")
