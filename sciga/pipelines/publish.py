"""`sciga publish OUT`: the quality gate, then one commit and a version tag on the Hub
(``publish/hub.py``)."""

from __future__ import annotations

import argparse
import os

from sciga.publish.hub import GateFailed, PublishError, publish


def add_arguments(ap: argparse.ArgumentParser) -> None:
    from sciga.pipelines.validate import add_gate_arguments

    ap.add_argument("out", metavar="OUT", help="build folder written by `sciga build`")
    ap.add_argument("--repo-id", required=True, metavar="ORG/NAME", help="dataset repo on the Hub")
    ap.add_argument(
        "--version",
        required=True,
        metavar="vX.Y.Z",
        help="the version, MAJOR.MINOR.PATCH with or without the v (1.0.1 and v1.0.1 are the same); "
        "becomes the git tag vX.Y.Z on the Hub",
    )
    ap.add_argument(
        "--dry-run",
        action="store_true",
        help="run the gate and show the plan (the gate's verdict, the tag, the files); send nothing",
    )
    ap.add_argument(
        "--private", action="store_true", help="create the repo private (an existing repo keeps its visibility)"
    )
    ap.add_argument(
        "--allow-any-licence",
        action="store_true",
        help="publish to a public repo a build whose licence policy (--licences all) let in papers "
        "that may not be redistributed (you hold the rights)",
    )
    ap.add_argument(
        "--no-changelog",
        dest="changelog",
        action="store_false",
        help="do not compare with the previous version: no changelog in the card, no changes/ files",
    )
    ap.add_argument(
        "--endpoint", metavar="URL", default=None, help="Hub endpoint (default: HF_ENDPOINT or https://huggingface.co)"
    )
    add_gate_arguments(ap)


def run(args, rest=None) -> int:
    import sys

    from sciga.quality.report import summary_text

    gate_options = {
        "max_dead_letter_rate": args.max_dead_letter_rate,
        "image_check": args.image_check,
        "max_pixels": args.max_image_pixels,
        "image_workers": args.image_workers,
        "max_missing_image_rate": args.max_missing_image_rate,
    }
    from sciga.publish.hub import REPO_ID_RE, normalize_version

    if not REPO_ID_RE.match(args.repo_id):
        print(
            f"sciga publish: --repo-id {args.repo_id!r} is not ORG/NAME; give the dataset repo as e.g. "
            "my-org/sciga-arxiv.",
            file=sys.stderr,
        )
        return 2
    try:
        normalize_version(args.version)
    except PublishError as e:
        print(f"sciga publish: {e}", file=sys.stderr)
        return 2
    try:
        result = publish(
            args.out,
            args.repo_id,
            args.version,
            dry_run=args.dry_run,
            private=args.private,
            endpoint=args.endpoint or os.environ.get("HF_ENDPOINT") or None,
            gate_options=gate_options,
            changelog=args.changelog,
            allow_any_licence=args.allow_any_licence,
        )
    except GateFailed as e:
        print(summary_text(e.result), file=sys.stderr)
        print(
            f"sciga publish: {e}. Fix the build (see `sciga validate {args.out}`) and publish again.", file=sys.stderr
        )
        return 1
    except PublishError as e:
        print(f"sciga publish: {e}", file=sys.stderr)
        return 1
    print(result.summary())
    return 0
