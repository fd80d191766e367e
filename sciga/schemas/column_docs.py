"""What every column of the published configs means, kept beside the Arrow schemas it describes.

The data reference of the docs site (docs/reference/data.md) is generated from ``SCHEMAS``
(schemas/arrow.py) and these descriptions when the site is built, so a column's name and
Arrow type always come from the schema itself. tests/project/test_docs.py checks that every column,
nested fields included, has a description here and that no description names a column the
schemas do not have: a column added to schemas/arrow.py without a sentence here fails the
tests, and so does a sentence left behind for a column that was removed.

Nested fields are named by their path (``sections.paragraphs.text``: a field of the structs
inside the list ``sections.paragraphs``). The struct types used in several places
(``REF_SPAN``, ``IMAGE``) are described once, in ``SHARED_FIELDS``, and every column of such
a type points there instead of repeating them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Optional

import pyarrow as pa

from sciga.schemas.arrow import IMAGE, REF_SPAN

# Struct types that occur in several columns: their fields are described once.
SHARED_STRUCTS: dict[str, pa.DataType] = {"ref_span": REF_SPAN, "image": IMAGE}

# What one row of each config is ("one row per ...").
CONFIG_ROWS = {
    "papers": "paper, nested like SciGA's Listing 1 (sections, figures, tables, graphical abstract)",
    "figures": "figure and one per subfigure, with the image itself",
    "mentions": "inline reference to a figure or subfigure",
    "dead_letter": "input that gave no paper, and per part of a kept paper that failed",
}

_TAGS = "text with SciGA's tokens (`<MATH> alttext </MATH>`, `<NOTE> footnote </NOTE>`, `<TAG> Figure 2: </TAG>`)"

SHARED_FIELDS: dict[str, dict[str, str]] = {
    "ref_span": {
        "": "S2ORC-style span of a figure reference inside a text; offsets are characters of that text",
        "start": "first character of the span",
        "end": "character after the span",
        "text": 'the span\'s text as a reader sees it ("Figure 3b")',
        "ref_id": "our id of the figure, subfigure or table it names (`2401.13641_F3`, `2401.13641_F3.2`)",
        "resolution": "how the target was found: `anchor` (the `a.ltx_ref` href), `label` (a `LABEL:fig:...` "
        'leftover through the TeX label map), `text` (a typed "Figure 3b" by printed number) '
        'or `range` (a figure inside a range such as "Figures 4-6")',
        "sentence_start": "first character of the sentence holding the span (figure references only)",
        "sentence_end": "character after that sentence",
        "panels": 'panel names the text gives for a figure without panel elements ("Figures 3b and c" -> '
        '`["b", "c"]`); `[]` otherwise',
    },
    "image": {
        "": "one graphic of a figure or subfigure, as the page shows it",
        "path": "file path normalized relative to the paper's asset root (`assets/x1.png`, `figs/a b.png`); "
        "null for inline SVG and missing graphics",
        "url": "absolute URL of the image when the page's location is known",
        "kind": "`raster`, `svg`, `inline_svg` (drawn inside the page, no file), `missing` (LaTeXML could not "
        "find the graphic) or `unrendered` (LaTeXML left raw TeX)",
        "width": "display width written in the HTML (not the decoded size)",
        "height": "display height written in the HTML",
        "html_id": "the element id in the page",
        "source": "`html`, or `tex` when the image was recovered from the e-print",
    },
}

COLUMNS: dict[str, dict[str, str]] = {
    "papers": {
        "id": "the paper's id: its arXiv id (`2401.13641`, `astro-ph/0601001`), or the file stem for a page that "
        "names no arXiv paper (then `provenance.id_source` is `stem`)",
        "version": "arXiv version of the page (`v2`), when known",
        "title": "title, " + _TAGS,
        "authors": "authors in order",
        "authors.name": "author name (TeX accents turned into Unicode)",
        "authors.affiliations": "the author's affiliations, when the source gives them",
        "published": "date of the first version (ISO 8601, UTC)",
        "updated": "date of the version built",
        "subjects": "subject classes",
        "subjects.arxiv": "arXiv categories, primary first (`cs.CV`, `cs.LG`)",
        "subjects.acm": "ACM Computing Classification codes or concept paths (from the metadata, the page and the TeX)",
        "subjects.msc": "Mathematics Subject Classification codes",
        "primary_category": "the primary arXiv category",
        "comment": 'the authors\' arXiv comment ("Accepted to CVPR 2025 (main conference)")',
        "journal_ref": "arXiv journal reference",
        "conference": "the venue parsed from the comment",
        "conference.venue": "conference name (`CVPR`)",
        "conference.year": "conference year",
        "conference.track": "`main` or `workshop`",
        "dois": "DOIs of the paper",
        "license": "licence URL from the arXiv metadata (or `--assume-licence` for a page without one)",
        "withheld": "null, or the licence (`unknown`: none) for which the build's licence policy "
        "(`--licences`) withheld the paper: only its metadata is written, no text, figures or mentions",
        "abstract": "abstract, " + _TAGS,
        "sections": "the section tree, flattened in document order",
        "sections.id": "section id derived from LaTeXML's (`2401.13641_S2.1` from `S2.SS1`)",
        "sections.parent_id": "id of the enclosing section; null at the top level",
        "sections.level": "depth in the tree (1 = section, 2 = subsection, ...)",
        "sections.number": "printed number (`2.1`), when there is one",
        "sections.title": "title as SciGA writes it: `<TAG> 2.1 </TAG> Method`",
        "sections.body": "the paragraphs joined by a blank line, " + _TAGS,
        "sections.paragraphs": "the section's own paragraphs",
        "sections.paragraphs.text": "paragraph text, " + _TAGS,
        "sections.paragraphs.html_id": "the paragraph's element id in the page",
        "sections.paragraphs.ref_spans": "figure and table references inside the paragraph",
        "sections.figure_ids": "ids of the figures placed in this section",
        "sections.html_id": "the section's element id in the page",
        "sections.title_ref_spans": "figure references inside the section title",
        "figures": "every figure of the paper in order of appearance (tables and algorithm floats are never figures)",
        "figures.id": "figure id in order of appearance (`2401.13641_F3`); the printed number is `number`",
        "figures.html_id": "the figure's element id in the page",
        "figures.index": "1-based order of appearance among the figures",
        "figures.number": "printed number (`3`, `3.2`, `S1`); null when the figure has no numbered caption",
        "figures.label": "printed tag without tokens (`Figure 3:`)",
        "figures.caption": "caption as SciGA writes it: `<TAG> Figure 3: </TAG> Caption text`",
        "figures.images": "every graphic of the figure, its subfigures' included",
        "figures.subfigures": "the figure's panels",
        "figures.subfigures.id": "subfigure id (`2401.13641_F3.2`)",
        "figures.subfigures.html_id": "the panel's element id in the page",
        "figures.subfigures.label": "printed panel label (`(a)`)",
        "figures.subfigures.caption": "subcaption (`<TAG> (a) </TAG> Input image`); empty when the panel has none",
        "figures.subfigures.images": "the panel's graphics",
        "figures.subfigures.caption_source": "`html`, `split_parent` (split from the parent caption by the linking "
        "stage) or `none`",
        "figures.subfigures.caption_ref_spans": "other figures named in the subcaption",
        "figures.section_id": "the section the figure is placed in",
        "figures.is_teaser": "the figure is a teaser (`ltx_teaserfigure`, `S0.F*`, or placed before the first section)",
        "figures.caption_ref_spans": "other figures named in the caption",
        "tables": "tables of the paper (captions only)",
        "tables.id": "table id (`2401.13641_T1`)",
        "tables.html_id": "the table's element id in the page",
        "tables.index": "1-based order of appearance among the tables",
        "tables.number": "printed number",
        "tables.caption": "caption, " + _TAGS,
        "tables.section_id": "the section the table is placed in",
        "tables.caption_ref_spans": "figures named in the table caption",
        "teaser": "ids of the teaser figures",
        "graphical_abstract": "the paper's graphical abstract (from `--ga-manifest`), or its de-facto GA",
        "graphical_abstract.id": "`<paper>_GA` (`2401.13641_GA`)",
        "graphical_abstract.type": "`Original`, `Reused` or `Modified` (typed against the paper's figures); null "
        "for a de-facto GA",
        "graphical_abstract.paths": "where the GA image came from",
        "graphical_abstract.components": "the figure ids the GA is made of (Reused / Modified), or the figure standing "
        "in for a de-facto GA",
        "graphical_abstract.caption": "caption given in the manifest",
        "graphical_abstract.de_facto": "true when no manifest GA exists and a figure stands in for it (SciGA's I_GA)",
        "graphical_abstract.source": "where it came from: the manifest's `source`, or for a de-facto GA `teaser` or "
        "`first_intro_reference`",
        "graphical_abstract.score": "match evidence behind the type (NCC or embedding cosine)",
        "graphical_abstract.error": "why a manifest GA has no type (fetch or decode failure)",
        "provenance": "where the record came from and what made it",
        "provenance.source": "`ar5iv`, `arxiv_html`, `local`, `sample`, `ar5iv_dump`, ...",
        "provenance.url": "URL of the page, when known",
        "provenance.input_uri": "the input file the paper was built from, relative to the `--input` folder (or bucket "
        "path) it was found under; never the build machine's absolute path",
        "provenance.content_sha256": "SHA-256 of the page's bytes",
        "provenance.generator": "`LaTeXML` or `LaTeXML oxide`",
        "provenance.generator_version": "the generator's version (`0.8.7`)",
        "provenance.builder_version": "sciga-builder version that built the row",
        "provenance.schema_version": "data schema version of the row",
        "provenance.decode_errors": "bytes replaced while decoding the page (a few are tolerated)",
        "provenance.id_source": "where the id came from: `metadata`, `page`, `filename`, or `stem` (not an arXiv id)",
        "provenance.latexml_errors": "`ltx_ERROR` elements in the page's article, outside formulas: macros or "
        "environments LaTeXML could not convert (a page that holds nothing else is the dead letter "
        "`failed_conversion`)",
    },
    "figures": {
        "id": "figure id (`2401.13641_F3`), subfigure id (`2401.13641_F3.2`), or `<paper>_GA` for a manifest GA",
        "paper_id": "the paper's id",
        "parent_id": "for a subfigure, its figure's id; null for a figure",
        "kind": "`figure`, `subfigure` or `graphical_abstract`",
        "index": "1-based order of the figure in the paper (a subfigure has its figure's)",
        "number": "printed figure number",
        "label": "printed tag: `Figure 3:` for a figure, `(a)` for a subfigure",
        "caption": "the figure's caption (the parent caption for a subfigure), " + _TAGS,
        "subcaption": "the subfigure's own caption; null for figures",
        "subcaption_source": "`html`, `split_parent` or `none` (subfigures only)",
        "image": "the image in the `datasets` Image convention (`struct<bytes, path>`): `datasets` decodes it to "
        "PIL; null when the build has no bytes for it (`image_status` says why; a figure made of panels "
        "has none of its own: its panels are rows)",
        "image.bytes": "the image file's bytes as found (PNG, JPEG, ...); for `image_status = rasterized_svg` "
        "a PNG drawn from the SVG",
        "image.path": "the path the page gave, relative to the paper's asset root (`figs/a.png`); readers never open "
        "it: the bytes are there",
        "image_status": "why the row has its image or not: one value of the closed set in "
        "[Image status](#image-status) (never null)",
        "image_paths": "every image path of the figure or subfigure",
        "image_kind": "kind of the row's image (see `image.kind` of the papers config)",
        "image_source": "`html`, `tex` (recovered from the e-print) or `ga_manifest`",
        "image_url": "absolute URL of the image when the page's location is known",
        "image_uri": "where the image file was read from, or where it was looked for when it was not found: a "
        "path relative to the input folder it lies under (a file outside every input folder, such as a GA "
        "image `--ga-allow-outside` let the build read: its base name alone); null for a figure that names "
        "no file. For "
        "`rasterized_svg` the SVG the PNG was drawn from: the `.svg` file, or `<page>#<svg element id>` for "
        "a drawing inline in the page",
        "width": "decoded width in pixels (null until the image decoded)",
        "height": "decoded height in pixels",
        "phash": "64-bit DCT perceptual hash, 16 hex digits",
        "image_error": "the details of a missing image: a short kind and a sentence (`decompression_bomb: ...`, "
        "`corrupt: ...`, `svg_only: ...`, `pdf_only: ...`, `outside_input: ...`, `not_a_file: ...`, "
        "`unreadable: ...`, `image file figs/a.png not found next to the page`)",
        "section_id": "the section the figure is placed in",
        "html_id": "the element id in the page",
        "is_teaser": "the figure is a teaser",
        "ga_role": "`ga` (the GA image itself), `ga_reused`, `ga_component`, `de_facto_ga`, or null",
        "medical": "the MedICaT medical filter's result",
        "medical.keyword_hits": "medical keywords found in the caption, the subcaption and the sentences that "
        "reference the figure",
        "medical.classifier_run": "the DocFigure classifier ran on the image",
        "medical.topk_labels": "the classifier's top K labels",
        "medical.topk_scores": "their scores",
        "medical.is_medical": '"Medical" among the top K; false without keyword hits; null when hits exist but the '
        "classifier did not run",
    },
    "mentions": {
        "paper_id": "the paper's id",
        "figure_id": "the figure it names (the subfigure when the text names one)",
        "section_id": "the section holding the text (for a caption, the float's section)",
        "paragraph_index": "0-based paragraph index inside the section; null for captions and titles",
        "char_start": "first character of the span in its text",
        "char_end": "character after the span",
        "surface": 'the span\'s text ("Figure 3b")',
        "sentence": "the sentence holding the mention (scispaCy), at most 2,000 characters: a mention with no "
        "sentence boundary for longer gets the 2,000 characters around it (`manifest.json` counts them "
        "in `stats.sentences_cut`)",
        "sentence_start": "first character of that sentence in the text",
        "resolution": "`anchor`, `label`, `text` or `range` (see `ref_span.resolution`)",
        "context": "which text the offsets index: a body `paragraph`, a `caption` of another float, or a section `title`",
        "context_id": "for a caption: the figure, subfigure or table whose caption it is",
        "panels": 'panel names the text gives for a figure without panel elements ("Figures 3b and c" -> '
        '`["b", "c"]`); else `[]`',
    },
    "dead_letter": {
        "paper_id": "the paper's id, when it is known",
        "stage": "the stage that failed (see Troubleshooting)",
        "error_type": "short machine-readable reason (see Troubleshooting)",
        "message": "one sentence naming the input, what was wrong and what to do",
        "input_uri": "the input that failed, relative to the `--input` folder it was found under",
        "scope": "`input`: the input gave no paper (inputs = papers + these); `part`: one part of a kept paper "
        "failed (e.g. an unsafe e-print: the paper is built without TeX recovery)",
    },
}


@dataclass(frozen=True)
class ColumnPath:
    """One column or nested field of a config's schema."""

    path: str  # "sections.paragraphs.text"
    type: pa.DataType
    depth: int  # 0 for a top-level column
    shared: Optional[str] = None  # the SHARED_STRUCTS name when the field's items are such a struct


def _items(t: pa.DataType) -> pa.DataType:
    while pa.types.is_list(t):
        t = t.value_type
    return t


def shared_name(t: pa.DataType) -> Optional[str]:
    items = _items(t)
    return next((name for name, st in SHARED_STRUCTS.items() if items == st), None)


def column_paths(schema: pa.Schema) -> Iterator[ColumnPath]:
    """Every column and nested field of ``schema`` in schema order; the fields of shared
    structs are not walked (they are described in ``SHARED_FIELDS``)."""

    def walk(prefix: str, t: pa.DataType, depth: int) -> Iterator[ColumnPath]:
        shared = shared_name(t)
        yield ColumnPath(prefix, t, depth, shared)
        items = _items(t)
        if shared is None and pa.types.is_struct(items):
            for f in items:
                yield from walk(f"{prefix}.{f.name}", f.type, depth + 1)

    for f in schema:
        yield from walk(f.name, f.type, 0)
