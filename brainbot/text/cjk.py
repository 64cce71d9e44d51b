"""Chinese, Japanese and Korean text to BM25 terms, each by its own rules.

The English analyzer (``lexical.analyze``) cuts every run of CJK characters into single
characters and overlapping bigrams (Lucene's CJKBigramFilter with unigrams). That suits
Chinese, but in Japanese many of those grams are grammar: hiragana particles and endings
(の, は, です, ますか) are in every sentence, and a question ending in できますか matched FAQ
sections on their endings (issue 41). A Japanese run keeps the grams, less those made of
hiragana alone that are single characters or bigrams of grammar (``JA_GRAMMAR``); a word
written in hiragana keeps its bigrams (ぬか). ``JapaneseRules`` holds the variants that were
measured: cutting the run where the script changes first (kanji, hiragana, katakana) and
each hiragana policy (kept, bigrams, bigrams less grammar, dropped). Chinese gets the
English analyzer's grams without the single characters of its commonest function words
(``ZH_FUNCTION``). Korean words are space-separated syllable runs with their particles
attached; they keep the English analyzer's grams.

Latin words inside a CJK text are analysed as English. This module does not detect the
language (``notes/language.py``) and scores nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import lexical

LANGUAGES = ("zh", "ja", "ko")

_SCRIPT = re.compile(
    "(?P<kanji>[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3005\u3006\u30f6"
    "\U00020000-\U0003ffff]+)"
    "|(?P<hiragana>[\u3040-\u309f]+)"
    "|(?P<katakana>[\u30a0-\u30ff\u31f0-\u31ff]+)"
    "|(?P<other>[^\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\U00020000-\U0003ffff]+)")


@dataclass(frozen=True)
class JapaneseRules:
    """How a Japanese run becomes terms. Chosen on the tuning set (benchmarks/
    tune_languages.py, results/language_constants_tuning.json; Japanese bm25 hit@5 /
    MRR@10 over 32 questions): the whole run, hiragana bigrams less grammar, 0.906 /
    0.839, against the English analyzer's grams 0.906 / 0.821; every variant cut at
    script changes did worse (0.844-0.875), losing the words that mix kanji and kana."""

    split_scripts: bool = False  # no gram crosses a change of script
    # "grams" (characters and bigrams) | "bigrams" | "content" (bigrams not in
    # JA_GRAMMAR) | "drop"
    hiragana: str = "content"
    katakana: tuple[int, ...] = (1, 2)  # gram sizes of a katakana piece
    kanji: tuple[int, ...] = (1, 2)  # gram sizes of a kanji piece


JAPANESE = JapaneseRules()
# The hiragana bigrams of Japanese grammar, which "content" leaves out: particles (から,
# まで, には, では, への), the copula and polite endings (です, ます, でし, まし, ませ),
# question endings (すか, ですか -> です + すか), auxiliaries and conjugation (ない, たい,
# れる, られ, せる, させ, てい, いる, ある, する, して, した, しま, れば, たら), and the
# demonstratives and forms that every sentence leans on (この, その, どの, これ, それ,
# こと, もの, よう, ため, など, ので, のは, には, とは, ください: くだ, ださ, さい).
# Written for this analyzer from Japanese grammar; which variant is used is measured.
JA_GRAMMAR = frozenset("""
から まで には では への とは のは ので など より にも でも とも けど けれ れど
です すか でし した まし ます ませ せん しょ ょう だっ った
ない なか かっ たい れる られ せる させ てい いる ある あり りま する して しま
れば たら なら ての この その あの どの これ それ あれ どれ こと もの よう
ため ください くだ ださ さい いい いて って つい おり なり なる なっ ても
""".split())
# Chinese function characters (particles, the copula, pronouns, question words): in every
# sentence, they match everything as single characters. Their bigrams are kept. Dropped
# on the tuning set's figures (Chinese bm25 hit@5 / MRR@10: kept 0.906 / 0.854, dropped
# 0.906 / 0.875).
ZH_FUNCTION = frozenset("的了是在和与或也都就而及吗呢吧啊么什怎哪这那我你他她它们有个")
ZH_DROP_FUNCTION = True


def terms(text: str, lang: str) -> list[str]:
    """The terms of ``text`` analysed as Chinese ("zh"), Japanese ("ja") or Korean."""
    out: list[str] = []
    for token in lexical.tokens(text):
        if not lexical.is_cjk_run(token):
            term = lexical.english_term(token)
            if term:
                out.append(term)
        elif lang == "ja":
            out.extend(japanese_grams(token, JAPANESE))
        elif lang == "zh" and ZH_DROP_FUNCTION:
            out.extend(g for g in lexical.cjk_grams(token) if g not in ZH_FUNCTION)
        else:
            out.extend(lexical.cjk_grams(token))
    return out


def japanese_grams(run: str, rules: JapaneseRules) -> list[str]:
    """The terms of one run of CJK characters in a Japanese text."""
    if not rules.split_scripts:
        return _hiragana_filtered(lexical.cjk_grams(run), rules)
    out: list[str] = []
    for m in _SCRIPT.finditer(run):
        piece, script = m.group(), m.lastgroup
        if script == "hiragana":
            if rules.hiragana == "grams":
                out.extend(lexical.cjk_grams(piece))
            elif rules.hiragana == "bigrams" and len(piece) >= 2:
                out.extend(lexical.cjk_grams(piece, (2,)))
            elif rules.hiragana == "content" and len(piece) >= 2:
                out.extend(g for g in lexical.cjk_grams(piece, (2,)) if g not in JA_GRAMMAR)
        elif script == "katakana":
            out.extend(lexical.cjk_grams(piece, rules.katakana))
        elif script == "kanji":
            out.extend(lexical.cjk_grams(piece, rules.kanji))
        else:  # Hangul or another CJK block inside Japanese text
            out.extend(lexical.cjk_grams(piece))
    return out


def _hiragana_filtered(grams: list[str], rules: JapaneseRules) -> list[str]:
    """Grams of an unsplit run, less the hiragana-only ones the rules leave out."""
    if rules.hiragana == "grams":
        return grams
    pairs = rules.hiragana in ("bigrams", "content")
    grammar = JA_GRAMMAR if rules.hiragana == "content" else frozenset()
    return [g for g in grams if not _all_hiragana(g)
            or (pairs and len(g) >= 2 and g not in grammar)]


def _all_hiragana(gram: str) -> bool:
    return all("\u3040" <= c <= "\u309f" for c in gram)
