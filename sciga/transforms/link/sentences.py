"""Sentence boundaries for texts that hold a figure mention (scispaCy).

Default: ``spacy.blank("en")`` + scispaCy's ``pysbd_sentencizer`` (rule based, no model, same
output everywhere), computed from pysbd alone wherever spaCy's tokens cannot change it
(``pysbd_sentences``), so that most builds never import spaCy. Option: a scispaCy model the user installed (``en_core_sci_sm``) or a
spaCy pipeline folder, loaded from disk - never downloaded.

pysbd splits after "cf.", inside "Figs. 2 and 3" and inside ``<MATH> x_{i}. y </MATH>``
(all three seen on real captions), so the text is protected before segmentation with a
same-length copy: sentence punctuation inside ``<MATH>`` blocks, inside the mention spans
themselves (with their brackets: "Figure 2(a)" is otherwise read as an enumerated item)
and in scientific abbreviations becomes "_". Offsets are unchanged, so the
boundaries found on the copy cut the original text.
"""

from __future__ import annotations

import contextlib
import re
import sys
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from typing import Optional

PYSBD = "pysbd"
NONE = "none"

# Abbreviations whose dot never ends a sentence in papers (they are followed by what
# they introduce: "cf. Fig. 3", "e.g. ResNet", "Eq. 2").
_ABBREV_RE = re.compile(
    r"(?<![A-Za-z])(?:cf|Cf|e\.g|E\.g|i\.e|I\.e|vs|viz|resp|approx|w\.r\.t|Fig|Figs|FIG|FIGS|Eq|Eqs|Eqn|Eqns|"
    r"Sec|Secs|Sect|Tab|Tabs|Ref|Refs|Alg|Thm|Lem|Prop|Def|Cor|Ch|Chap|App|Appx|Suppl|Supp|No|Nos|pp|ca|incl|esp)\."
)
# "et al." ends a sentence only when a new sentence follows ("... by Smith et al. We ...").
# These two patterns start with a literal and look behind it, rather than look behind
# first: the regex engine then jumps to each "et" / "(" instead of trying every position
# (the enumerations' pattern took 57 us a paragraph that way, 1 us this way; same matches).
_ET_AL_RE = re.compile(r"et(?<=\bet) al\.(?=\s*[(\[,;:a-z0-9']|\s*$)")
# Inline enumerations ("are: (i) a router, (ii) a memory, and (iii) ...") are not sentence
# starts, but pysbd reads "(ii)" as a list item.
_INLINE_ENUM_RE = re.compile(r"\((?:(?<=[,:;]\s\()|(?<=\band\s\()|(?<=\bor\s\())(?:[ivx]{1,5}|[a-h]|\d{1,2})\)")
_TOKEN_RE = re.compile(r"</?(MATH|TAG)>")
# A parenthetical with no sentence punctuation inside ("(Sect. 4)" once "Sect." is
# protected) cannot hold a boundary, but pysbd reads its "4)" as a list item: blank the
# brackets.
_PLAIN_PARENS_RE = re.compile(r"\([^()\[\].!?]{1,200}\)")
_STOPS_RE = re.compile(r"[.!?]")


def _token_blocks(text: str) -> list[tuple[int, int]]:
    """(start, end) of every ``<MATH> ... </MATH>`` and ``<TAG> ... </TAG>`` block, as the
    lazy pattern ``<MATH>.*?</MATH>|<TAG>.*?</TAG>`` finds them, in one pass: the pattern
    rescans to the end for every opener that is never closed, which a page that writes
    "&lt;MATH&gt;" many times turns quadratic."""
    tokens = list(_TOKEN_RE.finditer(text))
    last_close = {m.group(1): m.start() for m in tokens if m.group(0).startswith("</")}
    out: list[tuple[int, int]] = []
    name, start = None, 0
    for m in tokens:
        closing = m.group(0).startswith("</")
        if name is None:
            if not closing and last_close.get(m.group(1), -1) > m.start():
                name, start = m.group(1), m.start()
        elif closing and m.group(1) == name:
            out.append((start, m.end()))
            name = None
    return out


def protect(text: str, spans: Iterable[tuple[int, int]] = ()) -> str:
    """Same-length copy of ``text`` where no sentence can end inside a math block, a
    mention span or after a known abbreviation."""
    chars = list(text)

    def blank(a: int, b: int) -> None:
        for i in range(a, b):
            if chars[i] in ".!?":
                chars[i] = "_"

    for a, b in _token_blocks(text):
        blank(a, b)
    for a, b in spans:
        # Also "(a)" and dashes: pysbd reads "Figure 2(a) shows" as an enumerated list item
        # and starts a sentence at "(a)".
        for i in range(a, b):
            if not (chars[i].isalnum() or chars[i].isspace()):
                chars[i] = "_"
    for m in _ABBREV_RE.finditer(text):
        blank(m.start(), m.end())
    for m in _ET_AL_RE.finditer(text):
        blank(m.start(), m.end())
    for m in _INLINE_ENUM_RE.finditer(text):
        chars[m.start()] = chars[m.end() - 1] = "_"
    out = "".join(chars)
    return _PLAIN_PARENS_RE.sub(lambda m: "_" + m.group(0)[1:-1] + "_", out)


# Strong candidate boundaries (sentence punctuation, space, a capital or an opening
# bracket/token): they only delimit the window handed to the segmenter, never a sentence.
_STRONG_RE = re.compile(r"[.!?][\"')\]]*\s+(?=[A-Z\"'(\[<])")


# What ends the stretch before a strong boundary: a word, a number after a word, or a
# token / bracket, then the punctuation (closing quotes, brackets and blanked chars skipped).
_BEFORE_STOP_RE = re.compile(
    r"(?:(?<![A-Za-z])(?P<word>[A-Za-z]+)|(?P<numpre>[A-Za-z,;:_]\s+)?(?<!\d)(?P<num>\d+)|(?P<close>[>)\]%]))"
    r"[\"'\u201d\u2019)\]_]*[.!?][\"'\u201d\u2019)\]_]*\s*$"
)
_INNER_STOP_RE = re.compile(r"[!?]|(?<!\d)\.|\.(?!\d)")
_ABBREVIATIONS: Optional[frozenset] = None


def _abbreviations() -> frozenset:
    global _ABBREVIATIONS
    if _ABBREVIATIONS is None:
        from pysbd.lang.english import English

        _ABBREVIATIONS = frozenset(a.lower() for a in English.Abbreviation.ABBREVIATIONS)
    return _ABBREVIATIONS


def _real_boundary(prot: str, end: int) -> bool:
    """Is the strong candidate boundary ending at ``end`` one that pysbd keeps? Yes after a
    plain word, after a number that follows a word ("in Figure 10."), after a token or a
    bracket ("</MATH>.", "[12]."); no after a known abbreviation ("Dr.", "al."), an initial
    ("J. Smith"), a dotted word ("U.S.") or a number on its own ("5." may be a list item)."""
    m = _BEFORE_STOP_RE.search(prot, max(0, end - 60), end)
    if not m:
        return False
    if m.group("word"):
        word = m.group("word")
        before = prot[m.start("word") - 1] if m.start("word") > 0 else " "
        if before == "." or before == "_" or before.isdigit():
            return False  # "U.S.", "x_y.", "3D.": part of a longer token
        return len(word) > 1 and word.lower() not in _abbreviations()
    if m.group("num"):
        return bool(m.group("numpre")) or prot[m.end("num")] in ")]"  # "in Figure 10.", "[2016]."
    return True


def _balanced(s: str) -> bool:
    return s.count("(") == s.count(")") and s.count("[") == s.count("]")


class Sentencizer:
    """Sentence bounds around mentions.

    pysbd costs ~3 ms per call plus ~45 KB/s, and grows faster than the text beyond a few
    KB, so it never gets more than a window around a mention:

    - the text is cut at strong candidate boundaries (". " + capital); a mention lies in the
      stretch between two such cuts. pysbd segments that stretch plus one stretch on each
      side; if the sentence found touches a window edge, the window grows by one stretch on
      that side and is segmented again. (This also keeps pysbd's list-number rule local:
      on a whole paragraph it reads "... at depth 5. At depth 6 ..." as an item "5.", in a
      window it does not.)
    - shortcut: a stretch that is *evident* - no other sentence punctuation inside, no quote,
      brackets balanced before and inside, both cuts right after a plain word (not a digit,
      an initial or an abbreviation of pysbd's list) - is what pysbd returns for it, so it is
      taken without calling pysbd. Tests check shortcut == windowed pysbd on thousands of
      positions of the corpus; it is what brings linking under half of the parse time.
    """

    def __init__(self, name: str = PYSBD, shortcut: bool = True):
        self.name = name
        # The shortcut reproduces pysbd's rules; a model (en_core_sci_sm) decides by itself.
        self.shortcut = shortcut and name == PYSBD
        # pysbd: spaCy is loaded on the first window ``pysbd_sentences`` cannot settle (its
        # import alone is 1.3 s, most of a small rebuild). A model is loaded now, so that a
        # missing one is reported before any paper is read.
        self._nlp = None if name in (PYSBD, NONE) else load_pipeline(name)

    @property
    def nlp(self):
        """The spaCy pipeline (None for ``none``)."""
        if self._nlp is None and self.name != NONE:
            self._nlp = load_pipeline(self.name)
        return self._nlp

    def __getstate__(self):  # Beam pickles DoFns: rebuild the pipeline on the worker
        return {"name": self.name, "shortcut": self.shortcut}

    def __setstate__(self, state):
        type(self).__init__(self, state["name"], state.get("shortcut", True))

    @staticmethod
    def _evident(prot: str, c: list[int], k: int, balanced_before: Optional[bool] = None) -> bool:
        lo, hi = c[k], c[k + 1]
        block = prot[lo:hi].rstrip()
        body = block[:-1] if block and block[-1] in ".!?" else block
        body = body.rstrip("\"')]")
        if _INNER_STOP_RE.search(body) or '"' in block or "\n" in block:
            return False
        before = balanced_before if balanced_before is not None else _balanced(prot[:lo])
        if not _balanced(block) or not before:
            return False
        if lo > 0 and not _real_boundary(prot, lo):
            return False
        if hi < len(prot) and not _real_boundary(prot, hi):
            return False
        return True

    def _segment(self, texts: list[str]) -> list[list[tuple[int, int]]]:
        found: list[Optional[list[tuple[int, int]]]] = [
            pysbd_sentences(t) if self.name == PYSBD else None for t in texts
        ]
        rest = [i for i, spans in enumerate(found) if spans is None]
        by_spacy = dict(zip(rest, self._segment_with_spacy([texts[i] for i in rest]) if rest else []))
        return [spans if spans is not None else by_spacy[i] for i, spans in enumerate(found)]

    def _segment_with_spacy(self, texts: list[str]) -> list[list[tuple[int, int]]]:
        out = []
        for text, doc in zip(texts, self.nlp.pipe(texts)):
            spans = []
            for s in doc.sents:
                a, b = s.start_char, s.end_char
                while a < b and text[a].isspace():
                    a += 1
                while b > a and text[b - 1].isspace():
                    b -= 1
                if b > a:
                    spans.append((a, b))
            out.append(spans or [(0, len(text))])
        return out

    def sentences(
        self, texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]]
    ) -> list[list[tuple[int, int]]]:
        """For each text, the (start, end) of the sentence holding each of its spans.

        Time and memory are linear in the text length (``bounded``): no window handed to
        the segmenter exceeds ``MAX_WINDOW`` characters, and a sentence longer than
        ``MAX_SENTENCE`` is cut around its mention. ``self.cut`` counts the mentions whose
        sentence was cut in the last call."""
        self.cut = 0
        if self.name == NONE:
            return [[(0, len(t))] * len(sp) for t, sp in zip(texts, spans)]
        # jobs: [text index, span index, window (block lo, block hi)]
        result = [[(0, len(t))] * len(sp) for t, sp in zip(texts, spans)]
        prepared, cuts, jobs, balanced = [], [], [], []
        for ti, (text, sp) in enumerate(zip(texts, spans)):
            prot = protect(text, sp)
            c = [0] + [m.end() for m in _STRONG_RE.finditer(prot)] + [len(text)]
            prepared.append(prot)
            cuts.append(c)
            balanced.append(_balanced_at_cuts(prot, c))
            for si, (a, b) in enumerate(sp):
                k = max(0, bisect_right(c, a) - 1)
                if c[k + 1] - c[k] > MAX_STRETCH:
                    # No candidate boundary for a long way (a caption of mentions, a giant
                    # formula): no segmenter run, the mention's stretch cut around it.
                    result[ti][si] = cut_around(text, c[k], c[k + 1], a, b)
                    self.cut += 1
                    continue
                if self.shortcut and self._evident(prot, c, k, balanced[ti][k]):
                    lo, hi = _strip(text, c[k], c[k + 1])
                    result[ti][si] = (lo, hi)
                    continue
                jobs.append([ti, si, max(0, k - 1), min(len(c) - 1, k + 2)])
        cache: dict[tuple[int, int, int], list[tuple[int, int]]] = {}
        while jobs:
            todo = sorted({(ti, lo, hi) for ti, _, lo, hi in jobs if (ti, lo, hi) not in cache})
            if todo:
                windows = [prepared[ti][cuts[ti][lo] : cuts[ti][hi]] for ti, lo, hi in todo]
                for key, sents in zip(todo, self._segment(windows)):
                    base = cuts[key[0]][key[1]]
                    cache[key] = [(base + a, base + b) for a, b in sents]
            again = []
            for job in jobs:
                ti, si, lo, hi = job
                c = cuts[ti]
                sents = cache[(ti, lo, hi)]
                a, b = sentence_of(sents, spans[ti][si][0])
                w_start, w_end = c[lo], _strip(texts[ti], c[lo], c[hi])[1]
                grow_left = a <= w_start and lo > 0
                grow_right = b >= w_end and hi < len(c) - 1
                new_lo, new_hi = lo - 1 if grow_left else lo, hi + 1 if grow_right else hi
                if (grow_left or grow_right) and c[new_hi] - c[new_lo] <= MAX_WINDOW:
                    again.append([ti, si, new_lo, new_hi])
                    continue
                if grow_left or grow_right:
                    self.cut += 1  # the sentence goes on past the largest window: cut at its edge
                result[ti][si] = (a, b)
            jobs = again
        for ti, sp in enumerate(spans):
            for si, (a, b) in enumerate(sp):
                lo, hi = result[ti][si]
                if hi - lo > MAX_SENTENCE:
                    result[ti][si] = cut_around(texts[ti], lo, hi, a, b)
                    self.cut += 1
        return result


_SEGMENTER = None  # pysbd's segmenter, as scispaCy's pysbd_sentencizer configures it
_SPACY_ABBREVIATIONS: Optional[frozenset] = None  # scispaCy's: no sentence starts after these


def pysbd_sentences(text: str) -> Optional[list[tuple[int, int]]]:
    """The sentences ``spacy.blank("en")`` + scispaCy's ``pysbd_sentencizer`` give for
    ``text`` - without spaCy - or None where only spaCy's tokenizer can tell.

    That component keeps a pysbd sentence only when its start and end fall on token
    boundaries, and not when the token before it is one of scispaCy's abbreviations; a
    sentence then runs to the next kept start. Around a single space both boundaries are
    certain whatever spaCy's prefix, suffix and infix rules do: a space always ends a token
    and the next character always starts one. So the answer is certain when every sentence
    pysbd returns starts right after one space and ends right before one, the text holds no
    other white space (newlines have rules of their own; tabs and no-break spaces become
    tokens) and no tail of the word before a start is an abbreviation. That holds for 98%
    of the corpus' texts; tests compare it with spaCy's answer on thousands of them."""
    global _SEGMENTER, _SPACY_ABBREVIATIONS
    if _SEGMENTER is None:
        import pysbd
        from scispacy.consts import ABBREVIATIONS

        _roomy_regex_cache()
        _SPACY_ABBREVIATIONS = frozenset(ABBREVIATIONS)
        _SEGMENTER = pysbd.Segmenter(language="en", clean=False, char_span=True)
    n = len(text)
    if not n or text[0] == " " or _OTHER_SPACE_RE.search(text):
        return None
    abbreviations = _SPACY_ABBREVIATIONS or frozenset()
    starts = []
    for sent in _SEGMENTER.segment(text):
        start = sent.start
        end = sent.end - (len(sent.sent) - len(sent.sent.rstrip(" ")))  # as the component cuts it
        if end <= start:
            return None
        if start > 0 and not (text[start - 1] == " " and text[start] != " "):
            return None
        if end < n and not (text[end] == " " and text[end - 1] != " "):
            return None
        if start == 0:
            continue
        if start >= 2 and text[start - 2] != " ":  # one space: the token before is the word's last
            word = text[text.rfind(" ", 0, start - 1) + 1 : start - 1]
            if any(word[k:] in abbreviations for k in range(len(word))):
                return None
        starts.append(start)
    edges = [0, *sorted(set(starts)), n]
    out = [_strip(text, a, b) for a, b in zip(edges, edges[1:])]
    return [(a, b) for a, b in out if b > a] or [(0, n)]


_OTHER_SPACE_RE = re.compile(r"[^\S ]")  # white space other than the plain space


# Bounds that keep sentence finding linear in the text (real sentences around a mention in
# the corpus are at most ~630 characters; pysbd's cost per character grows with the window).
MAX_STRETCH = 2_000  # longer stretches without a candidate boundary are not segmented, only cut
MAX_WINDOW = 6_000  # a window handed to the segmenter never grows past this
MAX_SENTENCE = 2_000  # a mention's sentence is at most this long (cut around the mention)


def _strip(text: str, lo: int, hi: int) -> tuple[int, int]:
    """``text[lo:hi]`` without the white space at its ends, as (start, end); scans only the
    white space (no copy of the text)."""
    while lo < hi and text[lo].isspace():
        lo += 1
    while hi > lo and text[hi - 1].isspace():
        hi -= 1
    return lo, hi


def cut_around(text: str, lo: int, hi: int, a: int, b: int) -> tuple[int, int]:
    """At most ``MAX_SENTENCE`` characters of ``text[lo:hi]`` around the mention ``[a, b)``,
    cut at white space where there is some near the edges."""
    room = max(0, MAX_SENTENCE - (b - a))
    start = max(lo, a - room // 2)
    end = min(hi, start + MAX_SENTENCE)
    start = max(lo, min(start, end - MAX_SENTENCE))
    if start > lo:
        sp = text.find(" ", start, min(a, start + 80))
        start = sp + 1 if sp >= 0 else start
    if end < hi:
        sp = text.rfind(" ", max(b, end - 80), end)
        end = sp if sp >= 0 else end
    return _strip(text, start, end)


def _balanced_at_cuts(prot: str, cuts: list[int]) -> list[bool]:
    """For each cut, whether the brackets before it are balanced: one pass over the text
    (asking ``_balanced(prot[:cut])`` per mention would cost the text length each time)."""
    out, rnd, sq, prev = [], 0, 0, 0
    for cut in cuts:
        block = prot[prev:cut]
        rnd += block.count("(") - block.count(")")
        sq += block.count("[") - block.count("]")
        out.append(rnd == 0 and sq == 0)
        prev = cut
    return out


def _roomy_regex_cache(size: int = 4096) -> None:
    """pysbd builds a regex per abbreviation per call through ``re``'s module cache (512
    entries); past that the cache thrashes and half of pysbd's time goes to recompiling.
    A larger cache halves segmentation time. Only ever raised, never lowered."""
    if getattr(re, "_MAXCACHE", size) < size:
        re._MAXCACHE = size  # type: ignore[attr-defined]


@contextlib.contextmanager
def _spacy_without_torch():
    """spaCy's thinc imports PyTorch whenever it is installed (about 550 MB and 3.5 s per
    process), although sentence splitting never uses it. While spaCy is first imported,
    ``import torch`` fails, so thinc runs on NumPy; a later ``import torch`` (the vision
    models) works as usual. Nothing changes when torch or thinc is already loaded."""
    if "torch" in sys.modules or "thinc" in sys.modules:
        yield
        return
    sys.modules["torch"] = None  # type: ignore[assignment]  # the documented way to make an import fail
    try:
        yield
    finally:
        if sys.modules.get("torch", "") is None:
            del sys.modules["torch"]


def load_pipeline(name: str):
    """``pysbd`` | ``none`` | an installed spaCy package name | a pipeline folder."""
    if name == NONE:
        return None
    with _spacy_without_torch():
        import spacy
        import spacy.lang.en

    _roomy_regex_cache()
    if name == PYSBD:
        import scispacy.custom_sentence_segmenter

        nlp = spacy.blank("en")
        nlp.add_pipe("pysbd_sentencizer")
        return nlp
    try:
        nlp = spacy.load(name, exclude=["ner", "lemmatizer", "attribute_ruler", "tagger"])
    except OSError:
        raise ValueError(
            f"the sentence model {name!r} is not installed and is not a spaCy pipeline folder; install it "
            "(e.g. pip install the en_core_sci_sm release from scispaCy) or use --sentencizer pysbd"
        ) from None
    if not ({"parser", "senter", "sentencizer", "pysbd_sentencizer"} & set(nlp.pipe_names)):
        import scispacy.custom_sentence_segmenter  # noqa: F401 - registers the "pysbd_sentencizer" factory

        nlp.add_pipe("pysbd_sentencizer")
    return nlp


def sentence_of(spans: list[tuple[int, int]], start: int) -> tuple[int, int]:
    """The sentence span holding ``start`` (the last one starting at or before it)."""
    best = spans[0]
    for s in spans:
        if s[0] <= start:
            best = s
        else:
            break
    return best
