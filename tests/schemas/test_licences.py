"""The licence table (``schemas/licences.py``): every URL arXiv uses, read however it is
written; what each policy lets in; the SQL reading the gate uses agrees with the Python one."""

from __future__ import annotations

import duckdb
import pytest

from sciga.schemas.licences import (
    LICENCES,
    POLICIES,
    admits,
    admitted_kinds,
    canonical_url,
    licence_kind_sql,
    read_licence,
    withheld_reason,
)

# Every licence URL arXiv has given papers (arxiv.org/help/license, the metadata snapshot's values).
ARXIV_URLS = {
    "http://creativecommons.org/licenses/by/4.0/": "cc-by",
    "http://creativecommons.org/licenses/by-sa/4.0/": "cc-by-sa",
    "http://creativecommons.org/licenses/by-nc-sa/4.0/": "cc-by-nc-sa",
    "http://creativecommons.org/licenses/by-nc-nd/4.0/": "cc-by-nc-nd",
    "http://creativecommons.org/publicdomain/zero/1.0/": "cc0",
    "http://arxiv.org/licenses/nonexclusive-distrib/1.0/": "arxiv-nonexclusive",
    "http://creativecommons.org/licenses/by/3.0/": "cc-by",
    "http://creativecommons.org/licenses/by-nc-sa/3.0/": "cc-by-nc-sa",
    "http://creativecommons.org/licenses/publicdomain/": "cc-publicdomain",
    "http://arxiv.org/licenses/assumed-1991-2003/": "arxiv-assumed",
}
# What each policy writes in full (True) and withholds (False), kind by kind.
EXPECTED = {
    "cc0": (True, True, True),
    "cc-publicdomain": (True, True, True),
    "cc-by": (True, True, True),
    "cc-by-sa": (True, True, True),
    "cc-by-nc": (True, False, True),
    "cc-by-nc-sa": (True, False, True),
    "cc-by-nd": (True, False, False),
    "cc-by-nc-nd": (True, False, False),
    "arxiv-nonexclusive": (True, False, False),
    "arxiv-assumed": (True, False, False),
}


@pytest.mark.parametrize("url,kind", sorted(ARXIV_URLS.items()))
def test_every_arxiv_licence_url_is_known_in_any_spelling(url, kind):
    for spelling in (url, url.replace("http://", "https://"), url.rstrip("/"), url.upper(), " " + url + " "):
        known = read_licence(spelling)
        assert known is not None and known.licence.kind == kind, spelling
        assert known.url == url  # the canonical form is arXiv's own
    assert read_licence(url.replace("://", "://www.")).licence.kind == kind


def test_versions_are_normalised_and_unknown_urls_are_unknown():
    assert read_licence("https://creativecommons.org/licenses/by-sa/2/").url == (
        "http://creativecommons.org/licenses/by-sa/2.0/"
    )
    assert read_licence("https://creativecommons.org/licenses/by/4.0/legalcode").version == "4.0"
    for nothing in (None, "", "  ", "https://example.org/my-licence", "creativecommons.org/licenses/xyz/4.0/"):
        assert read_licence(nothing) is None
        assert canonical_url(nothing) == "unknown"


@pytest.mark.parametrize("kind", sorted(LICENCES))
def test_policies_let_in_exactly_what_may_be_shared_and_adapted(kind):
    url = next((u for u, k in ARXIV_URLS.items() if k == kind), f"http://creativecommons.org/licenses/{kind[3:]}/4.0/")
    assert tuple(admits(p, url) for p in POLICIES) == EXPECTED[kind]
    for policy, allowed in zip(POLICIES, EXPECTED[kind]):
        assert withheld_reason(policy, url) == (None if allowed else read_licence(url).url)
        assert (kind in admitted_kinds(policy)) == allowed


def test_a_paper_without_a_licence_is_withheld_by_every_policy_but_all():
    assert withheld_reason("all", None) is None
    assert withheld_reason("redistributable", None) == "unknown"
    assert withheld_reason("redistributable-nc", "") == "unknown"
    with pytest.raises(ValueError, match="unknown licence policy"):
        admits("everything", "http://creativecommons.org/licenses/by/4.0/")


def test_the_sql_reading_agrees_with_the_python_one():
    urls = [*ARXIV_URLS, None, "", "https://CreativeCommons.org/licenses/by-nc/4.0", "https://example.org/x"]
    urls += [u.replace("http://", "https://").rstrip("/") for u in ARXIV_URLS]
    con = duckdb.connect()
    for u in urls:
        (got,) = con.execute(f"SELECT {licence_kind_sql('l')} FROM (SELECT ?::VARCHAR AS l)", [u]).fetchone()
        known = read_licence(u)
        assert got == (known.licence.kind if known else "unknown"), u
