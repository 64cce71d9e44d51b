"""How much hybrid search trusts the vector leg: by the index's model and the language.

An embedding model is only as good as its training languages: all-MiniLM-L6-v2 was
trained on English, and its vectors of German or Japanese text rank little better than
chance (MIRACL nDCG@10 8.8), so fusing them at full weight pulled hybrid below BM25 alone
(issue 41). Hybrid weighs its vector leg by its model record's ``vector_weight[language]`` ("*": any
other language; model/records.py), each measured on the tuning question sets
(benchmarks/tune_languages.py) and reported on the test sets; a model no record names is
trusted everywhere.

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


def weight_of(model: str | None, lang: str) -> float:
    """The vector leg's weight for ``lang`` under the index's ``model`` (its upstream id):
    its record's ``vector_weight`` (model/records.py, where each was chosen); 1 for a model
    no record names."""
    from brainbot.model.records import for_index

    spec = for_index({"model": model}) if model else None
    return spec.weight_for(lang) if spec is not None else 1.0


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
