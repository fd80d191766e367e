"""The licence policy where a person reads a build: the dataset card's ``license`` field
per policy, and `sciga show` on a withheld paper."""

from __future__ import annotations

from sciga.explore.dataset_card import card_licence


def test_card_licence_field_follows_the_policy_and_the_papers_written():
    assert card_licence("all", ["http://creativecommons.org/licenses/by/4.0/"])["license"] == "other"
    assert card_licence("redistributable", ["https://creativecommons.org/licenses/by/4.0"]) == {"license": "cc-by-4.0"}
    assert card_licence("redistributable", ["http://creativecommons.org/publicdomain/zero/1.0/"]) == {
        "license": "cc0-1.0"
    }
    mixed = card_licence(
        "redistributable",
        ["http://creativecommons.org/licenses/by/4.0/", "http://creativecommons.org/licenses/by-sa/4.0/"],
    )
    assert mixed["license"] == "other" and "CC BY 4.0" in mixed["license_details"]
    assert "CC BY-SA 4.0" in mixed["license_details"] and mixed["license_name"] == "mixed-cc"
    nc = card_licence(
        "redistributable-nc",
        ["http://creativecommons.org/licenses/by/4.0/", "http://creativecommons.org/licenses/by-nc-sa/4.0/"],
    )
    assert nc["license"] == "other" and "non-commercial" in nc["license_details"]


def test_show_explains_a_withheld_paper():
    from sciga.explore.show import PaperRecord, render_text

    row = {"id": "2511.99003", "title": "T", "authors": [], "license": None, "withheld": "unknown", "provenance": {}}
    text = render_text(PaperRecord("2511.99003", row))
    assert "withheld: its licence (unknown) is outside the build's licence policy" in text
    assert "--assume-licence URL" in text
    row["withheld"] = None
    assert "withheld" not in render_text(PaperRecord("2511.99003", row))
