"""arXiv API metadata through the `arxiv` package, served from the real recorded
responses in ../shared/corpus/arxiv_api by a local HTTP server."""

from __future__ import annotations

import arxiv
import pytest
from sources_fixtures import CORPUS, FaultServer

from sciga.transforms.fetch.arxiv_api import ArxivApiError, ArxivMetadata, PoliteArxivClient, normalize_id
from sciga.transforms.fetch.http_client import PoliteClient

pytestmark = pytest.mark.corpus


@pytest.fixture(scope="module")
def server():
    with FaultServer() as s:
        yield s


def api(server, page_size=100, **kw) -> ArxivMetadata:
    http = PoliteClient(0.01, max_retries=kw.pop("max_retries", 2), backoff_base=0.01, read_timeout=2.0)
    return ArxivMetadata(http, server.api_url, page_size=page_size)


def test_normalize_id_forms():
    assert normalize_id("2401.13641v2") == ("2401.13641", "v2")
    assert normalize_id("arXiv:2401.13641") == ("2401.13641", None)
    assert normalize_id("https://arxiv.org/abs/astro-ph/0601001v1") == ("astro-ph/0601001", "v1")
    assert normalize_id("math.GT/0309136") == ("math.GT/0309136", None)
    assert normalize_id("abc") == (None, None)
    assert normalize_id("0000.0000") == ("0000.0000", None)


def test_single_new_style_id(server):
    look = api(server).by_ids(["1605.08386"])
    assert not look.errors
    m = look.found["1605.08386"]
    assert m["version"] == "v1"
    assert m["title"] == "Heat-bath random walks with Markov bases"
    assert [a["name"] for a in m["authors"]] == ["Caprice Stanley", "Tobias Windisch"]
    assert m["categories"] == ["math.CO", "math.ST"] and m["primary_category"] == "math.CO"
    assert m["published"] == "2016-05-26T17:59:46Z"
    assert m["comment"] == "20 pages, 3 figures" and m["conference"] is None


def test_old_style_id_with_affiliations_and_journal_ref(server):
    look = api(server).by_ids(["astro-ph/0601001"])
    m = look.found["astro-ph/0601001"]
    assert m["id"] == "astro-ph/0601001" and m["version"] == "v1"
    assert m["authors"][0] == {"name": "Andrew Gould", "affiliations": ["Ohio State"]}
    assert m["authors"][2]["affiliations"] == ["CfA"]
    assert m["journal_ref"] == "ActaAstron.56:1-50,2006"
    assert m["primary_category"] == "astro-ph"


def test_versioned_ids_new_and_old(server):
    look = api(server).by_ids(["2104.12255v1", "quant-ph/0201082v1"])
    assert set(look.found) == {"2104.12255", "quant-ph/0201082"}
    assert look.found["2104.12255"]["version"] == "v1"
    assert look.found["quant-ph/0201082"]["version"] == "v1"


def test_unknown_and_invalid_ids_are_per_id_errors(server):
    look = api(server).by_ids(["0000.0000", "abc", "1707.08567", "0808.05394"])
    assert set(look.found) == {"1707.08567"}
    assert look.found["1707.08567"]["title"].startswith("Proceedings of Workshop AEW10")
    assert look.errors["0000.0000"].error_type == "unknown_id"
    assert "arXiv has no paper 0000.0000" in look.errors["0000.0000"].message
    assert look.errors["0808.05394"].error_type == "unknown_id"
    assert look.errors["abc"].error_type == "bad_id"
    assert "'abc' is not an arXiv id" in look.errors["abc"].message
    # the invalid id never reached the API
    assert not any("id_list=abc" in r["query"] for r in server.requests_for("/api/query"))


def test_http_400_error_feed_is_a_clear_error(server):
    client = PoliteArxivClient(PoliteClient(0.01, max_retries=0), server.api_url)
    with pytest.raises(ArxivApiError) as ei:
        list(client.results(arxiv.Search(id_list=["abc"], max_results=1)))
    assert ei.value.error_type == "bad_request" and ei.value.per_id
    assert "incorrect id format for abc" in ei.value.message


def test_a_batch_poisoned_by_one_id_is_split(server):
    md = api(server)
    results, failures = {}, {}
    md._lookup(["1605.08386", "abc", "1707.08567"], results, failures)
    assert set(results) == {"1605.08386", "1707.08567"}
    assert failures["abc"].error_type == "bad_request"
    assert "incorrect id format for abc" in failures["abc"].message


def test_query_paging_through_the_package(server):
    md = api(server, page_size=10)
    got = list(md.search("testing", max_results=60))
    assert len(got) == 60
    assert len({m["id"] for m in got}) == 60, "no duplicate across pages"
    pages = [q["query"] for q in server.requests_for("/api/query") if "search_query=testing" in q["query"]]
    starts = sorted(int(p.split("start=")[1].split("&")[0]) for p in pages)
    assert starts[-6:] == [0, 10, 20, 30, 40, 50]


def test_query_resumes_from_an_offset(server):
    md = api(server, page_size=10)
    full = [m["id"] for m in md.search("testing", max_results=60)]
    tail = [m["id"] for m in md.search("testing", max_results=60, offset=30)]
    assert tail == full[30:]


def test_2016_feed_dois_and_cs_lg_comments(server):
    look = api(server).by_ids(["1111.2011v2"])
    m = look.found["1111.2011"]
    assert m["dois"] == ["10.1103/PhysRevB.85.115117"]
    assert m["journal_ref"] == "Phys. Rev. B 85, 115117 (2012)"
    assert m["primary_category"] == "cond-mat.str-el"
    lg = list(api(server, page_size=5).search("cat:cs.LG", max_results=5))
    assert len(lg) == 5 and all(x["primary_category"] for x in lg)
    assert lg[0]["id"] == "2604.21930" and lg[0]["comment"] == "12 pages, 2 figures"


def test_malformed_atom_gives_a_clear_error_after_bounded_retries(server):
    url = "/api/query"
    server.script(url, ["malformed"] * 10)
    try:
        look = api(server).by_ids(["1605.08386"])
    finally:
        server.script(url, [])
    err = look.errors["1605.08386"]
    assert err.error_type == "malformed_feed"
    assert "malformed Atom" in err.message and "1605.08386" in err.message


def test_api_down_is_a_per_id_error_not_a_crash(server):
    server.script("/api/query", ["503"] * 10)
    try:
        look = api(server, max_retries=1).by_ids(["1605.08386", "1707.08567"])
    finally:
        server.script("/api/query", [])
    assert not look.found
    assert {e.error_type for e in look.errors.values()} == {"api_unavailable"}
    assert "HTTP 503" in look.errors["1707.08567"].message


def test_corpus_is_the_real_one():
    assert (CORPUS / "arxiv_api" / "recorded").is_dir()


def test_licence_and_extra_dois_when_the_feed_carries_them():
    import json

    from lxml import etree

    from sciga.transforms.fetch.arxiv_api import _extras

    body = json.loads((CORPUS / "arxiv_api" / "recorded" / "id_1605.08386_s0_m100_199195aa31ad.json").read_text())[
        "body"
    ]
    body = body.replace(
        "</entry>",
        '<link href="http://creativecommons.org/licenses/by/4.0/" rel="license"/>'
        "<arxiv:doi>10.1000/a 10.1000/b</arxiv:doi></entry>",
    )
    ex = _extras(etree.fromstring(body.encode()))["http://arxiv.org/abs/1605.08386v1"]
    assert ex.license == "http://creativecommons.org/licenses/by/4.0/"
    assert ex.dois == ["10.1000/a", "10.1000/b"]
