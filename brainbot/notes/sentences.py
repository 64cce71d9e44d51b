"""An abbreviation-aware sentence splitter.

`split_sentences(text, start, end)` returns the spans ``(s, e)`` of the sentences in
``text[start:end]``, trimmed of surrounding whitespace; together they cover every
non-whitespace character of the range, and the gap between two spans is whitespace only.

A sentence ends at ``.``, ``!``, ``?`` or an ellipsis, after any closing quotes, brackets
or emphasis markers, when whitespace follows; or at ``。！？`` with or without whitespace.
A period does not end a sentence after a known abbreviation ("e.g.", "Dr.", "etc." before
a lower-case word), an initial ("J. R. R."), a dotted acronym ("U.S."), an enumerator at a
line start ("1."), or when the next word starts in lower case. Periods inside "3.14",
"v1.2.3", "config.json" or a URL are never candidates because no whitespace follows them.

Deterministic and linear: one regex pass over the candidates, with bounded look-back.
This is not a linguistic model: it leaves rare ambiguities (a sentence ending in "U.S.")
on the side of not splitting.
"""

from __future__ import annotations

import re

# Characters that both Python and MiniLM's tokenizer treat as whitespace. Control
# characters such as \x1c or \x0b are deliberately absent: the tokenizer deletes them, so a
# split there would glue two words together and break token additivity.
SPACE_CHARS = " \t\n\r\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
_SPACE_SET = frozenset(SPACE_CHARS)
_NON_SPACE = re.compile(f"[^{re.escape(SPACE_CHARS)}]")
_CANDIDATE = re.compile(r"[.!?\u2026\u3002\uff01\uff1f\u203c\u2047\u2048\u2049]+")
_CJK_END = frozenset("\u3002\uff01\uff1f")
# Closing quotes, brackets and markdown emphasis that belong to the sentence they close.
_CLOSERS = frozenset("\"')]}\u00bb\u201d\u2019\u300d\u300f\uff09*_`~")
_OPENERS = "\"'([{\u00ab\u201c\u2018\u300c\u300e\uff08*_`~"

# Never a sentence end, whatever follows.
_ABBREVIATIONS = frozenset(
    """mr mrs ms mx dr prof sr jr st mt rev hon gen col capt lt sgt cpt fr sen rep gov pres
    e.g eg i.e ie cf vs viz approx ca al et resp incl esp dept univ assn bros
    a.m p.m""".split()
)
# Not a sentence end when a number follows ("No. 5", "Fig. 3", "Jan. 12", "ext. 4471").
_NUMBER_ABBREVIATIONS = frozenset(
    """no nos nr vol vols p pp fig figs ch chap sec sect art eq eqs ex op ed tab ref
    jan feb mar apr jun jul aug sep sept oct nov dec ext tel""".split()
)
_ACRONYM = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")
# How far back a period looks for the word it ends; longer "words" are URLs or junk.
_LOOKBACK = 40


def _word_before(text: str, pos: int, floor: int) -> tuple[str, int]:
    """The whitespace-delimited word ending at pos (exclusive) and where it starts."""
    k = pos
    limit = max(floor, pos - _LOOKBACK)
    while k > limit and text[k - 1] not in _SPACE_SET:
        k -= 1
    word = text[k:pos]
    return word.lstrip(_OPENERS), k


def _period_ends(text: str, start: int, dot: int, next_char: str) -> bool:
    """Whether the single period at text[dot] ends a sentence."""
    if next_char.islower():
        return False  # "approx. five", "etc. and": an unknown abbreviation, most likely
    word, word_start = _word_before(text, dot, start)
    low = word.lower()
    if low in _ABBREVIATIONS:
        return False
    if low in _NUMBER_ABBREVIATIONS and next_char.isdigit():
        return False
    if len(word) == 1 and word.isalpha() and word.isupper():
        return False  # an initial: "J. R. R. Tolkien"
    if _ACRONYM.fullmatch(word):
        return False  # "U.S.", "e.g.", "a.m."
    if word.isdigit() and (word_start == start or text[word_start - 1] == "\n"):
        return False  # an enumerator at a line start: "1. First"
    return True


def split_sentences(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Sentence spans over text[start:end], each trimmed of whitespace."""
    end = len(text) if end is None else end
    first = _NON_SPACE.search(text, start, end)
    if first is None:
        return []
    spans: list[tuple[int, int]] = []
    sentence_start = first.start()
    for m in _CANDIDATE.finditer(text, sentence_start, end):
        a, b = m.span()
        if a < sentence_start:
            continue
        k = b
        while k < end and text[k] in _CLOSERS:
            k += 1
        if k >= end:
            break
        run = m.group()
        if run[-1] in _CJK_END:
            nxt = _NON_SPACE.search(text, k, end)
            if nxt is None:
                break
        else:
            if text[k] not in _SPACE_SET:
                continue  # "3.14", "config.json", "e.g.,", "Hello!World"
            nxt = _NON_SPACE.search(text, k, end)
            if nxt is None:
                break
            if run == "." and not _period_ends(text, sentence_start, a, nxt.group()):
                continue
            if run[-1] not in "!?\u203c\u2047\u2048\u2049" and nxt.group().islower():
                continue  # "wait... what": an ellipsis mid-sentence
        spans.append((sentence_start, k))
        sentence_start = nxt.start()
    last = end
    while last > sentence_start and text[last - 1] in _SPACE_SET:
        last -= 1
    while last > sentence_start and text[last - 1].isspace():
        last -= 1
    if last > sentence_start:
        spans.append((sentence_start, last))
    return spans


def sentences(text: str) -> list[str]:
    """The sentences of text, as strings (a convenience for tests and tools)."""
    return [text[s:e] for s, e in split_sentences(text)]


def ends_sentence(text: str) -> bool:
    """Whether text ends like a sentence: terminal punctuation, maybe closed by quotes."""
    k = len(text.rstrip())
    while k > 0 and text[k - 1] in _CLOSERS:
        k -= 1
    return k > 0 and _CANDIDATE.match(text, k - 1) is not None
