"""Which script and language a text is in: the language whose analyzer BM25 uses for a
note, the languages a query may be in, and whether the English model's vectors can be
trusted.

Two checks, both small and deterministic. The script: the share of letters in CJK scripts
(kana make it Japanese, Hangul Korean, ideographs alone Chinese) or in Cyrillic (Russian).
For Latin text, the words of each language's Snowball stop list (``stopwords/``), each
word counting 1 / (the number of lists holding it), so "und" speaks for German alone and
"de" barely for anyone; a language is named only when its evidence is enough and well
ahead of the next one's, and otherwise the text is "too short to tell" (None), which
the caller settles (a chunk takes its note's language, a note English). ``looks_english``
is the older, coarser check the index's language note and its model choice use.

It names languages; it does not stem, split or index anything (text/analyzers.py does).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from functools import cache
from pathlib import Path

# The characters of Chinese, Japanese and Korean writing, as a regex class body: the one
# definition that the script check here and the BM25 analyzer (text/lexical.py) share.
# Hangul Jamo, compatibility jamo (ㅋㅋ) and their extensions; kana and the katakana
# phonetic extensions; CJK ideographs (Ext A, the URO, the compatibility block, and planes
# 2-3: Ext B-H, such as 𠮷); Hangul syllables; halfwidth katakana and Hangul (ｶﾀｶﾅ,
# which the analyzer folds to fullwidth first, with NFKC).
CJK_RANGES = ("\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf"
              "\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\uff66-\uffdc"
              "\U00020000-\U0003ffff")
_CJK = re.compile(f"[{CJK_RANGES}]")
_LETTER = re.compile(r"[^\W\d_]")
_WORD = re.compile(r"[a-z']+")
# The 40 commonest English words (function words). Their share of a chunk's words,
# measured here: five paragraphs of German, French, Spanish, Dutch and Italian written for
# the check: 0.000-0.036; chunks of English notes under 0.05: rust book 0.4 %, sample
# vault 3.5 %, dwarves-brain 3.5 %, the terse team minutes 9.9 % (lists of names and
# links); their medians are 0.24-0.36. NON_ENGLISH_WARN sits above the worst English share.
ENGLISH_COMMON = frozenset(
    "the of and to a in is it you that he was for on are with as i his they be at one "
    "have this from or had by not but what all were we when your can said there use an "
    "each which she do how their if will up".split())
ENGLISH_MIN_RATE = 0.05
CJK_MIN_SHARE = 0.5  # of letters: a text at least half CJK is a CJK text
MIN_WORDS = 20  # fewer Latin words than this: too short to tell, counted as English
NON_ENGLISH_WARN = 0.2  # share of non-English chunks past which `index` warns


def cjk_share(text: str) -> float:
    """Share of the letters of ``text`` that are Chinese, Japanese or Korean."""
    letters = len(_LETTER.findall(text))
    return len(_CJK.findall(text)) / letters if letters else 0.0


def mostly_cjk(text: str) -> bool:
    return cjk_share(text) >= CJK_MIN_SHARE


def looks_english(text: str) -> bool:
    """False for text mostly in CJK scripts, or Latin text with few English words."""
    if mostly_cjk(text):
        return False
    words = _WORD.findall(text.lower())
    if len(words) < MIN_WORDS:
        return True
    return sum(w in ENGLISH_COMMON for w in words) / len(words) >= ENGLISH_MIN_RATE


# -- naming the language ---------------------------------------------------------------

# The languages with a Snowball stop list (stopwords/<code>.txt) that the Latin check can
# name: Danish, German, English, Spanish, Finnish, French, Hungarian, Indonesian, Italian,
# Dutch, Norwegian, Portuguese, Swedish. Irish's list is left out of the check (its "a",
# "an", "is", "in" would speak against English); Russian is named by its script.
LATIN_LANGUAGES = ("da", "de", "en", "es", "fi", "fr", "hu", "id", "it", "nl", "no", "pt",
                   "sv")
CJK_LANGUAGES = ("zh", "ja", "ko")
LANGUAGES = (*LATIN_LANGUAGES, "ru", *CJK_LANGUAGES)
_STOP_DIR = Path(__file__).with_name("stopwords")
_LATIN_WORD = re.compile(r"[^\W\d_]+")
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzàáâäãåæçèéêëìíîïñòóôöõøùúûüýÿœß")
_KANA = re.compile("[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]")
_HANGUL = re.compile("[\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7ff\uffa0-\uffdc]")
_CYRILLIC = re.compile("[\u0400-\u04ff]")
# Japanese prose is 40-70 % kana; Chinese holds none but a stray の in a name. A CJK text
# whose CJK letters are at least this share kana is Japanese.
JA_KANA_SHARE = 0.1
# A text whose letters are this share CJK is named a CJK language (Latin words in it are
# analysed as English all the same): a technical note in Chinese or Japanese is mostly
# commands and paths by letters. The tuning set's Japanese and Chinese notes (Debian
# Reference) hold 0.12 and more, but for one left untranslated; the English notes of
# examples/ and the shared corpora at most 0.03 (a ramen recipe naming its dishes).
CJK_NAME_SHARE = 0.1
# Of CJK letters, the share of Hangul past which a text is Korean.
KO_HANGUL_SHARE = 0.5
# A Latin text is named only when its best language has at least MIN_EVIDENCE (in
# exclusive stop words: "und" 1, "die" 1/2) and MARGIN times the runner-up's (Spanish,
# Portuguese and Italian share many stop words: a Spanish paragraph's runner-up had 0.57
# of its evidence). On the tuning set's notes (Debian Reference, 120 a language) this
# names en 120, de 119 (1 too short), es 114 (5 too short, 1 English), fr 104 (9 English:
# the translation left them in English; 7 too short), ja 119 (1 English), zh 120; every
# English text of examples/ and the shared corpora is named English or too short to tell.
MIN_EVIDENCE = 2.0
MARGIN = 1.5
# Letters and marks that only a few of these languages write, each counting like a stop
# word (once, shared among its owners): Spanish ñ ¿ ¡, Portuguese ã õ, German ß, French
# œ, the Scandinavian å æ ø. They tell apart the Romance languages, whose stop lists
# overlap most.
_MARK_OWNERS = {"ñ": ("es",), "¿": ("es",), "¡": ("es",), "ã": ("pt",), "õ": ("pt",),
                "ß": ("de",), "œ": ("fr",), "å": ("da", "no", "sv"), "æ": ("da", "no"),
                "ø": ("da", "no")}
# A chunk is analysed in a language other than its note's only on this much evidence:
# over the English notes of the shared corpora and examples/ (21,133 chunks) a chunk of
# an English note reached at most 2.7 in another language (hackmd's HTML, "n.d."
# references); a paragraph written in another language has 10 or more. On the tuning set
# (benchmarks/tune_languages.py; the Debian Reference leaves paragraphs untranslated)
# mean bm25 hit@5 / MRR@10 over six languages: the note's language alone 0.911 / 0.851,
# chunks on evidence 5 0.911 / 0.854, on 10 0.911 / 0.852.
CHUNK_MIN_EVIDENCE = 5.0


@cache
def stop_words(lang: str) -> frozenset[str]:
    """The Snowball stop list of ``lang`` (empty for a language without one)."""
    path = _STOP_DIR / f"{lang}.txt"
    if not path.is_file():
        return frozenset()
    lines = path.read_text(encoding="utf-8").splitlines()
    return frozenset(w for w in lines if w and not w.startswith("#"))


@cache
def _word_weights() -> dict[str, dict[str, float]]:
    """stop word -> {language: 1 / the number of Latin lists holding the word}; single
    letters left out (French "l", "d", "n" are in every "n.d." and "don't")."""
    owners: dict[str, list[str]] = {}
    for lang in LATIN_LANGUAGES:
        for word in stop_words(lang) - _LETTERS:
            owners.setdefault(word, []).append(lang)
    return {w: {lang: 1 / len(langs) for lang in langs} for w, langs in owners.items()}


def words_of(text: str) -> set[str]:
    """The distinct lowercased words of ``text``, and its marks of ``_MARK_OWNERS``: what
    ``latin_evidence`` counts. The union of two texts' sets is their concatenation's."""
    lowered = text.lower()
    return set(_LATIN_WORD.findall(lowered)) | (set(lowered) & _MARK_OWNERS.keys())


def latin_evidence(text: str, words: set[str] | None = None) -> dict[str, float]:
    """Language -> the weight of its stop words in ``text`` (or in ``words``, its
    ``words_of``), each word counted once (a table of "95% CI" repeats Italian "ci" many
    times), and of its marks; languages with none left out."""
    weights = _word_weights()
    found = words_of(text) if words is None else words
    out: dict[str, float] = {}
    for word in found & weights.keys():
        for lang, w in weights[word].items():
            out[lang] = out.get(lang, 0.0) + w
    for mark in found & _MARK_OWNERS.keys():
        owners = _MARK_OWNERS[mark]
        for lang in owners:
            out[lang] = out.get(lang, 0.0) + 1 / len(owners)
    return out


def script_language(text: str) -> str | None:
    """The language a text's script names: "ja", "ko" or "zh" for text with a fair share
    of CJK characters (``CJK_NAME_SHARE``), "ru" for text mostly Cyrillic; None for
    anything else (Latin, too few letters)."""
    if text.isascii():
        return None  # the common case, told without counting a letter
    cjk, cyrillic = len(_CJK.findall(text)), len(_CYRILLIC.findall(text))
    if not cjk and not cyrillic:
        return None
    # an ideograph newer than this Python's Unicode tables is CJK but no letter to it
    letters = max(len(_LETTER.findall(text)), cjk, cyrillic)
    if cjk / letters >= CJK_NAME_SHARE:
        if len(_HANGUL.findall(text)) >= KO_HANGUL_SHARE * cjk:
            return "ko"
        return "ja" if len(_KANA.findall(text)) >= JA_KANA_SHARE * cjk else "zh"
    if cyrillic / letters >= 0.5:
        return "ru"
    return None


def detect(text: str, min_evidence: float = MIN_EVIDENCE,
           words: set[str] | None = None) -> str | None:
    """The language ``text`` is written in, or None when it is too short to tell
    (``words``: its ``words_of``, when the caller has them)."""
    by_script = script_language(text)
    if by_script is not None:
        return by_script
    ranked = sorted(latin_evidence(text, words).items(), key=lambda kv: (-kv[1], kv[0]))
    if not ranked or ranked[0][1] < min_evidence:
        return None
    if len(ranked) > 1 and ranked[0][1] < MARGIN * ranked[1][1]:
        return None
    return ranked[0][0]


def plausible(text: str, among: Collection[str], main: Collection[str] = ()) -> list[str]:
    """The languages of ``among`` (an index's) that ``text``, a query of perhaps a few
    words, may be in: the one it is detected as when ``among`` holds it; else those of
    ``main`` (the index's main languages; ``among`` when not given) that its script
    allows, CJK languages for CJK text and the others for the rest, most evidence first.
    A single stop word does not name a query's language: "soy milk" is English, though
    "soy" is a Spanish stop word. Never empty while ``among`` is not."""
    named = detect(text)
    if named is not None and named in among:
        return [named]
    pool = list(main or among)
    cjk = mostly_cjk(text)
    fits = [lang for lang in pool if (lang in CJK_LANGUAGES) == cjk] or pool or list(among)
    evidence = latin_evidence(text)
    return sorted(fits, key=lambda lang: (-evidence.get(lang, 0.0), lang))
