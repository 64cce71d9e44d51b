"""TokenCounter's sums of cached word counts equal the tokenizer's count of the whole text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from brainbot.text.tokens import TokenCounter, words

# Whitespace Python splits at and BERT's normalizer does not (controls it deletes, Unicode
# spaces it keeps), ASCII whitespace, and text that makes wordpieces of its own.
_PIECES = st.one_of(
    st.sampled_from([" ", "\t", "\n", "\r\n", "\x0b", "\x0c", "\x1c", "\x1f", "\x85", "\xa0",
                     "\u2003", "\u3000", "\u2028", "\x00", "\ufffd", "\u0301", "Σ", "ΣΑΣ ",
                     "漢字", "naïve", "e.g.", "x" * 120, "[[link]]", "😀", "ﾞ"]),
    st.text(min_size=0, max_size=12),
)
_TEXTS = st.lists(_PIECES, max_size=30).map("".join)


@settings(deadline=None, max_examples=300)
@given(st.lists(_TEXTS, min_size=1, max_size=6))
def test_sums_of_words_equal_the_tokenizer(counter, texts):
    summing = TokenCounter(tokenizer=counter.tokenizer)
    direct = [len(e.ids) for e in counter.tokenizer.encode_batch(texts)]
    assert summing.count_many(texts) == direct
    assert [summing.count(t) for t in texts] == direct  # again, from the cache


def test_words_cut_at_ascii_whitespace_only_when_python_would_cut_elsewhere():
    assert words("a b\tc\n") == ["a", "b", "c"]
    assert words("a\xa0b c") == ["a\xa0b", "c"]
    assert words("a\x0bb") == ["a\x0bb"]


def test_a_full_cache_starts_afresh_and_counts_the_same(counter):
    small = TokenCounter(tokenizer=counter.tokenizer, cache_size=3)
    texts = ["one two three four", "five six", "one five seven eight nine"]
    assert small.count_many(texts) == [len(e.ids) for e in counter.tokenizer.encode_batch(texts)]
