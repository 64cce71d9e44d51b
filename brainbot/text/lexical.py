"""The BM25 side: the English analyzer, postings rows, and query-time CSR assembly.

The analyzer lowercases, splits on unicode word characters (a run of CJK characters,
``notes/language.CJK_RANGES``, becomes its characters and bigrams, since such text is not
space-separated), drops English stop words,
folds accented Latin letters to ASCII and applies the Porter stemmer: the same pipeline as Lucene's EnglishAnalyzer, which is
what Pyserini's BM25 baselines use. Whether stemming and stop words help is settled by
``brainbot eval`` (see README, "Retrieval quality"). Every other language has its own
analyzer beside this one (``text/analyzers.py``); English text, and text whose language
cannot be told, is analysed here, unchanged.

Scoring itself is the C kernel's (``kernel.bm25_topk``); this module only turns text
into terms and the postings table into the CSR arrays the kernel reads.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from brainbot.notes.language import CJK_RANGES

from .stemmer import stem

# Lucene's defaults, k1=1.2 and b=0.75. Pyserini's BEIR baselines use k1=0.9, b=0.4, but
# over our chunks (a document scores as its best chunk) `brainbot eval` on NFCorpus gave
# nDCG@10 0.3178 with (0.9, 0.4) and 0.3230 with (1.2, 0.75); (1.5, 0.75) 0.3225.
BM25_K1 = 1.2
BM25_B = 0.75
# Tokens longer than this are hashes, base64 or URLs glued together: never useful terms.
MAX_TERM_CHARS = 40
# v4: the CJK ranges widened (language.CJK_RANGES: jamo, halfwidth forms, Ext B+), so a
# text holding those characters gets other terms; no text of examples/, the shared corpora
# or NFCorpus holds one (checked: 1,305 files), so their terms are those of v3.
ANALYZER_VERSION = "en-porter-stop-fold-cjk12-v4"

# Lucene's EnglishAnalyzer stop set (ENGLISH_STOP_WORDS_SET), 33 words.
STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the "
    "their then there these they this to was will with".split()
)

_TOKEN = re.compile(f"[{CJK_RANGES}]+|[^\\W_{CJK_RANGES}]+")
_CJK_RUN = re.compile(f"[{CJK_RANGES}]")
# Halfwidth katakana and Hangul (U+FF61-U+FFDC) are folded to their fullwidth forms
# (NFKC: "ｶﾞ" -> "ガ"), so that they match what most text writes; nothing else is
# normalised, which keeps every other text's terms as they were.
_HALFWIDTH = re.compile("[\uff61-\uffdc]+")
# CJK text is not split by spaces (Korean is, by word, but its words are runs of several
# syllables), so a run of CJK characters is cut into n-grams: 1 = single characters
# (which match almost everything), 2 = overlapping bigrams, (1, 2) = both, as Lucene's
# CJKBigramFilter with outputUnigrams does. benchmarks/bench_cjk.py, bm25 hit@5 / MRR on
# examples/questions-cjk.jsonl: unigrams 1.000 / 0.976, bigrams 0.984 / 0.968, both
# 1.000 / 0.973. Both keeps what single characters find (one-character words, one-
# character queries) and adds the precision of bigrams, which single characters lack as
# a vault grows: a tie here, within one question of the best on every measure.
CJK_GRAMS: tuple[int, ...] = (1, 2)


def fold(token: str) -> str:
    """Drop accents from Latin letters ("kyōto" -> "kyoto", "naïve" -> "naive"), as
    Lucene's ASCIIFoldingFilter does for them; other scripts are left whole (folding
    would turn Japanese "が" into "か")."""
    out = []
    for ch in token:
        parts = unicodedata.normalize("NFKD", ch)
        base = parts[0]
        if base.isascii() and all(unicodedata.combining(c) for c in parts[1:]):
            out.append(base if base.isalnum() else "")  # "ﹰ" is a space and a mark: nothing
        else:
            out.append(ch)
    return "".join(out)


@lru_cache(maxsize=1 << 18)
def _normalise(token: str) -> str:
    if not token.isascii():
        token = fold(token).lower()  # "𝒥" folds to "J"
    return stem(token) if token.isascii() else token


def cjk_grams(run: str, sizes: tuple[int, ...] | None = None) -> list[str]:
    """The n-grams of a run of CJK characters, in order of position (a run shorter than
    every size is kept whole)."""
    sizes = sizes or CJK_GRAMS
    out = [run[i:i + n] for i in range(len(run)) for n in sizes if i + n <= len(run)]
    return out or [run]


def tokens(text: str) -> list[str]:
    """The lowercased tokens of ``text``: runs of CJK characters (halfwidth forms made
    fullwidth) and runs of other word characters, in order."""
    if _HALFWIDTH.search(text):
        text = _HALFWIDTH.sub(lambda m: unicodedata.normalize("NFKC", m.group()), text)
    return _TOKEN.findall(text.lower())


def is_cjk_run(token: str) -> bool:
    return _CJK_RUN.match(token) is not None


def english_term(token: str) -> str:
    """One non-CJK token's English term: "" for a stop word, an over-long token, or one
    that folds to nothing."""
    if len(token) > MAX_TERM_CHARS or token in STOP_WORDS:
        return ""
    return _normalise(token)


def analyze(text: str) -> list[str]:
    """Text to index terms, in order (repeats kept): the English analyzer."""
    out = []
    for token in tokens(text):
        if _CJK_RUN.match(token):
            out.extend(cjk_grams(token))
        elif len(token) <= MAX_TERM_CHARS and token not in STOP_WORDS:  # english_term,
            term = _normalise(token)  # inlined: this loop is the lexical phase's hot path
            if term:
                out.append(term)
    return out


def term_frequencies(text: str) -> tuple[Counter, int]:
    """Term -> count for one chunk, and the chunk's length in terms."""
    terms = analyze(text)
    return Counter(terms), len(terms)


def idf(n_docs: int, df: np.ndarray) -> np.ndarray:
    """Lucene's BM25 idf, log(1 + (N - df + 0.5) / (df + 0.5)): never negative."""
    df = df.astype(np.float64)
    return np.log1p((n_docs - df + 0.5) / (df + 0.5)).astype(np.float32)


@dataclass
class QueryPostings:
    """The CSR slice of the index that one query needs, in kernel positions."""

    indptr: np.ndarray  # int64 [t + 1]
    doc_ids: np.ndarray  # int32 [nnz], positions into the chunk arrays
    tfs: np.ndarray  # float32 [nnz]
    idf: np.ndarray  # float32 [t]
    terms: list[str]

    @property
    def empty(self) -> bool:
        return len(self.terms) == 0


def query_terms(text: str) -> Counter:
    """Analyzed query terms with their repeat counts (used as BM25 term weights)."""
    return Counter(analyze(text))


def assemble(postings: list[tuple[str, np.ndarray, np.ndarray]], n_docs: int) -> QueryPostings:
    """(term, positions int32 sorted, tfs) triples into one CSR slice with idf."""
    indptr = np.zeros(len(postings) + 1, dtype=np.int64)
    for i, (_, ids, _) in enumerate(postings):
        indptr[i + 1] = indptr[i] + len(ids)
    if postings:
        doc_ids = np.concatenate([p[1] for p in postings]).astype(np.int32, copy=False)
        tfs = np.concatenate([p[2] for p in postings]).astype(np.float32, copy=False)
    else:
        doc_ids, tfs = np.zeros(0, np.int32), np.zeros(0, np.float32)
    df = np.diff(indptr)
    return QueryPostings(indptr, doc_ids, tfs, idf(n_docs, df), [p[0] for p in postings])


def average_length(lengths: np.ndarray) -> float:
    return float(lengths.mean()) if len(lengths) else 1.0
