"""Why a row of the ``figures`` config has an image or not: ``figures.image_status``.

A figures row carries its image as the `datasets` Image struct ``image = {bytes, path}``
only when the bytes are there; otherwise ``image`` is null (a struct with a path and no
bytes makes `datasets` open that path from the reader's working directory). What the row
had instead is said by two string columns: ``image_uri``, where the image file was (or was
looked for), and ``image_status``, one value of the closed set below. ``image_error`` keeps
the sentence with the details.

The set is closed: the quality gate checks that every row has one of these values and that
``image`` holds bytes exactly when the status is ``embedded``. Each value names what a user
can do about it (docs: data reference, troubleshooting).
"""

from __future__ import annotations

from typing import Optional

EMBEDDED = "embedded"
RASTERIZED_SVG = "rasterized_svg"
NO_IMAGES_FLAG = "no_images_flag"
NOT_FOUND = "not_found"
TOO_LARGE = "too_large"
TOO_MANY_PIXELS = "too_many_pixels"
UNDECODABLE = "undecodable"
UNREADABLE = "unreadable"
OUTSIDE_INPUT = "outside_input"
NOT_A_FILE = "not_a_file"
SVG_ONLY = "svg_only"
PDF_ONLY = "pdf_only"
UNRENDERED = "unrendered"
MISSING_IN_PAGE = "missing_in_page"
IN_SUBFIGURES = "in_subfigures"
NO_IMAGE = "no_image"
REPEATED = "repeated"

# value -> what it means and what to do (one sentence each; the docs and the card quote them)
IMAGE_STATUSES: dict[str, str] = {
    EMBEDDED: "the image's bytes are in `image`",
    RASTERIZED_SVG: "the figure is an SVG drawing (inline in the page or an .svg file): `image` holds a PNG drawn "
    "from it (at most 2048 pixels a side) and `image_uri` says where the SVG is",
    NO_IMAGES_FLAG: "the build ran with --no-images: the file was found but its bytes were left out; "
    "build without --no-images to embed them",
    NOT_FOUND: "no file where the page's `img src` points, relative to the page's folder (`<img src=\"figs/a.png\">` "
    "in `p/p.html` means `p/figs/a.png`), nor in the paper's TeX source; put the images there, or give "
    "the e-prints with --tex-input",
    TOO_LARGE: "the file is larger than --max-image-mb; raise the limit to embed it",
    TOO_MANY_PIXELS: "the image has more pixels than --max-image-pixels (a possible decompression bomb); "
    "raise the limit if the image is genuine",
    UNDECODABLE: "the file is not a readable raster image (empty, truncated, corrupt, or a rasterization "
    "of its TeX graphic failed); image_error says why",
    UNREADABLE: "the file exists but could not be read (permissions, an I/O error, or it changed while the "
    "build ran); fix the file and build again",
    OUTSIDE_INPUT: "the image path leads outside the page's folder (../, an absolute path, or a link "
    "pointing outside the input) and was refused; copy the image into the page's folder",
    NOT_A_FILE: "the image path names something that is not a regular file (a FIFO, a device, a folder) and "
    "was not opened; put the image file itself there",
    SVG_ONLY: "the figure is an SVG drawing (inline in the page or an .svg file) that was not rasterized: it was "
    "refused (entities, a reference outside the document, a huge viewBox; image_error says which) or could not "
    "be drawn",
    PDF_ONLY: "the image file is a PDF: there is no raster image (TeX recovery rasterizes PDF figures of "
    "an e-print given with --tex-input)",
    UNRENDERED: "LaTeXML could not render this picture (raw TeX left in the page): there is no image",
    MISSING_IN_PAGE: "the page itself marks the graphic missing (LaTeXML did not find it when the page was "
    "made); convert the paper again with its figure files, or give its e-print with --tex-input",
    IN_SUBFIGURES: "a figure made of panels: its images are the rows of its subfigures",
    NO_IMAGE: "the figure names no image at all (a caption-only or table-like figure)",
    REPEATED: "the row shows the same image file (`image_uri`) as an earlier row of the same paper, whose `image` "
    "holds its bytes (image_error names that row): a paper's image file is stored once, however many rows show it",
}

# Statuses of rows whose `image` holds bytes (the gate checks bytes exactly for these).
WITH_BYTES = frozenset({EMBEDDED, RASTERIZED_SVG})

# Rows that carry no image by design, not by a problem: left out of "figures without an
# image" and of the gate's missing-image rate (numerator and denominator).
BY_DESIGN = frozenset({IN_SUBFIGURES, REPEATED})
# Rows whose image was found but left out on request (--no-images): rows that should have
# an image, and do; not missing.
ON_REQUEST = frozenset({NO_IMAGES_FLAG})

# ImageDecodeError kinds (transforms/vision/decode.py) -> status
DECODE_KIND_STATUS = {
    "svg_only": SVG_ONLY,
    "pdf_only": PDF_ONLY,
    "decompression_bomb": TOO_MANY_PIXELS,
    "empty": UNDECODABLE,
    "corrupt": UNDECODABLE,
}

# image_kind values (schemas.records.IMAGE_KINDS) that never carry raster pixels -> status
KIND_STATUS = {"inline_svg": SVG_ONLY, "unrendered": UNRENDERED, "missing": MISSING_IN_PAGE}


def counts_as_missing(status: Optional[str]) -> bool:
    """A row the user would expect an image for, that has none (summary, card, gate)."""
    return status is not None and status not in WITH_BYTES and status not in BY_DESIGN and status not in ON_REQUEST


def settle_status(
    status: Optional[str],
    *,
    has_bytes: bool,
    image_kind: Optional[str],
    image_path: Optional[str],
    no_images: bool = False,
) -> str:
    """The row's final status: what a stage recorded, else what its fields say. ``has_bytes``:
    the row's image bytes are (or would be, without --no-images) in the shard."""
    if has_bytes:
        if no_images:
            return NO_IMAGES_FLAG
        return RASTERIZED_SVG if status == RASTERIZED_SVG else EMBEDDED
    if status is not None and status != EMBEDDED:
        return status
    if image_kind in KIND_STATUS:
        return KIND_STATUS[image_kind]
    if not image_path:
        return NO_IMAGE
    return NOT_FOUND
