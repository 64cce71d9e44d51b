"""Counting tokens in an index's model's own tokenizer, the unit of every chunk budget.

`TokenCounter` wraps the tokenizer of a model record (``model.load_tokenizer(truncate=False)``;
MiniLM's wordpieces by default, multilingual-e5-small's sentencepieces) and counts **with**
its two special tokens ([CLS] [SEP], <s> </s>), because that is what has to fit in the
model's positions. A text's count is the sum of its words' counts, where what a word is
depends on the tokenizer (``WordpieceRules``, ``UnigramRules``): BERT's normalizer maps
ASCII whitespace to a space and its pre-tokenizer always splits there, so a text cut at
[ \t\n\r] has exactly the wordpieces of its parts (``words``; a text holding another
character Python splits at but the normalizer deletes or keeps, such as U+000B or U+00A0,
is cut at ASCII whitespace only); the unigram tokenizer splits at every character its
table maps to a space, and a text ending in one gets one more piece. Word counts are
cached, so the tokenizer sees each distinct word once; a vault of 70 MB repeats its words
~40 times. ``cache_size=0`` counts every text with the tokenizer itself: the oracle the
tests hold the sums to.

`split_long` cuts a text that is over budget, at whitespace when it can, else between
two wordpieces, from one encoding's offsets.

The tokenizer is loaded on first use, so building a TokenCounter is free and importing
this module never touches the model files. The unigram rules need the model's table, read
with its tokenizer. This module does not embed anything.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left
from collections.abc import Iterable, Sequence

from brainbot.notes.sentences import SPACE_CHARS

# [CLS] and [SEP]: every encoding the embedder makes carries exactly these two.
SPECIAL_TOKENS = 2
# Distinct words held (~100 bytes each); the cache starts afresh past it. A 70 MB vault has
# about 1.3M distinct words, so a long run re-tokenizes a few rare words now and then.
DEFAULT_CACHE_SIZE = 500_000
# Python's str.split() also splits at these, which the BERT normalizer deletes (controls) or
# keeps inside the text it tokenizes (U+00A0 and other Unicode spaces): a text holding one
# is cut at ASCII whitespace only.
_OTHER_SPLITS = re.compile("[\x0b\x0c\x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029"
                           "\u202f\u205f\u3000]")
_ASCII_SPACE = re.compile("[ \t\n\r]+")


_SPACES = frozenset(SPACE_CHARS)
# Window size for encoding long texts; see TokenCounter.offsets.
OFFSET_WINDOW = 4096


def separates(ch: str) -> bool:
    """Whether BERT's pre-tokenizer always splits next to ch: whitespace, punctuation or a
    CJK ideograph. Texts joined at such a character count the sum of their wordpieces."""
    o = ord(ch)
    if ch in " \t\n\r" or 33 <= o <= 47 or 58 <= o <= 64 or 91 <= o <= 96 or 123 <= o <= 126:
        return True
    if 0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF or 0xF900 <= o <= 0xFAFF:
        return True
    # Other controls are deleted by the normalizer, so they separate nothing; Unicode
    # spaces and punctuation do.
    return o > 127 and unicodedata.category(ch)[0] in "PZ"


def _windows(text: str, separates=separates) -> list[int]:
    """Cut positions 0 = b0 < b1 < ... = len(text), about OFFSET_WINDOW apart, each next to
    a separating character (never inside a word, which would change its pieces)."""
    bounds = [0]
    pos, n = 0, len(text)
    while n - pos > OFFSET_WINDOW:
        hi = pos + OFFSET_WINDOW
        cut = max(text.rfind(" ", pos + 1, hi), text.rfind("\n", pos + 1, hi))
        if cut <= pos:
            cut = next((k for k in range(hi, pos, -1) if separates(text[k])), -1)
        if cut <= pos:
            cut = next((k for k in range(hi, n) if separates(text[k])), n)
        if cut >= n:
            break
        bounds.append(cut)
        pos = cut
    bounds.append(n)
    return bounds


def words(text: str) -> list[str]:
    """text cut at ASCII whitespace: parts whose wordpieces add up to text's (an empty part
    has none)."""
    if _OTHER_SPLITS.search(text) is None:
        return text.split()
    return _ASCII_SPACE.split(text)


class WordpieceRules:
    """How BERT's wordpiece tokenizer (MiniLM) splits: at ASCII whitespace always, and at
    punctuation and CJK ideographs (``separates``)."""

    kind = "wordpiece"

    def __init__(self, tokenizer=None) -> None:
        pass

    @staticmethod
    def words(text: str) -> list[str] | None:
        return words(text)

    @staticmethod
    def separates(ch: str) -> bool:
        return separates(ch)

    @staticmethod
    def extra(text: str) -> int:
        return 0


class UnigramRules:
    """How the sentencepiece unigram tokenizer (multilingual-e5-small, ``model/unigram.py``)
    splits: only at characters its table maps to a space (and the space itself); a text
    ending in one gets a lone U+2581 piece. A text holding a character the table deletes
    or maps to something with a space at an end (a control, "¨") is counted whole
    (``words`` None): its words would not add up."""

    kind = "unigram"

    def __init__(self, table: dict[int, str]) -> None:
        spaces = {" "} | {chr(cp) for cp, out in table.items() if out == " "}
        odd = {chr(cp) for cp, out in table.items()
               if out != " " and (not out or out[0] == " " or out[-1] == " ")}
        self.spaces = frozenset(spaces)
        self._split = re.compile("[" + "".join(map(re.escape, sorted(spaces))) + "]+")
        self._odd = re.compile("[" + "".join(map(re.escape, sorted(odd))) + "]") if odd else None

    def words(self, text: str) -> list[str] | None:
        if self._odd is not None and self._odd.search(text):
            return None
        return [w for w in self._split.split(text) if w]

    def separates(self, ch: str) -> bool:
        return ch in self.spaces

    def extra(self, text: str) -> int:
        """The lone piece a text ending in a space gets."""
        return 1 if text and text[-1] in self.spaces else 0


class TokenCounter:
    """Counts a model's tokens (its two special tokens included), summing cached word
    counts. ``model``: a record or its name (MiniLM's for None)."""

    def __init__(self, tokenizer=None, cache_size: int = DEFAULT_CACHE_SIZE,
                 model=None) -> None:
        from brainbot.model.records import record

        self.model = record(model).name
        self._tokenizer = tokenizer
        self._rules: WordpieceRules | UnigramRules | None = None
        self._pieces: dict[str, int] = {"": 0}
        self._cache_size = cache_size
        self.hits = 0  # texts counted from cached words alone
        self.misses = 0  # texts that sent a new word to the tokenizer

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            from brainbot.model.files import load_tokenizer

            self._tokenizer = load_tokenizer(truncate=False, model=self.model)
        return self._tokenizer

    @property
    def rules(self) -> WordpieceRules | UnigramRules:
        if self._rules is None:
            from brainbot.model.records import record

            spec = record(self.model)
            if spec.tokenizer == "unigram":
                from brainbot.model.files import normalization_table

                self._rules = UnigramRules(normalization_table(spec))
            else:
                self._rules = WordpieceRules()
        return self._rules

    def separates(self, ch: str) -> bool:
        """Whether this tokenizer always splits next to ch: texts joined at such a
        character count the sum of their pieces."""
        return self.rules.separates(ch)

    def count(self, text: str) -> int:
        """Tokens of text, the two special tokens included (so "" counts 2)."""
        return self.count_many((text,))[0]

    def count_many(self, texts: Sequence[str] | Iterable[str], cache: bool = True) -> list[int]:
        """count() of each text; the words not cached yet go through one encode_batch.
        (``cache`` is kept for callers; every count is a sum of cached words now.)"""
        texts = list(texts)
        if not texts:
            return []
        if self._cache_size <= 0:
            return [len(e.ids) for e in self.tokenizer.encode_batch(texts)]
        rules = self.rules
        parts = [rules.words(t) for t in texts]
        out = [0] * len(texts)
        whole = [i for i, ws in enumerate(parts) if ws is None]
        if whole:  # texts whose words would not add up: counted as they are
            encodings = self.tokenizer.encode_batch([texts[i] for i in whole])
            for i, e in zip(whole, encodings, strict=True):
                out[i] = len(e.ids)
        summed = [(i, ws) for i, ws in enumerate(parts) if ws is not None]
        pieces = self._pieces
        try:
            sums = [sum(map(pieces.__getitem__, ws)) for _, ws in summed]
        except KeyError:
            self._learn([ws for _, ws in summed])
            sums = [sum(map(pieces.__getitem__, ws)) for _, ws in summed]
            self.misses += len(texts)
        else:
            self.hits += len(texts)
        for (i, _), n in zip(summed, sums, strict=True):
            out[i] = SPECIAL_TOKENS + n + rules.extra(texts[i])
        return out

    def _learn(self, parts: list[list[str]]) -> None:
        """Count, in one encode_batch, every word of parts not in the cache."""
        pieces = self._pieces
        new = list(dict.fromkeys(w for ws in parts for w in ws if w not in pieces))
        if len(pieces) + len(new) > self._cache_size:
            self.clear()
            new = list(dict.fromkeys(w for ws in parts for w in ws if w))
        encodings = self.tokenizer.encode_batch(new, add_special_tokens=False)
        for word, enc in zip(new, encodings, strict=True):
            pieces[word] = len(enc.ids)

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """Character spans of text's wordpieces, special tokens excluded (not cached).

        Long texts are encoded in windows cut where the pre-tokenizer splits anyway
        (whitespace, punctuation), through one encode_batch: the same offsets, but one
        1 MB encode takes ~10 s where 4 KB windows take ~3 s (measured, 2 cores)."""
        bounds = _windows(text, self.rules.separates)
        if len(bounds) == 2:
            return list(self.tokenizer.encode(text, add_special_tokens=False).offsets)
        pieces = [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
        encodings = self.tokenizer.encode_batch(pieces, add_special_tokens=False)
        out: list[tuple[int, int]] = []
        for base, enc in zip(bounds, encodings, strict=False):
            out.extend((base + a, base + b) for a, b in enc.offsets)
        return out

    def clear(self) -> None:
        self._pieces.clear()
        self._pieces[""] = 0


# --- cutting a text that is over budget -----------------------------------------------


def _last_space(text: str, lo: int, hi: int) -> int:
    """Index of the last whitespace character in text[lo:hi], or -1."""
    best = -1
    for ch in " \t\n\u3000\u00a0":
        best = max(best, text.rfind(ch, lo, hi))
    return best


def split_long(
    text: str, start: int, end: int, budget: int, max_chars: int, counter: TokenCounter
) -> list[tuple[int, int, int, bool]]:
    """Cut text[start:end] into pieces of at most budget wordpieces and max_chars chars.

    Pieces end at whitespace when there is any within reach, else between two wordpieces.
    Returns (start, end, wordpieces, cut_at_whitespace) for each piece. Counts come from
    one encoding's offsets and are exact where a cut falls on a pre-tokenizer boundary;
    pieces cut inside a word are recounted, and cut finer while they exceed the budget.
    """
    offsets = counter.offsets(text[start:end])
    token_starts = [start + a for a, _ in offsets]
    pieces: list[tuple[int, int, int, bool, bool]] = []
    pos, exact_start = start, True
    while pos < end:
        first = bisect_left(token_starts, pos)
        limit = end if first + budget >= len(token_starts) else token_starts[first + budget]
        limit = min(limit, pos + max_chars)
        if limit >= end:
            cut, at_space, exact_end = end, True, True
        else:
            space = _last_space(text, pos + 1, limit + 1)
            if space > pos:
                cut, at_space, exact_end = space, True, True
            else:
                cut, at_space = max(limit, pos + 1), False
                exact_end = counter.separates(text[cut - 1]) or counter.separates(text[cut])
        e = cut
        while e > pos and text[e - 1].isspace():
            e -= 1
        if e > pos:
            n = bisect_left(token_starts, e, first) - first
            pieces.append((pos, e, n, at_space, exact_start and exact_end))
        pos, exact_start = cut, exact_end
        while pos < end and text[pos] in _SPACES:
            pos += 1
    return _recount(text, pieces, budget, max_chars, counter)


def _recount(text, pieces, budget, max_chars, counter) -> list[tuple[int, int, int, bool]]:
    """Exact counts for pieces cut inside a word; re-cut any that grew past the budget."""
    rough = [i for i, p in enumerate(pieces) if not p[4]]
    counts = counter.count_many([text[pieces[i][0] : pieces[i][1]] for i in rough])
    out = [p[:4] for p in pieces]
    for i, n in zip(rough, counts, strict=False):
        out[i] = (out[i][0], out[i][1], n - SPECIAL_TOKENS, out[i][3])
    fixed = []
    for piece in out:
        s, e, n, _ = piece
        if n <= budget:
            fixed.append(piece)
        else:  # a cut changed how a word splits into wordpieces; cut it finer
            shrink = max(1, budget - (n - budget) - 1)
            fixed.extend(split_long(text, s, e, shrink, max_chars, counter))
    return fixed
