"""The polite client against a real HTTP server on 127.0.0.1 with injected faults."""

from __future__ import annotations

import time

import pytest
from sources_fixtures import FaultServer

from sciga.transforms.fetch.http_client import FetchError, PoliteClient, parse_retry_after

BODY = b"<html><body class='ltx_document'>" + b"x" * 5000 + b"</body></html>"


@pytest.fixture()
def server():
    with FaultServer() as s:
        s.add("/page", BODY, etag='"v1"')
        yield s


def client(**kw) -> PoliteClient:
    kw.setdefault("max_retries", 4)
    kw.setdefault("backoff_base", 0.01)
    kw.setdefault("read_timeout", 1.0)
    return PoliteClient(kw.pop("rate_limit", 0.01), **kw)


def test_plain_get_and_stats(server):
    c = client()
    r = c.get(server.base + "/page")
    assert r.status == 200 and r.body == BODY and r.attempts == 1
    assert c.stats.requests == 1 and c.stats.bytes == len(BODY) and c.stats.retries == 0


def test_429_retry_after_is_honoured(server):
    server.script("/page", ["429:1", "ok"])
    c = client()
    t0 = time.monotonic()
    r = c.get(server.base + "/page")
    waited = time.monotonic() - t0
    assert r.status == 200 and r.body == BODY and r.attempts == 2
    assert waited >= 0.95, "Retry-After: 1 must make the client wait a second"
    assert [e["status"] for e in server.requests_for("/page")] == [429, 200]


def test_5xx_burst_then_success(server):
    server.script("/page", ["500", "503", "502", "ok"])
    c = client()
    r = c.get(server.base + "/page")
    assert r.body == BODY and r.attempts == 4 and c.stats.retries == 3


def test_retries_are_bounded(server):
    server.script("/page", ["503"] * 50)
    c = client(max_retries=3)
    with pytest.raises(FetchError) as ei:
        c.get(server.base + "/page")
    assert len(server.requests_for("/page")) == 4  # 1 try + 3 retries, never more
    e = ei.value
    assert e.kind == "http_503" and e.attempts == 4 and not e.permanent
    assert "failed after 4 attempt(s) (last: HTTP 503)" in e.message and "rerun later" in e.message


def test_connection_reset_is_retried(server):
    server.script("/page", ["reset", "reset", "ok"])
    r = client().get(server.base + "/page")
    assert r.body == BODY and r.attempts == 3


def test_truncated_body_is_detected_and_retried(server):
    server.script("/page", ["truncate", "ok"])
    r = client().get(server.base + "/page")
    assert r.body == BODY and r.attempts == 2
    assert server.requests_for("/page")[0]["complete"] is False


def test_truncated_every_time_fails_clearly(server):
    server.script("/page", ["truncate"] * 3)
    with pytest.raises(FetchError) as ei:
        client(max_retries=2).get(server.base + "/page")
    assert ei.value.kind in ("truncated", "connection") and ei.value.attempts == 3


def test_slow_response_times_out_then_succeeds(server):
    server.script("/page", ["slow:1.5", "ok"])
    t0 = time.monotonic()
    r = client(read_timeout=0.3).get(server.base + "/page")
    assert r.body == BODY and r.attempts == 2
    assert time.monotonic() - t0 < 5


def test_dripping_body_hits_the_total_deadline(server):
    server.script("/page", ["drip"] * 3)
    t0 = time.monotonic()
    with pytest.raises(FetchError) as ei:
        client(max_retries=1, read_timeout=1.0, total_timeout=0.5).get(server.base + "/page")
    assert ei.value.kind == "timeout"
    assert time.monotonic() - t0 < 5, "a slow-drip body must not hang the client"


def test_conditional_request_gives_not_modified(server):
    c = client()
    first = c.get(server.base + "/page")
    again = c.get(server.base + "/page", etag=first.etag)
    assert first.etag == '"v1"'
    assert again.status == 304 and again.not_modified and again.body == b""
    assert c.stats.not_modified == 1


def test_size_limit_refuses_without_retrying(server):
    with pytest.raises(FetchError) as ei:
        client().get(server.base + "/page", max_bytes=100)
    assert ei.value.kind == "too_large" and ei.value.permanent
    assert len(server.requests_for("/page")) == 1


def test_not_found_is_returned_not_retried(server):
    r = client().get(server.base + "/nothing-here")
    assert r.status == 404 and r.attempts == 1


def test_redirects_are_followed_through_the_limiter(server):
    server.add("/old", (server.base + "/page").encode(), status=302)
    r = client().get(server.base + "/old")
    assert r.status == 200 and r.url.endswith("/page") and r.body == BODY


def test_rate_limit_spaces_requests_per_host(server):
    c = client(rate_limit=0.2)
    for _ in range(4):
        c.get(server.base + "/page")
    times = [e["t"] for e in server.requests_for("/page")]
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert len(gaps) == 3 and min(gaps) >= 0.18, gaps


def test_arxiv_hosts_never_go_below_three_seconds():
    c = PoliteClient(0.01)
    assert c.interval_for("export.arxiv.org") == 3.0
    assert c.interval_for("ar5iv.labs.arxiv.org") == 3.0
    assert c.interval_for("arxiv.org") == 3.0
    assert c.interval_for("127.0.0.1") == 0.01
    assert PoliteClient(5).interval_for("arxiv.org") == 5


def test_retry_after_forms():
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after("0.5") == 0.5
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == pytest.approx(10.0)
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412490.0) == 0.0


def test_unreachable_host_fails_after_bounded_retries():
    c = client(max_retries=2, connect_timeout=0.5)
    with pytest.raises(FetchError) as ei:
        c.get("http://127.0.0.1:9/nothing")  # discard port: connection refused
    assert ei.value.kind == "connection" and ei.value.attempts == 3
