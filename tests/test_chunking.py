"""chunking: heading paths, packing rules, the token budget, exact spans and coverage, on
hand-written notes, generated markdown, hostile input and the three shared corpora."""

from __future__ import annotations

import hashlib
import json
import re
from bisect import bisect_right
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brainbot.errors import InputError
from brainbot.notes.inline import InlineMarkup
from brainbot.notes.markdown import parse
from brainbot.text.chunking import Chunk, ChunkParams, chunk_note, chunk_text
from brainbot.text.tokens import SPECIAL_TOKENS, TokenCounter

CORPORA = Path(__file__).resolve().parents[2] / "shared" / "data" / "corpora"
SMALL = ChunkParams(max_tokens=64, target_tokens=48, min_tokens=16, overlap_sentences=1)


@pytest.fixture(scope="session")
def fresh(counter) -> TokenCounter:
    """Same tokenizer, its own cache: recounts that do not trust the chunker's cache."""
    return TokenCounter(tokenizer=counter.tokenizer, cache_size=0)


def check(text: str, chunks: list[Chunk], fresh: TokenCounter, params=None) -> None:
    """Every invariant of the chunk contract, recounted independently."""
    params = params or ChunkParams()
    note = parse(text)
    markup = InlineMarkup.of_note(note)
    shows_text = bool(markup.visible(note.body_start_char).strip())
    covered = bytearray(len(text))
    for i, c in enumerate(chunks):
        assert c.chunk_index == i
        assert text[c.start_char : c.end_char] == c.source_text
        assert c.source_text and not c.source_text[-1].isspace()
        assert c.start_char >= note.body_start_char
        assert c.start_line == bisect_right(note.line_starts, c.start_char)
        assert c.end_line == bisect_right(note.line_starts, c.end_char - 1)
        prefix = " > ".join(c.heading_path)
        # retrieval_text is the heading prefix and what a reader sees of the source.
        seen = markup.visible(c.start_char, c.end_char)
        seen = seen.strip() if markup.edited(c.start_char, c.end_char) else seen
        if shows_text and not seen.strip():  # only when no neighbour could take it whole
            for j in (i - 1, i + 1):
                if 0 <= j < len(chunks):
                    span = max(c.end_char, chunks[j].end_char) - min(c.start_char, chunks[j].start_char)
                    assert span > params.max_chars, f"chunk {i} shows nothing: {c.source_text!r}"
        if c.retrieval_text != seen:
            head, _, body = c.retrieval_text.partition("\n\n")
            assert body == seen and prefix.endswith(head) and head
        covered[c.start_char : c.end_char] = b"\x01" * (c.end_char - c.start_char)
        if i:
            assert c.start_char >= chunks[i - 1].start_char
    counts = fresh.count_many([c.retrieval_text for c in chunks])
    sources = fresh.count_many([c.source_text for c in chunks])
    for c, n, m in zip(chunks, counts, sources, strict=False):
        assert n == c.retrieval_tokens <= params.max_tokens
        assert m == c.source_tokens
    body = text[note.body_start_char :]
    missing = [
        i for i, ch in enumerate(body, note.body_start_char) if not covered[i] and not ch.isspace()
    ]
    assert not missing, f"uncovered text at {missing[:5]}: {text[missing[0]:missing[0] + 40]!r}"


# --- heading paths and prefixes -----------------------------------------------------------


def test_heading_path_is_nested_by_level(counter, fresh):
    text = "# A\n\nText a.\n\n## B\n\nText b.\n\n### C\n\nText c.\n\n## D\n\nText d.\n"
    params = ChunkParams(min_tokens=0)
    chunks = chunk_text(text, "n.md", counter, params)
    assert [c.heading_path for c in chunks] == [("A",), ("A", "B"), ("A", "B", "C"), ("A", "D")]
    assert chunks[1].source_text == "## B\n\nText b."  # the heading goes with its text
    assert chunks[2].retrieval_text == "A > B > C\n\n### C\n\nText c."
    check(text, chunks, fresh, params)


def test_fallback_heading(counter, fresh):
    text = "Loose text before any heading.\n\n# Later\n\nMore text here, under a heading.\n"
    params = ChunkParams(min_tokens=0)
    chunks = chunk_text(text, "dir/My Note.md", counter, params)
    assert chunks[0].heading_path == ("My Note",)
    assert chunks[0].retrieval_text == "My Note\n\nLoose text before any heading."
    assert chunks[1].heading_path == ("Later",)
    custom = chunk_text(text, "dir/My Note.md", counter, params, fallback_heading="Title")
    assert custom[0].heading_path == ("Title",)
    bare = chunk_text("A BEIR document.", "MED-1", counter, fallback_heading="")
    assert bare[0].heading_path == ()
    assert bare[0].retrieval_text == bare[0].source_text == "A BEIR document."
    assert bare[0].retrieval_tokens == bare[0].source_tokens


def test_tiny_sections_merge_with_an_honest_path(counter, fresh):
    text = "# Top\n\n## One\n\nShort.\n\n## Two\n\nAlso short.\n\n## Three\n\nTiny.\n"
    chunks = chunk_text(text, "n.md", counter)
    assert len(chunks) == 1
    assert chunks[0].heading_path == ("Top",)  # the common ancestor of One, Two, Three
    assert chunks[0].source_text.startswith("# Top")
    check(text, chunks, fresh)


def test_parent_heading_without_text_travels_with_its_child(counter, fresh):
    prose = " ".join(f"Sentence number {i} says something useful." for i in range(30))
    text = f"# Guide\n\n## Install\n\n{prose}\n\n## Use\n\n{prose}\n"
    chunks = chunk_text(text, "g.md", counter)
    assert chunks[0].source_text.startswith("# Guide\n\n## Install\n\nSentence number 0")
    assert chunks[0].heading_path == ("Guide", "Install")
    assert not any(c.source_text.strip() in ("# Guide", "## Install", "## Use") for c in chunks)
    check(text, chunks, fresh)


def test_long_heading_paths_shorten_only_the_prefix(counter, fresh):
    words = " ".join(f"word{i}" for i in range(10))
    text = "".join(f"{'#' * level} Level {level} {words}\n\n" for level in range(1, 7))
    text += "The text under all those headings. " * 40
    chunks = chunk_text(text, "deep.md", counter)
    path = tuple(f"Level {level} {words}" for level in range(1, 7))
    for c in chunks:
        assert c.heading_path == path
        prefix = c.retrieval_text[: -len(c.source_text) - 2]
        assert " > ".join(path).endswith(prefix)
        assert len(prefix) < len(" > ".join(path))
    check(text, chunks, fresh)
    # Headings that cannot all fit one chunk with any text: invariants still hold.
    huge = "".join(f"{'#' * level} Level {level} {words * 3}\n\n" for level in range(1, 7))
    huge += "The text under all those headings. " * 40
    check(huge, chunk_text(huge, "deep.md", counter), fresh)


def test_a_megabyte_heading(counter, fresh):
    text = "# " + "heading " * 125_000 + "\n\nText.\n"
    chunks = chunk_text(text, "h.md", counter)
    check(text, chunks, fresh)


# --- packing -----------------------------------------------------------------------------


def test_code_fence_stays_whole_when_it_fits(counter, fresh):
    prose = " ".join(f"Prose sentence {i} explains the code below." for i in range(25))
    code = "```rust\n" + "\n".join(f"let x{i} = {i}; # not a heading" for i in range(20)) + "\n```"
    text = f"# Code\n\n{prose}\n\n{code}\n\nAfter the code.\n"
    chunks = chunk_text(text, "c.md", counter)
    assert any(code in c.source_text for c in chunks)
    check(text, chunks, fresh)


def test_big_code_fence_splits_on_lines(counter, fresh):
    code = "```python\n" + "\n".join(f"value_{i} = compute({i}, 'x')  # step {i}" for i in range(150)) + "\n```"
    text = f"# Code\n\n{code}\n"
    chunks = chunk_text(text, "c.md", counter)
    assert len(chunks) > 2
    for c in chunks:
        assert c.start_char == 0 or text[c.start_char - 1] == "\n"
        assert c.end_char == len(text) or text[c.end_char] == "\n"
    assert chunks[0].source_text.startswith("# Code\n\n```python\nvalue_0")
    assert chunks[-1].source_text.endswith("# step 149\n```")
    check(text, chunks, fresh)


def test_big_table_splits_on_whole_rows(counter, fresh):
    rows = "\n".join(f"| {i} | name {i} | a longer description of row {i} |" for i in range(120))
    text = f"## Table\n\n| id | name | description |\n|---|---|---|\n{rows}\n"
    chunks = chunk_text(text, "t.md", counter)
    assert len(chunks) > 2
    assert "|---|---|---|\n| 0 |" in chunks[0].source_text
    for c in chunks:
        assert c.source_text.endswith("|")
        assert text[c.start_char - 1] == "\n"
    assert sum(len(re.findall(r"\| name \d", c.source_text)) for c in chunks) == 120  # once
    check(text, chunks, fresh)


def test_big_list_splits_on_items(counter, fresh):
    items = "\n".join(f"- Item {i} has a sentence. And a second one about {i}." for i in range(80))
    text = f"# List\n\n{items}\n"
    chunks = chunk_text(text, "l.md", counter)
    assert len(chunks) > 2
    for c in chunks:
        assert c.source_text.endswith(".")
        assert text[c.end_char] == "\n" if c.end_char < len(text) else True
        assert c.source_text.lstrip("# List\n").startswith("- Item")
    check(text, chunks, fresh)


def test_nested_list_item_too_big_splits_on_sub_items_then_sentences(counter, fresh):
    sub = "\n".join(f"  - sub point {i}: " + "details are here. " * 12 for i in range(12))
    text = f"- Top item\n{sub}\n- Next item\n"
    chunks = chunk_text(text, "l.md", counter)
    check(text, chunks, fresh)
    assert all(c.source_text.endswith((".", "item")) for c in chunks)


def test_overlong_sentence_splits_on_words(counter, fresh):
    text = "# Run-on\n\n" + " ".join(f"word{i}" for i in range(1500)) + "\n"
    chunks = chunk_text(text, "r.md", counter)
    assert len(chunks) > 3
    for c in chunks:
        assert c.end_char == len(text) or text[c.end_char].isspace()  # never mid-word
    check(text, chunks, fresh)


def test_wrapped_run_on_splits_on_line_ends_first(counter, fresh):
    lines = "\n".join(f"[x] item {i} without punctuation but with words" for i in range(80))
    chunks = chunk_text(lines, "w.md", counter)
    for c in chunks:
        assert c.end_char == len(lines) or lines[c.end_char] == "\n"
    check(lines, chunks, fresh)


def test_a_word_longer_than_the_budget(counter, fresh):
    text = "intro\n\n" + "#-" * 5000 + "\n\n" + "x" * 50_000 + "\n"
    chunks = chunk_text(text, "w.md", counter)
    assert all(len(c.source_text) <= ChunkParams().max_chars for c in chunks)
    check(text, chunks, fresh)


def test_overlap_is_whole_sentences_within_a_section(counter, fresh):
    sentences = [f"Sentence {i} is about topic {i % 7} in some detail." for i in range(80)]
    text = "# S\n\n" + " ".join(sentences) + "\n\n# T\n\n" + " ".join(sentences) + "\n"
    chunks = chunk_text(text, "o.md", counter)
    pairs = list(zip(chunks, chunks[1:], strict=False))
    same = [(a, b) for a, b in pairs if a.heading_path == b.heading_path]
    assert same
    for a, b in same:
        shared = text[b.start_char : a.end_char]
        assert shared in sentences  # exactly one whole sentence is repeated
    crossing = [(a, b) for a, b in pairs if a.heading_path != b.heading_path]
    assert crossing and all(b.start_char > a.end_char for a, b in crossing)
    none = chunk_text(text, "o.md", counter, ChunkParams(overlap_sentences=0))
    assert all(b.start_char > a.end_char for a, b in zip(none, none[1:], strict=False))
    check(text, chunks, fresh)


def test_balanced_sizes_and_no_crumbs(counter, fresh):
    text = "# S\n\n" + " ".join(f"Sentence {i} carries some meaning." for i in range(120))
    chunks = chunk_text(text, "b.md", counter)
    sizes = [c.retrieval_tokens for c in chunks]
    assert min(sizes) >= 0.6 * max(sizes)
    check(text, chunks, fresh)


def test_note_of_only_headings_still_yields_its_text(counter, fresh):
    text = "# A\n## B\n### C\n"
    chunks = chunk_text(text, "h.md", counter)
    assert len(chunks) == 1 and "### C" in chunks[0].source_text
    check(text, chunks, fresh)


def test_note_ending_in_a_heading_has_no_heading_only_chunk(counter, fresh):
    text = "# Body\n\n" + "A sentence of the body text. " * 60 + "\n\n# The end\n"
    chunks = chunk_text(text, "e.md", counter)
    assert chunks[-1].source_text != "# The end"
    check(text, chunks, fresh)


def test_front_matter_is_not_chunked(counter, fresh):
    text = "---\ntitle: Secret\ntags: [a]\n---\n# Visible\n\nBody text.\n"
    chunks = chunk_text(text, "f.md", counter)
    assert "Secret" not in "".join(c.retrieval_text for c in chunks)
    assert chunks[0].start_line == 5
    assert chunk_text("---\ntitle: x\n---\n", "f.md", counter) == []
    assert chunk_text("", "f.md", counter) == []
    assert chunk_text("\n \n\t\n", "f.md", counter) == []
    check(text, chunks, fresh)


# --- invisible markup: retrieved by what a reader sees ------------------------------------

DOCS = Path(__file__).parent / "data" / "docs" / "prompt-caching.md"
SOURCE_URL = "https://docs.example.com/en/docs/build-with-claude/prompt-caching"


def test_documentation_note_is_retrieved_by_its_visible_text(counter, fresh):
    """The reported bug: a note opening with a source comment and an anchor comment under
    every heading gave a comment-only chunk 0 that ranked first for the URL's words."""
    from brainbot.text.lexical import analyze

    text = DOCS.read_text(encoding="utf-8")
    chunks = chunk_text(text, "docs/prompt-caching.md", counter)
    check(text, chunks, fresh)
    assert chunks[0].start_char == 0 and chunks[0].heading_path == ("Prompt caching",)
    assert chunks[0].retrieval_text.startswith("Prompt caching\n\n# Prompt caching\n\nPrompt")
    url_words = set(analyze("example com build claude en anchor mirrored sync"))
    for c in chunks:
        assert "<!--" not in c.retrieval_text and SOURCE_URL not in c.retrieval_text
        assert "-->" not in c.retrieval_text and "](" not in c.retrieval_text
        assert c.retrieval_text.partition("\n\n")[2].strip().count("\n") >= 1  # not a heading
        assert not url_words & set(analyze(c.retrieval_text)), c.retrieval_text
    assert "<!-- source:" in chunks[0].source_text  # the spans still hold the markup
    linked = next(c for c in chunks if "pricing page" in c.retrieval_text)
    assert "See the pricing page for the rates, and Batch processing" in linked.retrieval_text
    assert "counting limits and Context windows." in chunks[-1].retrieval_text


def test_anchor_comment_under_a_heading_travels_with_its_text(counter, fresh):
    prose = " ".join(f"Sentence number {i} says something useful about setup." for i in range(40))
    text = ("<!-- source: https://x.io/very/long/path/to/the/page/on/the/site/that/goes/on -->\n"
            "<!-- fetched 2025-01-15 by the mirror job; edit the page, not this copy -->\n\n"
            f"# Guide\n<!-- anchor: guide -->\n\n## Setup\n<!-- anchor: setup -->\n\n{prose}\n\n"
            f"## Use\n<!-- anchor: use -->\n\n{prose}\n\n<!-- end of page -->\n")
    for params in (ChunkParams(), SMALL, ChunkParams(min_tokens=0, overlap_sentences=0)):
        chunks = chunk_text(text, "g.md", counter, params)
        check(text, chunks, fresh, params)
        for c in chunks:
            body = c.retrieval_text.partition("\n\n")[2]
            assert body and not all(line.startswith("#") for line in body.splitlines() if line)
        assert chunks[0].start_char == 0 and chunks[-1].source_text.endswith("<!-- end of page -->")
        assert chunks[0].heading_path == ("Guide", "Setup")
        assert chunks[0].retrieval_text.startswith("Guide > Setup\n\n# Guide\n\n## Setup\n\nSentence")


def test_a_note_of_comments_only_keeps_its_coverage(counter, fresh):
    text = "<!-- one -->\n\n<!-- two\nlines -->\n"
    chunks = chunk_text(text, "c.md", counter)
    assert len(chunks) == 1 and chunks[0].source_text == text.strip()
    assert chunks[0].retrieval_text == "c"  # the fallback heading: there is nothing else
    check(text, chunks, fresh)


def test_headings_are_what_a_reader_sees(counter, fresh):
    text = "# Setup <!-- anchor: setup -->\n\nText.\n\n## See [[Guide#Install|the guide]] `x`\n\nMore.\n"
    chunks = chunk_text(text, "h.md", counter, ChunkParams(min_tokens=0))
    assert [c.heading_path for c in chunks] == [("Setup",), ("Setup", "See the guide `x`")]
    check(text, chunks, fresh, ChunkParams(min_tokens=0))


def test_link_heavy_text_embeds_only_the_link_text(counter, fresh):
    links = " ".join(f"[item {i}](https://example.org/a/long/path/{i}/page.html#section-{i})."
                     for i in range(120))
    text = f"# Links\n\n{links}\n"
    chunks = chunk_text(text, "l.md", counter)
    check(text, chunks, fresh)
    assert all(c.source_tokens > c.retrieval_tokens for c in chunks)
    assert all("https://" not in c.retrieval_text for c in chunks)


def test_an_index_of_the_previous_chunker_is_refused_with_the_reason(tmp_path, monkeypatch):
    """CHUNKER_VERSION 4 joins a lone comment to the chunk before it (issue 40): a v3
    index must be rebuilt, and is told so, and why."""
    from brainbot.errors import IncompatibleIndexError
    from brainbot.index.indexer import Indexer
    from brainbot.text import chunking

    assert ChunkParams().fingerprint().startswith("chunker4-")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# A\n\nSome text about pears.\n", encoding="utf-8")
    db = tmp_path / "old.db"
    monkeypatch.setattr(chunking, "CHUNKER_VERSION", "3")
    with Indexer(db, embed=False) as ix:
        ix.index_paths([notes])
    monkeypatch.setattr(chunking, "CHUNKER_VERSION", "4")
    with pytest.raises(IncompatibleIndexError, match="--rebuild") as caught:
        with Indexer(db, embed=False) as ix:
            ix.index_paths([notes])
    assert "(its chunker made a chunk that shows nothing of a comment" in str(caught.value)
    with Indexer(db, rebuild=True, embed=False) as ix:
        ix.index_paths([notes])


def test_a_comment_after_a_list_that_fills_the_budget_joins_its_chunk(counter, fresh):
    """Issue 40 (hypothesis found it): the heading and the list take the model's whole
    budget, so their chunk has no room for a heading prefix; the anchor comment after them
    made a chunk of its own that showed nothing (its retrieval text only the prefix)."""
    text = "# Heading\n\n" + "- a.\n" * 84 + "\n<!-- anchor -->\n"
    heading, items = (counter.count(t) - SPECIAL_TOKENS for t in ("# Heading", "- a.\n" * 84))
    assert heading + items == ChunkParams().max_tokens - SPECIAL_TOKENS  # no room for "Heading"
    chunks = chunk_text(text, "n.md", counter)
    assert [c.source_text for c in chunks] == [text.rstrip()]
    assert chunks[0].retrieval_text == text[: text.index("<!--")].strip()
    check(text, chunks, fresh)
    # the case hypothesis drew, at SMALL's budget
    drawn = ("# H\n\n- A.\n- A.\n- A.\n- AQ.\n- AACF.\n- e.g. ![](img.png) A.\n- BHFHB.\n"
             "- A e.g. [[Note#Part|alias]] A A.\n\n<!-- anchor: a -->")
    chunks = chunk_text(drawn, "gen/note.md", counter, SMALL)
    assert len(chunks) == 1
    check(drawn, chunks, fresh, SMALL)
    # a comment that opens what follows still goes with it
    text += "\nA closing sentence under the list.\n"
    chunks = chunk_text(text, "n.md", counter)
    assert chunks[-1].source_text.startswith("<!-- anchor -->")
    check(text, chunks, fresh)


def test_cjk_text(counter, fresh):
    text = "# 标题\n\n" + "这是一个很长的句子，用来测试分块。" * 200 + "\n"
    chunks = chunk_text(text, "zh.md", counter)
    assert len(chunks) > 3 and all(c.source_text.endswith("。") for c in chunks)
    check(text, chunks, fresh)


# --- records, ids, params ------------------------------------------------------------------


def test_record_shape_and_ids(counter):
    text = "# A\n\nSome text.\n"
    chunk = chunk_text(text, "dir/a.md", counter)[0]
    record = chunk.to_record()
    assert list(record) == ["chunk_id", "chunk_index", "source_text", "retrieval_text",
                            "metadata", "measurements"]
    assert list(record["metadata"]) == ["source_file", "heading_path", "start_line",
                                        "end_line", "start_char", "end_char"]
    assert list(record["measurements"]) == ["source_tokens", "retrieval_tokens"]
    assert record["metadata"]["heading_path"] == ["A"]
    expected = hashlib.sha256(b"dir/a.md\x000\x00# A\n\nSome text.").hexdigest()[:16]
    assert chunk.chunk_id == expected
    json.dumps(record)


def test_same_input_gives_byte_identical_output(counter):
    text = (CORPORA / "rust-book" / "src" / "ch04-01-what-is-ownership.md")
    note = text.read_text() if text.exists() else "# T\n\n" + "Words and more words. " * 300
    a = [json.dumps(c.to_record()) for c in chunk_text(note, "x.md", counter)]
    b = [json.dumps(c.to_record()) for c in chunk_text(note, "x.md", TokenCounter())]
    assert a == b


def test_chunk_text_is_parse_then_chunk_note(counter):
    text = "# A\n\nText.\n"
    assert chunk_text(text, "a.md", counter) == chunk_note(parse(text), "a.md", counter)


def test_params_are_validated_and_fingerprinted():
    default = ChunkParams()
    assert default.max_tokens == 256 and default.min_tokens < default.target_tokens
    assert default.fingerprint() == ChunkParams().fingerprint()
    assert default.fingerprint() != ChunkParams(target_tokens=150).fingerprint()
    for bad in (dict(max_tokens=10), dict(max_tokens=512), dict(target_tokens=300), dict(min_tokens=-1),
                dict(min_tokens=250), dict(overlap_sentences=-1), dict(max_chars=10)):
        with pytest.raises(InputError):
            ChunkParams(**bad)
    with pytest.raises(ValueError):
        ChunkParams(target_tokens=0)


# --- hostile input -----------------------------------------------------------------------


def test_binary_junk(counter, fresh):
    junk = (bytes(range(256)) * 40 + b"\xff\xfe# x\n```\n\x1b[0m" + bytes(range(128, 256)) * 40)
    text = junk.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
    check(text, chunk_text(text, "junk.md", counter), fresh)


def test_unterminated_fence(counter, fresh):
    text = "# T\n\nIntro.\n\n```\n" + "\n".join(f"line {i}" for i in range(400))
    chunks = chunk_text(text, "u.md", counter)
    assert chunks[-1].source_text.endswith("line 399")
    check(text, chunks, fresh)


def test_five_thousand_row_table(counter, fresh, pace):
    text = "| a | b |\n|---|---|\n" + "".join(f"| {i} | row {i} |\n" for i in range(5000))
    chunks = pace.run(lambda: chunk_text(text, "t.md", counter), len(text))
    check(text, chunks, fresh)


def test_ten_thousand_headings(counter, fresh, pace):
    text = "".join(f"{'#' * (i % 6 + 1)} Heading {i}\n\ntext {i}.\n\n" for i in range(10_000))
    chunks = pace.run(lambda: chunk_text(text, "h.md", counter), len(text))
    check(text, chunks, fresh)
    only = "".join(f"# H{i}\n" for i in range(10_000))
    check(only, chunk_text(only, "h.md", counter), fresh)


def test_single_megabyte_line(counter, fresh, pace):
    for text in ("word " * 200_000, "#" * 1_000_000):
        chunks = pace.run(lambda text=text: chunk_text(text, "l.md", counter), len(text))
        check(text, chunks, fresh)


@pytest.mark.parametrize("text", [
    "<!-- anchor -->\n" * 50_000 + "\nThe only visible sentence.\n",
    "Text before.\n\n<!-- never closed\n" + "hidden line\n" * 50_000,
    "[[" * 300_000 + "\n\nText after.\n",
    "# Links\n\n" + "[a](https://x.io/" + "b" * 60 + ") " * 20_000,
    "[r]: https://x.io/r\n" * 20_000,
])
def test_notes_of_hostile_markup(counter, fresh, text):
    check(text, chunk_text(text, "m.md", counter), fresh)


@pytest.mark.slow
def test_twenty_megabyte_note(counter, pace):
    section = "## Part {}\n\n" + "A sentence about the topic, with detail. " * 30 + "\n\n"
    section += "```\ncode line\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
    text = "".join(section.format(i) for i in range(20_000_000 // len(section)))
    chunks = pace.run(lambda: chunk_text(text, "big.md", counter), len(text))
    assert all(c.retrieval_tokens <= 256 for c in chunks)
    assert all(text[c.start_char : c.end_char] == c.source_text for c in chunks[::97])
    assert chunks[-1].end_char == len(text.rstrip())


# --- properties on generated markdown --------------------------------------------------

_word = st.one_of(
    st.from_regex(r"[a-zA-Z]{1,12}", fullmatch=True),
    st.sampled_from(["e.g.", "U.S.", "3.14", "config.json", "naïve", "漢字", "😀", "Dr.",
                     "https://x.io/a.b", "`code`", "**bold**", "[[link]]", "#tag", "—",
                     "[text](https://x.io/a_(b) \"t\")", "<!-- note -->", "![](img.png)",
                     "[[Note#Part|alias]]"]),
)
_sentence = st.lists(_word, min_size=1, max_size=30).map(" ".join).map(lambda s: s + ".")
_paragraph = st.lists(_sentence, min_size=1, max_size=12).map(" ".join)
_heading = st.tuples(st.integers(1, 6), st.lists(_word, max_size=6).map(" ".join)).map(
    lambda t: "#" * t[0] + " " + t[1]
)
_fence = st.lists(
    st.one_of(st.sampled_from(["# not a heading", "", "    indented", "}"]), _sentence), max_size=30
).map(lambda lines: "```py\n" + "\n".join(lines) + "\n```")
_table = st.lists(st.lists(_word, min_size=2, max_size=2), max_size=40).map(
    lambda rows: "| a | b |\n|---|---|\n" + "\n".join(f"| {x} | {y} |" for x, y in rows)
)
_list = st.lists(st.tuples(st.booleans(), _sentence), min_size=1, max_size=25).map(
    lambda items: "\n".join(("  - " if nested else "- ") + s for nested, s in items)
)
_quote = _paragraph.map(lambda p: "> " + p)
_long_line = st.integers(300, 3000).map(lambda n: " ".join(f"w{i}" for i in range(n)))
_comment = st.sampled_from(["<!-- anchor: a -->", "<!-- source: https://x.io/a/b-c -->\n<!-- more -->",
                            "[ref]: https://x.io/ref", "<!--\n" + "hidden line\n" * 200 + "-->"])
_block = st.one_of(_heading, _paragraph, _paragraph, _fence, _table, _list, _quote, _long_line,
                   _comment, st.sampled_from(["---", "<div>\nhtml\n</div>", "    indented code"]))
_front = st.sampled_from(["", "---\ntitle: T\n---\n", "---\nbad: [\n---\n"])
_note = st.tuples(_front, st.lists(_block, max_size=14)).map(
    lambda t: t[0] + "\n\n".join(t[1])
)
_params = st.sampled_from([ChunkParams(), SMALL, ChunkParams(overlap_sentences=0, min_tokens=0),
                           ChunkParams(target_tokens=120, overlap_sentences=2)])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.data_too_large])
@given(_note, _params)
def test_generated_notes_hold_every_invariant(counter, fresh, text, params):
    chunks = chunk_text(text, "gen/note.md", counter, params)
    check(text, chunks, fresh, params)
    assert chunk_text(text, "gen/note.md", counter, params) == chunks


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300).map(lambda t: t.replace("\r", "\n")), _params)
def test_arbitrary_text_holds_every_invariant(counter, fresh, text, params):
    check(text, chunk_text(text, "any.md", counter, params), fresh, params)


# --- the shared corpora ---------------------------------------------------------------------


def corpus_notes(name: str) -> dict[str, str]:
    root = CORPORA / name
    if not root.is_dir():
        pytest.skip(f"{root} is absent (the shared corpora are not laid next to this checkout)")
    notes = {}
    for path in sorted(root.rglob("*.md")):
        text = open(path, encoding="utf-8", errors="replace").read()
        notes[path.relative_to(root).as_posix()] = text[1:] if text.startswith("\ufeff") else text
    return notes


@pytest.mark.corpus
@pytest.mark.parametrize("name", ["rust-book", "dwarves-brain", "rust-lang-team-minutes"])
def test_corpus(name, counter, fresh):
    """~10-25 s a corpus: chunk every note, recount every chunk, score the result."""
    from brainbot.text.quality import assess

    notes = corpus_notes(name)
    chunks = []
    for rel, text in notes.items():
        note_chunks = chunk_note(parse(text), rel, counter)
        body = parse(text)
        covered = bytearray(len(text))
        for c in note_chunks:
            assert text[c.start_char : c.end_char] == c.source_text
            covered[c.start_char : c.end_char] = b"\x01" * (c.end_char - c.start_char)
        missing = [i for i in range(body.body_start_char, len(text))
                   if not covered[i] and not text[i].isspace()]
        assert not missing, f"{rel}: uncovered text at {missing[:3]}"
        chunks.extend(note_chunks)
    records = [c.to_record() for c in chunks]
    for r in records:
        assert set(r) == {"chunk_id", "chunk_index", "source_text", "retrieval_text",
                          "metadata", "measurements"}
        assert set(r["metadata"]) == {"source_file", "heading_path", "start_line", "end_line",
                                      "start_char", "end_char"}
    recount = fresh.count_many([c.retrieval_text for c in chunks])
    assert max(recount) <= 256
    assert recount == [c.retrieval_tokens for c in chunks]
    report = assess(records, texts=notes, counter=counter)
    assert report.signals["boundary"]["clean_end_share"] >= 0.90, report.format_text()
    assert report.hard["over_limit"] == 0
    assert report.hard["heading_only"] == 0, report.format_text()
    assert report.hard["cut_fences"] == 0, report.format_text()
