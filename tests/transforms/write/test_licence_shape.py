"""The write stage's licence policy on one paper (``write/steps.py``): what the policy does to
its papers row (``licence_shape``), the digest that row is written under (``shaped_digest``:
never the stored table's when the row differs from it), and the row itself
(``shape_papers_table``: metadata kept, content emptied, the assumed licence filled in)."""

from __future__ import annotations

from sciga.schemas.arrow import to_table
from sciga.transforms.write.steps import LicenceShape, licence_shape, shape_papers_table, shaped_digest

BY = "http://creativecommons.org/licenses/by/4.0/"
ND = "http://creativecommons.org/licenses/by-nc-nd/4.0/"


def paper(license=None):
    return to_table(
        "papers",
        [
            {
                "id": "2511.99001",
                "title": "T",
                "authors": [{"name": "A", "affiliations": []}],
                "license": license,
                "abstract": "An abstract.",
                "sections": [{"id": "2511.99001_S1", "title": "Intro", "body": "text", "paragraphs": []}],
                "teaser": ["2511.99001_F1"],
                "provenance": {"source": "local", "url": "https://arxiv.org/abs/2511.99001"},
            }
        ],
    )


def test_licence_shape_per_policy():
    assert licence_shape(BY, "redistributable", None) == LicenceShape()
    assert licence_shape(ND, "redistributable-nc", None) == LicenceShape(withheld=ND)
    assert licence_shape(None, "redistributable", None) == LicenceShape(withheld="unknown")
    assert licence_shape(None, "redistributable", BY) == LicenceShape(assumed_licence=BY)
    assert licence_shape(ND, "redistributable", BY) == LicenceShape(withheld=ND)  # a licence given is kept
    assert licence_shape(None, "all", None) == LicenceShape()


def test_shaped_digest_differs_exactly_when_the_row_does():
    assert shaped_digest("d", LicenceShape()) == "d"
    assert shaped_digest(None, LicenceShape(withheld=ND)) is None
    withheld, assumed = (
        shaped_digest("d", LicenceShape(withheld=ND)),
        shaped_digest("d", LicenceShape(assumed_licence=BY)),
    )
    assert len({"d", withheld, assumed, shaped_digest("d", LicenceShape(withheld="unknown"))}) == 4
    assert withheld == shaped_digest("d", LicenceShape(withheld=ND))  # deterministic


def test_a_withheld_row_keeps_its_metadata_and_nothing_else():
    table = paper(ND)
    assert shape_papers_table(table, None, None) is table
    out = shape_papers_table(table, ND, None)
    assert out.schema.equals(table.schema, check_metadata=True)
    (row,) = out.to_pylist()
    assert row["id"] == "2511.99001" and row["title"] == "T" and row["authors"][0]["name"] == "A"
    assert row["license"] == ND and row["withheld"] == ND
    assert row["provenance"]["url"] == "https://arxiv.org/abs/2511.99001"
    assert row["abstract"] is None and row["sections"] == [] and row["teaser"] == [] and row["figures"] == []
    assert row["graphical_abstract"] is None


def test_the_assumed_licence_fills_only_a_missing_one():
    (row,) = shape_papers_table(paper(None), None, BY).to_pylist()
    assert row["license"] == BY and row["withheld"] is None and row["abstract"] == "An abstract."
