"""Compound words (German "Küchenabfälle" = Küche + Abfälle): extra BM25 terms so that a
compound and its parts find each other.

No dictionary: a long word term of a compounding language also gives the character
n-grams of its stem as terms of their own (marked with ``MARK``, which no word term can
hold), and a query word gives its n-grams too, at a fraction of a word's weight. A query
"Abfall" then matches a note's "Küchenabfälle" through "#abfal" and "#bfall"; a query
"Küchenabfälle" matches a note's "Abfall aus der Küche" through those and "#kuche". This is
McNamee & Mayfield's character n-gram tokenisation (Information Retrieval 7, 2004, which
found 5-grams best for German), kept beside the words rather than instead of them. The
index side grams only long words (the compounds); the query side every word of at least
``N`` letters, since a short query word may be the part inside a note's compound.

Which languages, how long a word, which n and how much a query gram weighs are measured
(benchmarks/bench_languages.py on the tuning set); ``MODE = "none"`` turns it off. This
module does not stem (its input is stems) and knows no vocabulary.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

# Chosen on the tuning set (benchmarks/tune_languages.py, results/language_constants_
# tuning.json: German bm25 hit@5 / MRR@10, 32 questions): none 0.906 / 0.820; 5-grams of
# words of 8 letters or more, a query word's grams weighing 0.25 together, 0.938 / 0.837,
# the best of the eight variants (the others 0.906, MRR 0.811-0.845). One question apart:
# the test set's figures are reported beside them (docs/benchmarks.md).
MODE = "ngrams"  # "ngrams" | "none"
LANGUAGES = ("de",)  # the languages whose words get n-gram terms (the sets have no nl, sv)
N = 5  # n-gram length
INDEX_MIN = 8  # a note's word term this long or longer (a compound) gets n-grams
QUERY_WEIGHT = 0.25  # a query word's n-grams weigh this much together (a word weighs 1)
MARK = "#"  # no word term holds it: lexical's tokens are runs of word characters


def grams(term: str) -> list[str]:
    """The marked n-grams of one term, in order (none for a term shorter than N)."""
    return [MARK + term[i:i + N] for i in range(len(term) - N + 1)]


def _applies(lang: str | None) -> bool:
    return MODE == "ngrams" and lang in LANGUAGES


def index_extra(terms: Iterable[str], lang: str | None) -> list[str]:
    """The n-gram terms a note's chunk adds for its long words (repeats kept)."""
    if not _applies(lang):
        return []
    return [g for t in terms if len(t) >= INDEX_MIN and t.isalpha() for g in grams(t)]


def query_extra(terms: Iterable[str], lang: str | None) -> Counter:
    """The n-gram terms of a query's words, weighted: each word's grams share
    QUERY_WEIGHT."""
    out: Counter = Counter()
    if not _applies(lang):
        return out
    for term in terms:
        found = grams(term) if term.isalpha() else []
        for g in found:
            out[g] = max(out[g], QUERY_WEIGHT / len(found))
    return out
