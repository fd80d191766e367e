"""TeX source -> figures with their captions, numbers and resolved graphic files.

What is understood (enough for arXiv sources, without running TeX):

* the main file: the one with ``\\documentclass`` (or ``\\documentstyle``) and
  ``\\begin{document}`` that no other file inputs (``00README.XXX`` ``toplevelfile`` wins);
* ``\\input`` / ``\\include`` / ``\\subfile`` / ``\\import{dir}{file}`` / ``\\subimport``
  trees, inlined in order with cycle and depth limits (graphics inside an imported file
  resolve relative to its folder, as the ``import`` package does);
* comments, ``\\iffalse ... \\fi`` and ``comment`` environments are dropped;
* ``\\graphicspath{{a/}{b/}}`` and ``\\DeclareGraphicsExtensions``;
* ``\\includegraphics[...]{name}`` (and ``*``), ``\\epsfig{file=...}``, ``\\psfig{figure=...}``,
  ``\\epsfbox``, ``\\epsffile``, ``\\plotone`` / ``\\plottwo`` (AASTeX); names with quotes,
  braces or spaces; missing extensions tried in pdfLaTeX's order, then EPS/PS;
* figure floats (``figure``, ``figure*``, ``teaserfigure``, ``wrapfigure``, ``SCfigure``,
  ``sidewaysfigure``) and ``\\captionof{figure}`` outside floats (CVPR teaser strips);
  numbering follows LaTeX: every ``\\caption`` of a figure steps the counter (two captions
  in one float are two figures), ``\\caption`` inside a ``subfigure`` environment,
  ``\\subcaption`` and ``\\subfloat`` do not, ``\\setcounter{figure}`` and
  ``\\ContinuedFloat`` are honoured.

Graphics that cannot be found are kept with an error, so the caller can say which figure
lacks which file.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Optional

from sciga.transforms.eprints.eprint import SourceTree
from sciga.transforms.metadata.classifications import classes_from_tex

# pdfLaTeX's default search order, then what latex+dvips would use.
DEFAULT_EXTS = (
    ".pdf",
    ".png",
    ".jpg",
    ".mps",
    ".jpeg",
    ".jbig2",
    ".jb2",
    ".PDF",
    ".PNG",
    ".JPG",
    ".JPEG",
    ".eps",
    ".ps",
    ".EPS",
    ".PS",
    ".eps.gz",
    ".gif",
    ".tif",
    ".tiff",
    ".svg",
)
FIGURE_ENVS = (
    "figure",
    "figure*",
    "teaserfigure",
    "wrapfigure",
    "wrapfigure*",
    "SCfigure",
    "SCfigure*",
    "sidewaysfigure",
    "sidewaysfigure*",
    "floatingfigure",
)
MAX_DEPTH = 20
MAX_EXPANDED_CHARS = 40 * 1024 * 1024


@dataclass
class GraphicRef:
    ref: str  # as written in the source
    path: Optional[str] = None  # file in the source tree
    error: Optional[str] = None
    subcaption: Optional[str] = None


@dataclass
class TexFigure:
    number: Optional[str]  # printed number as LaTeX would count it; None if uncaptioned
    caption: str  # plain text of the caption
    graphics: list[GraphicRef] = field(default_factory=list)
    env: str = "figure"
    label: Optional[str] = None


@dataclass
class TexDocument:
    main: Optional[str]
    figures: list[TexFigure] = field(default_factory=list)
    graphicspath: list[str] = field(default_factory=list)
    acm_classes: list[str] = field(default_factory=list)
    msc_classes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # inputs not found, cycles, limits

    @property
    def missing_graphics(self) -> list[str]:
        return [g.ref for f in self.figures for g in f.graphics if g.path is None]


# -- text helpers ------------------------------------------------------------------------
_COMMENT_RE = re.compile(r"(?<!\\)%[^\n]*")


def strip_comments(tex: str) -> str:
    tex = _COMMENT_RE.sub("", tex)
    tex = re.sub(r"\\begin\{comment\}.*?\\end\{comment\}", "", tex, flags=re.S)
    # \iffalse ... \fi (not nested: enough for commented-out figures)
    return re.sub(r"\\iffalse\b.*?\\fi\b", "", tex, flags=re.S)


def decode_tex(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def read_group(text: str, i: int, open_ch: str = "{", close_ch: str = "}") -> tuple[Optional[str], int]:
    """Content of a balanced group starting at ``text[i]`` (after spaces), and the index
    after it; (None, i) if there is no such group."""
    n = len(text)
    j = i
    while j < n and text[j] in " \t\r\n":
        j += 1
    if j >= n or text[j] != open_ch:
        return None, i
    depth = 0
    k = j
    while k < n:
        ch = text[k]
        if ch == "\\":
            k += 2
            continue
        if ch == open_ch:
            depth += 1
        elif ch == close_ch:
            depth -= 1
            if depth == 0:
                return text[j + 1 : k], k + 1
        k += 1
    return None, i


def skip_options(text: str, i: int) -> int:
    """Skip any number of ``[...]`` optional arguments (nested brackets allowed)."""
    while True:
        grp, j = read_group(text, i, "[", "]")
        if grp is None:
            return i
        i = j


def tex_to_plain(s: str) -> str:
    """A caption in TeX -> plain words (math, refs, cites, labels, footnotes dropped)."""
    s = re.sub(
        r"\\(?:label|ref|cref|Cref|autoref|eqref|pageref|cite[a-zA-Z]*|footnote|footnotemark|"
        r"footnotetext|url|href|hspace|vspace|includegraphics|index)\*?\s*(?:\[[^\]]*\]\s*)*\{[^{}]*\}",
        " ",
        s,
    )
    s = re.sub(r"\$\$.*?\$\$|\$.*?\$|\\\(.*?\\\)|\\\[.*?\\\]", " ", s, flags=re.S)
    s = re.sub(r"\\[`'^\"~=.](?=[A-Za-z{])", "", s)  # accents: \'e -> e
    s = re.sub(r"\\[uvHtcdbk](?=\{)", "", s)  # \v{c} -> c
    s = re.sub(r"\\[a-zA-Z@]+\*?", " ", s)
    s = s.replace("~", " ").replace("\\%", "%").replace("\\&", "&").replace("\\_", "_")
    s = re.sub(r"[{}]", "", s)
    s = re.sub(r"[\[\]\\]", " ", s)
    s = re.sub(r"\s+", " ", s).strip()
    return re.sub(r"\s+([.,;:!?])", r"\1", s).replace("..", ".")


# -- files and the input tree ----------------------------------------------------------------
_DOCCLASS_RE = re.compile(r"\\document(?:class|style)\b")
_BEGIN_DOC_RE = re.compile(r"\\begin\s*\{document\}")
_INPUT_RE = re.compile(
    r"\\(?P<cmd>input|include|subfile|InputIfFileExists|import|subimport|includefrom|subincludefrom|inputfrom|subinputfrom)"
    r"(?![A-Za-z@])\s*"
)


def find_main(tree: SourceTree) -> Optional[str]:
    texs = tree.tex_files()
    if not texs:
        return None
    for p, data in tree.files.items():
        if posixpath.basename(p).lower().startswith("00readme"):
            m = re.search(rb"^\s*(\S+\.tex)\s+toplevelfile", data, re.M)
            if m:
                cand = posixpath.normpath(posixpath.join(posixpath.dirname(p), m.group(1).decode("utf-8", "replace")))
                if cand in tree.files:
                    return cand
    texts = {p: strip_comments(decode_tex(tree.files[p])) for p in texs}
    roots = [p for p in texs if _DOCCLASS_RE.search(texts[p]) and _BEGIN_DOC_RE.search(texts[p])]
    if not roots:
        roots = [p for p in texs if _BEGIN_DOC_RE.search(texts[p])] or [
            p for p in texs if _DOCCLASS_RE.search(texts[p])
        ]
    if not roots:
        return texs[0] if len(texs) == 1 else None
    if len(roots) == 1:
        return roots[0]
    included = set()
    for p in texs:
        for inc in re.finditer(r"\\(?:input|include|subfile)\s*\{([^{}]+)\}", texts[p]):
            included.add(posixpath.normpath(inc.group(1).strip()).removesuffix(".tex"))
    top = [p for p in roots if p.removesuffix(".tex") not in included] or roots
    preferred = ("main", "ms", "paper", "article", "manuscript", "root")
    top.sort(
        key=lambda p: (
            p.count("/"),
            posixpath.basename(p).removesuffix(".tex").lower() not in preferred,
            -len(tree.files[p]),
            p,
        )
    )
    return top[0]


def _resolve_tex(tree: SourceTree, name: str, base_dir: str) -> Optional[str]:
    name = name.strip().strip('"')
    for d in (base_dir, ""):
        cand = posixpath.normpath(posixpath.join(d, name)) if d else posixpath.normpath(name)
        if cand.startswith("../") or cand.startswith("/"):
            continue
        for c in (cand, cand + ".tex", cand + ".ltx"):
            if c in tree.files:
                return c
    return None


@dataclass
class _Chunk:
    text: str
    base_dir: str  # folder graphics resolve against (import package semantics)


def expand(tree: SourceTree, main: str, problems: list[str]) -> list[_Chunk]:
    """The main file with its inputs inlined, as chunks that remember their folder."""
    out: list[_Chunk] = []
    total = [0]

    def walk(path: str, base_dir: str, depth: int, stack: tuple) -> None:
        if depth > MAX_DEPTH:
            problems.append(f"\\input nesting deeper than {MAX_DEPTH} at {path}; stopped there")
            return
        text = strip_comments(decode_tex(tree.files[path]))
        total[0] += len(text)
        if total[0] > MAX_EXPANDED_CHARS:
            problems.append(
                f"the TeX sources exceed {MAX_EXPANDED_CHARS // (1 << 20)} MiB when inlined; stopped at {path}"
            )
            return
        pos = 0
        for m in _INPUT_RE.finditer(text):
            if m.start() < pos:
                continue
            cmd = m.group("cmd")
            i = m.end()
            dir_arg = None
            if cmd in ("import", "subimport", "includefrom", "subincludefrom", "inputfrom", "subinputfrom"):
                dir_arg, i = read_group(text, i)
                if dir_arg is None:
                    continue
            arg, j = read_group(text, i)
            if arg is None:
                if cmd == "input":
                    mm = re.match(r"\s*([^\s{}\\]+)", text[i:])
                    if not mm:
                        continue
                    arg, j = mm.group(1), i + mm.end()
                else:
                    continue
            if cmd == "InputIfFileExists":
                # \InputIfFileExists{file}{then}{else}: skip the two branches
                _, j2 = read_group(text, j)
                _, j = read_group(text, j2)
            out.append(_Chunk(text[pos : m.start()], base_dir))
            pos = j
            arg = arg.strip()
            if dir_arg is not None:
                if cmd.startswith("sub"):
                    new_base = (
                        posixpath.normpath(posixpath.join(base_dir, dir_arg.strip()))
                        if base_dir
                        else posixpath.normpath(dir_arg.strip())
                    )
                else:
                    new_base = posixpath.normpath(dir_arg.strip())
                target = _resolve_tex(tree, posixpath.join(new_base, arg), "")
            else:
                new_base = base_dir
                target = _resolve_tex(tree, arg, base_dir)
            if target is None:
                if not arg.lower().endswith(
                    (".bbl", ".sty", ".cls", ".pgf", ".tikz", ".pdf_tex", ".ind", ".toc", ".aux")
                ):
                    problems.append(f"\\{cmd}{{{arg}}} in {path} names a file that is not in the source")
                continue
            if target in stack:
                problems.append(f"\\{cmd}{{{arg}}} in {path} includes itself (cycle); skipped")
                continue
            walk(target, new_base, depth + 1, stack + (target,))
        out.append(_Chunk(text[pos:], base_dir))

    walk(main, posixpath.dirname(main), 0, (main,))
    return out


# -- graphics ----------------------------------------------------------------------------
def _graphicspath(text: str) -> list[str]:
    dirs = []
    for m in re.finditer(r"\\graphicspath\s*", text):
        grp, _ = read_group(text, m.end())
        if grp is None:
            continue
        inner = re.findall(r"\{([^{}]*)\}", grp) or [grp]
        for d in inner:
            d = d.strip().strip('"')
            if d:
                dirs.append(d)
    return dirs


def _declared_exts(text: str) -> Optional[list[str]]:
    m = re.search(r"\\DeclareGraphicsExtensions\s*\{([^{}]*)\}", text)
    if not m:
        return None
    exts = [e.strip() for e in m.group(1).split(",") if e.strip()]
    return exts or None


def clean_graphic_name(raw: str) -> str:
    s = raw.strip()
    s = re.sub(r"^\{(.*)\}$", r"\1", s)  # {{fig.1}.png} -> {fig.1}.png
    s = s.replace("{", "").replace("}", "").replace('"', "")
    s = s.replace("\\space", " ").replace("~", " ")
    return s.strip()


@dataclass
class GraphicsContext:
    tree: SourceTree
    main_dir: str
    dirs: list[str]
    exts: list[str]
    _lower: dict = field(default_factory=dict)

    def __post_init__(self):
        self._lower = {}
        for p in self.tree.files:
            self._lower.setdefault(p.lower(), p)

    def resolve(self, raw: str, base_dir: str) -> GraphicRef:
        name = clean_graphic_name(raw)
        ref = GraphicRef(ref=raw.strip())
        if not name:
            ref.error = "empty graphic name"
            return ref
        if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
            ref.error = f"graphic {name!r} is an absolute path (not in the e-print)"
            return ref
        bases = []
        for b in (base_dir, self.main_dir):
            if b not in bases:
                bases.append(b)
        for d in self.dirs:
            for b in (self.main_dir, base_dir):
                full = posixpath.normpath(posixpath.join(b, d)) if b else posixpath.normpath(d)
                if full not in bases:
                    bases.append(full)
        if "" not in bases:
            bases.append("")
        low_name = name.lower()
        has_ext = low_name.endswith(tuple(e.lower() for e in DEFAULT_EXTS))
        tries = ([name] if has_ext else []) + [name + e for e in self.exts] + ([] if has_ext else [name])
        for b in bases:
            for t in tries:
                cand = posixpath.normpath(posixpath.join(b, t)) if b else posixpath.normpath(t)
                if cand.startswith("../") or cand == "..":
                    continue
                if cand in self.tree.files:
                    ref.path = cand
                    return ref
        # Case-insensitive fallback (sources written on Windows / macOS).
        for b in bases:
            for t in tries:
                cand = posixpath.normpath(posixpath.join(b, t)) if b else posixpath.normpath(t)
                hit = self._lower.get(cand.lower())
                if hit:
                    ref.path = hit
                    return ref
        ref.error = f"graphic {name!r} is referenced but not in the e-print"
        return ref


_GRAPHIC_CMD_RE = re.compile(
    r"\\(?P<cmd>includegraphics|epsfig|psfig|epsfbox|epsffile|plotone|plottwo|plotfiddle|includesvg)(?![A-Za-z@])\*?"
)


def graphics_in(text: str) -> list[tuple[int, str]]:
    """(offset, raw name) of every graphic inclusion in ``text``, in order."""
    out = []
    for m in _GRAPHIC_CMD_RE.finditer(text):
        cmd = m.group("cmd")
        i = skip_options(text, m.end())
        arg, j = read_group(text, i)
        if arg is None:
            continue
        if cmd in ("epsfig", "psfig"):
            mm = re.search(r"(?:file|figure)\s*=\s*([^,}]+)", arg)
            if mm:
                out.append((m.start(), mm.group(1)))
        elif cmd == "plottwo":
            out.append((m.start(), arg))
            arg2, _ = read_group(text, j)
            if arg2 is not None:
                out.append((m.start() + 1, arg2))
        else:
            out.append((m.start(), arg))
    return out


# -- figures -----------------------------------------------------------------------------
_ENV_RE = re.compile(r"\\(begin|end)\s*\{([A-Za-z*]+)\}")
_CAPTION_RE = re.compile(
    r"\\(caption|captionof|subcaption|subfloat|subfigure|sidesubfloat|subcaptionbox|"
    r"setcounter|addtocounter|ContinuedFloat|label)(?![A-Za-z@])(\*?)"
)


@dataclass
class _Event:
    pos: int
    kind: str  # caption | subcaption | graphic | counter | continued | label
    text: str = ""
    value: int = 0
    ref: Optional[GraphicRef] = None  # the resolved graphic of a "graphic" event


def _events(seg: str, base_dir: str, gctx: GraphicsContext, in_subfigure_env: list[tuple[int, int]]) -> list[_Event]:
    evs: list[_Event] = []
    for pos, raw in graphics_in(seg):
        evs.append(_Event(pos, "graphic", raw, ref=gctx.resolve(raw, base_dir)))
    for m in _CAPTION_RE.finditer(seg):
        name, star = m.group(1), m.group(2)
        i = m.end()
        if name == "ContinuedFloat":
            evs.append(_Event(m.start(), "continued"))
            continue
        if name in ("setcounter", "addtocounter"):
            counter, j = read_group(seg, i)
            val, _ = read_group(seg, j)
            if counter and counter.strip() == "figure" and val is not None:
                try:
                    evs.append(_Event(m.start(), "set" if name == "setcounter" else "add", value=int(val.strip())))
                except ValueError:
                    pass
            continue
        if name == "label":
            lab, _ = read_group(seg, i)
            if lab is not None:
                evs.append(_Event(m.start(), "label", lab.strip()))
            continue
        if name == "captionof":
            typ, j = read_group(seg, i)
            if typ is None or typ.strip() != "figure":
                continue
            j = skip_options(seg, j)
            cap, _ = read_group(seg, j)
            if cap is not None:
                evs.append(_Event(m.start(), "captionof" if not star else "caption_nonum", cap))
            continue
        if name in ("subfloat", "sidesubfloat"):
            opt, _ = read_group(seg, i, "[", "]")
            evs.append(_Event(m.start(), "subfloat", opt or ""))
            continue
        if name in ("subcaption", "subcaptionbox"):
            j = skip_options(seg, i)
            cap, _ = read_group(seg, j)
            evs.append(_Event(m.start(), "subcaption", cap or ""))
            continue
        if name == "subfigure":
            # subfigure package: \subfigure[caption]{...} (the environment form is handled by begin/end)
            opt, _ = read_group(seg, i, "[", "]")
            evs.append(_Event(m.start(), "subfloat", opt or ""))
            continue
        # \caption[short]{long}
        j = skip_options(seg, i)
        cap, _ = read_group(seg, j)
        if cap is None:
            continue
        inside_sub = any(a <= m.start() < b for a, b in in_subfigure_env)
        if inside_sub:
            evs.append(_Event(m.start(), "subcaption", cap))
        else:
            evs.append(_Event(m.start(), "caption_nonum" if star else "caption", cap))
    evs.sort(key=lambda e: e.pos)
    return evs


def _env_spans(text: str) -> list[tuple[str, int, int, int]]:
    """(name, begin offset, body start, end offset) of top-level figure-like environments
    and of subfigure-like environments anywhere, with proper nesting."""
    spans = []
    stack: list[tuple[str, int, int]] = []
    for m in _ENV_RE.finditer(text):
        kind, name = m.group(1), m.group(2)
        if kind == "begin":
            stack.append((name, m.start(), m.end()))
        else:
            for k in range(len(stack) - 1, -1, -1):
                if stack[k][0] == name:
                    nm, b, bs = stack[k]
                    del stack[k:]
                    spans.append((nm, b, bs, m.start()))
                    break
    return spans


def parse_document(tree: SourceTree) -> TexDocument:
    """All figures of an e-print's main document, with graphics resolved."""
    main = find_main(tree)
    doc = TexDocument(main=main)
    if main is None:
        if tree.kind in ("pdf", "ps"):
            doc.problems.append(f"the e-print is {tree.kind.upper()}-only; there is no TeX to take figures from")
        else:
            doc.problems.append("no main .tex file found in the e-print")
        return doc
    chunks = expand(tree, main, doc.problems)
    text = "".join(c.text for c in chunks)
    doc.graphicspath = _graphicspath(text)
    exts = _declared_exts(text)
    gctx = GraphicsContext(
        tree=tree,
        main_dir=posixpath.dirname(main),
        dirs=doc.graphicspath,
        exts=list(exts) + [e for e in DEFAULT_EXTS if e not in exts] if exts else list(DEFAULT_EXTS),
    )
    doc.acm_classes, doc.msc_classes = classes_from_tex(text)

    # One pass over the inlined text, chunk by chunk (chunks keep their graphics folder).
    chunk_spans = []
    pos = 0
    for c in chunks:
        chunk_spans.append((pos, pos + len(c.text), c.base_dir))
        pos += len(c.text)
    body_start = _BEGIN_DOC_RE.search(text)
    start = body_start.end() if body_start else 0
    spans = _env_spans(text)
    sub_spans = [(b, e) for nm, b, _, e in spans if nm in ("subfigure", "subfigure*")]
    counter = 0
    for a, z, env in _float_regions(text, start, spans):
        if a >= z:
            continue
        evs = _events_between(text, a, z, chunk_spans, sub_spans, gctx)
        if env is None:
            counter = _figures_outside_floats(evs, counter, doc.figures)
        else:
            counter = _figures_in_float(evs, counter, env, doc.figures)
    return doc


def _float_regions(
    text: str, start: int, spans: list[tuple[str, int, int, int]]
) -> list[tuple[int, int, Optional[str]]]:
    """The body from ``start`` cut into (start, end, figure environment or None) regions: the
    bodies of the outermost figure environments and the text between them."""
    fig_spans = sorted([(b, bs, e, nm) for nm, b, bs, e in spans if nm in FIGURE_ENVS and b >= start])
    # keep only outermost figure environments
    outer: list[tuple[int, int, int, str]] = []
    for b, bs, e, nm in fig_spans:
        if outer and b < outer[-1][2]:
            continue
        outer.append((b, bs, e, nm))
    cursor = start
    regions: list[tuple[int, int, Optional[str]]] = []
    for b, bs, e, nm in outer:
        regions.append((cursor, b, None))
        regions.append((bs, e, nm))
        cursor = e
    regions.append((cursor, len(text), None))
    return regions


def _events_between(
    text: str,
    a: int,
    z: int,
    chunk_spans: list[tuple[int, int, str]],
    sub_spans: list[tuple[int, int]],
    gctx: GraphicsContext,
) -> list[_Event]:
    """The events of ``text[a:z]``, in order; split by chunk so graphics resolve against the
    right folder."""
    evs = []
    for ca, cz, d in chunk_spans:
        lo, hi = max(a, ca), min(z, cz)
        if lo >= hi:
            continue
        local_subs = [(sb - lo, se - lo) for sb, se in sub_spans if sb < hi and se > lo]
        for ev in _events(text[lo:hi], d, gctx, local_subs):
            ev.pos += lo
            evs.append(ev)
    evs.sort(key=lambda e: e.pos)
    return evs


def _figures_outside_floats(evs: list[_Event], counter: int, figures: list[TexFigure]) -> int:
    """Outside floats only counters and \\captionof{figure} matter (teaser strips): the graphics
    of a \\captionof are those since the previous caption-ish event. Appends the figures; the
    figure counter after them."""
    pending: list[GraphicRef] = []
    for ev in evs:
        if ev.kind == "set":
            counter = ev.value
        elif ev.kind == "add":
            counter += ev.value
        elif ev.kind == "graphic" and ev.ref is not None:
            pending.append(ev.ref)
        elif ev.kind == "captionof":
            counter += 1
            figures.append(
                TexFigure(number=str(counter), caption=tex_to_plain(ev.text), graphics=pending[-4:], env="captionof")
            )
            pending = []
        elif ev.kind in ("caption", "subcaption"):
            pending = []
    return counter


def _figures_in_float(evs: list[_Event], counter: int, env: str, figures: list[TexFigure]) -> int:
    """The figures of one figure environment (one per caption, subfigures as graphics with a
    subcaption). Appends them; the figure counter after them."""
    figs_here: list[TexFigure] = []
    pending: list[GraphicRef] = []
    continued = False
    next_sub: Optional[str] = None
    for ev in evs:
        if ev.kind == "graphic" and ev.ref is not None:
            ref = ev.ref
            if next_sub is not None:
                ref.subcaption = next_sub or None
                next_sub = None
            pending.append(ref)
        elif ev.kind == "subfloat":
            # \subfloat[caption]{\includegraphics{x}}: the caption comes first.
            next_sub = tex_to_plain(ev.text)
        elif ev.kind == "subcaption":
            # subfigure environment / \subcaption: the caption follows its graphic.
            if pending and pending[-1].subcaption is None:
                pending[-1].subcaption = tex_to_plain(ev.text) or None
        elif ev.kind == "continued":
            continued = True
        elif ev.kind in ("set", "add"):
            counter = ev.value if ev.kind == "set" else counter + ev.value
        elif ev.kind == "label":
            if figs_here and figs_here[-1].label is None:
                figs_here[-1].label = ev.text
        elif ev.kind in ("caption", "captionof", "caption_nonum"):
            if ev.kind != "caption_nonum" and not continued:
                counter += 1
            number = str(counter) if ev.kind != "caption_nonum" else None
            figs_here.append(TexFigure(number=number, caption=tex_to_plain(ev.text), graphics=pending, env=env))
            pending = []
    if pending:
        if figs_here:
            figs_here[-1].graphics.extend(pending)
        else:
            figs_here.append(TexFigure(number=None, caption="", graphics=pending, env=env))
    figures.extend(figs_here)
    return counter
