"""Abs2Cap (SciGA Sec. 4.2 (i)): a figure's relevance is the lexical similarity of its
caption to the abstract. Captions are cleaned first (``training.captions``): no labels,
no figure numbers.

* BM25 (bm25s): Intra-GA builds one index per paper over that paper's captions (so IDF
  is the paper's own: a word every caption shares carries no weight), the abstract is the
  query. Inter-GA builds one index over the training GAs' captions.
* ROUGE-L (rouge-score): F-measure of the longest common subsequence, abstract as the
  reference.

A subfigure's text is its parent caption plus its subcaption; a figure scores the max over
its subfigures, as for the image methods.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from sciga.training.ground_truth import Example

SCORERS = ("bm25", "rouge-l")


def _quiet_bm25s() -> None:
    import logging

    logging.getLogger("bm25s").setLevel(logging.WARNING)


def _tokenize(texts: Sequence[str]) -> list[list[str]]:
    import bm25s

    _quiet_bm25s()
    return bm25s.tokenize(list(texts), stopwords="en", return_ids=False, show_progress=False)


def bm25_scores(query: str, docs: Sequence[str]) -> np.ndarray:
    """BM25 of every doc for the query, with an index over ``docs`` alone."""
    import bm25s

    if not docs:
        return np.zeros(0)
    corpus = _tokenize(docs)
    if not any(corpus):
        return np.zeros(len(docs))
    retriever = bm25s.BM25()
    retriever.index(corpus, show_progress=False)
    q = _tokenize([query])[0]
    if not q:
        return np.zeros(len(docs))
    return np.asarray(retriever.get_scores(q), dtype=np.float64)


class Bm25Index:
    """One index over a gallery (Inter-GA), queried many times."""

    def __init__(self, docs: Sequence[str]):
        import bm25s

        self.n = len(docs)
        corpus = _tokenize(docs)
        self.empty = not any(corpus)
        self.retriever = bm25s.BM25()
        if not self.empty:
            self.retriever.index(corpus, show_progress=False)

    def scores(self, query: str) -> np.ndarray:
        q = _tokenize([query])[0]
        if self.empty or not q:
            return np.zeros(self.n)
        return np.asarray(self.retriever.get_scores(q), dtype=np.float64)


_ROUGE = None


def rouge_l_scores(query: str, docs: Sequence[str]) -> np.ndarray:
    global _ROUGE
    if _ROUGE is None:
        from rouge_score import rouge_scorer

        _ROUGE = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    return np.asarray([_ROUGE.score(query, d)["rougeL"].fmeasure if d else 0.0 for d in docs], dtype=np.float64)


def text_scores(scorer: str, query: str, docs: Sequence[str]) -> np.ndarray:
    if scorer == "bm25":
        return bm25_scores(query, docs)
    if scorer == "rouge-l":
        return rouge_l_scores(query, docs)
    raise ValueError(f"unknown Abs2Cap scorer {scorer!r}: use one of {', '.join(SCORERS)}.")


def score_intra(examples: Iterable[Example], scorer: str = "bm25") -> Iterator[tuple[Example, list[float]]]:
    for ex in examples:
        docs, owner = [], []
        for j, c in enumerate(ex.candidates):
            for u in c.units:
                docs.append(u.caption)
                owner.append(j)
        s = text_scores(scorer, ex.abstract, docs)
        best = np.full(len(ex.candidates), -np.inf)
        for j, v in zip(owner, s):
            best[j] = max(best[j], v)
        yield ex, [float(v) for v in best]


def ga_caption(ex: Example) -> str:
    assert ex.ga_index is not None, "an example without a GA has no GA caption"
    c = ex.candidates[ex.ga_index]
    return " ".join(dict.fromkeys([c.caption] + [u.caption for u in c.units])).strip()


def score_inter(queries: Sequence[Example], gallery: Sequence[Example], scorer: str = "bm25") -> np.ndarray:
    """(queries, gallery) scores of each query abstract against each gallery GA caption."""
    docs = [ga_caption(g) for g in gallery]
    out = np.zeros((len(queries), len(docs)))
    if scorer == "bm25":
        index = Bm25Index(docs)
        for i, q in enumerate(queries):
            out[i] = index.scores(q.abstract)
    else:
        for i, q in enumerate(queries):
            out[i] = text_scores(scorer, q.abstract, docs)
    return out
