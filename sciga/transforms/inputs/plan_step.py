"""Plan the inputs of a build: what must be computed, what can be reused.

Per input page the plan derives its result key from the page's SHA-256 (given by the
launcher when it knew it, see ``inputs/page_index.py``; else read and hashed here, streamed,
so a page costs no memory) and asks the result store whether a result with that key exists,
is complete and still matches every file it was made from (sidecar, e-print, images,
GA-manifest row). Such a paper skips parsing, linking and vision entirely: a few hundred
bytes (``ResultRef``) go straight to the writer. Everything else goes on to be parsed.

``--rebuild`` turns the lookup off. The shard layout does not depend on the plan: it is
fixed from the number of inputs before the pipeline starts.

An input the listing refused (``inputs/refused.py``: a page behind a link out of the input,
a path too long to open, a name that is not UTF-8 ...) is never read: the plan turns it
into its dead letter at once, a reference without a stored result on the same output as
the reused ones (``REUSED``: what goes straight to the writer).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Optional, Union

from sciga.schemas.build import FileDep, PlannedInput, ResultRef
from sciga.schemas.records import DeadLetter
from sciga.transforms.common.counters import Counter
from sciga.transforms.common.input_files import parent_of
from sciga.transforms.common.progress import Progress
from sciga.transforms.common.quick_exit import arm_quick_exit
from sciga.transforms.common.result_store import ResultStore, hash_file, ref_from_header, result_key, reusable
from sciga.transforms.common.steps import Step, Tagged
from sciga.transforms.inputs.refused import STAGE as REFUSED_STAGE
from sciga.transforms.inputs.refused import RefusedInput
from sciga.transforms.inputs.refused import from_element as refused_input

REUSED = "reused"


@dataclass(frozen=True)
class PlanOptions:
    store_root: str  # where results are kept (``<out>/.sciga`` by default)
    fingerprint: str  # code + result-changing options (``result_store.result_key``)
    rebuild: bool = False  # recompute everything, reuse nothing
    # False: the store holds nothing to reuse, so a page the launcher did not hash goes to
    # the parse step without a key, which hashes the bytes it reads (each page read once).
    hash_pages: bool = True
    max_page_bytes: int = 128 * 1024 * 1024
    progress_dir: Optional[str] = None


class PlanStep(Step):
    """input URI, or (URI, page SHA-256 the launcher knew) -> ``PlannedInput`` (main output) or a reusable ``ResultRef`` (``reused``)."""

    def __init__(self, options: PlanOptions, checkers: Optional[Mapping[str, Callable[[FileDep], bool]]] = None):
        self.options = options
        self.checkers = dict(checkers or {})
        self.progress = Progress(options.progress_dir)
        self.reused = Counter("inputs_reused")
        self.planned = Counter("inputs_planned")

    def setup(self):
        arm_quick_exit()
        self.store = ResultStore(self.options.store_root)
        for c in self.checkers.values():
            if hasattr(c, "setup"):
                c.setup()

    def process(self, element: Union[str, tuple[str, Optional[str]]]):
        gone = refused_input(element) if isinstance(element, str) else None
        if gone is not None:
            self.progress.add(inputs=1, dead=1)
            yield Tagged(REUSED, refused_ref(gone))
            return
        uri, sha = element if isinstance(element, tuple) else (element, None)
        if sha is None and not self.options.hash_pages:
            self.planned.inc()
            yield PlannedInput(uri=uri, key=None)
            return
        if sha is None:
            try:
                sha, _ = hash_file(uri, limit=self.options.max_page_bytes, root=parent_of(uri))
            except Exception:  # noqa: BLE001 - the parse stage reads it again and says what is wrong
                self.planned.inc()
                yield PlannedInput(uri=uri, key=None)
                return
        key = result_key(uri, sha, self.options.fingerprint)
        if not self.options.rebuild:
            header = self.store.header(key)
            if header is not None and reusable(header, self.checkers):
                ref = ref_from_header(header, reused=True)
                self.reused.inc()
                self.progress.add(
                    inputs=1,
                    reused=1,
                    papers=int(ref.is_paper),
                    dead=int(not ref.is_paper),
                    images=int(ref.stats.get("images_read", 0)),
                )
                yield Tagged(REUSED, ref)
                return
        self.planned.inc()
        yield PlannedInput(uri=uri, key=key, page_sha256=sha)

    def finish(self):
        self.progress.flush()


def refused_ref(gone: RefusedInput) -> ResultRef:
    """The result of an input the listing refused: its dead letter, nothing stored (a rerun
    refuses it again, as cheaply)."""
    from sciga.transforms.inputs.pages import fallback_paper_id

    uri = gone.uri
    pid, how = fallback_paper_id(uri)
    pid = pid if how == "filename" else None  # the name gives an arXiv id, or the row names none
    dl = DeadLetter(paper_id=pid, stage=REFUSED_STAGE, error_type=gone.kind, message=gone.message, input_uri=uri)
    return ResultRef(uri=uri, key=None, paper_id=pid, is_paper=False, dead=[dl])
