"""Every reason the builder gives for a failed input or part: the values of ``dead_letter.stage``
and ``dead_letter.error_type``, what each means and what to do about it.

The troubleshooting page of the docs site is generated from ``REASONS``. tests/project/test_docs.py
reads the code (every ``StageError``, ``ParseError``, ``FetchError``, ``ArxivApiError`` and
``DeadLetter`` made anywhere, and the other places an error type is set) and fails when it
can emit an error type that has no entry here, when a stage it names for that type is
missing, or when an entry names an error type nothing emits any more. A new reason is
therefore documented in the same change that introduces it.

``shown_in`` says where a person meets the reason:
- ``dead_letter``: a row of the build's ``dead_letter`` config, ``scope = "input"``: the input
  gave no paper;
- ``dead_letter (part)``: a row with ``scope = "part"``: the paper is kept, only that part of
  it (its e-print) was skipped;
- ``fetch report``: a failure listed by `sciga fetch` (its summary and ``report.json``);
- ``image_error``: the ``image_error`` column of a figures row (the row has no image);
- ``command``: the command stops with one sentence before any paper is built.
"""

from __future__ import annotations

from dataclasses import dataclass

# The per-paper steps of a build that catch whatever escapes them: an unexpected exception in
# any of them is an ``internal`` dead letter of that stage.
PER_PAPER_STAGES = ("parse", "tex_source", "link", "vision", "latexml")


@dataclass(frozen=True)
class Reason:
    error_types: tuple[str, ...]  # ``http_<status>`` stands for every HTTP status
    stages: tuple[str, ...]
    shown_in: tuple[str, ...]
    meaning: str
    what_to_do: str


_EPRINT_PART = ("dead_letter (part)", "dead_letter", "fetch report")
_FETCHED = ("fetch report", "dead_letter")

REASONS: tuple[Reason, ...] = (
    # ------------------------------------------------------------------ reading an input
    Reason(
        ("missing",),
        ("read",),
        ("dead_letter", "fetch report"),
        "the input file (or an ar5iv dump member) disappeared between listing and reading",
        "check the input folder and run the build again; this reason is not remembered, so the rerun retries it",
    ),
    Reason(
        ("unreadable",),
        ("read",),
        ("dead_letter", "fetch report"),
        "the file exists but could not be read (permissions, I/O error, a broken dump)",
        "fix the permissions or the file and run again; not remembered, the rerun retries it",
    ),
    Reason(
        ("too_large",),
        ("read", "parse"),
        ("dead_letter", "fetch report"),
        "the page (or its decompressed content) is above `--max-page-mb`",
        "raise `--max-page-mb` if the page is genuine",
    ),
    Reason(
        ("conversion_failed",),
        ("read", "fetch_html"),
        _FETCHED,
        "the page is ar5iv's or arXiv's notice of a failed LaTeXML conversion: it holds no paper text",
        "build the paper from its TeX instead: `--html-from auto` converts its e-print with LaTeXML",
    ),
    Reason(
        ("bad_metadata",),
        ("read",),
        ("dead_letter",),
        "the `<stem>.meta.json` sidecar beside the page (or in `--metadata`) is not valid JSON, is larger than "
        "16 MiB, or has a field of the wrong JSON type; the message names the field (`2401.00001.meta.json: "
        "field 'authors' must be a list, not text (\"A. Author\")`)",
        "fix the field or delete the sidecar (every key is optional; see the quickstart for its format)",
    ),
    Reason(
        ("outside_input",),
        ("read", "tex_source", "latexml"),
        ("dead_letter", "dead_letter (part)"),
        "the page, its metadata sidecar or its e-print is a symbolic link (or lies behind one) that leads outside "
        "the folder it was found in, so it was not read: a link cannot bring a file from elsewhere on the machine "
        "into a dataset you may publish. A page inside a linked folder that leads out of the input is listed by "
        "its name through the link and refused the same way (nothing behind the link is opened; a link to a "
        "folder of more than 10,000 entries is one row, the link's). For a page or sidecar (`read`) the input "
        "gives no paper; for a TeX source "
        '(`tex_source`, `scope = "part"`) the paper is kept without TeX recovery; for an e-print to convert '
        "(`latexml`) the paper has no page",
        "copy the file into the input folder instead of linking to it from elsewhere",
    ),
    Reason(
        ("bad_name",),
        ("read",),
        ("dead_letter",),
        "the input's name cannot be read or written as given: a file name that is not valid UTF-8 (Linux allows "
        "any bytes; the row names it with `\\xNN` escapes), or an object store key that ends in `/` (every "
        "reader takes it for a folder); it was listed and counted, never read",
        "rename the file to UTF-8 (e.g. with `convmv`), or copy the object to a key without the trailing `/`",
    ),
    Reason(
        ("path_too_long",),
        ("read",),
        ("dead_letter",),
        "the page's path is 4,096 bytes or longer, more than the system's file calls take; it was listed (through "
        "folder descriptors) and counted, never read",
        "move the page to a shorter path",
    ),
    Reason(
        ("unsafe_member",),
        ("read",),
        ("dead_letter",),
        "an ar5iv dump member's name is absolute, climbs out of the archive with `..` or holds `::`; it was "
        "listed and counted, never read",
        "rebuild the dump with plain relative member names (`2401/2401.13641.html`)",
    ),
    Reason(
        ("not_a_file",),
        ("read", "tex_source", "latexml"),
        ("dead_letter", "dead_letter (part)"),
        "a FIFO (named pipe), socket or device carries the name of a page, sidecar or e-print; it was never "
        "opened (reading it could block the build forever)",
        "replace it with the regular file",
    ),
    # ------------------------------------------------------------------ parsing a page
    Reason(("empty",), ("parse",), ("dead_letter",), "the file is empty", "refetch it or remove it from the input"),
    Reason(
        ("not_html",),
        ("parse",),
        ("dead_letter",),
        "the file is a PDF, binary data or otherwise not an HTML page",
        "give the paper's ar5iv / arXiv HTML (LaTeXML output), not its PDF",
    ),
    Reason(
        ("not_latexml",),
        ("parse", "fetch_html"),
        _FETCHED,
        "the file is HTML but not LaTeXML output (or the server sent a PDF or another page)",
        "only ar5iv / arxiv.org/html pages and our own LaTeXML conversions are supported; check `--html-base-url`",
    ),
    Reason(
        ("bad_gzip",), ("parse",), ("dead_letter",), "a `.html.gz` page is not a readable gzip file", "refetch the page"
    ),
    Reason(
        ("bad_encoding",),
        ("parse",),
        ("dead_letter",),
        "too many bytes do not decode in the page's encoding (a few are replaced and counted in "
        "`provenance.decode_errors`)",
        "refetch the page or convert it to UTF-8",
    ),
    Reason(("truncated",), ("parse",), ("dead_letter",), "the page ends before `</html>`", "refetch the page"),
    Reason(
        ("failed_conversion",),
        ("parse",),
        ("dead_letter",),
        "a page arXiv published although its LaTeXML conversion failed: no title, heading, abstract or figure, "
        'only `ltx_ERROR` elements (undefined macros) and a few words (titled "Untitled Document"); the '
        "message gives the page's error count. Unlike `conversion_failed` (arXiv's or ar5iv's notice page in "
        "place of a paper), this is LaTeXML's own output. A page with real content and a few errors stays a "
        "paper, its count in `provenance.latexml_errors`",
        "build the paper from its TeX source: `--html-from auto` converts its e-print with LaTeXML",
    ),
    Reason(
        ("unparseable",),
        ("parse",),
        ("dead_letter",),
        "lxml could not parse the page, or it holds no elements",
        "refetch the page",
    ),
    Reason(
        ("too_deep",),
        ("parse",),
        ("dead_letter",),
        "elements nest too deeply to be a real paper page",
        "check the file",
    ),
    Reason(
        ("no_paper_id",),
        ("parse",),
        ("dead_letter",),
        "the page does not say which paper it is: no canonical URL, no `<base href>`, no id in the file name",
        "name the file `<arxiv_id>.html` or give a metadata sidecar with an `id`",
    ),
    Reason(
        ("too_many_rows",),
        ("parse",),
        ("dead_letter",),
        "the page would make more rows than any paper: more than 10,000 `<figure>` elements or 100,000 links "
        'within the page (`href="#..."`), counted before it is parsed, or more than 5,000 figures and subfigures '
        "once parsed (`transforms/parse/row_bounds.py`); so that one page cannot take the build's memory or fill "
        "a shard. (Mentions are not a reason: a paper keeps its first 20,000, the rest are counted in the "
        "manifest's `stats.mentions_capped`)",
        "check the page: a generated or hostile page is not a paper; a genuine one can be split",
    ),
    Reason(
        ("id_mismatch",),
        ("parse",),
        ("dead_letter",),
        "the file's name is an arXiv id (`2401.00042.html`) but its metadata sidecar or the page itself (canonical "
        "URL, `<base href>`, title) names another paper; it is not built under either id, so no input can take "
        "another paper's place (ids are compared normalised: fullwidth digits, zero-width and bidirectional "
        "characters do not make a different id)",
        "rename the file to the paper it holds, or fix the sidecar's `id`; a page whose name is not an arXiv id "
        "takes the id the page gives",
    ),
    Reason(
        ("empty_document",),
        ("parse",),
        ("dead_letter",),
        "a LaTeXML page with no title, text or figures",
        "check the conversion; rebuild the page from its TeX with `--html-from latexml`",
    ),
    Reason(
        ("duplicate",),
        ("dedupe",),
        ("dead_letter",),
        "two inputs are the same paper; the newest version (then the richest record) is kept and the other "
        "copies get this row",
        "remove one of the copies from the input to silence it",
    ),
    # ------------------------------------------------------------------ e-prints and TeX sources
    Reason(
        ("unsafe_archive",),
        ("tex_source", "latexml"),
        _EPRINT_PART,
        "the e-print has a member that climbs out of its folder or is absolute, a link, a device or FIFO, an "
        "over-long name or an oversized extension header; nothing of it was extracted",
        "nothing to do: the paper is kept without TeX figure recovery (or, for a conversion, has no page)",
    ),
    Reason(
        ("size_bomb",),
        ("tex_source", "latexml"),
        _EPRINT_PART,
        "the e-print or one of its members is larger (declared or inflated) than the source limits (512 MiB in "
        "all, 256 MiB a member), or its TeX files hold more than 64 MiB of text",
        "nothing to do for a hostile archive; the paper is kept without TeX figure recovery (for a conversion, "
        "`latexml`: it has no page)",
    ),
    Reason(
        ("too_many_members",),
        ("tex_source",),
        _EPRINT_PART,
        "the e-print has more members than the limit allows",
        "nothing to do; the paper is kept without TeX figure recovery",
    ),
    Reason(
        ("corrupt_source",),
        ("tex_source",),
        _EPRINT_PART,
        "the e-print is not a readable archive, or a member is truncated",
        "refetch the e-print (`sciga fetch --refresh`)",
    ),
    Reason(
        ("empty_source",),
        ("tex_source", "fetch_source"),
        _EPRINT_PART,
        "the e-print is empty, holds no TeX, or the server sent an empty body",
        "rerun `sciga fetch` later; the paper is kept with its HTML figures",
    ),
    Reason(
        ("unsupported_source",),
        ("tex_source",),
        _EPRINT_PART,
        "the e-print is an archive kind arXiv does not serve (e.g. zip), or a bulk tar holds neither a gzipped "
        "source nor a PDF for the paper",
        "check `--eprint-base-url` / the source folder",
    ),
    Reason(
        ("missing_source",),
        ("tex_source",),
        ("dead_letter (part)",),
        "the source file found for the paper disappeared before it was read",
        "check `--tex-input` and run again",
    ),
    Reason(
        ("not_in_bulk",),
        ("tex_source",),
        ("dead_letter (part)", "dead_letter"),
        "no bulk tar holds the paper (none covers its id, or the covering tar lacks it: withdrawn, no source)",
        "fetch its e-print per paper (`sciga fetch --ids ...`)",
    ),
    Reason(
        ("pdf_only",),
        ("tex_source", "latexml"),
        ("dead_letter (part)", "dead_letter"),
        "the paper was submitted as a PDF (or PostScript) only: there is no TeX",
        "nothing to do: its figures come from the HTML only, and it cannot be converted with LaTeXML",
    ),
    Reason(
        ("md5_mismatch",),
        ("tex_source",),
        ("dead_letter (part)", "dead_letter"),
        "a bulk tar does not match `arXiv_src_manifest.xml` (md5 or size), or a member changed since the tar "
        "was verified; none of its bytes were used",
        "fetch the tar and the manifest again (or delete the tar's index in `OUT/.sciga/bulk/tars/` to verify it "
        "again)",
    ),
    Reason(
        ("bulk_tar_unreadable",),
        ("tex_source",),
        ("dead_letter (part)", "dead_letter"),
        "a bulk tar could not be read to its end (I/O or network error, broken tar)",
        "check the bulk folder or the connection and run again",
    ),
    Reason(
        ("bulk_not_scanned",),
        ("tex_source",),
        ("dead_letter (part)", "dead_letter"),
        "the tar that holds the paper was not verified yet, so nothing is read from it",
        "let the build extract its papers first (`sciga build --eprints-bulk ...` does it before the pipeline)",
    ),
    Reason(
        ("missing_manifest",),
        ("eprint_bulk",),
        ("command",),
        "`--eprints-bulk` names a folder or URL without a readable `arXiv_src_manifest.xml`",
        "pass the folder (or URL) holding the manifest and the `arXiv_src_*.tar` files; for `s3://`, check your "
        "AWS credentials",
    ),
    Reason(
        ("bad_manifest",),
        ("eprint_bulk",),
        ("command",),
        "`arXiv_src_manifest.xml` is not a valid manifest",
        "fetch `arXiv_src_manifest.xml` again (it lies beside the tars)",
    ),
    # ------------------------------------------------------------------ our own LaTeXML conversion
    Reason(
        ("no_eprint",),
        ("latexml",),
        ("dead_letter",),
        "`--html-from latexml|auto`: the paper has metadata but neither a page nor an e-print to convert",
        "fetch its e-print (`sciga fetch --parts eprint`) or give `--eprints-bulk` / `--tex-input`",
    ),
    Reason(
        ("no_main_file",),
        ("latexml",),
        ("dead_letter",),
        "no TeX file of the e-print is a complete document (no `\\documentclass` with `\\begin{document}`)",
        "check the e-print; name the main file in a `00README` if it is unusual",
    ),
    Reason(
        ("latexml_missing",),
        ("latexml",),
        ("dead_letter",),
        "`latexmlc` is not installed",
        "install LaTeXML (`apt-get install latexml`; `scripts/setup.sh` does it)",
    ),
    Reason(
        ("latexml_timeout",),
        ("latexml",),
        ("dead_letter",),
        "LaTeXML did not finish within `--latexml-timeout` (default 300 s) and was stopped",
        "raise `--latexml-timeout` for very long papers",
    ),
    Reason(
        ("latexml_memory",),
        ("latexml",),
        ("dead_letter",),
        "LaTeXML ran out of `--latexml-max-memory-gb` (default 4 GB), or the limit could not be set",
        "raise `--latexml-max-memory-gb`",
    ),
    Reason(
        ("latexml_fatal",),
        ("latexml",),
        ("dead_letter",),
        'LaTeXML stopped on a fatal error (e.g. "Too many errors"); the message quotes it',
        "nothing to do for the build; the paper has no converted page",
    ),
    # ------------------------------------------------------------------ fetching
    Reason(
        ("bad_id",),
        ("metadata",),
        _FETCHED,
        "the id is not an arXiv id",
        "fix the id list (e.g. `2401.13641`, `astro-ph/0601001`)",
    ),
    Reason(("unknown_id",), ("metadata",), _FETCHED, "arXiv has no paper with that id", "check the id"),
    Reason(
        ("bad_request",),
        ("metadata",),
        _FETCHED,
        "the arXiv API rejected the query",
        "fix the `--query` (the message quotes the API's reason)",
    ),
    Reason(
        ("api_unavailable",),
        ("metadata",),
        _FETCHED,
        "the arXiv API could not be reached after the retries",
        "rerun later: finished parts are journaled and not fetched again",
    ),
    Reason(
        ("malformed_feed", "empty_page"),
        ("metadata",),
        _FETCHED,
        "the arXiv API answered with damaged or empty Atom",
        "rerun later; check `--arxiv-api-url` if it persists",
    ),
    Reason(
        ("failed",),
        ("metadata", "fetch_html"),
        ("dead_letter",),
        "`sciga build --ids`: the paper's metadata or page could not be fetched and no reason was recorded",
        "run `sciga fetch` for the same ids: its report names the cause",
    ),
    Reason(
        ("no_html",),
        ("fetch_html",),
        _FETCHED,
        "the HTML server has no page for the paper (HTTP 404/410, or a redirect to the abstract page)",
        "it may have no LaTeX source or was never converted; build it from its e-print with `--html-from auto`",
    ),
    Reason(
        ("corrupt_page", "empty_page"),
        ("fetch_html",),
        _FETCHED,
        "the server sent a damaged gzip stream or an empty page",
        "rerun `sciga fetch --retry-failed` later",
    ),
    Reason(
        ("no_source",),
        ("fetch_source",),
        ("fetch report",),
        "the e-print server has no source for the paper (HTTP 403/404/410)",
        "nothing to do: its figures come from the HTML only",
    ),
    Reason(
        ("http_<status>",),
        ("metadata", "fetch_html", "fetch_source"),
        _FETCHED,
        "the server answered another HTTP status (4xx: permanent; 5xx after the retries: transient)",
        "check `--arxiv-api-url` / `--html-base-url` / `--eprint-base-url`; rerun later for a 5xx",
    ),
    Reason(
        ("fetch_failed",),
        ("fetch_html", "fetch_source"),
        _FETCHED,
        "a transient download failure after the retries (timeout, dropped connection, truncated body, "
        "429 / 5xx); the message names which",
        "rerun the same command later: finished parts are journaled and never fetched twice",
    ),
    Reason(
        ("timeout", "connection", "truncated"),
        ("fetch_html", "fetch_source"),
        ("fetch report",),
        "what went wrong inside a `fetch_failed` (these kinds are transient, so the part's error type is "
        "`fetch_failed` and the message names the kind)",
        "rerun later; lower the load on the server with `--rate-limit`",
    ),
    Reason(
        ("redirects", "bad_url", "request"),
        ("fetch_html", "fetch_source"),
        _FETCHED,
        "the URL redirected too often, is not a valid URL, or the request could not be made",
        "check `--html-base-url` / `--eprint-base-url`",
    ),
    Reason(
        ("too_large",),
        ("fetch_html", "fetch_source"),
        _FETCHED,
        "the download is larger than its limit (declared or received)",
        "check the URL; pages above the limit are not real papers",
    ),
    # ------------------------------------------------------------------ figures from TeX (per image)
    Reason(
        ("tool_missing",),
        ("rasterize",),
        ("image_error",),
        "pdftoppm or ghostscript is not installed, so PDF / EPS figures cannot be rasterized",
        "install poppler-utils and ghostscript (`scripts/setup.sh` does it)",
    ),
    Reason(
        ("too_many_pixels", "bad_image"),
        ("rasterize",),
        ("image_error",),
        "the figure file is not a readable image, or is larger than the pixel limit",
        "nothing to do; the figure keeps no image from the source",
    ),
    Reason(
        ("timeout", "tool_failed", "rejected"),
        ("rasterize",),
        ("image_error",),
        "poppler / ghostscript did not finish in `--rasterize-timeout`, could not start, or rejected the file; "
        "after a timeout or a failed start the paper's result is not kept as final, so the next build tries again",
        "raise `--rasterize-timeout` for very large figures; otherwise nothing to do",
    ),
    Reason(
        ("interrupted",),
        ("rasterize",),
        ("image_error",),
        "poppler / ghostscript was stopped by a signal (Ctrl-C, the OOM killer) while it converted a PDF / EPS "
        "figure: the figure has no image in this build, and the paper's result is not kept as final",
        "run the build again: the next build rasterizes the figure again",
    ),
    Reason(
        ("unsupported",),
        ("rasterize",),
        ("image_error",),
        "the figure file is SVG or another format this builder does not rasterize",
        "nothing to do; the figure keeps no image from the source",
    ),
    # ------------------------------------------------------------------ bugs
    Reason(
        ("internal",),
        PER_PAPER_STAGES,
        ("dead_letter",),
        "an unexpected exception in a stage: a bug, never the input's fault; the message names the exception "
        "and where it was raised",
        "please report it with the input; the rerun tries the paper again (internal errors are not remembered)",
    ),
)


def reasons_for(error_type: str) -> list[Reason]:
    return [r for r in REASONS if error_type in r.error_types]
