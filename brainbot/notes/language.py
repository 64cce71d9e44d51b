"""Which script and language a text is in: enough to know when the English model's
vectors cannot be trusted.

all-MiniLM-L6-v2 was trained on English; on Chinese, Japanese or Korean text its vectors
are weak, so hybrid search leans on BM25 for a query written mostly in those scripts, and
``brainbot index`` warns when many notes look non-English. The check is deliberately
small: the share of letters in CJK scripts, and for Latin text the rate of the commonest
English words (a German or French note has letters like English but few of its words).
It does not name languages.
"""

from __future__ import annotations

import re

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
