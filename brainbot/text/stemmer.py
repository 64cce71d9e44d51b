"""The Porter stemmer, as Martin Porter's reference C implementation and Lucene run it.

``stem(word)`` strips English inflectional and derivational suffixes in five steps
(plurals and -ed/-ing; terminal y; double suffixes such as -ization; -ic-/-ful/-ness;
single suffixes such as -ance/-ent/-ive; a final -e and -ll), following

    Porter, M.F. (1980) "An algorithm for suffix stripping", Program 14(3), 130-137.

It reproduces the behaviour of Porter's own ``porter.c`` (tartarus.org) and of Lucene's
``PorterStemmer``/``PorterStemFilter`` (which BM25 baselines such as Pyserini's use),
including their three departures from the published paper:

* step 2 maps -bli to -ble (the paper has -abli to -able), so possibly -> possibl;
* step 2 maps -logi to -log (not in the paper), so archaeology -> archaeolog;
* words of one or two letters are returned unchanged.

Porter stems are not words (happy -> happi, relational -> relat) and the function is not
idempotent (stem(stem(w)) may differ from stem(w)); both are properties of the algorithm.

brainbot's own input policy, on top of the algorithm: the token must already be
lowercased (the algorithm treats anything but a/e/i/o/u/y as a consonant, as porter.c
does), and tokens that contain a non-ASCII character or a digit are returned unchanged
(Lucene would stem "3dprinting"; we keep numbers and identifiers intact).

Left out on purpose: the later Porter2 ("English") stemmer and everything else from
Snowball, stemmers for other languages, lowercasing, tokenisation and stop words (those
live in :mod:`brainbot.text.lexical`). There are no dependencies beyond the standard library,
and importing the module only builds two small lookup tables and one regex.
"""

from __future__ import annotations

import functools
import re

__all__ = ["stem"]

_DIGIT = re.compile(r"[0-9]")

# Consonant/vowel pattern of a word: 'v' for a, e, i, o, u; 'c' for everything else,
# except 'y', which is resolved by position in _pattern().
_CV = str.maketrans({chr(i): "c" for i in range(128)} | dict.fromkeys("aeiou", "v") | {"y": "y"})

# Step 2: dispatched on the penultimate letter, first matching suffix decides (even when
# its measure condition then fails), exactly like the switch in porter.c.
_STEP2 = {
    "a": (("ational", "ate", "vcv"), ("tional", "tion", "cvvc")),
    "c": (("enci", "ence", "vccv"), ("anci", "ance", "vccv")),
    "e": (("izer", "ize", "vcv"),),
    "l": (
        ("bli", "ble", "ccv"),  # departure: the paper has abli -> able
        ("alli", "al", "vc"),
        ("entli", "ent", "vcc"),
        ("eli", "e", "v"),
        ("ousli", "ous", "vvc"),
    ),
    "o": (("ization", "ize", "vcv"), ("ation", "ate", "vcv"), ("ator", "ate", "vcv")),
    "s": (
        ("alism", "al", "vc"),
        ("iveness", "ive", "vcv"),
        ("fulness", "ful", "cvc"),
        ("ousness", "ous", "vvc"),
    ),
    "t": (("aliti", "al", "vc"), ("iviti", "ive", "vcv"), ("biliti", "ble", "ccv")),
    "g": (("logi", "log", "cvc"),),  # departure: not in the paper
}

# Step 3: dispatched on the last letter.
_STEP3 = {
    "e": (("icate", "ic", "vc"), ("ative", "", ""), ("alize", "al", "vc")),
    "i": (("iciti", "ic", "vc"),),
    "l": (("ical", "ic", "vc"), ("ful", "", "")),
    "s": (("ness", "", ""),),
}

# Step 4: dispatched on the penultimate letter; removed when the stem's measure is > 1.
_STEP4 = {
    "a": ("al",),
    "c": ("ance", "ence"),
    "e": ("er",),
    "i": ("ic",),
    "l": ("able", "ible"),
    "n": ("ant", "ement", "ment", "ent"),
    "o": ("ion", "ou"),  # -ion only after s or t; -ou takes care of -ous
    "s": ("ism",),
    "t": ("ate", "iti"),
    "u": ("ous",),
    "v": ("ive",),
    "z": ("ize",),
}


def _pattern(w: str) -> str:
    """'c'/'v' per letter; y is a consonant at the start or after a vowel."""
    p = w.translate(_CV)
    if "y" not in p:
        return p
    cv = list(p)
    for i, ch in enumerate(cv):
        if ch == "y":
            cv[i] = "c" if i == 0 or cv[i - 1] == "v" else "v"
    return "".join(cv)


# In what follows ``p`` is the pattern of the current word (or of a longer word that the
# current one is a prefix of: truncation keeps it valid), and a stem is the prefix w[:n].
# The measure m of a stem, [C](VC){m}[V], is its number of vowel-to-consonant changes.


def _cvc(w: str, p: str, n: int) -> bool:
    """*o: the stem w[:n] ends consonant-vowel-consonant, the last not w, x or y."""
    return n >= 3 and p[n - 3 : n] == "cvc" and w[n - 1] not in "wxy"


def _step1a(w: str, p: str) -> tuple[str, str]:
    """Plurals: sses -> ss, ies -> i, s -> (nothing) unless ss."""
    if w[-1] == "s":
        if w.endswith("sses") or w.endswith("ies"):
            w = w[:-2]
        elif w[-2] != "s":
            w = w[:-1]
    return w, p


def _step1b(w: str, p: str) -> tuple[str, str]:
    """-eed -> -ee when m > 0; -ed, -ing removed when the stem has a vowel, then tidied
    (at -> ate, bl -> ble, iz -> ize, a double consonant undoubled, *o -> +e)."""
    if w.endswith("eed"):
        if p.count("vc", 0, len(w) - 3) > 0:
            w = w[:-1]
        return w, p
    if w.endswith("ed"):
        n = len(w) - 2
    elif w.endswith("ing"):
        n = len(w) - 3
    else:
        return w, p
    if n <= 0 or p.find("v", 0, n) < 0:
        return w, p
    w = w[:n]
    if w.endswith("at") or w.endswith("bl") or w.endswith("iz"):
        return w + "e", p[:n] + "v"
    if n >= 2 and w[-1] == w[-2] and p[n - 1] == "c":
        return (w[:-1] if w[-1] not in "lsz" else w), p
    if p.count("vc", 0, n) == 1 and _cvc(w, p, n):
        return w + "e", p[:n] + "v"
    return w, p


def _step1c(w: str, p: str) -> tuple[str, str]:
    """Terminal y -> i when the stem has a vowel."""
    n = len(w) - 1
    if w[-1] == "y" and p.find("v", 0, n) >= 0:
        return w[:n] + "i", p[:n] + "v"
    return w, p


def _replace(w: str, p: str, rules) -> tuple[str, str]:
    """Steps 2 and 3: the first rule whose suffix matches decides; it applies when
    m(stem) > 0, and no later rule is tried either way (porter.c's switch)."""
    for suffix, repl, repl_p in rules or ():
        if w.endswith(suffix):
            n = len(w) - len(suffix)
            if p.count("vc", 0, n) > 0:
                return w[:n] + repl, p[:n] + repl_p
            break
    return w, p


def _step2(w: str, p: str) -> tuple[str, str]:
    """Double suffixes (-ational, -izer, -biliti, ...), dispatched on the penultimate
    letter."""
    return _replace(w, p, _STEP2.get(w[-2]))


def _step3(w: str, p: str) -> tuple[str, str]:
    """-icate, -ative, -alize, -iciti, -ical, -ful, -ness, dispatched on the last letter."""
    return _replace(w, p, _STEP3.get(w[-1]))


def _step4(w: str, p: str) -> tuple[str, str]:
    """Single suffixes (-ance, -ment, -ive, ...) removed when m(stem) > 1; -ion only
    after s or t."""
    for suffix in (_STEP4.get(w[-2]) if len(w) >= 2 else None) or ():
        if w.endswith(suffix):
            n = len(w) - len(suffix)
            if suffix == "ion" and (n < 1 or w[n - 1] not in "st"):
                continue
            if p.count("vc", 0, n) > 1:
                w = w[:n]
            break
    return w, p


def _step5(w: str, p: str) -> str:
    """A final -e when m > 1, or m == 1 and the stem is not *o; then -ll -> -l when
    m > 1."""
    n = len(w)
    if w[-1] == "e":
        m = p.count("vc", 0, n)
        if m > 1 or (m == 1 and not _cvc(w, p, n - 1)):
            w = w[:-1]
            n -= 1
    if n >= 2 and w[-1] == "l" and w[-2] == "l" and p.count("vc", 0, n) > 1:
        w = w[:-1]
    return w


@functools.lru_cache(maxsize=1 << 18)
def stem(word: str) -> str:
    """Porter stem of an already-lowercased token.

    Words of length <= 2, and words containing a digit or a non-ASCII character, are
    returned unchanged.
    """
    if len(word) <= 2 or not word.isascii() or _DIGIT.search(word):
        return word
    w, p = _step1b(*_step1a(word, _pattern(word)))
    if len(w) <= 1:  # e.g. "ies" -> "i": nothing further can apply
        return w
    for step in (_step1c, _step2, _step3, _step4):
        w, p = step(w, p)
    return _step5(w, p)
