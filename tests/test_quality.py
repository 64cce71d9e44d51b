"""quality.assess: signals, hard counts and suggestions, on chunks the chunker made and on
records built by hand to break one rule at a time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brainbot.text.chunking import ChunkParams, chunk_text
from brainbot.text.quality import assess

NOTE = """---
title: Sample
---
# Sample note

An opening paragraph that says what the note is about. It has a few sentences, and
they wrap over lines the way notes often do. Nothing here is surprising.

## Code

Here is some code:

```python
# a comment, not a heading
def add(a, b):
    return a + b
```

## Table

| name | value |
|------|-------|
| one  | 1     |
| two  | 2     |

## List

- first item, with a sentence.
- second item
  - nested detail
- third item
"""


def records(text: str, spans, counter, source_file: str = "n.md", tokens=None) -> list[dict]:
    """Contract records for hand-picked spans of text (heading path left empty)."""
    out = []
    for i, (s, e) in enumerate(spans):
        source = text[s:e]
        n = counter.count(source) if tokens is None else tokens[i]
        out.append({
            "chunk_id": f"{i:016x}", "chunk_index": i,
            "source_text": source, "retrieval_text": source,
            "metadata": {"source_file": source_file, "heading_path": [],
                         "start_line": text.count("\n", 0, s) + 1,
                         "end_line": text.count("\n", 0, e - 1) + 1,
                         "start_char": s, "end_char": e},
            "measurements": {"source_tokens": n, "retrieval_tokens": n},
        })
    return out


def test_the_chunkers_output_scores_well(counter):
    chunks = chunk_text(NOTE, "sample.md", counter)
    report = assess(chunks, counter=counter)
    assert report.hard == {"over_limit": 0, "heading_only": 0, "cut_fences": 0,
                           "cut_table_rows": 0}
    assert report.signals["boundary"]["clean_end_share"] == 1.0
    assert report.score >= 90
    assert report.chunks == len(chunks) and report.files == 1


def test_chunks_records_and_rebuilt_text_agree(counter):
    long_note = NOTE + "\n## More\n\n" + " ".join(f"Sentence {i} adds detail." for i in range(90))
    chunks = chunk_text(long_note, "sample.md", counter)
    from_chunks = assess(chunks, counter=counter).to_dict()
    from_records = assess([c.to_record() for c in chunks], counter=counter).to_dict()
    with_text = assess(chunks, texts={"sample.md": long_note}, counter=counter).to_dict()
    assert from_chunks == from_records
    assert from_chunks["hard"] == with_text["hard"]
    assert from_chunks["signals"]["boundary"] == with_text["signals"]["boundary"]
    recounted = assess(chunks, counter=counter, recount=True).to_dict()
    assert recounted["signals"] == from_chunks["signals"]


def test_over_limit_is_a_hard_violation(counter):
    text = "One sentence. Two sentences."
    good = assess(records(text, [(0, 28)], counter), counter=counter)
    bad = assess(records(text, [(0, 28)], counter, tokens=[300]), counter=counter)
    assert good.hard["over_limit"] == 0 and bad.hard["over_limit"] == 1
    assert bad.score <= good.score - 5
    assert any("max_tokens" in s for s in bad.suggestions)


def test_heading_only_chunks_are_counted(counter):
    text = "# Alone\n\nSome text that is under the heading, a full sentence."
    report = assess(records(text, [(0, 7), (9, len(text))], counter), counter=counter)
    assert report.hard["heading_only"] == 1
    assert any("min_tokens" in s for s in report.suggestions)
    setext = "Alone\n=====\n\nText."
    assert assess(records(setext, [(0, 11), (13, 18)], counter), counter=counter).hard[
        "heading_only"] == 1


DOCS = Path(__file__).parent / "data" / "docs" / "prompt-caching.md"


def test_chunks_a_reader_sees_nothing_of_are_junk(counter):
    """A comment-only chunk 0 (what chunker version 2 made of a documentation note) has
    letters and enough tokens, yet a reader sees nothing of it: junk, not healthy."""
    text = DOCS.read_text(encoding="utf-8")
    heading = text.index("# Prompt caching")
    comments = text.rindex("-->", 0, heading) + 3
    spans = [(0, comments), (heading, text.index("\n\nCaching never")),
             (text.index("Caching never"), len(text.rstrip()))]
    report = assess(records(text, spans, counter, "docs.md"), counter=counter)
    junk = report.signals["junk"]
    assert junk["invisible_chunks"] == 1 and junk["junk_chunks"] >= 1
    assert any("show a reader nothing" in s and "docs.md" in s for s in report.suggestions)
    fixed = assess(chunk_text(text, "docs.md", counter), texts={"docs.md": text}, counter=counter)
    assert fixed.signals["junk"]["invisible_chunks"] == fixed.signals["junk"]["junk_chunks"] == 0
    assert fixed.hard["heading_only"] == 0


def test_a_heading_with_only_its_anchor_is_heading_only(counter):
    text = "## Setup\n<!-- anchor: setup -->\n\nThe setup text, a whole sentence long."
    cut = text.index("\n\nThe")
    report = assess(records(text, [(0, cut), (cut + 2, len(text))], counter), counter=counter)
    assert report.hard["heading_only"] == 1


def test_a_small_fence_split_is_a_cut_fence(counter):
    text = "Intro.\n\n```\nline one\nline two\n```\n\nAfter."
    fence_start = text.index("```")
    mid = text.index("line two")
    spans = [(0, mid - 1), (mid, len(text))]  # on a line boundary, but it would have fit
    report = assess(records(text, spans, counter), counter=counter)
    assert report.hard["cut_fences"] == 1
    whole = [(0, 6), (fence_start, text.index("\n\nAfter")), (text.index("After"), len(text))]
    assert assess(records(text, whole, counter), counter=counter).hard["cut_fences"] == 0
    assert any("code fences" in s for s in report.suggestions)


def test_a_big_fence_may_split_on_lines_only(counter):
    lines = [f"value_{i} = compute({i}, 'argument')" for i in range(120)]
    text = "```\n" + "\n".join(lines) + "\n```"
    mid = text.index("value_60")
    on_line = [(0, mid - 1), (mid, len(text))]
    assert assess(records(text, on_line, counter), counter=counter).hard["cut_fences"] == 0
    cut = mid + 5
    mid_line = [(0, cut), (cut, len(text))]
    assert assess(records(text, mid_line, counter), counter=counter).hard["cut_fences"] == 1


def test_a_table_row_cut_in_the_middle(counter):
    text = "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |"
    cut = text.index("| 3") + 3
    report = assess(records(text, [(0, cut), (cut, len(text))], counter), counter=counter)
    assert report.hard["cut_table_rows"] == 2  # the end of one chunk, the start of the next
    rows = text.index("| 3")
    clean = [(0, rows - 1), (rows, len(text))]
    assert assess(records(text, clean, counter), counter=counter).hard["cut_table_rows"] == 0


def test_a_row_too_long_for_any_chunk_is_a_forced_cut(counter):
    text = "| a |\n|---|\n| " + "x " * 2000 + "|"
    cut = text.index("x " * 300) + 400
    report = assess(records(text, [(0, cut - 1), (cut, len(text))], counter), counter=counter)
    assert report.hard["cut_table_rows"] == 0
    assert report.signals["junk"]["forced_cuts"] == 2


def test_mid_sentence_ends_lower_the_boundary_signal(counter):
    sentences = " ".join(f"Sentence number {i} is complete." for i in range(40))
    cuts = [0]
    for k in range(1, 8):
        cuts.append(sentences.index(f"number {k * 5} ") + 4)  # inside a sentence
    spans = [(a, b) for a, b in zip(cuts, cuts[1:], strict=False)] + [(cuts[-1], len(sentences))]
    spans = [(s + (sentences[s] == " "), e) for s, e in spans]
    report = assess(records(sentences, spans, counter, "prose.md"), counter=counter)
    assert report.signals["boundary"]["clean_end_share"] == pytest.approx(1 / 8)
    assert any("mid-sentence" in s and "prose.md" in s for s in report.suggestions)
    assert report.worst_files[0]["source_file"] == "prose.md"


def test_redundancy_band(counter):
    text = " ".join(f"Sentence {i} says one thing." for i in range(60))
    fifth = len(text) // 5
    heavy = [(0, 4 * fifth), (fifth, len(text))]  # 60 % of the text is indexed twice
    heavy = [(s, e if not text[e - 1].isspace() else e - 1) for s, e in heavy]
    report = assess(records(text, heavy, counter), counter=counter)
    assert report.signals["redundancy"]["overlap_share"] > 0.25
    assert report.signals["redundancy"]["score"] < 100
    assert any("lower overlap_sentences" in s for s in report.suggestions)


def test_small_chunks_suggest_the_lever(counter):
    text = "\n\n".join(f"Paragraph {i} is short." for i in range(40))
    spans, pos = [], 0
    for para in text.split("\n\n"):
        spans.append((pos, pos + len(para)))
        pos += len(para) + 2
    report = assess(records(text, spans, counter), counter=counter)
    assert report.signals["size"]["score"] < 50
    assert report.signals["junk"]["junk_share"] == 1.0
    assert any("raise min_tokens" in s for s in report.suggestions)


def test_report_formats(counter):
    report = assess(chunk_text(NOTE, "sample.md", counter), ChunkParams(), counter=counter)
    data = report.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert set(data) >= {"score", "signals", "hard", "worst_files", "suggestions"}
    assert set(data["signals"]) == {"size", "redundancy", "boundary", "junk"}
    assert all("score" in v for v in data["signals"].values())
    text = report.format_text()
    for word in ("size", "redundancy", "boundary", "junk", "hard limits", "suggestions"):
        assert word in text


def test_empty_input():
    report = assess([])
    assert report.chunks == 0 and report.score == 100.0
    assert report.hard["over_limit"] == 0
    assert report.format_text()


def test_deterministic(counter):
    chunks = chunk_text(NOTE, "sample.md", counter)
    assert assess(chunks, counter=counter).to_dict() == assess(chunks, counter=counter).to_dict()
