"""Paper ids are validated and normalised wherever they enter (issue 43, item 6): arXiv ids
(new and old style, ASCII digits) or local ids; NFKC, no control, format or bidi
characters, no path syntax."""

from __future__ import annotations

import pytest

from sciga.schemas import ids
from sciga.schemas.records import MetaFieldError, PaperMeta

GENUINE = "2401.00099"
CONFUSABLES = [
    "２４０１.０００９９",  # fullwidth digits
    "2401.0\u200b0099",  # zero-width space
    "\u202e2401.00099",  # right-to-left override
    "2401.00099\u2066",  # left-to-right isolate
    " 2401.00099\u00ad",  # soft hyphen (a format character)
    "2401.00099\x07",  # a control character
]


@pytest.mark.parametrize("raw", CONFUSABLES)
def test_confusable_spellings_are_the_same_paper(raw):
    assert ids.checked_paper_id(raw) == (GENUINE, None)
    assert ids.paper_id_from_filename(raw) == (GENUINE, None)
    assert PaperMeta.from_dict({"id": raw}).id == GENUINE


@pytest.mark.parametrize("raw", ["../../x", "/etc/passwd", "..", "a/../../b", "a..b", "x\\y", "", "a b", "é" * 3])
def test_path_syntax_and_stray_characters_are_no_paper_id(raw):
    with pytest.raises(ids.BadIdError):
        ids.checked_paper_id(raw)


@pytest.mark.parametrize("raw", ["../../x", "/etc/passwd", "..", "a/../../b"])
def test_a_sidecar_with_such_an_id_is_bad_metadata_naming_the_field(raw):
    with pytest.raises(MetaFieldError, match="field 'id'.*path syntax"):
        PaperMeta.from_dict({"id": raw})


def test_valid_forms():
    assert ids.checked_paper_id("2401.13641v2") == ("2401.13641", "v2")
    assert ids.checked_paper_id("astro-ph/0601001") == ("astro-ph/0601001", None)
    assert ids.checked_paper_id("math.GT/0309136v1") == ("math.GT/0309136", "v1")
    assert ids.checked_paper_id("eml-2024.local") == ("eml-2024.local", None)
    assert not ids.is_arxiv_id("٢٤٠١.٠٠٠٩٩")  # Arabic-Indic digits are not an arXiv id's digits
    for stem in ("a..b/../c", "x....y", "..", "../../etc/passwd"):
        local = ids.local_id_from_stem(stem)
        assert local is None or (ids.is_local_id(local) and ".." not in local), (stem, local)
