"""How much hybrid search trusts the vector leg: by the index's model and the language.

An embedding model is only as good as its training languages: all-MiniLM-L6-v2 was
trained on English, and its vectors of German or Japanese text rank little better than
chance (MIRACL nDCG@10 8.8), so fusing them at full weight pulled hybrid below BM25 alone
(issue 41). Hybrid weighs its vector leg by ``VECTOR_WEIGHTS[model][language]`` ("*": any
other language), each measured on the tuning question sets (benchmarks/bench_languages.py)
and reported on the test sets; a model not in the table is trusted everywhere.

The languages are the query's own when it can be told (its script, or its stop words)
and it is one the index holds: those are the notes that answer it. A query in a language
the index does not hold (an English question over German notes) takes the lowest weight
of its own and the index's main languages of its script: the model must match across
them. A query too short to tell takes the index's main languages of its script.

This module only picks weights; the fusion itself is the kernel's (``kernel.fuse``).
"""

from __future__ import annotations

from collections.abc import Mapping

from brainbot.notes import language
from brainbot.text.analyzers import ENGLISH, main_languages

DEFAULT = "*"
# (bm25, vector) weights of reciprocal rank fusion; the bm25 leg always weighs 1. Each
# chosen on the tuning set (benchmarks/tune_languages.py, results/language_constants_
# tuning.json: hybrid hit@5 / MRR@10 of the Debian Reference's 32 answerable questions a
# language, the vector leg weighed 0, 0.25, 0.5, 0.75 or 1):
# all-MiniLM-L6-v2
#   en  1: 0.969 / 0.938; lower weights 0.969 / 0.901-0.922 (and the NFCorpus setting).
#   ja, zh  0: BM25 alone, 0.906 / 0.839 and 0.906 / 0.875; 0.25 already 0.906 / 0.682 and
#     0.875 / 0.654, 1 0.656 / 0.493 and 0.656 / 0.558. Korean is not in the sets: 0 as
#     measured on examples/questions-cjk.jsonl (benchmarks/bench_cjk.py).
#   "*"  0.25, the best over de, es and fr together (hit@5 0.969, 0.938, 0.938); chosen
#     on two of them, it is 0.5 for de (0.938 where its own best, 0.25, has 0.969) and
#     0.25 for es and fr (within 0.005 MRR of their own best, 0.5).
VECTOR_WEIGHTS: dict[str, dict[str, float]] = {
    "sentence-transformers/all-MiniLM-L6-v2": {
        "en": 1.0, "zh": 0.0, "ja": 0.0, "ko": 0.0, DEFAULT: 0.25,
    },
}


def weight_of(model: str | None, lang: str) -> float:
    """The vector leg's weight for ``lang`` under ``model`` (1 for a model not listed)."""
    table = VECTOR_WEIGHTS.get(model or "", {})
    return table.get(lang, table.get(DEFAULT, 1.0))


def query_languages(query: str, languages: Mapping[str, int]) -> list[str]:
    """The languages whose weights a query's fusion takes (see the module docstring):
    ``languages`` are the index's, language -> chunks (``text/analyzers.index_languages``)."""
    among, main = list(languages), main_languages(languages)
    own = language.detect(query)
    if own is None or own in among:
        return language.plausible(query, among, main) if among else [ENGLISH]
    cjk = own in language.CJK_LANGUAGES
    return [own, *(lang for lang in main or among if (lang in language.CJK_LANGUAGES) == cjk)]


def vector_weight(model: str | None, query: str, languages: Mapping[str, int]) -> float:
    """The vector leg's weight for ``query`` on an index of ``model`` whose chunks are in
    ``languages``: the lowest of its languages' weights."""
    return min(weight_of(model, lang) for lang in query_languages(query, languages))
