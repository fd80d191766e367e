"""The parse step of a build: planned input -> ``PaperWork`` holding the parsed paper.

Reads the page and its metadata sidecar (recording both as dependencies of the result),
then ``parse_latexml_html``. A page that cannot be read or parsed becomes a dead-lettered
work item (stage ``read`` or ``parse``) on the ``dead_letter`` output.
"""

from __future__ import annotations

from sciga.schemas.build import PaperWork, PlannedInput
from sciga.transforms.common.result_store import absent_dep, file_dep, result_key, sha256_hex
from sciga.transforms.common.steps import PaperStep
from sciga.transforms.inputs.pages import (
    fallback_paper_id,
    find_sidecar,
    read_bytes,
    read_sidecar_bytes,
    sidecar_meta,
)
from sciga.transforms.parse.latexml_html import parse_latexml_html
from sciga.transforms.parse.options import ParseOptions


class ParseStep(PaperStep):
    """``PlannedInput`` -> ``PaperWork`` with the paper, or dead-lettered (read / parse)."""

    STAGE = "parse"

    def __init__(self, options: ParseOptions = ParseOptions(), fingerprint: str = ""):
        super().__init__()
        self.options = options
        self.fingerprint = fingerprint

    def start(self, planned: PlannedInput) -> PaperWork:
        work = PaperWork(uri=planned.uri, key=planned.key, fallback_id=fallback_paper_id(planned.uri)[0])
        work.planned_sha256 = planned.page_sha256
        return work

    def run(self, work: PaperWork):
        # read_bytes and the sidecar raise StageErrors of stage "read"; the parser's are "parse".
        data = read_bytes(work.uri, self.options.max_page_bytes)
        sha = sha256_hex(data)
        if work.key is None or (work.planned_sha256 is not None and sha != work.planned_sha256):
            # Not hashed by the plan, or changed since: filed under what was read now.
            work.key = result_key(work.uri, sha, self.fingerprint)
        found, looked = find_sidecar(work.uri, self.options.metadata_dir)
        side = read_sidecar_bytes(found) if found is not None else None
        work.deps.extend(absent_dep(u) for u in looked)
        if found is not None:
            work.deps.append(file_dep(found, side))
        meta = sidecar_meta(work.uri, found, side)
        fid, how = fallback_paper_id(work.uri)
        work.paper = parse_latexml_html(
            data,
            meta,
            input_uri=work.uri,
            fallback_id=fid,
            fallback_id_source=how,
            source=self.options.source,
            max_bytes=self.options.max_page_bytes,
            content_sha256=sha,
        )
        return [work]
