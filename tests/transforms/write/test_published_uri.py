"""The paths the shards publish (issue 41, item 8): relative to the input root a file came
from, its base name outside every root, names that are no path kept."""

from __future__ import annotations

import pyarrow as pa

from sciga.transforms.write.published_uri import (
    normalize_roots,
    publish_dead_letter_row,
    publish_table,
    published_text,
    published_uri,
    spec_root,
)

ROOTS = normalize_roots(["/home/ana/corpus/html", "/home/ana/corpus/html/sub", "gs://bucket/prefix/", None])


def test_a_local_path_inside_a_root_is_relative_to_the_innermost_root():
    assert published_uri("/home/ana/corpus/html/2303.17564.html", ROOTS) == "2303.17564.html"
    assert published_uri("/home/ana/corpus/html/assets/x1.png", ROOTS) == "assets/x1.png"
    assert published_uri("/home/ana/corpus/html/sub/a.html", ROOTS) == "a.html"
    assert published_uri("file:///home/ana/corpus/html/a.html", ROOTS) == "a.html"
    assert published_uri("/home/ana/corpus/html/p.html#S6.F4", ROOTS) == "p.html#S6.F4"  # an inline SVG


def test_an_object_store_key_is_relative_to_the_bucket_path_given():
    assert published_uri("gs://bucket/prefix/x.html", ROOTS) == "x.html"
    assert published_uri("gs://bucket/prefix/deep/x.png", ROOTS) == "deep/x.png"
    assert published_uri("gs://bucket/prefixed/x.html", ROOTS) == "x.html"  # not under gs://bucket/prefix
    assert published_uri("s3://pages/in/2490.00003.html/", normalize_roots(["s3://pages/in"])) == "2490.00003.html/"


def test_a_path_outside_every_root_is_its_base_name():
    # a GA image --ga-allow-outside let the build read: its folder is the machine's
    assert published_uri("/home/ana/private/ga/fig.png", ROOTS) == "fig.png"
    assert published_uri("/elsewhere/x.html", ()) == "x.html"


def test_names_that_are_no_path_are_kept():
    for uri in ("arxiv:2303.17564", "https://arxiv.org/html/2303.17564v1", "<bytes>", None, ""):
        assert published_uri(uri, ROOTS) == uri


def test_an_archive_member_keeps_its_member_and_publishes_its_archive():
    uri = "zip://1709/1709.07020.html::/home/ana/corpus/html/bulk.zip"
    assert published_uri(uri, ROOTS) == "zip://1709/1709.07020.html::bulk.zip"


def test_messages_lose_the_absolute_folder():
    msg = "/home/ana/corpus/html/bad.html is HTML but not LaTeXML output; image /home/ana/corpus/html/a.png too"
    out = published_text(msg, ["/home/ana/corpus/html/bad.html"], ROOTS)
    assert out == "bad.html is HTML but not LaTeXML output; image a.png too"
    assert published_text("/tmp/x/fig.png unreadable", ["/tmp/x/fig.png"], ROOTS) == "fig.png unreadable"


def test_spec_root_is_the_folder_read(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.html").write_text("x")
    assert spec_root(str(tmp_path / "in")) == str(tmp_path / "in")
    assert spec_root(str(tmp_path / "in" / "a.html")) == str(tmp_path / "in")
    assert spec_root(str(tmp_path / "in" / "*.html")) == str(tmp_path / "in")
    assert spec_root("gs://bucket/prefix") == "gs://bucket/prefix"
    assert spec_root("gs://bucket/prefix/x.html") == "gs://bucket/prefix"


def test_tables_and_dead_letters_are_published():
    prov = pa.array([{"input_uri": "/home/ana/corpus/html/a.html", "source": "ar5iv"}])
    papers = publish_table("papers", pa.table({"id": ["a"], "provenance": prov}), ROOTS)
    assert papers.column("provenance").to_pylist() == [{"input_uri": "a.html", "source": "ar5iv"}]
    figures = pa.table(
        {"image_uri": ["/home/ana/corpus/html/x.png", None], "image_error": ["/home/ana/corpus/html/x.png gone", None]}
    )
    figures = publish_table("figures", figures, ROOTS)
    assert figures.to_pylist() == [
        {"image_uri": "x.png", "image_error": "x.png gone"},
        {"image_uri": None, "image_error": None},
    ]
    row = {
        "paper_id": None,
        "input_uri": "/home/ana/corpus/html/b.html",
        "message": "/home/ana/corpus/html/b.html: bad",
    }
    assert publish_dead_letter_row(row, ROOTS) == {"paper_id": None, "input_uri": "b.html", "message": "b.html: bad"}
    assert publish_table("figures", figures, ()) is figures  # no roots: nothing to cut
