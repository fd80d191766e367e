"""ACM Computing Classification (1998 codes and 2012 concept paths) and MSC classes.

SciGA keeps ACM-CCS and MSC classes "only when specified by authors in arXiv metadata or
within the paper itself". They come from three places, merged in this order:

* arXiv metadata: ``acm-class`` ("I.2.6; H.3.3") and ``msc-class`` ("Primary 05C10;
  Secondary 68R10") strings;
* the TeX source: ``\\ccsdesc[500]{Human-centered computing~Haptic devices}``,
  ``\\category{H.5.2}{...}{...}``, ``\\subjclass[2020]{...}``, ``\\subclass{...}``,
  ``\\MSC[2010] 00-01 \\sep 99-00``, ``\\keywords{...}`` and plain "MSC 2020: 68T07" /
  "ACM CCS: I.2.6" lines;
* the LaTeXML page: ``span.ltx_role_ccs`` notes (acmart), ``div.ltx_classification``
  (amsart ``\\subjclass``) and ``div.ltx_keywords``.

A 2012 CCS concept path is written with " → " between levels, the way the ACM prints it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Optional

ACM_CODE_RE = re.compile(r"(?<![A-Za-z0-9.])([A-K]\.(?:\d{1,2}|m)(?:\.(?:\d{1,2}|m))?)(?![A-Za-z0-9])")
MSC_CODE_RE = re.compile(r"(?<![A-Za-z0-9])(\d{2}(?:[A-Z](?:\d{2}|xx|XX)|-(?:XX|xx|\d{2})))(?![A-Za-z0-9])")
PATH_SEP = " \u2192 "
MAX_CLASSIFIED_PAGE_BYTES = 256 * 1024 * 1024  # a gzipped page is inflated at most this far (bombs exist)

_MSC_LINE_RE = re.compile(
    r"(?:\bMSC\b|Mathematics\s+Subject\s+Classifications?|AMS\s+(?:subject\s+)?classifications?|"
    r"AMS\s+MSC|Subject\s+Classification)[^:\n]{0,40}[:.]?\s*(?P<body>[^\n]{0,300})",
    re.I,
)
_ACM_LINE_RE = re.compile(
    r"(?:\bACM\s+(?:CCS|Classification|Computing\s+Classification|subject\s+classes?)|\bCR\s+Subject\s+Classification|"
    r"\bCCS\s+Concepts)[^:\n]{0,40}[:.]?\s*(?P<body>[^\n]{0,300})",
    re.I,
)


def _dedupe(items: Iterable[str]) -> list[str]:
    seen, out = set(), []
    for it in items:
        it = re.sub(r"\s+", " ", it).strip(" ;,.")
        if it and it not in seen:
            seen.add(it)
            out.append(it)
    return out


def acm_from_metadata(value: Optional[str]) -> list[str]:
    """arXiv ``acm-class`` -> codes (free-text entries without a code are kept as text)."""
    if not value:
        return []
    codes = ACM_CODE_RE.findall(value)
    if codes:
        return _dedupe(codes)
    return _dedupe(re.split(r"[;,]", value))


def msc_from_metadata(value: Optional[str]) -> list[str]:
    if not value:
        return []
    return _dedupe(MSC_CODE_RE.findall(value))


def _balanced(text: str, start: int) -> tuple[Optional[str], int]:
    """The content of the ``{...}`` group opening at ``start`` (None if not a group)."""
    if start >= len(text) or text[start] != "{":
        return None, start
    depth = 0
    for i in range(start, min(len(text), start + 20000)):
        ch = text[i]
        if ch == "\\":
            continue
        if ch == "{" and (i == 0 or text[i - 1] != "\\"):
            depth += 1
        elif ch == "}" and text[i - 1] != "\\":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i], i + 1
    return None, start


def _command_args(tex: str, name: str, nargs: int = 1) -> list[list[str]]:
    """All uses of ``\\name[opt]{a}{b}...`` -> [[a, b, ...]] (optional args skipped)."""
    out = []
    for m in re.finditer(r"\\" + name + r"\*?(?![A-Za-z])", tex):
        i = m.end()
        while i < len(tex) and tex[i] in " \t\n":
            i += 1
        while i < len(tex) and tex[i] == "[":
            j = tex.find("]", i)
            if j < 0:
                break
            i = j + 1
            while i < len(tex) and tex[i] in " \t\n":
                i += 1
        args = []
        for _ in range(nargs):
            while i < len(tex) and tex[i] in " \t\n":
                i += 1
            arg, i2 = _balanced(tex, i)
            if arg is None:
                break
            args.append(arg)
            i = i2
        if len(args) == nargs:
            out.append(args)
    return out


def _tex_plain(s: str) -> str:
    s = re.sub(r"\\textrightarrow|\\rightarrow|\$\\to\$|\$\\rightarrow\$", PATH_SEP, s)
    s = re.sub(r"\\[A-Za-z]+\*?", " ", s)
    return re.sub(r"[{}]", "", s).strip()


def ccs_path(raw: str) -> str:
    """``Human-centered computing~Haptic devices`` -> ``Human-centered computing → Haptic devices``."""
    parts = [p.strip() for p in re.split(r"~|\u00a0|\s*\u2192\s*|\s*->\s*", raw) if p.strip()]
    return PATH_SEP.join(parts)


def strip_tex_comments(tex: str) -> str:
    return re.sub(r"(?<!\\)%[^\n]*", "", tex)


def classes_from_tex(tex: str) -> tuple[list[str], list[str]]:
    """(ACM, MSC) classes written in a TeX source."""
    tex = strip_tex_comments(tex)
    acm: list[str] = []
    msc: list[str] = []
    for (arg,) in _command_args(tex, "ccsdesc"):
        acm.append(ccs_path(_tex_plain(arg.replace("~", "\u00a0"))))
    for args in _command_args(tex, "category", 3):
        acm.extend(ACM_CODE_RE.findall(args[0]) or [_tex_plain(args[0])])
    for name in ("acmClassification", "acmclass", "ACMclass"):
        for (arg,) in _command_args(tex, name):
            acm.extend(ACM_CODE_RE.findall(arg))
    for name in ("subjclass", "subclass", "msc", "MSC", "mscclass", "amsclass"):
        for (arg,) in _command_args(tex, name):
            msc.extend(MSC_CODE_RE.findall(arg))
    # elsarticle: \begin{keyword} ... \MSC[2010] 00-01 \sep 99-00 \end{keyword}
    for m in re.finditer(r"\\MSC(?:\[[^\]]*\])?\s*([^\\\n]*(?:\\sep[^\\\n]*)*)", tex):
        msc.extend(MSC_CODE_RE.findall(m.group(1)))
    for (arg,) in _command_args(tex, "keywords"):
        a2, m2 = _labelled_lines(arg)
        acm.extend(a2)
        msc.extend(m2)
    a3, m3 = _labelled_lines(tex)
    return _dedupe(acm + a3), _dedupe(msc + m3)


def _labelled_lines(text: str) -> tuple[list[str], list[str]]:
    """Codes on lines that say what they are: "MSC 2020: 68T07", "ACM CCS: I.2.6"."""
    acm, msc = [], []
    for m in _MSC_LINE_RE.finditer(text):
        msc.extend(MSC_CODE_RE.findall(m.group("body")))
    for m in _ACM_LINE_RE.finditer(text):
        acm.extend(ACM_CODE_RE.findall(m.group("body")))
    return acm, msc


def classes_from_html(html: bytes) -> tuple[list[str], list[str]]:
    """(ACM, MSC) classes a LaTeXML page shows (acmart CCS notes, amsart classification)."""
    from lxml import etree

    if not html or b"ltx_" not in html:
        return [], []
    if html[:2] == b"\x1f\x8b":
        import zlib

        from sciga.transforms.common.decompress import InflatesTooFar, gunzip_at_most

        try:
            html = gunzip_at_most(html, MAX_CLASSIFIED_PAGE_BYTES)
        except (OSError, EOFError, zlib.error, InflatesTooFar):
            return [], []
    try:
        root = etree.fromstring(html, etree.HTMLParser(huge_tree=True, no_network=True))
    except (etree.ParserError, ValueError):
        return [], []
    if root is None:
        return [], []
    acm, msc = [], []
    for el in root.iter("span", "div", "p"):
        cls = (el.get("class") or "").split()
        if "ltx_role_ccs" in cls:
            content = None
            for sub in el.iter("span"):
                if "ltx_note_content" in (sub.get("class") or "").split():
                    content = sub
                    break
            if content is None:
                continue
            parts = []
            for node in content.xpath("./text()|./*"):
                if isinstance(node, str):
                    parts.append(node)
                elif "ltx_note_type" not in (node.get("class") or "") and node.tag != "sup":
                    parts.append("".join(node.itertext()))
            text = "".join(parts).strip()
            if text:
                acm.append(ccs_path(text))
        elif "ltx_classification" in cls or "ltx_keywords" in cls:
            text = " ".join(el.itertext())
            title = " ".join(t for t in el.xpath(".//*[contains(@class,'ltx_title')]//text()"))
            if "ltx_classification" in cls and re.search(r"Mathematics|MSC|AMS|Subject", title + text, re.I):
                msc.extend(MSC_CODE_RE.findall(text))
            elif "ltx_classification" in cls and re.search(r"ACM|CCS|Computing", title + text, re.I):
                acm.extend(ACM_CODE_RE.findall(text))
            else:
                a2, m2 = _labelled_lines(text)
                acm.extend(a2)
                msc.extend(m2)
    return _dedupe(acm), _dedupe(msc)


def merge_classes(*lists: Iterable[str]) -> list[str]:
    out: list[str] = []
    for lst in lists:
        out.extend(lst or [])
    return _dedupe(out)
