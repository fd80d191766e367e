"""List and plan the inputs of a build: what must be computed, what can be reused.

Per input page the plan reads and hashes the page (streamed, so a page costs no memory),
derives its result key and asks the result store whether a result with that key exists,
is complete and still matches every file it was made from (sidecar, e-print, images,
GA-manifest row). Such a paper skips parsing, linking and vision entirely: a few hundred
bytes (``ResultRef``) go straight to the writer. Everything else goes on to be parsed.

``--rebuild`` turns the lookup off. The shard layout does not depend on the plan: it is
fixed from the number of inputs before the pipeline starts.
"""

from __future__ import annotations

import json
import logging
import posixpath
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Optional

import apache_beam as beam
from apache_beam.metrics import Metrics

from sciga.schemas.build import FileDep, PlannedInput, ResultHeader, ResultRef
from sciga.transforms.common.input_files import parent_of, read_input
from sciga.transforms.common.progress import Progress
from sciga.transforms.common.result_store import ResultStore, dep_still_valid, hash_file, result_key
from sciga.transforms.inputs.pages import (
    MAX_SIDECAR_BYTES,
    META_SUFFIX,
    fallback_paper_id,
    list_inputs,
    list_metadata,
    page_candidates,
)

REUSED = "reused"
log = logging.getLogger("sciga.build")


@dataclass(frozen=True)
class PlanOptions:
    store_root: str  # where results are kept (``<out>/.sciga`` by default)
    fingerprint: str  # code + result-changing options (``result_store.result_key``)
    rebuild: bool = False  # recompute everything, reuse nothing
    max_page_bytes: int = 128 * 1024 * 1024
    progress_dir: Optional[str] = None


def ref_from_header(header: ResultHeader, reused: bool) -> ResultRef:
    """The ``ResultRef`` a stored result stands for."""
    return ResultRef(
        uri=header.uri,
        key=header.key,
        paper_id=header.paper_id,
        is_paper=header.is_paper,
        reused=reused,
        version=header.version,
        n_figures=header.n_figures,
        n_paragraphs=header.n_paragraphs,
        content_sha256=header.content_sha256,
        dead=list(header.dead),
        stats=dict(header.stats),
        sizes={k: list(v) for k, v in header.sizes.items()},
    )


def reusable(
    header: Optional[ResultHeader], checkers: Optional[Mapping[str, Callable[[FileDep], bool]]] = None
) -> bool:
    """A stored result that can stand for the input as it is now (complete, final: not made
    while a tool was interrupted or an I/O error struck, and its dependencies unchanged)."""
    if header is None or not header.complete or not header.final:
        return False
    return all(dep_still_valid(d, checkers) for d in header.deps)


class PlanInput(beam.DoFn):
    """input URI -> ``PlannedInput`` (main output) or a reusable ``ResultRef`` (``reused``)."""

    def __init__(self, options: PlanOptions, checkers: Optional[Mapping[str, Callable[[FileDep], bool]]] = None):
        self.options = options
        self.checkers = dict(checkers or {})
        self.progress = Progress(options.progress_dir)
        self.reused = Metrics.counter("sciga", "inputs_reused")
        self.planned = Metrics.counter("sciga", "inputs_planned")

    def setup(self):
        self.store = ResultStore(self.options.store_root)
        for c in self.checkers.values():
            if hasattr(c, "setup"):
                c.setup()

    def process(self, uri: str):
        try:
            sha, _ = hash_file(uri, limit=self.options.max_page_bytes, root=parent_of(uri))
        except Exception:  # noqa: BLE001 - the parse stage reads it again and says what is wrong
            self.planned.inc()
            yield PlannedInput(uri=uri, key=None)
            return
        key = result_key(uri, sha, self.options.fingerprint)
        if not self.options.rebuild:
            header = self.store.header(key)
            if reusable(header, self.checkers):
                ref = ref_from_header(header, reused=True)
                self.reused.inc()
                self.progress.add(
                    inputs=1,
                    reused=1,
                    papers=int(ref.is_paper),
                    dead=int(not ref.is_paper),
                    images=int(ref.stats.get("images_read", 0)),
                )
                yield beam.pvalue.TaggedOutput(REUSED, ref)
                return
        self.planned.inc()
        yield PlannedInput(uri=uri, key=key, page_sha256=sha)

    def finish_bundle(self):
        self.progress.flush()


class PlanInputs(beam.PTransform):
    """PCollection[input URI] -> {``planned``: PlannedInput, ``reused``: ResultRef}."""

    def __init__(self, options: PlanOptions, checkers: Optional[Mapping[str, Callable[[FileDep], bool]]] = None):
        super().__init__()
        self.options = options
        self.checkers = checkers

    def expand(self, uris):
        return uris | "PlanInput" >> beam.ParDo(PlanInput(self.options, self.checkers)).with_outputs(
            REUSED, main="planned"
        )


# ------------------------------------------------------------------ listing (before the pipeline)


def input_list_lines(inputs: Sequence[str]) -> list[str]:
    """The lines of a build's input-list file: one JSON string each, ASCII (newlines,
    ``::``, spaces and any Unicode in a name are escaped, so no name splits or merges)."""
    return [json.dumps(u, ensure_ascii=True) + "\n" for u in inputs]


def input_from_line(line: str) -> str:
    """An input URI back from its input-list line (``input_list_lines``)."""
    return json.loads(line)


def list_build_inputs(specs: Sequence[str], html_from: str = "ar5iv") -> list[str]:
    """The input-list lines: pages, and with ``--html-from latexml|auto`` requests to make a
    paper's page from its e-print (``latexml:<metadata sidecar>``)."""
    from sciga.transforms.inputs.tex_inputs import id_keys, page_keys, source_paper_id, tex_sources
    from sciga.transforms.latexml.pages_from_eprints import convert_request

    pages = list_inputs(specs)  # a spec that does not exist: FileNotFoundError, one sentence from the CLI
    metas = list_metadata(specs)
    page_set = set(pages)
    beside = [m for m in metas if any(c in page_set for c in page_candidates(m))]
    if html_from == "ar5iv":
        without_page = [m for m in metas if m not in beside]
        if without_page:
            log.warning(
                "%d papers have metadata but no page (e.g. %s); they are not built: --html-from auto converts "
                "their e-prints with LaTeXML",
                len(without_page),
                without_page[0],
            )
        return pages
    # A paper is known by its id: a sidecar or TeX folder elsewhere than the paper's page still has that page.
    keys = page_keys(pages)
    metas_by_id = {m: _meta_id(m) for m in metas if m not in beside or html_from == "latexml"}
    meta_keys = {_meta_key(k) for k in metas_by_id.values()}
    sources = [
        t
        for t in tex_sources(specs, skip=keys if html_from == "auto" else ())
        if not (id_keys(source_paper_id(t)[0]) & meta_keys)
    ]
    if html_from == "auto":
        convert = [m for m in metas if m not in beside and not (id_keys(metas_by_id[m]) & keys)]
        convert += [t for t in sources if not (id_keys(source_paper_id(t)[0]) & keys)]
        return sorted(pages + [convert_request(m) for m in convert])
    # latexml: every paper with metadata or a TeX source gets its page from its e-print; other pages stay.
    replaced = {c for m in metas for c in page_candidates(m)}
    converted = set().union(
        *(id_keys(i) for i in metas_by_id.values()), *(id_keys(source_paper_id(t)[0]) for t in sources)
    )
    kept = [p for p in pages if p not in replaced and not (page_keys([p]) & converted)]
    return sorted(kept + [convert_request(m) for m in metas] + [convert_request(t) for t in sources])


def _meta_id(meta_uri: str) -> Optional[str]:
    """The paper a sidecar is for: an arXiv id in its file name is taken as it is (a fetch
    cache names sidecars after their paper; at corpus scale reading each costs minutes on a
    bucket), else the id written inside it."""
    from sciga.schemas import ids
    from sciga.transforms.latexml.pages_from_eprints import meta_paper_id

    named, _ = ids.paper_id_from_filename(posixpath.basename(meta_uri)[: -len(META_SUFFIX)])
    if named:
        return named
    from sciga.transforms.common.errors import StageError
    from sciga.transforms.inputs.pages import read_sidecar_bytes

    try:
        return meta_paper_id(meta_uri, read_sidecar_bytes(meta_uri))  # contained: a link out is not read
    except StageError:
        return None  # the build dead-letters it when it reads it


def _meta_key(paper_id: Optional[str]) -> str:
    from sciga.schemas import ids

    return ids.split_version(paper_id)[0] if paper_id else ""


def input_paper_ids(inputs: Sequence[str]) -> list[str]:
    """The arXiv ids the inputs are for, as far as the names and sidecars say (for bulk
    e-print extraction before the pipeline)."""
    from sciga.transforms.latexml.pages_from_eprints import CONVERT_PREFIX, meta_paper_id

    out = set()
    for line in inputs:
        if line.startswith(CONVERT_PREFIX):
            uri = line[len(CONVERT_PREFIX) :]
            if not uri.endswith(META_SUFFIX):  # a TeX source given as an input: its name is the id
                from sciga.transforms.inputs.tex_inputs import source_paper_id

                pid, how = source_paper_id(uri)
                if how == "filename":
                    out.add(pid)
                continue
            try:
                out.add(meta_paper_id(uri, read_input(uri, parent_of(uri), MAX_SIDECAR_BYTES)))
            except OSError:
                continue
        else:
            pid, how = fallback_paper_id(line)
            if how == "filename" and pid:
                out.add(pid)
            elif line.endswith(".html") or ".html" in line:
                side = line.split(".htm", 1)[0] + META_SUFFIX
                try:
                    out.add(meta_paper_id(side, read_input(side, parent_of(side), MAX_SIDECAR_BYTES)))
                except (OSError, ValueError):
                    pass
    return sorted(out)
