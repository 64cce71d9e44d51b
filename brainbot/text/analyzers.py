"""BM25 analysis per language: a text's terms in the language it is written in, and a
query's terms in every language the index holds that the query may be in.

English is ``lexical.analyze``, untouched (Lucene's English stop words, ASCII folding and
the Porter stemmer: what Pyserini's baselines use), and so is every text whose language
cannot be told. A Latin or Cyrillic language with a Snowball stemmer is analysed the same
way with its own pieces: lowercase, its Snowball stop list (``notes/stopwords``), its
Snowball stemmer (PyStemmer), then accents folded off the stem, so that a query typed
without them ("cafe", "Kuchenabfalle") still matches; German compounds get extra terms
(``text/compounds.py``). Chinese, Japanese and Korean runs go to ``text/cjk.py``; Latin
words inside them are analysed as English.

A note's chunks are analysed in the note's language unless a chunk is clearly in another
one (``chunk_languages``). Terms of all languages share one vocabulary: "python" is the
same term in an English and a German note, so a code word finds both.

This module does not score, store or detect (``notes/language.py`` detects).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import lru_cache

import Stemmer

from brainbot.notes import language

from . import cjk, compounds, lexical

# The Snowball algorithm (PyStemmer's name) of each language analysed with one; English
# keeps Porter (lexical.py), the CJK languages text/cjk.py.
SNOWBALL = {"da": "danish", "de": "german", "es": "spanish", "fi": "finnish",
            "fr": "french", "hu": "hungarian", "id": "indonesian", "it": "italian",
            "nl": "dutch", "no": "norwegian", "pt": "portuguese", "ru": "russian",
            "sv": "swedish"}
ENGLISH = "en"
# Where those languages' Snowball stop words are dropped ("both": from notes and queries;
# "query": from queries alone, the notes keep them as terms and in their length; "none")
# and whether their Snowball stemmer runs: each measured (benchmarks/tune_languages.py,
# group "snowball").
SNOWBALL_STOP = "both"
SNOWBALL_STEM = True
# The analyzer an index records (store/identity.py): English terms are those of
# lexical.ANALYZER_VERSION exactly; "lang1" adds the per-language analysis of this module.
VERSION = f"{lexical.ANALYZER_VERSION}+lang1"

# The meta entry counting the chunks an index analysed in each language, JSON:
# {"de": 1200, "en": 35}.
LANGUAGES_KEY = "languages"
# A language holding less than this share of an index's chunks is not one a query is
# analysed in unless the query is detected as it: NFCorpus holds 33 chunks of French,
# German and Spanish abstracts among 10k English ones (0.3 %), and its English titles,
# too short to tell, should not be stemmed as French too.
MAIN_SHARE = 0.05

_local = threading.local()  # PyStemmer's stemmers are not safe to share across threads


def _stemmer(lang: str) -> Stemmer.Stemmer:
    cache = getattr(_local, "stemmers", None)
    if cache is None:
        cache = _local.stemmers = {}
    if lang not in cache:
        cache[lang] = Stemmer.Stemmer(SNOWBALL[lang])
    return cache[lang]


@lru_cache(maxsize=1 << 18)
def _snowball_term(token: str, lang: str, stem: bool = True) -> str:
    """One lowercased token of ``lang`` to its term: stemmed (not a token holding a
    digit: numbers and identifiers stay whole, as in English), accents folded off."""
    if lang == "ru":
        token = token.replace("ё", "е")  # the stop list and the stemmer spell it so
    if stem and not any(c.isdigit() for c in token):
        token = _stemmer(lang).stemWord(token)
    return lexical.fold(token)


def snowball_terms(text: str, lang: str, query: bool = False) -> list[str]:
    """Terms of ``text`` (a query's when ``query``) in a language with a Snowball stemmer
    (``SNOWBALL``)."""
    dropped = SNOWBALL_STOP == "both" or (query and SNOWBALL_STOP == "query")
    stop = language.stop_words(lang) if dropped else frozenset()
    out: list[str] = []
    for token in lexical.tokens(text):
        if lexical.is_cjk_run(token):
            out.extend(lexical.cjk_grams(token))
        elif len(token) <= lexical.MAX_TERM_CHARS and token not in stop:
            term = _snowball_term(token, lang, SNOWBALL_STEM)
            if term:
                out.append(term)
    return out


def analyze_as(text: str, lang: str | None, query: bool = False) -> list[str]:
    """The terms of ``text`` (a query's when ``query``) analysed as ``lang`` (None or an
    unknown code: English)."""
    if lang in SNOWBALL:
        return snowball_terms(text, lang, query)
    if lang in cjk.LANGUAGES:
        return cjk.terms(text, lang)
    return lexical.analyze(text)


def index_terms(text: str, lang: str | None) -> tuple[Counter, int]:
    """Term -> count for one chunk analysed as ``lang``, and its BM25 length (its word
    terms: the extra terms of compounds do not lengthen it)."""
    terms = analyze_as(text, lang)
    counts = Counter(terms)
    extra = compounds.index_extra(terms, lang)
    if extra:
        counts.update(extra)
    return counts, len(terms)


def chunk_languages(note_text: str, chunks: Sequence[str]) -> list[str]:
    """The language each chunk is analysed in: the note's (its script, or the stop words
    of all its chunks; English when it is too short to tell), unless the chunk's own text clearly names another language
    (``language.CHUNK_MIN_EVIDENCE``: a paragraph in French inside an English note) or
    is mostly in a CJK script inside a note that is not."""
    words = [language.words_of(text) for text in chunks]
    note = language.detect(note_text, words=set().union(*words)) or ENGLISH
    out = []
    for text, own_words in zip(chunks, words):
        own = language.detect(text, language.CHUNK_MIN_EVIDENCE, own_words)
        if own in cjk.LANGUAGES and (note in cjk.LANGUAGES or not language.mostly_cjk(text)):
            own = None  # a Japanese note's chunk all in kanji is no Chinese; an English
            # one naming a few dishes in Japanese stays English
        out.append(own or note)
    return out


def query_terms(text: str, languages: Mapping[str, int]) -> Counter:
    """A query's terms, weighted, analysed in each of the index's ``languages`` (language
    -> chunks analysed in it) that it may be in (``language.plausible``; a language of
    under ``MAIN_SHARE`` of the chunks only when the query is detected as it). A term
    found by several analyses counts once, at its highest weight; a stop word of any of
    those languages is no term, whichever analysis kept it (English keeps "ich", German
    drops it). An index of English alone gets exactly ``lexical.query_terms``."""
    langs = language.plausible(text, list(languages), main_languages(languages))
    if langs in ([], [ENGLISH]):
        return lexical.query_terms(text)
    stops = _query_stops(tuple(langs)) if SNOWBALL_STOP != "none" else frozenset()
    out: Counter = Counter()
    for lang in langs:
        counts = Counter(analyze_as(text, lang, query=True))
        counts.update(compounds.query_extra(list(counts), lang))
        for term, n in counts.items():
            if term not in stops and n > out.get(term, 0):
                out[term] = n
    return out


def main_languages(languages: Mapping[str, int]) -> list[str]:
    """The languages holding at least ``MAIN_SHARE`` of an index's chunks."""
    total = sum(languages.values())
    return [lang for lang, n in languages.items() if total and n >= MAIN_SHARE * total]


@lru_cache(maxsize=64)
def _query_stops(langs: tuple[str, ...]) -> frozenset[str]:
    out: set[str] = set()
    for lang in langs:
        words = lexical.STOP_WORDS if lang == ENGLISH else language.stop_words(lang)
        out |= {lexical.fold(w) for w in words} | set(words)
    return frozenset(out)


def note_analysis(note_text: str, chunks: Sequence[str],
                  version: str = VERSION) -> list[tuple[Counter, int, bool, str]]:
    """(terms, BM25 length, looks English, language analysed in) of each chunk of a note,
    as the index's analyzer ``version`` wants: this module's (each chunk in its language)
    or an index's from before it (``lexical.ANALYZER_VERSION``: every chunk English)."""
    if version == VERSION:
        langs = chunk_languages(note_text, chunks)
    elif version == lexical.ANALYZER_VERSION:
        langs = [ENGLISH] * len(chunks)
    else:
        raise ValueError(f"unknown analyzer {version!r}")
    return [(*index_terms(text, lang), language.looks_english(text), lang)
            for text, lang in zip(chunks, langs)]


def recorded_languages(meta: dict[str, str]) -> dict[str, int]:
    """Language -> chunks the index analysed in it, as its meta counts them
    (``LANGUAGES_KEY``, counted as they were written: a count only grows until a
    rebuild); {} when it counts none."""
    try:
        found = json.loads(meta.get(LANGUAGES_KEY) or "{}")
    except ValueError:
        return {}
    if not isinstance(found, dict):
        return {}
    return {str(k): v for k, v in found.items() if isinstance(v, int) and v > 0}


def index_languages(meta: dict[str, str]) -> dict[str, int]:
    """The languages an index's queries are analysed in (``recorded_languages``): English
    alone for an index of the English-only analyzer, or with nothing written yet."""
    if meta.get("analyzer") != VERSION:
        return {ENGLISH: 1}
    return recorded_languages(meta) or {ENGLISH: 1}


def readable(analyzer: str | None) -> bool:
    """Whether this code can query an index that records ``analyzer``: its own, or the
    English-only one before it (whose queries it analyses in English, as its notes
    were)."""
    return analyzer in (VERSION, lexical.ANALYZER_VERSION)


def writes_with(recorded: str | None, rebuild: bool = False) -> str:
    """The analyzer a writer adds chunks to an index with: the English-only one an index
    from before per-language analysis records (its notes keep the terms they have, and
    its queries the English analysis that finds them), else this code's; a rebuild
    analyses each note in its language."""
    if recorded == lexical.ANALYZER_VERSION and not rebuild:
        return lexical.ANALYZER_VERSION
    return VERSION
