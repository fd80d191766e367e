"""A tiny synthetic SciGA-style build for the training tests, made from the sample
corpus's real figure images (samples/html/*/figs/*.png) and written with the project's
own record types, row converters, shard writer and manifest.

Every paper has a graphical abstract that can be learned: its GA is a teaser-derived
image (one of the two sample teasers, flipped or cropped) whose caption shares words with
the abstract; the other figures are the sample's plots and diagrams. The GA is announced
in all the ways the GT resolver knows (author GA + components, teaser, figure referenced
first in the Introduction) and one paper has a subfigure GA.
"""

from __future__ import annotations

import io
import os
import random
from pathlib import Path

from PIL import Image as PILImage

from sciga.schemas.arrow import TO_ROW
from sciga.schemas.records import (
    Figure,
    GraphicalAbstract,
    Image,
    Paper,
    Paragraph,
    Provenance,
    RefSpan,
    Section,
    Subfigure,
    Subjects,
)
from sciga.training.splits import split_of
from sciga.transforms.vision.figure_rows import figure_rows
from sciga.transforms.write import manifest as mf
from sciga.transforms.write.shard_names import empty_table_bytes, shard_name, table_bytes

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_FIGS = sorted((ROOT / "samples" / "html").glob("*/figs/*.png"))

TOPICS = [
    ("cs.CV", "video segmentation keyframe routing tokens", "video keyframe router segmentation overview"),
    ("cs.HC", "haptic sculpting stylus force feedback", "haptic stylus sculpting force overview"),
    ("cs.CV", "image restoration diffusion denoising", "diffusion denoising restoration pipeline overview"),
    ("cs.HC", "user study interaction technique", "interaction technique user study overview"),
]
OTHER_CAPTIONS = [
    "Accuracy against compute on the benchmark.",
    "Mean task completion time per technique.",
    "Ablation of the training objective.",
    "Qualitative results on held-out scenes.",
]


def _png(im: PILImage.Image) -> bytes:
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return buf.getvalue()


def _images():
    teasers = [p for p in SAMPLE_FIGS if p.name == "teaser.png"]
    others = [p for p in SAMPLE_FIGS if p.name != "teaser.png"]
    assert teasers and others, "the sample corpus figures (samples/html/*/figs) are missing"
    return [PILImage.open(p).convert("RGB") for p in teasers], [PILImage.open(p).convert("RGB") for p in others]


def paper_ids(n_per_split: dict) -> list[str]:
    """Deterministic ids with at least the asked number of papers in each split."""
    want = dict(n_per_split)
    got = {k: 0 for k in want}
    out, i = [], 0
    while any(got[k] < want[k] for k in want):
        pid = f"2601.{10000 + i:05d}"
        s = split_of(pid)
        if got[s] < want[s]:
            got[s] += 1
            out.append(pid)
        i += 1
    return sorted(out)


def make_papers(ids: list[str], seed: int = 0) -> tuple[list[Paper], dict[str, bytes]]:
    """Paper records + {image path: PNG bytes}."""
    rng = random.Random(seed)
    teasers, others = _images()
    blobs: dict[str, bytes] = {}
    papers = []
    for n, pid in enumerate(ids):
        field, abstract_words, ga_words = TOPICS[n % len(TOPICS)]
        ga_im = teasers[n % len(teasers)]
        if n % 3 == 1:
            ga_im = ga_im.transpose(PILImage.FLIP_LEFT_RIGHT)
        elif n % 3 == 2:
            w, h = ga_im.size
            ga_im = ga_im.crop((w // 10, 0, w, h))
        ga_path = f"{pid}/ga.png"
        blobs[ga_path] = _png(ga_im.resize((160, 48)))
        figs: list[Figure] = []
        kinds = ["ga", "other", "other", "other"]
        rng.shuffle(kinds)  # the GA is not always Figure 1
        if n == 0:
            kinds = ["other", "ga", "other", "other"]
        other_i = 0
        for idx, kind in enumerate(kinds, start=1):
            fid = f"{pid}_F{idx}"
            if kind == "ga":
                cap = f"<TAG> Figure {idx}: </TAG> {ga_words.capitalize()} of our method."
                if n == 5:  # a GA made of two panels: subfigure max-pooling
                    subs = [
                        Subfigure(
                            id=f"{fid}.{k}",
                            html_id=None,
                            label=f"({'ab'[k - 1]})",
                            caption=f"<TAG> ({'ab'[k - 1]}) </TAG> {ga_words} panel {k}",
                            images=[Image(path=ga_path if k == 1 else f"{pid}/ga_b.png")],
                        )
                        for k in (1, 2)
                    ]
                    blobs[f"{pid}/ga_b.png"] = blobs[ga_path]
                    figs.append(
                        Figure(
                            id=fid,
                            html_id=f"S1.F{idx}",
                            index=idx,
                            number=str(idx),
                            label=f"Figure {idx}:",
                            caption=cap,
                            images=[Image(path=ga_path), Image(path=f"{pid}/ga_b.png")],
                            subfigures=subs,
                            section_id=f"{pid}_S1",
                        )
                    )
                    continue
                path = ga_path
            else:
                src = others[(n + other_i) % len(others)]
                path = f"{pid}/fig{idx}.png"
                blobs[path] = _png(src.resize((96, 64)))
                cap = f"<TAG> Figure {idx}: </TAG> {OTHER_CAPTIONS[(n + other_i) % len(OTHER_CAPTIONS)]}"
                other_i += 1
            figs.append(
                Figure(
                    id=fid,
                    html_id=f"S1.F{idx}",
                    index=idx,
                    number=str(idx),
                    label=f"Figure {idx}:",
                    caption=cap,
                    images=[Image(path=path)],
                    section_id=f"{pid}_S1",
                    is_teaser=(kind == "ga" and n % 4 == 1),
                )
            )
        ga_fig = next(f for f, k in zip(figs, kinds) if k == "ga")
        paper = Paper(
            id=pid,
            title=f"Paper {n} on {abstract_words}",
            abstract=f"We study {abstract_words}. Our {ga_words} method improves results. "
            f"Experiments on public benchmarks show gains.",
            subjects=Subjects(arxiv=[field]),
            primary_category=field,
            figures=figs,
            provenance=Provenance(source="synthetic-test"),
        )
        intro = Paragraph(
            text=f"As shown in Figure {ga_fig.number}, we route tokens.",
            ref_spans=[RefSpan(start=12, end=20, text=f"Figure {ga_fig.number}", ref_id=ga_fig.id)],
        )
        paper.sections = [
            Section(
                id=f"{pid}_S1",
                parent_id=None,
                level=1,
                number="1",
                title="<TAG> 1 </TAG> Introduction",
                body=intro.text,
                paragraphs=[intro],
            )
        ]
        # Announce the GA in each way the resolver knows: author GA, teaser, intro reference.
        if n % 4 == 0:
            paper.graphical_abstract = GraphicalAbstract(
                id=f"{pid}_GA", type="Reused", components=[ga_fig.id], de_facto=False
            )
        elif n % 4 == 1:
            paper.teaser = [ga_fig.id]
        # n % 4 in (2, 3): the first figure referenced in the Introduction
        papers.append(paper)
    return papers, blobs


def write_build(out_dir: os.PathLike, papers: list[Paper], blobs: dict[str, bytes], ga_images: bool = True) -> str:
    """Parquet shards + manifest in the layout `sciga build` writes."""
    out = Path(out_dir)
    rows = {"papers": [], "figures": [], "mentions": [], "dead_letter": []}
    for p in papers:
        rows["papers"].append(TO_ROW["papers"](p))
        for fr in figure_rows(p):
            fr.image_bytes = blobs.get(fr.image_path) if fr.image_path else None
            rows["figures"].append(TO_ROW["figures"](fr))
        ga = p.graphical_abstract
        if ga_images and ga is not None and not ga.de_facto:
            # The author GA image itself: a figures row with the GA id.
            comp = next(f for f in p.figures if f.id == ga.components[0])
            path = comp.images[0].path
            rows["figures"].append(
                {
                    **TO_ROW["figures"](
                        figure_rows(
                            Paper(
                                id=p.id,
                                title="",
                                abstract="",
                                figures=[
                                    Figure(
                                        id=ga.id,
                                        html_id=None,
                                        index=0,
                                        number=None,
                                        label=None,
                                        caption="",
                                        images=[Image(path=path)],
                                    )
                                ],
                            )
                        )[0]
                    ),
                    "image": {"bytes": blobs[path], "path": path},
                    "ga_role": "graphical_abstract",
                    "kind": "figure",
                    "index": 0,
                }
            )
    for config, rs in rows.items():
        d = out / "data" / config
        d.mkdir(parents=True, exist_ok=True)
        data = table_bytes(config, rs) if rs else empty_table_bytes(config)
        (d / shard_name(0, 1)).write_bytes(data)
    counts, files = mf.count_build(str(out))
    counts.inputs = len(papers)
    mf.write_manifest(str(out), counts, files, inputs_hash="synthetic-" + str(len(papers)), options={})
    return str(out)


def tiny_build(out_dir: os.PathLike, n_per_split=None, seed: int = 0) -> str:
    ids = paper_ids(n_per_split or {"train": 16, "val": 2, "test": 4})
    papers, blobs = make_papers(ids, seed)
    return write_build(out_dir, papers, blobs)
