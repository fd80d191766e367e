"""Extraction benchmark: how close is the parser to the cost of parsing itself?

Runs, side by side in one process on the same pages (real corpus pages + the sample,
replicated to a few hundred documents):
  floor   lxml HTML parse only (no extraction): the least any extractor can cost;
  sciga   parse_latexml_html: the full record (sections, tokens, figures, ref spans);
  bs4     a plain BeautifulSoup extractor of the same fields, as most scripts write it.
Also checks that peak memory stays flat in the number of papers (records are produced one
at a time and dropped, as in the pipeline).

    python bench/extract.py [--docs 300] [--bs4-docs 60]
"""

from __future__ import annotations

import argparse
import gc
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lxml import etree

from sciga.transforms.parse import parse_latexml_html


def corpus_pages() -> list[tuple[str, bytes]]:
    from paths import corpus_dir

    corpus = corpus_dir()
    files = (sorted(corpus.glob("html/*.html")) + sorted(corpus.glob("latexml/*.html"))) if corpus else []
    files += sorted((ROOT / "samples" / "html").glob("*/*.html"))
    return [(f.stem, f.read_bytes()) for f in files]


def floor(data: bytes):
    return etree.fromstring(data, etree.HTMLParser(huge_tree=True, remove_comments=True))


def sciga(data: bytes, stem: str):
    return parse_latexml_html(data, input_uri=stem, fallback_id=stem, fallback_id_source="stem")


def bs4_extract(data: bytes, builder: str = "lxml"):
    """The fields sciga extracts, written the usual BeautifulSoup way (``html.parser`` is
    BeautifulSoup's default builder; ``lxml`` its fastest)."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(data, builder)
    for m in soup.find_all("math"):
        m.replace_with(f" <MATH> {m.get('alttext', '')} </MATH> ")
    for n in soup.select("span.ltx_note.ltx_role_footnote"):
        content = n.select_one(".ltx_note_content")
        for mark in (content or n).select(".ltx_note_mark, .ltx_tag_note"):
            mark.decompose()
        n.replace_with(f" <NOTE> {(content or n).get_text(' ', strip=True)} </NOTE> ")
    for t in soup.select(".ltx_tag"):
        t.replace_with(f" <TAG> {t.get_text(' ', strip=True)} </TAG> ")
    title = soup.select_one(".ltx_title_document")
    out = {"title": title.get_text(" ", strip=True) if title else "", "authors": [], "sections": [], "figures": []}
    out["authors"] = [a.get_text(" ", strip=True) for a in soup.select(".ltx_creator.ltx_role_author .ltx_personname")]
    ab = soup.select_one(".ltx_abstract")
    out["abstract"] = ab.get_text(" ", strip=True) if ab else ""
    for fig in soup.select("figure.ltx_figure"):
        cap = fig.find("figcaption")
        out["figures"].append(
            {
                "id": fig.get("id"),
                "caption": " ".join(cap.get_text(" ").split()) if cap else "",
                "images": [i.get("src") for i in fig.find_all("img")],
            }
        )
    for sec in soup.select(
        "section.ltx_section, section.ltx_subsection, section.ltx_subsubsection, section.ltx_paragraph"
    ):
        h = sec.find(["h2", "h3", "h4", "h5", "h6"])
        paras = []
        for p in sec.find_all("div", class_="ltx_para", recursive=False):
            for f in p.find_all("figure"):
                f.extract()
            paras.append(" ".join(p.get_text(" ").split()))
        out["sections"].append(
            {
                "id": sec.get("id"),
                "title": h.get_text(" ", strip=True) if h else "",
                "paragraphs": paras,
                "refs": [a.get("href") for a in sec.find_all("a", class_="ltx_ref")],
            }
        )
    return out


def timed(fn, docs, repeats: int = 3) -> float:
    """Best of ``repeats`` passes: the machine may be shared, the minimum is the cost."""
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        t = time.perf_counter()
        for stem, data in docs:
            fn(stem, data)
        best = min(best, time.perf_counter() - t)
    return best


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=300)
    ap.add_argument("--bs4-docs", type=int, default=60, help="bs4 is slow: time it on fewer docs, report per doc")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the side-by-side subset comparison")
    args = ap.parse_args()
    pages = corpus_pages()
    docs = [pages[i % len(pages)] for i in range(args.docs)]
    mb = sum(len(d) for _, d in docs) / 1e6
    print(f"{len(pages)} distinct pages replicated to {len(docs)} documents ({mb:.1f} MB)")

    timed(lambda s, d: sciga(d, s), docs[: len(pages)], 1)  # warm-up (imports, caches)
    t_floor = timed(lambda s, d: floor(d), docs)
    t_sciga = timed(lambda s, d: sciga(d, s), docs)
    # BeautifulSoup is slow: compare it on a subset, each round timing all extractors
    # back to back on the same documents, keeping each one's best round.
    bs_docs = docs[: args.bs4_docs]
    best = {"floor": float("inf"), "sciga": float("inf"), "bs4_lxml": float("inf"), "bs4_default": float("inf")}
    for _ in range(args.rounds):
        best["floor"] = min(best["floor"], timed(lambda s, d: floor(d), bs_docs, 1))
        best["sciga"] = min(best["sciga"], timed(lambda s, d: sciga(d, s), bs_docs, 1))
        best["bs4_lxml"] = min(best["bs4_lxml"], timed(lambda s, d: bs4_extract(d), bs_docs, 1))
        best["bs4_default"] = min(best["bs4_default"], timed(lambda s, d: bs4_extract(d, "html.parser"), bs_docs, 1))
    t_floor_part, t_sciga_part, t_bs4_part, t_bs4_default = (
        best["floor"],
        best["sciga"],
        best["bs4_lxml"],
        best["bs4_default"],
    )

    # Memory: peak RSS after N and after 2N more documents; records are not kept.
    rss0 = peak_rss_mb()
    timed(lambda s, d: sciga(d, s), docs * 2, 1)
    rss1 = peak_rss_mb()

    per = lambda t, n: 1000 * t / n
    print()
    print("| extractor | ms / doc | docs / s | vs lxml parse floor | sciga speed-up |")
    print("|---|---:|---:|---:|---:|")
    print(f"| lxml parse only (floor) | {per(t_floor, len(docs)):.1f} | {len(docs) / t_floor:.0f} | 1.00x | |")
    print(
        f"| sciga parse_latexml_html | {per(t_sciga, len(docs)):.1f} | {len(docs) / t_sciga:.0f} | {t_sciga / t_floor:.2f}x | 1.0x |"
    )
    print(
        f"| BeautifulSoup (lxml builder), {len(bs_docs)} docs | {per(t_bs4_part, len(bs_docs)):.1f} | "
        f"{len(bs_docs) / t_bs4_part:.1f} | {t_bs4_part / t_floor_part:.2f}x | "
        f"{t_bs4_part / t_sciga_part:.1f}x slower than sciga |"
    )
    print(
        f"| BeautifulSoup (default html.parser), {len(bs_docs)} docs | {per(t_bs4_default, len(bs_docs)):.1f} | "
        f"{len(bs_docs) / t_bs4_default:.1f} | {t_bs4_default / t_floor_part:.2f}x | "
        f"{t_bs4_default / t_sciga_part:.1f}x slower than sciga |"
    )
    print()
    print(
        f"peak RSS after {len(docs)} docs: {rss0:.0f} MB; after {2 * len(docs)} more: {rss1:.0f} MB "
        f"(growth {rss1 - rss0:+.0f} MB)"
    )


if __name__ == "__main__":
    main()
