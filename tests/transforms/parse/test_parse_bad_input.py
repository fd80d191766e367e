"""Bad pages: each is a correct record or one ParseError that says what was wrong."""

from __future__ import annotations

import gzip
import time

import pytest
from html_fixtures import figure, img, para, perl_page, section

from sciga.transforms.parse import ParseError, parse_latexml_html


def fails(data: bytes, error_type: str, uri: str = "bad.html"):
    with pytest.raises(ParseError) as ei:
        parse_latexml_html(data, input_uri=uri, fallback_id="bad")
    assert ei.value.error_type == error_type, ei.value.message
    assert uri in ei.value.message  # the message names the input
    return ei.value


@pytest.mark.parametrize(
    "data,error_type",
    [
        (b"", "empty"),
        (b"   \n\t ", "empty"),
        (b"%PDF-1.5\n%\xe2\xe3\xcf\xd3 binary", "not_html"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "not_html"),
        (b"just some words, no markup at all", "not_html"),
        (b"<html><body><h1>404 Not Found</h1></body></html>", "not_latexml"),
        (b"\x1f\x8b\x08\x00garbage-not-gzip", "bad_gzip"),
    ],
)
def test_rejected_inputs(data, error_type):
    fails(data, error_type)


def test_truncated_page():
    page = perl_page(section("S1", "1", "I", para("S1.p1", "text " * 200)))
    fails(page[: len(page) // 2], "truncated")


def test_gzipped_page_is_read():
    page = perl_page(section("S1", "1", "I", para("S1.p1", "zipped")))
    p = parse_latexml_html(gzip.compress(page), input_uri="a.html.gz")
    assert p.sections[0].body == "zipped"


def test_a_few_bad_bytes_are_replaced_and_counted():
    page = perl_page(section("S1", "1", "I", para("S1.p1", "caf\u00e9 ok"))).replace("café".encode(), b"caf\xe9")
    p = parse_latexml_html(page, input_uri="latin.html")
    assert p.provenance.decode_errors == 1 and p.sections[0].body == "caf\ufffd ok"


def test_wrong_encoding_is_rejected():
    body = "".join(chr(0xE0 + i % 20) for i in range(5000))
    page = perl_page(section("S1", "1", "I", para("S1.p1", body))).replace(body.encode(), body.encode("latin-1"))
    fails(page, "bad_encoding")


def test_declared_legacy_charset_is_honoured():
    page = perl_page(section("S1", "1", "I", para("S1.p1", "naïve")))
    page = page.replace(b'<meta charset="UTF-8">', b'<meta charset="iso-8859-1">').replace(
        "naïve".encode(), "naïve".encode("latin-1")
    )
    assert parse_latexml_html(page, input_uri="x.html").sections[0].body == "naïve"


def test_over_size_limit():
    with pytest.raises(ParseError) as ei:
        parse_latexml_html(perl_page(para("p1", "x" * 5000)), input_uri="big.html", max_bytes=1000)
    assert ei.value.error_type == "too_large" and "--max-page-mb" in ei.value.message


def test_page_with_no_id_is_rejected_with_advice():
    page = b'<html><body><article class="ltx_document"><div class="ltx_para"><p class="ltx_p">x</p></div></article></body></html>'
    with pytest.raises(ParseError) as ei:
        parse_latexml_html(page, input_uri="nameless.html")
    assert ei.value.error_type == "no_paper_id" and "name the file" in ei.value.message


def test_paper_with_700_figures():
    figs = "".join(figure(f"S1.F{i}", i, f"Figure number {i}.", img(f"x{i}.png")) for i in range(1, 701))
    p = parse_latexml_html(perl_page(section("S1", "1", "Many", figs)), input_uri="many.html")
    assert len(p.figures) == 700 and p.figures[-1].id == "2401.00001_F700" and p.figures[-1].number == "700"
    assert len(p.sections[0].figure_ids) == 700


@pytest.mark.e2e  # parses a 50 MB page
def test_50_mb_page_parses_in_reasonable_time():
    block = para("S1.p{}", 'A long paragraph of text with <math alttext="x^2"><mi>x</mi></math> math. ' * 40)
    n = 50 * 1024 * 1024 // len(block)
    body = section("S1", "1", "Huge", "".join(block.replace("{}", str(i)) for i in range(n)))
    page = perl_page(body)
    assert len(page) > 50 * 1024 * 1024
    t = time.time()
    p = parse_latexml_html(page, input_uri="huge.html")
    assert len(p.sections[0].paragraphs) == n
    assert time.time() - t < 120


def test_deep_nesting_does_not_crash():
    page = perl_page(section("S1", "1", "Deep", "<span>" * 5000 + "deep" + "</span>" * 5000))
    try:
        p = parse_latexml_html(page, input_uri="deep.html")
        assert "deep" in p.sections[0].body
    except ParseError as e:
        assert e.error_type in ("too_deep", "unparseable")


def _python_says_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def test_the_utf8_check_accepts_nothing_pythons_decoder_refuses():
    """``is_utf8`` (Arrow's validator) decides which pages skip Python's decoder: a sequence
    it accepts and Python refuses would reach lxml undecoded and uncounted. Every 2-byte
    sequence, and 3- and 4-byte ones with every lead byte and the bytes at the edges of
    UTF-8's ranges after it, alone and inside text. (Every 3-byte sequence with a non-ASCII
    lead, 8.4 million, was compared once when this was written: none differed.)"""
    from sciga.transforms.parse.decode import is_utf8

    edges = [0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xED, 0xF4, 0xF5, 0xFF]
    seqs = [bytes([a, b]) for a in range(256) for b in range(256)]
    cont = [0x00, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xFF]  # the edges of the continuation ranges
    seqs += [bytes([a, b, c]) for a in range(0x80, 256) for b in edges for c in edges]
    seqs += [bytes([a, b, c, d]) for a in range(0xE0, 256) for b in cont for c in cont for d in cont]
    wrong = [s for s in seqs if is_utf8(s) and not _python_says_utf8(s)]
    wrong += [s for s in seqs[:65536] if not is_utf8(s) and _python_says_utf8(s)]  # 2 bytes: the same answer
    in_text = [b"caf\xc3\xa9 " * 50 + s + b" end" for s in seqs[::97]]
    wrong += [s for s in in_text if is_utf8(s) != _python_says_utf8(s)]
    assert not wrong, wrong[:10]
    assert is_utf8("Zürich ∑ 𝔸 ok".encode()) and not is_utf8(b"caf\xe9") and is_utf8(b"")


def test_a_surrogate_or_overlong_byte_sequence_is_replaced_as_before():
    """Sequences Python's strict decoder refuses (a UTF-16 surrogate, an overlong slash) are
    replaced and counted, as when every page went through that decoder."""
    for bad in (b"\xed\xa0\x80", b"\xc0\xaf"):
        page = perl_page(section("S1", "1", "I", para("S1.p1", "a XX b"))).replace(b"XX", bad)
        p = parse_latexml_html(page, input_uri="odd.html")
        assert p.provenance.decode_errors >= 1 and "\ufffd" in p.sections[0].body
