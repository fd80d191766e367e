"""Record types that flow through the pipeline (one shape, from parser to writer).

They are plain dataclasses: picklable for Beam, cheap to build in the parser, and turned
into Arrow rows only at the writer (``schemas.arrow``). Field names follow SciGA's Listing 1
where it has one, lower-cased.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


@dataclass
class Author:
    name: str
    affiliations: list[str] = field(default_factory=list)


@dataclass
class Subjects:
    arxiv: list[str] = field(default_factory=list)
    acm: list[str] = field(default_factory=list)
    msc: list[str] = field(default_factory=list)


@dataclass
class Conference:
    venue: Optional[str] = None
    year: Optional[int] = None
    track: Optional[str] = None  # "main" | "workshop"


@dataclass
class RefSpan:
    """S2ORC-style span of a figure reference inside a paragraph's text."""

    start: int
    end: int
    text: str
    ref_id: str  # our figure, subfigure or table id
    # Added by the linking stage; S2ORC readers can ignore them.
    resolution: Optional[str] = None  # "anchor" (a.ltx_ref) | "label" (LABEL:... + TeX map) | "text" | "range"
    sentence_start: Optional[int] = None  # the sentence holding the span, same offsets
    sentence_end: Optional[int] = None  # (set for figure references only)
    # Panels the text names that no subfigure element stands for ("Figures 3b and c" of a
    # figure without panel elements: ref_id is the figure, panels ["b", "c"]); [] otherwise.
    panels: list[str] = field(default_factory=list)


@dataclass
class Paragraph:
    text: str
    html_id: Optional[str] = None
    ref_spans: list[RefSpan] = field(default_factory=list)
    # Transient (not published): (start, end) of every citation element (LaTeXML
    # ``cite.ltx_cite``, resolved or not) in ``text``. The linking stage reads them: a
    # figure mention inside a citation, or followed by "of"/"in" and one, names another work.
    citation_spans: list[tuple[int, int]] = field(default_factory=list)


@dataclass
class Section:
    id: str
    parent_id: Optional[str]
    level: int
    number: Optional[str]
    title: str  # "<TAG> 2.1 </TAG> Method" as SciGA writes it
    body: str  # paragraphs joined by a blank line
    paragraphs: list[Paragraph] = field(default_factory=list)
    figure_ids: list[str] = field(default_factory=list)
    html_id: Optional[str] = None
    title_ref_spans: list[RefSpan] = field(default_factory=list)  # references inside the title


# Image kinds: a file we can fetch ("raster" or "svg"), SVG drawn inline in the page
# ("inline_svg", no file), a placeholder for a graphic LaTeXML could not find ("missing"),
# or a picture LaTeXML failed to render (raw TeX left in the page: "unrendered").
IMAGE_KINDS = ("raster", "svg", "inline_svg", "missing", "unrendered")


@dataclass
class Image:
    path: Optional[str]  # normalized path relative to the paper's asset root
    url: Optional[str] = None  # absolute URL when the page's location is known
    kind: str = "raster"
    width: Optional[int] = None  # as written in the HTML (display size)
    height: Optional[int] = None
    html_id: Optional[str] = None
    source: str = "html"  # "html" | "tex"
    # Transient (not published): an inline SVG drawing as a standalone SVG document
    # (kind "inline_svg"), for the vision stage to rasterize.
    svg: Optional[str] = None


@dataclass
class Subfigure:
    id: str
    html_id: Optional[str]
    label: Optional[str]  # "(a)"
    caption: str  # "<TAG> (a) </TAG> Input image", "" when the panel has none
    images: list[Image] = field(default_factory=list)
    caption_source: str = "html"  # "html" | "none" | "split_parent" (linking stage)
    caption_ref_spans: list[RefSpan] = field(default_factory=list)  # other figures named in the caption
    caption_citation_spans: list[tuple[int, int]] = field(default_factory=list)  # transient, as Paragraph's


@dataclass
class Figure:
    id: str
    html_id: Optional[str]
    index: int  # 1-based order of appearance among figures
    number: Optional[str]  # printed number: "3", "3.2", "S1"; None when uncaptioned
    label: Optional[str]  # printed tag without tokens: "Figure 3:"
    caption: str  # "<TAG> Figure 3: </TAG> Caption text"
    images: list[Image] = field(default_factory=list)  # all images, subfigures' included
    subfigures: list[Subfigure] = field(default_factory=list)
    section_id: Optional[str] = None
    is_teaser: bool = False
    caption_ref_spans: list[RefSpan] = field(default_factory=list)  # other figures named in the caption
    caption_citation_spans: list[tuple[int, int]] = field(default_factory=list)  # transient, as Paragraph's


@dataclass
class Table:
    id: str
    html_id: Optional[str]
    index: int
    number: Optional[str]
    caption: str
    section_id: Optional[str] = None
    caption_ref_spans: list[RefSpan] = field(default_factory=list)
    caption_citation_spans: list[tuple[int, int]] = field(default_factory=list)  # transient, as Paragraph's


@dataclass
class GraphicalAbstract:
    id: str
    type: Optional[str] = None  # "Original" | "Reused" | "Modified"
    paths: list[str] = field(default_factory=list)
    components: list[str] = field(default_factory=list)
    caption: Optional[str] = None
    de_facto: bool = False  # teaser / first-referenced figure standing in for a GA
    source: Optional[str] = None
    score: Optional[float] = None  # match evidence behind the type (NCC / cosine), vision stage
    error: Optional[str] = None  # why a manifest GA has no type (fetch / decode failure)


@dataclass
class Provenance:
    source: str  # "ar5iv" | "arxiv_html" | "local" | "sample" | "ar5iv_dump" ...
    url: Optional[str] = None
    input_uri: Optional[str] = None
    content_sha256: Optional[str] = None
    generator: Optional[str] = None  # "LaTeXML" | "LaTeXML oxide"
    generator_version: Optional[str] = None
    builder_version: Optional[str] = None
    schema_version: Optional[str] = None
    decode_errors: int = 0  # bytes replaced while decoding the page
    id_source: Optional[str] = None  # "metadata" | "page" | "filename" | "stem" (not an arXiv id)
    # ltx_ERROR elements in the page's article: what LaTeXML could not convert (undefined
    # macros, unknown environments). A page that is nothing but these is a dead letter.
    latexml_errors: int = 0


@dataclass
class Paper:
    id: str
    title: str
    abstract: str
    version: Optional[str] = None
    authors: list[Author] = field(default_factory=list)
    published: Optional[str] = None
    updated: Optional[str] = None
    subjects: Subjects = field(default_factory=Subjects)
    primary_category: Optional[str] = None
    comment: Optional[str] = None
    journal_ref: Optional[str] = None
    conference: Conference = field(default_factory=Conference)
    dois: list[str] = field(default_factory=list)
    license: Optional[str] = None
    # set by the writer, never by a stage: the licence the build's policy withheld the paper for
    withheld: Optional[str] = None
    sections: list[Section] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    teaser: list[str] = field(default_factory=list)
    graphical_abstract: Optional[GraphicalAbstract] = None
    provenance: Provenance = field(default_factory=lambda: Provenance(source="unknown"))
    # Transient (not published): TeX \label -> printed figure number ("fig:teaser" -> "1",
    # "fig:sub-a" -> "3a"), from PaperMeta or the TeX source stage; the linking stage uses it
    # to resolve "LABEL:fig:..." leftovers of unresolved references.
    figure_labels: dict[str, str] = field(default_factory=dict)
    # Transient (not published): typed figure mentions the linking stage found but did not
    # link, by reason ("other_work": "Figure 1 of [12]", "their Figure 4"). The build sums
    # them into its stats (``sum(paper.rejected_mentions.values())`` per paper).
    rejected_mentions: dict[str, int] = field(default_factory=dict)


@dataclass
class PaperMeta:
    """Metadata known before parsing (arXiv API, a sidecar file, the fetch cache)."""

    id: Optional[str] = None
    version: Optional[str] = None
    title: Optional[str] = None
    authors: list[Author] = field(default_factory=list)
    published: Optional[str] = None
    updated: Optional[str] = None
    categories: list[str] = field(default_factory=list)
    primary_category: Optional[str] = None
    comment: Optional[str] = None
    journal_ref: Optional[str] = None
    dois: list[str] = field(default_factory=list)
    license: Optional[str] = None
    abstract: Optional[str] = None
    acm_classes: list[str] = field(default_factory=list)
    msc_classes: list[str] = field(default_factory=list)
    conference: Optional[Conference] = None
    source: Optional[str] = None
    url: Optional[str] = None
    figure_labels: dict[str, str] = field(default_factory=dict)  # TeX \label -> printed figure number

    @classmethod
    def from_dict(cls, d: dict) -> PaperMeta:
        """From a metadata sidecar's JSON object; a field of the wrong type raises
        ``MetaFieldError`` naming the field (never a crash further down)."""
        check_meta_fields(d)
        d = dict(d)
        if d.get("id"):
            d["id"] = _checked_meta_id(d["id"])
        authors = []
        for a in d.pop("authors", None) or []:
            if isinstance(a, str):
                authors.append(Author(name=a))
            else:
                authors.append(Author(name=a.get("name", ""), affiliations=list(a.get("affiliations") or [])))
        conf = d.pop("conference", None)
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        meta = cls(**known)
        meta.authors = authors
        if isinstance(conf, dict):
            meta.conference = Conference(**{k: conf.get(k) for k in ("venue", "year", "track")})
        return meta


class MetaFieldError(ValueError):
    """A metadata field of the wrong type; the message names the field and what it holds."""


_META_TEXT = (
    "id",
    "version",
    "title",
    "published",
    "updated",
    "primary_category",
    "comment",
    "journal_ref",
    "license",
    "abstract",
    "source",
    "url",
)
_META_TEXT_LISTS = ("categories", "dois", "acm_classes", "msc_classes")


def _json_kind(v) -> str:
    if isinstance(v, bool):
        return "true/false"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "text"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    return "null" if v is None else type(v).__name__


def _wrong(field_name: str, want: str, v) -> MetaFieldError:
    shown = repr(v) if isinstance(v, (bool, int, float, str)) and len(repr(v)) <= 40 else _json_kind(v)
    return MetaFieldError(f"field {field_name!r} must be {want}, not {_json_kind(v)} ({shown})")


def _checked_meta_id(raw: str) -> str:
    """A sidecar's ``id``, normalised (``ids.normalize_id``), the version kept; ``MetaFieldError``
    when it is neither an arXiv id nor a local id (``../../x`` is no paper's id)."""
    from sciga.schemas.ids import BadIdError, checked_paper_id, normalize_id

    try:
        checked_paper_id(raw)
    except BadIdError as e:
        shown = repr(raw) if len(raw) <= 60 else repr(raw[:60]) + "..."
        raise MetaFieldError(f"field 'id' ({shown}) {e}") from None
    return normalize_id(raw)


def check_meta_fields(d) -> None:
    """Raise ``MetaFieldError`` for the first field of a metadata object whose JSON type is
    not the one ``PaperMeta`` holds (unknown fields are ignored, null means absent)."""
    if not isinstance(d, dict):
        raise MetaFieldError(f"the metadata must be a JSON object, not {_json_kind(d)}")
    for k in _META_TEXT:
        v = d.get(k)
        if v is not None and not isinstance(v, str):
            raise _wrong(k, "text", v)
    for k in _META_TEXT_LISTS:
        v = d.get(k)
        if v is None:
            continue
        if not isinstance(v, list):
            raise _wrong(k, "a list of text", v)
        for i, x in enumerate(v):
            if not isinstance(x, str):
                raise _wrong(f"{k}[{i}]", "text", x)
    authors = d.get("authors")
    if authors is not None:
        if not isinstance(authors, list):
            raise _wrong("authors", "a list", authors)
        for i, a in enumerate(authors):
            if isinstance(a, str):
                continue
            if not isinstance(a, dict):
                raise _wrong(f"authors[{i}]", "a name or an object with a name", a)
            if not isinstance(a.get("name", ""), str):
                raise _wrong(f"authors[{i}].name", "text", a.get("name"))
            aff = a.get("affiliations")
            if aff is not None and (not isinstance(aff, list) or not all(isinstance(x, str) for x in aff)):
                raise _wrong(f"authors[{i}].affiliations", "a list of text", aff)
    conf = d.get("conference")
    if conf is not None:
        if not isinstance(conf, dict):
            raise _wrong("conference", "an object", conf)
        for k in ("venue", "track"):
            if conf.get(k) is not None and not isinstance(conf[k], str):
                raise _wrong(f"conference.{k}", "text", conf[k])
        year = conf.get("year")
        if year is not None and (isinstance(year, bool) or not isinstance(year, int)):
            raise _wrong("conference.year", "a whole number", year)
    labels = d.get("figure_labels")
    if labels is not None:
        if not isinstance(labels, dict):
            raise _wrong("figure_labels", "an object", labels)
        for k, v in labels.items():
            if not isinstance(v, str):
                raise _wrong(f"figure_labels[{k!r}]", "text", v)


@dataclass
class Medical:
    """MedICaT-style medical filter result for one figure image."""

    keyword_hits: list[str] = field(default_factory=list)
    classifier_run: bool = False
    topk_labels: list[str] = field(default_factory=list)
    topk_scores: list[float] = field(default_factory=list)
    is_medical: Optional[bool] = None  # None: not decided (classifier not run, no keywords)


# What a row of the ``figures`` config is: a figure, one of its panels, or the paper's
# graphical abstract given by ``--ga-manifest`` (id ``<paper>_GA``; a de-facto GA is a
# figure and has no row of its own). The gate checks the column against this set.
FIGURE_ROW_KINDS = ("figure", "subfigure", "graphical_abstract")


@dataclass
class FigureRow:
    """One row of the ``figures`` config: a figure, a subfigure or a manifest GA, with its image."""

    id: str
    paper_id: str
    parent_id: Optional[str]
    kind: str  # one of FIGURE_ROW_KINDS
    index: int
    number: Optional[str]
    label: Optional[str]
    caption: str  # the figure's caption (parent caption for subfigures)
    subcaption: Optional[str]
    subcaption_source: Optional[str]
    image_bytes: Optional[bytes]
    image_path: Optional[str]
    image_paths: list[str]
    image_kind: Optional[str]
    image_source: Optional[str]
    image_url: Optional[str] = None
    # Where the image file was, or was looked for (published). When its bytes were read,
    # they are read again from here when the shard is written (with the SHA-256 and size
    # below, build-internal), so bytes never ride along.
    image_uri: Optional[str] = None
    image_sha256: Optional[str] = None
    image_size: Optional[int] = None
    # Why the row has its image or not: one value of schemas.images.IMAGE_STATUSES.
    image_status: Optional[str] = None
    width: Optional[int] = None  # decoded pixel size (None until decoded)
    height: Optional[int] = None
    phash: Optional[str] = None
    image_error: Optional[str] = None
    section_id: Optional[str] = None
    html_id: Optional[str] = None
    is_teaser: bool = False
    ga_role: Optional[str] = None
    medical: Medical = field(default_factory=Medical)
    # Transient (not published): the inline SVG drawing the row's image is made from
    # (``Image.svg``); the vision stage rasterizes it and drops it.
    svg_source: Optional[str] = None


@dataclass
class MentionRow:
    """One inline reference to a figure in the text.

    ``context`` says which text the char offsets index: a body ``paragraph`` (section id +
    paragraph index), a ``caption`` of another float (``context_id`` = that figure,
    subfigure or table; paragraph_index None) or a section ``title`` (paragraph_index None).
    """

    paper_id: str
    figure_id: str
    section_id: Optional[str]
    paragraph_index: Optional[int]
    char_start: int
    char_end: int
    surface: str
    sentence: Optional[str] = None
    sentence_start: Optional[int] = None
    resolution: str = "anchor"  # "anchor" | "label" | "text" | "range"
    context: str = "paragraph"  # "paragraph" | "caption" | "title"
    context_id: Optional[str] = None
    panels: list[str] = field(default_factory=list)  # panels named without a subfigure element ("b", "left")


@dataclass
class DeadLetter:
    paper_id: Optional[str]
    stage: str
    error_type: str
    message: str
    input_uri: Optional[str] = None
    # "input": the input gave no paper (counted against it: inputs = papers + these);
    # "part": one part of a kept paper failed (e.g. an unsafe e-print: the paper is in the
    # build, only its TeX figure recovery was skipped).
    scope: str = "input"
