"""Fuzzing the read path end to end: bytes -> notes.decode -> markdown.parse ->
chunking.chunk_note, and the BM25 analyzer (lexical.analyze, the query side included).

What tests/test_markdown.py and tests/test_chunking.py already cover (generated markdown
and arbitrary str through parse and chunk_text with four fixed ChunkParams) is not
repeated. Here the inputs are raw bytes (invalid UTF-8, BOMs, CRLF and lone CR, NULs),
structures nested deeper and indented more oddly than those generators make, and
ChunkParams drawn at random over their whole valid range. Invariants, recounted
independently of the chunker: spans exact against the decoded text, every non-blank
character covered, retrieval_tokens <= max_tokens, lines consistent with chars, chunk
ids unique, the same bytes give the same chunks.

atheris (coverage-guided) runs too when it is installed; it is optional. For a longer
hunt, BRAINBOT_FUZZ_SCALE=20 multiplies every example count.
"""

from __future__ import annotations

import os
import subprocess
import sys
from bisect import bisect_right
from collections import Counter

import pytest
from conftest import REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brainbot.notes import files as notes
from brainbot.notes.inline import InlineMarkup
from brainbot.notes.markdown import BLOCK_KINDS, parse
from brainbot.text import lexical
from brainbot.text.chunking import ChunkParams, chunk_note
from brainbot.text.tokens import TokenCounter

SCALE = int(os.environ.get("BRAINBOT_FUZZ_SCALE", "1"))
FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                      HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def counters(counter) -> tuple[TokenCounter, TokenCounter]:
    """(the chunker's counter, an uncached one that recounts)."""
    return counter, TokenCounter(tokenizer=counter.tokenizer, cache_size=0)


# --- strategies ---------------------------------------------------------------------------

_params = st.integers(32, 256).flatmap(
    lambda mx: st.integers(8, mx).flatmap(
        lambda target: st.builds(
            ChunkParams, max_tokens=st.just(mx), target_tokens=st.just(target),
            min_tokens=st.integers(0, target), overlap_sentences=st.integers(0, 8),
            max_chars=st.integers(256, 4096))))

_words = st.one_of(
    st.from_regex(r"[A-Za-z]{1,10}", fullmatch=True),
    st.sampled_from(["Dr.", "e.g.", "3.14", "…", "漢字。", "😀", "naïve", "x" * 60, "a.b.c",
                     "[[wiki link]]", "`code`", "**", "|", "\\", "<!--", "-->", "&nbsp;",
                     "\u200b", "\u202e", "\u0301", "\t", "ß", "İ", "ﬁ"]),
)
_prose = st.lists(_words, min_size=1, max_size=40).map(" ".join)
# A line: indentation, a stack of container markers, then content or a block opener.
_marker = st.sampled_from(["> ", "- ", "* ", "1. ", "10) ", "+ ", ">", "-\t", "  "])
_opener = st.sampled_from(["# ", "###### ", "####### ", "```", "````python", "~~~", "---",
                           "===", "***", "| a | b |", "|---|:-:|", "    ", "<div>", "</div>",
                           "<pre>", "<!--", "[ ] ", "[x] ", ""])
_line = st.tuples(st.sampled_from(["", " ", "  ", "   ", "    ", "\t", " \t"]),
                  st.lists(_marker, max_size=12).map("".join), _opener,
                  _prose | st.just("")).map("".join)
_newline = st.sampled_from([b"\n", b"\r\n", b"\r", b"\n\n"])
_junk = st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xef\xbb\xbf", b"\x00",
                         b"\xe2\x80\xa8", b"\x1b[31m", b"\x85"])


@st.composite
def _note_bytes(draw) -> bytes:
    """Markdown-ish lines in mixed newline styles, with bad bytes spliced in."""
    parts = []
    if draw(st.booleans()):
        parts.append(draw(st.sampled_from([b"\xef\xbb\xbf", b""])) + b"---\r\ntitle: t\n---")
    for _ in range(draw(st.integers(0, 30))):
        line = draw(_line).encode("utf-8")
        if draw(st.integers(0, 9)) == 0:
            cut = draw(st.integers(0, len(line)))
            line = line[:cut] + draw(_junk) + line[cut:]
        parts.append(line)
    joined = b""
    for part in parts:
        joined += part + draw(_newline)
    return joined[: len(joined) - draw(st.integers(0, 2))]


# --- invariants -------------------------------------------------------------------------


def check_note(data: bytes, params: ChunkParams, counters) -> None:
    counter, fresh = counters
    text, warnings = notes.decode(data)
    assert "\r" not in text
    assert bool(warnings) == _invalid_utf8(data)
    note = parse(text)
    starts = note.line_starts
    previous = -1
    for b in note.blocks:
        assert b.kind in BLOCK_KINDS and previous < b.start_char <= b.end_char <= len(text)
        assert b.start_char == 0 or text[b.start_char - 1] == "\n"
        assert b.end_char == len(text) or text[b.end_char] == "\n"
        previous = b.end_char
    chunks = chunk_note(note, "fuzz/note.md", counter, params)
    markup = InlineMarkup.of_note(note)  # retrieval_text holds the visible text (chunker 3)
    covered = bytearray(len(text))
    for i, c in enumerate(chunks):
        assert c.chunk_index == i and c.source_text
        assert text[c.start_char : c.end_char] == c.source_text
        assert c.start_char >= note.body_start_char
        assert c.start_line == bisect_right(starts, c.start_char)
        assert c.end_line == bisect_right(starts, c.end_char - 1)
        seen = markup.visible(c.start_char, c.end_char)
        # The chunker strips what it shows when an edit touches the span (chunking._retrieval),
        # and a wikilink cut by the span is an edit left as written: seen == source_text then.
        edited = markup.edited(c.start_char, c.end_char)
        assert c.retrieval_text.endswith(seen.strip() if edited else seen)
        # len(source_text) <= params.max_chars is not checked here: see
        # test_max_chars_holds_on_a_found_case below.
        covered[c.start_char : c.end_char] = b"\x01" * (c.end_char - c.start_char)
    recount = fresh.count_many([c.retrieval_text for c in chunks])
    for c, n in zip(chunks, recount, strict=True):
        assert n == c.retrieval_tokens <= params.max_tokens
    assert len({c.chunk_id for c in chunks}) == len(chunks)
    body = range(note.body_start_char, len(text))
    missing = [i for i in body if not covered[i] and not text[i].isspace()]
    assert not missing, f"uncovered {text[missing[0]:missing[0] + 30]!r}"
    assert chunk_note(parse(text), "fuzz/note.md", counter, params) == chunks


def _invalid_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return False
    except UnicodeDecodeError:
        return True


# --- the read path ----------------------------------------------------------------------


@settings(FUZZ, max_examples=150 * SCALE)
@given(_note_bytes(), _params)
def test_bytes_to_chunks_on_nested_markdown(counters, data, params):
    check_note(data, params, counters)


@settings(FUZZ, max_examples=500 * SCALE)
@given(st.binary(max_size=600), _params)
def test_bytes_to_chunks_on_arbitrary_bytes(counters, data, params):
    check_note(data, params, counters)


@settings(FUZZ, max_examples=60 * SCALE)
@given(st.integers(1, 60), st.sampled_from(["> ", "- ", "  - ", "1. ", "> - ", "\t"]), _prose)
def test_deep_nesting(counters, depth, marker, prose):
    """Quotes and lists nested up to 60 deep, each level with text: no recursion limit,
    every invariant."""
    lines = [marker * d + prose for d in range(depth)] + [marker * d for d in range(depth, 0, -1)]
    check_note("\n".join(lines).encode(), ChunkParams(), counters)


# Found by this file's fuzzing (BRAINBOT_FUZZ_SCALE=20): a 262-character chunk under
# max_chars=261. Minimal by deletion: removing any one character makes it fit.
MAX_CHARS_CASE = (
    " > 1. ---Dr. \t | v \U0001f600 \u0301 \u0130 QVAPDQUwst OoiqG ** xiSaP 3.14 nLbcrzaMyR "
    "LnRa QhlWm \u0301 **\n    <!--\n***\U0001f600 `code` na\u00efve JHzKsqwh A `code` "
    "na\u00efve JHzKsqwh nJvPiPh <!-- \t \u0130 tRFu Y NkOfDSDfyi \u202e g SUykmrh e.g. "
    "deH f " + "x" * 22 + "\ufffd" + "x" * 38
)


def test_max_chars_holds_on_a_found_case(counters):
    """Found by the fuzzer: the first line's indentation was taken into a chunk that was
    already max_chars long."""
    params = ChunkParams(max_tokens=239, target_tokens=172, overlap_sentences=0,
                         min_tokens=0, max_chars=261)
    chunks = chunk_note(parse(MAX_CHARS_CASE), "fuzz/note.md", counters[0], params)
    assert max(len(c.source_text) for c in chunks) <= params.max_chars


# --- the analyzer -----------------------------------------------------------------------


@settings(FUZZ, max_examples=1000 * SCALE)
@given(st.text(max_size=300))
def test_analyzer_terms_are_clean(text):
    terms = lexical.analyze(text)
    for term in terms:
        assert term and term == term.lower() and not any(ch.isspace() for ch in term)
        assert len(term) <= lexical.MAX_TERM_CHARS
    tf, length = lexical.term_frequencies(text)
    assert length == len(terms) and tf == Counter(terms)
    assert lexical.query_terms(text) == tf  # a query is analyzed as the index was


@settings(FUZZ, max_examples=500 * SCALE)
@given(st.text(max_size=120), st.text(max_size=120))
def test_analyzer_splits_at_whitespace(a, b):
    """Terms of "a b" are those of a then those of b: no term spans a space, and nothing
    depends on what came before (so a chunk's postings do not depend on its neighbours)."""
    assert lexical.analyze(a + " " + b) == lexical.analyze(a) + lexical.analyze(b)


@settings(FUZZ, max_examples=500 * SCALE)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=200))
def test_analyzer_ignores_ascii_case(text):
    assert lexical.analyze(text.upper()) == lexical.analyze(text.lower()) == lexical.analyze(text)


def test_analyzer_on_hostile_strings():
    for text in ["\x00" * 1000, "a" * 1_000_000, "漢" * 100_000, "\ud800\udfff lone surrogates",
                 "İ" * 1000, "ﬃ" * 1000, "\u0301" * 1000, "1" * 41 + " ok", "_" * 500]:
        terms = lexical.analyze(text)
        assert all(0 < len(t) <= lexical.MAX_TERM_CHARS for t in terms)
    assert lexical.analyze("a" * 41) == [] and lexical.analyze("1" * 41 + " ok") == ["ok"]


# --- atheris (optional) -----------------------------------------------------------------

ATHERIS = r'''
import sys
import atheris

with atheris.instrument_imports():
    from brainbot.text import chunking, lexical
from brainbot.notes import markdown, files as notes, sentences

from brainbot.text.tokens import TokenCounter

counter = TokenCounter()
params = chunking.ChunkParams(max_tokens=64, target_tokens=48, min_tokens=8)


def one(data: bytes) -> None:
    text, _ = notes.decode(data)
    note = markdown.parse(text)
    for c in chunking.chunk_note(note, "a.md", counter, params):
        assert text[c.start_char:c.end_char] == c.source_text
        assert counter.count(c.retrieval_text) == c.retrieval_tokens <= 64
    lexical.analyze(text)


atheris.Setup([sys.argv[0], "-runs=4000", "-max_len=1024", "-max_total_time=60",
               "-rss_limit_mb=4096"], one)
atheris.Fuzz()
'''


@pytest.mark.slow
def test_atheris_read_path(tmp_path):
    pytest.importorskip("atheris", reason="atheris is optional (pip install atheris)")
    script = tmp_path / "fuzz_read_path.py"
    script.write_text(ATHERIS, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Done" in result.stderr
