"""Sentences around mentions: scispaCy's pysbd_sentencizer with protected tokens, the
window/shortcut machinery, and the spaCy-model option (a tiny pipeline built here)."""

from __future__ import annotations

import re

import pytest
from link_fixtures import CORPUS_PAGES, SAMPLE_STEMS, TEST_PAGES, linked, needs_corpus, page_path, parse, sentencizer

from sciga.transforms.link.sentences import (
    _ET_AL_RE,
    _INLINE_ENUM_RE,
    _STRONG_RE,
    NONE,
    Sentencizer,
    load_pipeline,
    protect,
    pysbd_sentences,
    sentence_of,
)

TEXT = (
    "As shown in Figs. 2 and 3, the router works (cf. Fig. 3(a)). Smith et al. show that "
    "<MATH> x_{i}. y=2 </MATH> holds in Fig. 4. We use e.g. ResNet, i.e. a CNN, as in Sect. 4. "
    "The error is 3.5 pp. lower in Fig. S1 than reported by Smith et al. Then we stop."
)


def sentence(text, needle, sz=None):
    a = text.index(needle)
    ((s, e),) = (sz or sentencizer()).sentences([text], [[(a, a + len(needle))]])[0:1][0]
    return text[s:e]


def test_protect_keeps_offsets_and_blanks_only_what_cannot_end_a_sentence():
    p = protect(TEXT, [(TEXT.index("Figs. 2"), TEXT.index("Figs. 2") + 7)])
    assert len(p) == len(TEXT)
    assert "Figs_ 2" in p and "cf_" in p and "et al_ show" in p and "x_{i}_ y" in p and "e_g_" in p
    assert "Smith et al. Then" in p  # a new sentence follows: this "et al." may end one
    assert p.endswith("we stop.")


# The two patterns as first written, looking behind before they match anything: the
# rewritten ones (a literal first, for speed) must find exactly the same spans.
_ET_AL_LOOKING_FIRST = re.compile(r"\bet al\.(?=\s*[(\[,;:a-z0-9']|\s*$)")
_INLINE_ENUM_LOOKING_FIRST = re.compile(r"(?:(?<=[,:;]\s)|(?<=\band\s)|(?<=\bor\s))\((?:[ivx]{1,5}|[a-h]|\d{1,2})\)")


def test_the_fast_patterns_find_what_the_look_behind_first_ones_find():
    import random

    pieces = [", (ii) ", " and (a) ", " or (3) ", "; (iv)", "(b)", "band (a)", "for (i)", "color (x)", "(12)"]
    pieces += [" et al. ", "bet al.", "et al.,", "et al.(", " et al. We", "Smith et al.", "\n", "  ", " ", "a"]
    pieces += ["(", ")", ",", ":", ";", "and", "or", "et", " al.", "é", "_"]
    rng = random.Random(7)
    texts = [TEXT] + ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 14))) for _ in range(20_000)]
    texts += [p.text for key in SAMPLE_STEMS for s in parse(key).sections for p in s.paragraphs]
    for fast, first in ((_ET_AL_RE, _ET_AL_LOOKING_FIRST), (_INLINE_ENUM_RE, _INLINE_ENUM_LOOKING_FIRST)):
        for t in texts:
            assert [m.span() for m in fast.finditer(t)] == [m.span() for m in first.finditer(t)], t
    assert sum(bool(_INLINE_ENUM_RE.search(t)) for t in texts) > 1000  # the pieces make real matches


@pytest.mark.parametrize(
    "needle, want",
    [
        ("Figs. 2", "As shown in Figs. 2 and 3, the router works (cf. Fig. 3(a))."),
        ("Fig. 3(a)", "As shown in Figs. 2 and 3, the router works (cf. Fig. 3(a))."),
        ("Fig. 4", "Smith et al. show that <MATH> x_{i}. y=2 </MATH> holds in Fig. 4."),
        ("Fig. S1", "The error is 3.5 pp. lower in Fig. S1 than reported by Smith et al."),
    ],
)
def test_mentions_survive_fig_cf_et_al_and_math(needle, want):
    assert sentence(TEXT, needle) == want


def test_unprotected_pysbd_would_cut_these_sentences():
    """The reason for protect(): scispaCy's component on the raw text splits after "cf."."""
    raw = [TEXT[a:b] for a, b in Sentencizer()._segment([TEXT])[0]]
    assert "As shown in Figs. 2 and 3, the router works (cf." in raw or "As shown in Figs." in raw


def test_none_and_titles():
    sz = Sentencizer(NONE)
    assert sz.sentences(["a b. c d."], [[(0, 1), (5, 6)]]) == [[(0, 9), (0, 9)]]
    assert sentence_of([(0, 5), (6, 10)], 7) == (6, 10)


def test_spacy_model_option_loads_a_pipeline_folder(tmp_path):
    """A model from disk (what en_core_sci_sm is once installed); never downloaded."""
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.to_disk(tmp_path / "tiny")
    sz = Sentencizer(str(tmp_path / "tiny"))
    assert not sz.shortcut  # the model decides by itself
    text = "First we look. Then see Fig. 2 for more. Done."
    assert sentence(text, "Fig. 2", sz) == "Then see Fig. 2 for more."
    with pytest.raises(ValueError, match="not installed"):
        load_pipeline("en_core_sci_nonexistent")


def test_sentencizer_pickles_by_name():
    import pickle

    sz = pickle.loads(pickle.dumps(Sentencizer()))
    assert sz.nlp is not None and sz.name == "pysbd"


def _positions(text):
    return [(m.start(), m.start() + 1) for m in re.finditer(r"(?<= )[a-z]{3,}", text)][::5]


@pytest.mark.e2e  # runs pysbd over whole corpus papers
@needs_corpus
@pytest.mark.parametrize("key", ["eml", "honline", "distildoc", "2511.99003"])
def test_shortcut_equals_windowed_pysbd(key):
    """The shortcut takes a stretch as the sentence only where pysbd agrees: same bounds on
    every probed position of real paragraphs (hundreds per page)."""
    paper = parse(key)
    texts = [p.text for s in paper.sections for p in s.paragraphs if len(p.text) < 6000]
    spans = [_positions(t) for t in texts]
    fast = Sentencizer().sentences(texts, spans)
    slow = Sentencizer(shortcut=False).sentences(texts, spans)
    assert sum(map(len, spans)) > 50
    assert fast == slow


@needs_corpus
def test_every_corpus_mention_gets_the_whole_text_sentence():
    """For the mentions themselves, window + shortcut agree with segmenting the whole text."""
    slow = Sentencizer(shortcut=False)
    n = 0
    for key in list(SAMPLE_STEMS) + list(CORPUS_PAGES):
        if not page_path(key).exists():
            continue
        paper = linked(key)
        for sec in paper.sections:
            for para in sec.paragraphs:
                fig = [s for s in para.ref_spans if s.sentence_start is not None]
                if not fig:
                    continue
                whole = slow._segment([protect(para.text, [(s.start, s.end) for s in fig])])[0]
                for s in fig:
                    assert (s.sentence_start, s.sentence_end) == sentence_of(whole, s.start)
                    n += 1
    assert n > 80


# Texts where spaCy's tokens decide what pysbd alone cannot: white space other than one
# space, a start or an end inside a word, an abbreviation of scispaCy's before a start.
TOKEN_CASES = [
    "We compare with Smith et al. Their model wins.\nA new line starts here. And more.",
    "Two  spaces here. Then\ta tab. And\u00a0a no-break space. End.",
    "It ends here.Next starts without a space. Done.",
    '"A quoted sentence." Then another one. (A bracketed sentence.) The last one.',
    "See the sec. Next we go on. It is in figs. Two more follow. Done.",
    "Accuracy rose by 3 pp. The loss fell in Fig. 2. We stop here.",
    " A leading space. Then a second sentence.",
    TEXT,
]


def _page_texts(keys, widths=(1, 3)) -> list[str]:
    """Paragraphs, captions and windows of ``widths`` stretches between strong candidate
    boundaries (as the windowed segmenter cuts them, protected) of the pages ``keys``."""
    out = []
    for key in keys:
        paper = parse(key)
        out += [f.caption for f in paper.figures if f.caption]
        for sec in paper.sections:
            for para in sec.paragraphs:
                t = protect(para.text)
                c = [0] + [m.end() for m in _STRONG_RE.finditer(t)] + [len(t)]
                out += [t[c[i] : c[i + w]] for w in widths for i in range(len(c) - w)]
                out.append(para.text)
    return list(dict.fromkeys(x for x in out if x))


def _agrees_with_spacy(texts: list[str]) -> tuple[int, int]:
    sz = Sentencizer()
    settled = 0
    for t in texts:
        got = pysbd_sentences(t)
        if got is not None:
            settled += 1
            assert got == sz._segment_with_spacy([t])[0], t
    return settled, len(texts)


def test_pysbd_alone_gives_spacys_sentences_wherever_it_answers():
    """Sentences come from pysbd directly, spaCy's tokenizer only where pysbd's bounds are
    not certain token bounds: the same sentences either way, on every text of the sample."""
    settled, n = _agrees_with_spacy(_page_texts(SAMPLE_STEMS + TEST_PAGES) + TOKEN_CASES)
    assert n > 200 and settled > 0.9 * n, (settled, n)


def test_where_pysbd_alone_cannot_tell_spacy_decides():
    sz = Sentencizer()
    unsettled = [t for t in TOKEN_CASES if pysbd_sentences(t) is None]
    assert len(unsettled) >= 5, unsettled
    assert sz._nlp is None, "spaCy is loaded only when a text needs it"
    for t in TOKEN_CASES:
        assert sz._segment([t]) == sz._segment_with_spacy([t]), t
    assert sz._nlp is not None


@pytest.mark.e2e  # pysbd and spaCy over whole corpus papers and arXiv abstracts
@needs_corpus
def test_pysbd_alone_gives_spacys_sentences_on_the_corpus():
    from lxml import etree

    from conftest import CORPUS

    texts = _page_texts(CORPUS_PAGES, widths=(1, 2, 3))
    for f in sorted((CORPUS / "arxiv_api").rglob("*.xml")):
        for el in etree.parse(str(f)).iter("{http://www.w3.org/2005/Atom}summary"):
            texts += [" ".join((el.text or "").split()), (el.text or "").strip()]
    settled, n = _agrees_with_spacy(list(dict.fromkeys(t for t in texts if t)))
    assert n > 3000 and settled > 0.95 * n, (settled, n)
