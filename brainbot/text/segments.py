"""A passage cut into the pieces a reader cites: sentences, list items, code blocks, table
rows, headings.

The Claude path sends each search result as one text block per segment, so the API's
block-range citations name exact lines (``notes/x.md:61-62``) instead of a whole chunk;
the offline answer quotes from the same segments. ``segments`` finds them in a passage's
text (sentences with ``notes/sentences.py``, items with ``markdown.marker_lines``), and
``blocks`` widens them into a partition of the text, so every character is in exactly one
block and the blocks read back as the passage.

This module cuts text; it does not score or verify anything.
"""

from __future__ import annotations

from dataclasses import dataclass

from brainbot.notes.markdown import marker_lines, parse
from brainbot.notes.sentences import split_sentences


@dataclass(frozen=True)
class Segment:
    start: int
    end: int  # exclusive, trailing whitespace excluded
    kind: str  # sentence | item | code | row | header | heading | other


def _trimmed(text: str, s: int, e: int) -> tuple[int, int]:
    s += len(text[s:e]) - len(text[s:e].lstrip())
    return s, max(s, s + len(text[s:e].rstrip()))


def _line_offset(text: str, k: int) -> int:
    pos = 0
    for _ in range(k):
        pos = text.index("\n", pos) + 1
    return pos


def _items(text: str, block) -> list[tuple[int, int]]:
    a, b = block.start_char, block.end_char
    starts = [a + _line_offset(text[a:b], k) for k in marker_lines(text, block)]
    return list(zip(starts, starts[1:] + [b], strict=True))


def _rows(text: str, a: int, b: int, header: int = 2) -> list[tuple[int, int, str]]:
    out, pos = [], a
    for i, line in enumerate(text[a:b].split("\n")):
        if line.strip():
            out.append((pos, pos + len(line), "header" if i < header else "row"))
        pos += len(line) + 1
    return out


def _headless_table(text: str, a: int, b: int) -> bool:
    """A paragraph of pipe-delimited lines: the rest of a table whose header row and
    delimiter stayed in the chunk before (markdown reads it as prose, and its sentences
    would cut a row between its description and its value: "| `idle-timeout` | Time in
    milliseconds since last keypress before idle timers trigger. | `250` |")."""
    lines = [line.strip() for line in text[a:b].split("\n") if line.strip()]
    return bool(lines) and all(line.startswith("|") and line.endswith("|") for line in lines)


# A line at least this long that does not end a clause is hard-wrapped prose (documents
# wrapped at 72-80 columns), whatever the next line starts with ("`mpsc` stands for\n
# _multiple producer_"); a shorter one continues only into a lower-case line, so the
# "Invoice date: …" lines of a note stay separate facts.
WRAP_MIN = 60
_MARKUP_OPENERS = "_*`\"'([“‘"


def _continues(line: str, nxt: str) -> bool:
    line = line.rstrip()
    if not nxt or line[-1:] in ".!?:;":
        return False
    return len(line) >= WRAP_MIN or nxt.lstrip(_MARKUP_OPENERS)[:1].islower()


def _prose(text: str, a: int, b: int) -> list[tuple[int, int]]:
    """Sentences of a paragraph, each line its own group unless it continues into the
    next (``_continues``)."""
    out, pos, start = [], a, a
    lines = text[a:b].split("\n")
    for i, line in enumerate(lines):
        end = pos + len(line)
        nxt = lines[i + 1].lstrip(" >") if i + 1 < len(lines) else ""
        if not _continues(line, nxt):
            out.extend(split_sentences(text, start, end))
            start = end + 1
        pos = end + 1
    return out


def segments(text: str) -> list[Segment]:
    """The citable pieces of ``text``, in order, never overlapping."""
    out: list[Segment] = []
    for block in parse(text).blocks:
        a, b = block.start_char, block.end_char
        if block.kind == "paragraph" and _headless_table(text, a, b):
            spans = _rows(text, a, b, header=0)
        elif block.kind in ("paragraph", "quote"):
            spans = [(s, e, "sentence") for s, e in _prose(text, a, b)]
        elif block.kind == "list":
            spans = [(s, e, "item") for s, e in _items(text, block)]
        elif block.kind == "table":
            spans = _rows(text, a, b)
        elif block.kind in ("code", "heading"):
            spans = [(a, b, block.kind)]
        else:
            spans = [(a, b, "other")]
        for s, e, kind in spans:
            s, e = _trimmed(text, s, e)
            if e > s:
                out.append(Segment(s, e, kind))
    return out


def blocks(text: str) -> list[tuple[int, int]]:
    """A partition of ``text`` into one span per segment: each runs from its segment's
    start to the next one's (the whitespace between goes with the one before), the first
    from 0, the last to the end. A text with no segment is one block."""
    starts = [seg.start for seg in segments(text)]
    if not starts:
        return [(0, len(text))]
    starts[0] = 0
    return list(zip(starts, starts[1:] + [len(text)], strict=True))
