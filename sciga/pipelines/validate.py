"""`sciga validate OUT`: run the quality gate over a build and write its report.

Exit status 0 when every expectation holds, 1 when any fails (the terminal names each failed
expectation with its unexpected count and example ids), 2 when OUT is not a build.

Checking never writes where it reads from a remote: the report of a build on hf://, gs://
or s3:// goes to ``./quality-report`` in the working folder (``--report`` chooses another place),
so validating a published version leaves its repo (commits, files, tags) as it was.
"""

from __future__ import annotations

import argparse
import os
import posixpath
import sys
from typing import Any, Protocol

import fsspec

from sciga.pipelines.arg_types import positive_int, rate
from sciga.quality.defaults import DEFAULT_MAX_DEAD_LETTER_RATE, DEFAULT_MAX_MISSING_IMAGE_RATE, IMAGE_CHECKS
from sciga.transforms.vision.defaults import DEFAULT_MAX_PIXELS

REPORT_DIR = "quality"
LOCAL_REPORT_DIR = "quality-report"  # in the working folder, for a build on remote storage


class ArgumentAdder(Protocol):
    """A parser or one of its argument groups."""

    def add_argument(self, *args: Any, **kwargs: Any) -> Any: ...


def add_gate_arguments(ap: ArgumentAdder) -> None:
    ap.add_argument(
        "--max-dead-letter-rate",
        type=rate,
        default=DEFAULT_MAX_DEAD_LETTER_RATE,
        metavar="R",
        help=f"fail when dead letters / inputs exceeds R (default {DEFAULT_MAX_DEAD_LETTER_RATE})",
    )
    ap.add_argument(
        "--max-missing-image-rate",
        type=rate,
        default=DEFAULT_MAX_MISSING_IMAGE_RATE,
        metavar="R",
        help="fail when figures rows without an image / rows that should have one exceeds R (default "
        f"{DEFAULT_MAX_MISSING_IMAGE_RATE}; figures made of panels and --no-images builds do not count)",
    )
    ap.add_argument(
        "--image-check",
        choices=IMAGE_CHECKS,
        default="decode",
        help="decode every embedded image (default), only read headers and structure, or skip images",
    )
    ap.add_argument(
        "--max-image-pixels",
        type=positive_int,
        default=None,
        metavar="N",
        help="images with more pixels than N fail the gate without being decoded (default: the "
        "--max-image-pixels the build was made with, from manifest.json; else "
        f"{DEFAULT_MAX_PIXELS:,})",
    )
    ap.add_argument(
        "--image-workers",
        type=positive_int,
        default=os.cpu_count() or 1,
        metavar="N",
        help="processes decoding images (default: one per core)",
    )


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("out", metavar="OUT", help="build folder written by `sciga build`")
    add_gate_arguments(ap)
    ap.add_argument(
        "--report",
        metavar="PATH",
        help="report file (.md or .html; .json for machine-readable) or folder; "
        f"default: OUT/{REPORT_DIR}/report.{{md,html,json}}, or ./{LOCAL_REPORT_DIR}/ for a build on "
        "hf://, gs:// or s3:// (checking never writes to a remote build)",
    )


def default_report_folder(out: str) -> str:
    """Where the report goes without --report: beside the shards of a local build; in the
    working folder for a build on remote storage, which a checking command never writes to."""
    from sciga.transforms.common.storage import is_remote

    # Not ./quality: in a clone of this repository that is a link to the package's sciga/quality.
    return LOCAL_REPORT_DIR if is_remote(out) else posixpath.join(out.rstrip("/"), REPORT_DIR)


def gate_from_args(args):
    from sciga.explore.build_folder import check_is_build

    # Where the build lies is checked before the gate's libraries load (Great Expectations
    # takes seconds to import): a typo or an unreachable store is said at once.
    check_is_build(args.out)
    check_report_target(args.out, getattr(args, "report", None))
    from sciga.quality.gate import run_gate

    return run_gate(
        args.out,
        max_dead_letter_rate=args.max_dead_letter_rate,
        image_check=args.image_check,
        max_pixels=args.max_image_pixels,
        image_workers=args.image_workers,
        max_missing_image_rate=args.max_missing_image_rate,
    )


def check_report_target(out: str, report: str | None) -> None:
    """Before the gate runs: the report can be written (one sentence when it cannot)."""
    from sciga.pipelines.paths import check_output_file, check_output_folder

    if report and posixpath.splitext(report)[1] in (".md", ".html", ".json"):
        check_output_file(report, "--report")
    elif report:
        check_output_folder(report, "--report")
    else:
        check_output_folder(
            default_report_folder(out),
            "the report folder",
            advice="give --report PATH (a folder, or a .md / .html / .json file) where you can write",
        )


def write_reports(result, out: str, report: str | None) -> list[str]:
    from sciga.quality import report as rp

    renderers = {".md": rp.markdown, ".html": rp.html_page, ".json": rp.json_text}
    if report and posixpath.splitext(report)[1] in renderers:
        targets = [report]
    else:
        folder = report or default_report_folder(out)
        targets = [posixpath.join(folder, f"report{ext}") for ext in (".md", ".html", ".json")]
    for path in targets:
        fs, p = fsspec.core.url_to_fs(path)
        parent = posixpath.dirname(p)
        if parent:
            fs.makedirs(parent, exist_ok=True)
        with fs.open(p, "w", encoding="utf-8") as f:
            f.write(renderers[posixpath.splitext(path)[1]](result))
    return targets


def run(args, rest=None) -> int:
    result = gate_from_args(args)
    from sciga.quality.report import summary_text

    paths = write_reports(result, args.out, args.report)
    # The verdict is the command's result: stdout, pass or fail (`sciga validate OUT > gate.txt`
    # keeps it). A failure also says so on stderr, in one line, with the exit status 1.
    print(summary_text(result))
    print(f"report: {', '.join(paths)}")
    if not result.success:
        print(
            f"sciga validate: the quality gate failed on {args.out} ({len(result.failed)} of "
            f"{len(result.checks)} expectations not met, listed above); see {paths[0]}.",
            file=sys.stderr,
        )
    return 0 if result.success else 1
