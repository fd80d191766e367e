"""Benchmark: linking quality against hand-checked facts, over every real page we have.

    python bench/linking_quality.py [--facts tests/linking_facts.json] [--report FILE.md]

Pages: the embedded sample (samples/html), the shared corpus (``$SCIGA_CORPUS``, else
``../shared/corpus``) and the test pages (tests/pages/html). The facts (one file, checked by
reading each page's HTML) give per page every figure mention (paragraph, surface, figure or
subfigure, panel names), the panels of every figure, the subcaption labels and the mentions
of other works' figures that must not be linked.

Printed, per page and in total:
- mention precision and recall of the linking stage (parse + ``link_paper``, as the build
  runs it, without the sentencizer) against the facts, a mention counting as right when its
  paragraph, surface, figure id and panels all match;
- the same for the baseline measured in the same run: the ``a.ltx_ref`` anchors alone (what
  an extractor that follows only hyperlinks gets), and the recall ratio linking / baseline;
- panel precision and recall: a panel counts as right when its figure, its place among
  the figure's panels and its label all match the facts (a row container taken for one
  panel, or a panel without the label printed for it, is wrong), and the figures whose
  panel count or subcaption labels differ from the facts;
- other works' figure mentions rejected (found / expected).

A report, not a gate: the exit status is 0 whenever the pages could be read.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout: the ``sciga`` package lives at the root

from sciga.transforms.link.link_paper import link_paper
from sciga.transforms.link.mentions import mention_rows
from sciga.transforms.parse import parse_latexml_html


def corpus_dir() -> Path:
    for cand in (os.environ.get("SCIGA_CORPUS"), ROOT.parent / "shared" / "corpus", Path("/work/shared/corpus")):
        if cand and Path(cand).is_dir():
            return Path(cand)
    return ROOT.parent / "shared" / "corpus"


def page_file(source: str) -> Path:
    where, rel = source.split(":", 1)
    return {"samples": ROOT / "samples" / "html", "corpus": corpus_dir(), "pages": ROOT / "tests" / "pages" / "html"}[
        where
    ] / rel


def _where(paper, row) -> str:
    if row.context == "paragraph":
        sec = next(s for s in paper.sections if s.id == row.section_id)
        return sec.paragraphs[row.paragraph_index].html_id or f"{sec.id}#p{row.paragraph_index}"
    rel = (row.context_id if row.context == "caption" else row.section_id)[len(paper.id) + 1 :]
    return f"{row.context}:{rel}"


def _key(paper, row) -> tuple:
    # getattr: the same facts also score a checkout from before mentions had panels
    return (
        _where(paper, row),
        row.surface,
        row.figure_id[len(paper.id) + 1 :],
        tuple(getattr(row, "panels", None) or ()),
    )


def score(found: Counter, truth: Counter) -> tuple[int, int, int]:
    tp = sum((found & truth).values())
    return tp, sum(found.values()) - tp, sum(truth.values()) - tp


def pr(tp: int, fp: int, fn: int) -> tuple[float, float]:
    p = tp / (tp + fp) if tp + fp else 1.0
    r = tp / (tp + fn) if tp + fn else 1.0
    return p, r


def panel_keys(counts: dict, labels: dict) -> Counter:
    """(figure, place, label) per panel; a figure without labels has None for each."""
    out: Counter = Counter()
    for fig, n in counts.items():
        labs = labels.get(fig) or []
        out.update((fig, k, labs[k - 1] if k <= len(labs) else None) for k in range(1, n + 1))
    return out


def evaluate_page(key: str, fact: dict) -> dict:
    path = page_file(fact["source"])
    paper = parse_latexml_html(path.read_bytes(), None, input_uri=str(path), fallback_id=key)
    # Baseline: the anchors the parser resolved from hrefs, before any linking (paragraph
    # or caption or title, figure id): what an extractor that follows hyperlinks gets.
    rel = len(paper.id) + 1
    base = Counter()
    for sec in paper.sections:
        for i, para in enumerate(sec.paragraphs):
            base.update((para.html_id or f"{sec.id}#p{i}", s.ref_id[rel:]) for s in para.ref_spans if "_F" in s.ref_id)
        base.update((f"title:{sec.id[rel:]}", s.ref_id[rel:]) for s in sec.title_ref_spans if "_F" in s.ref_id)
    for owner in [f for f in paper.figures] + [sf for f in paper.figures for sf in f.subfigures] + list(paper.tables):
        base.update(
            (f"caption:{owner.id[rel:]}", s.ref_id[rel:])
            for s in owner.caption_ref_spans
            if "_F" in s.ref_id and s.ref_id.split(".")[0] != owner.id.split(".")[0]
        )
    paper = link_paper(paper)
    found = Counter(_key(paper, r) for r in mention_rows(paper))
    truth = Counter(tuple(m[:3]) + (tuple(m[3]),) for m in fact["mentions"])
    target = lambda c: Counter((k[0], k[2]) for k in c.elements())
    subs = {f.id[len(paper.id) + 1 :]: len(f.subfigures) for f in paper.figures}
    labels = {
        f.id[len(paper.id) + 1 :]: [s.label for s in f.subfigures]
        for f in paper.figures
        if any(s.label for s in f.subfigures)
    }
    sub_wrong = sorted(k for k in set(subs) | set(fact["subfigures"]) if subs.get(k) != fact["subfigures"].get(k))
    label_wrong = sorted(
        k for k in set(labels) | set(fact["subcaption_labels"]) if labels.get(k) != fact["subcaption_labels"].get(k)
    )
    panels_found = panel_keys(subs, {f.id[len(paper.id) + 1 :]: [s.label for s in f.subfigures] for f in paper.figures})
    panels_truth = panel_keys(fact["subfigures"], fact["subcaption_labels"])
    return {
        "page": key,
        "link": score(found, truth),
        "link_target": score(target(found), target(truth)),
        "panel": score(panels_found, panels_truth),
        "anchors": score(base, target(truth)),
        "missed": sorted((truth - found).elements()),
        "extra": sorted((found - truth).elements()),
        "figures": len(subs),
        "panels": sum(subs.values()),
        "panels_expected": sum(fact["subfigures"].values()),
        "panel_count_wrong": sub_wrong,
        "label_wrong": label_wrong,
        "rejected": getattr(paper, "rejected_mentions", {}).get("other_work", 0),
        "rejected_expected": fact["rejected_other_work"],
    }


def render(results: list[dict]) -> str:
    head = (
        "| page | mentions (facts) | linking P | linking R | linking R (figure only) | anchors-only P (figure only) "
        "| anchors-only R (figure only) | panels (facts) | panel P | panel R | figures with wrong panels / labels "
        "| other works' rejected (facts) |"
    )
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    tot = {"link": [0, 0, 0], "link_target": [0, 0, 0], "anchors": [0, 0, 0], "panel": [0, 0, 0]}
    panels = panels_exp = rej = rej_exp = 0
    for r in results:
        for k in tot:
            tot[k] = [a + b for a, b in zip(tot[k], r[k])]
        lp, lr = pr(*r["link"])
        _, tr = pr(*r["link_target"])
        bp, br = pr(*r["anchors"])
        pp, prr = pr(*r["panel"])
        n = r["link"][0] + r["link"][2]
        wrong = ", ".join(r["panel_count_wrong"] + [f"{x} (labels)" for x in r["label_wrong"]]) or "-"
        lines.append(
            f"| {r['page']} | {n} | {lp:.3f} | {lr:.3f} | {tr:.3f} | {bp:.3f} | {br:.3f} "
            f"| {r['panels']} ({r['panels_expected']}) | {pp:.3f} | {prr:.3f} | {wrong} "
            f"| {r['rejected']} ({r['rejected_expected']}) |"
        )
        panels += r["panels"]
        panels_exp += r["panels_expected"]
        rej += r["rejected"]
        rej_exp += r["rejected_expected"]
    lp, lr = pr(*tot["link"])
    _, tr = pr(*tot["link_target"])
    bp, br = pr(*tot["anchors"])
    pp, prr = pr(*tot["panel"])
    n = tot["link"][0] + tot["link"][2]
    lines.append(
        f"| **all {len(results)} pages** | {n} | **{lp:.3f}** | **{lr:.3f}** | {tr:.3f} | {bp:.3f} | {br:.3f} "
        f"| {panels} ({panels_exp}) | **{pp:.3f}** | **{prr:.3f}** | | {rej} ({rej_exp}) |"
    )
    lines.append("")
    lines.append(
        f"Recall (paragraph + figure), linking / anchors only: {tr / br if br else float('inf'):.2f}x "
        f"({tot['link_target'][0]} vs {tot['anchors'][0]} of {n} hand-checked mentions). Linking P/R also "
        "require the surface a reader sees and the panel names; a panel is right when its figure, place and "
        "label match."
    )
    diffs = [(r["page"], "missed", m) for r in results for m in r["missed"]] + [
        (r["page"], "extra", m) for r in results for m in r["extra"]
    ]
    if diffs:
        lines.append("")
        lines.append("Differences from the facts (page, kind, (paragraph, surface, figure, panels)):")
        lines += [f"- {p} {kind}: {m}" for p, kind, m in diffs]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--facts", default=str(ROOT / "tests" / "linking_facts.json"))
    ap.add_argument("--report", help="also write the table to this Markdown file")
    args = ap.parse_args(argv)
    with open(args.facts, encoding="utf-8") as f:
        facts = {k: v for k, v in json.load(f).items() if not k.startswith("_")}
    results, skipped = [], []
    for key, fact in facts.items():
        if not page_file(fact["source"]).exists():
            skipped.append(key)
            continue
        results.append(evaluate_page(key, fact))
    text = render(results)
    if skipped:
        text += f"\nSkipped (page not found; is ../shared/corpus there?): {', '.join(skipped)}\n"
    print(text, end="")
    if args.report:
        Path(args.report).parent.mkdir(parents=True, exist_ok=True)
        Path(args.report).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
