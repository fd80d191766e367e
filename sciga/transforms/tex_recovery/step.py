"""Recover figures from the TeX source: a per-paper step between parse and link.

For a paper whose e-print is found (beside the page, or in ``--tex-input``), figures whose
HTML image is lost, absent or blank are pointed at the source file (``recover_figures``),
and those files are turned into PNG bytes here, once per paper, while the e-print is open
(PDF / EPS are rasterized). The bytes stay with the paper's work item until the vision
stage has measured them and the result store has kept them.

An unsafe or unreadable e-print does not cost the paper: the paper goes on without TeX
recovery and the e-print gets a dead-letter row of its own (``scope = "part"``). Where
the build looked for a source, and what it found, are recorded as dependencies, so adding
an e-print later recomputes exactly that paper.
"""

from __future__ import annotations

from sciga.schemas.build import PaperWork
from sciga.transforms.common.counters import Counter
from sciga.transforms.common.dead_letter import dead_letter_from
from sciga.transforms.common.result_store import absent_dep, stat_dep
from sciga.transforms.common.steps import PaperStep, is_transient
from sciga.transforms.tex_recovery.options import TexOptions

STAGE = "tex_source"


def tex_image_paths(paper) -> list[str]:
    """The source files the paper's figures now show (after recovery), in order."""
    seen: dict[str, None] = {}
    for fig in paper.figures:
        for img in fig.images:
            if img.source == "tex" and img.path:
                seen.setdefault(img.path, None)
        for sub in fig.subfigures:
            for img in sub.images:
                if img.source == "tex" and img.path:
                    seen.setdefault(img.path, None)
    return list(seen)


class RecoverStep(PaperStep):
    """PaperWork -> PaperWork whose lost figures point at (and carry) their TeX files."""

    STAGE = STAGE

    def __init__(self, options: TexOptions = TexOptions()):
        super().__init__()
        self.options = options
        self.with_source = Counter("tex_sources_found")
        self.recovered = Counter("tex_images_recovered")
        self.unusable = Counter("tex_sources_dead_lettered")

    def run(self, work: PaperWork):
        from sciga.transforms.eprints.tex_sources import locate_source_checked

        paper, uri, o = work.live_paper(), work.uri, self.options
        src, looked = locate_source_checked(uri, paper.id, o.tex_dirs)
        work.deps.extend(absent_dep(u) for u in looked)
        if src is None and o.bulk is None:
            return [work]
        if src is not None:
            work.deps.append(stat_dep(src))
        try:
            if src is not None:
                tree = self._load(work, src)
            elif o.bulk is not None:
                # From the bulk tars (extracted into the build's cache before the pipeline).
                work.deps.append(stat_dep(o.bulk.eprint_path(paper.id)))
                tree = o.bulk.tree(paper.id)
            self.with_source.inc()
            self._recover(work, tree)
        except Exception as e:  # noqa: BLE001 - the e-print fails, the paper stays
            self.unusable.inc()
            dl = dead_letter_from(e, STAGE, uri, paper.id)
            dl.scope = "part"
            if is_transient(e, dl.error_type):
                work.cacheable = False  # an I/O error reading the e-print: the next build tries it again
            work.dead.append(dl)
            work.count("tex_sources_dead_lettered")
            return [work]
        self._make_images(work, tree)
        return [work]

    def _load(self, work: PaperWork, src: str):
        from sciga.transforms.eprints.tex_sources import load_source

        return load_source(src, paper_id=work.live_paper().id)

    def _recover(self, work: PaperWork, tree) -> None:
        from sciga.transforms.eprints.tex_graphics import parse_document
        from sciga.transforms.tex_recovery.recover import image_problem, recover_figures

        o, uri = self.options, work.uri
        doc = parse_document(tree)
        rep = recover_figures(
            work.live_paper(),
            doc,
            lambda img: image_problem(img, uri, o.check_blank),
            threshold=o.threshold,
            number_min_jaccard=o.number_min_jaccard,
        )
        work.count("tex_figures_matched", rep.matched)
        work.count("tex_images_recovered", rep.recovered)
        self.recovered.inc(rep.recovered)

    def _make_images(self, work: PaperWork, tree) -> None:
        from sciga.transforms.eprints.rasterize import to_png_many

        o = self.options
        names = []
        for path in tex_image_paths(work.live_paper()):
            if path in tree.files:
                names.append(path)
            else:
                work.made_image_errors[path] = f"{path} is not in the e-print."
        results = (
            to_png_many([(n, tree.files[n]) for n in names], dpi=o.dpi, max_side=o.max_side, timeout=o.timeout)
            if names
            else []
        )
        for name, (png, err) in zip(names, results):
            if png is not None:
                work.made_images[name] = png
            elif err is not None:
                work.made_image_errors[name] = err.message
                if err.transient:
                    work.cacheable = False  # interrupted or timed out: not a final result
