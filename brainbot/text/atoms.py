"""Atoms: the smallest spans the chunker packs, each with its wordpiece count and how good
a place its end is to end a chunk.

Sentences of prose; whole code blocks, tables and lists when the model can take them,
else their lines, rows or items; words (and characters) only for a line that alone is
over the budget. Every atom is counted once per note, in one ``count_many``; the packer
(``text/chunking.py``) adds counts up, which is exact under BERT's pre-tokenizer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from brainbot.notes.inline import InlineMarkup
from brainbot.notes.markdown import (
    Block,
    fence_closes,
    fence_open,
    list_item_starts,
    marker_lines,
    starts_item,
)
from brainbot.notes.sentences import split_sentences

from .tokens import SPECIAL_TOKENS, TokenCounter, split_long

# Break strengths: how good a place the end of an atom is to end a chunk.
BREAK_BLOCK = 3.0  # end of a paragraph, code block, table, list
BREAK_ITEM = 2.5  # end of a top-level list item
BREAK_SENTENCE = 2.0  # end of a sentence inside a paragraph, or of a nested list item
BREAK_LINE_GAP = 1.8  # a code line followed by a blank line
BREAK_LINE = 1.5  # end of a code line or table row
BREAK_INTRO = 1.0  # a paragraph ending in ":" introduces what follows
BREAK_ITEM_LINE = 1.8  # a line end inside an over-long sentence, before an item-like line
BREAK_WRAPPED = 1.0  # a line end inside an over-long sentence
BREAK_WORD = 0.0  # a word boundary inside an over-long line
BREAK_CHAR = -1.0  # no whitespace at all within the budget
_UNCOUNTED = 1 << 40  # the count of a span too long to be worth counting
# The heading prefix of a retrieval text may take at most this share of max_tokens; deeper
# paths keep their last headings ("Ownership > Borrowing"), never the leading ones.
PREFIX_MAX_SHARE = 0.25


@dataclass
class Section:
    """A heading (or the note's start) and the blocks under it, before the next heading."""

    path: tuple[str, ...]
    blocks: list[Block] = field(default_factory=list)

    def shows_text(self, markup: InlineMarkup) -> bool:
        """Whether a reader sees anything under the heading: a section holding only an
        anchor comment travels with the next one, as a heading without text does."""
        return any(b.kind != "heading" and not markup.blank(b.start_char, b.end_char)
                   for b in self.blocks)


def heading_text(heading: str | None) -> str:
    """A heading as a reader sees it, on one line: "Setup <!-- anchor -->" is "Setup"."""
    heading = heading or ""
    if any(ch in heading for ch in "<[`"):
        heading = InlineMarkup.of_text(heading).visible()
    return " ".join(heading.split())


def sections_of(blocks: list[Block]) -> list[Section]:
    """The note's sections in order, each with its full heading path."""
    stack: list[tuple[int, str]] = []
    sections: list[Section] = []
    for block in blocks:
        if block.kind == "heading":
            while stack and stack[-1][0] >= block.level:
                stack.pop()
            stack.append((block.level, heading_text(block.heading)))
            sections.append(Section(tuple(t for _, t in stack if t), [block]))
        else:
            if not sections:
                sections.append(Section(()))
            sections[-1].blocks.append(block)
    return sections


def _line_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """(start, end) of the non-blank lines of text[start:end], trailing space trimmed."""
    spans = []
    pos = start
    while pos < end:
        nl = text.find("\n", pos, end)
        stop = end if nl == -1 else nl
        e = stop
        while e > pos and text[e - 1].isspace():
            e -= 1
        if e > pos:
            spans.append((pos, e))
        if nl == -1:
            break
        pos = nl + 1
    return spans


class Atoms:
    """Parallel arrays of atoms, in document order, and how to make them."""

    def __init__(self, text: str, counter: TokenCounter, max_tokens: int, max_chars: int,
                 markup: InlineMarkup) -> None:
        self.text = text
        self.counter = counter
        self.markup = markup  # what a reader sees: an atom with nothing visible costs nothing
        self.max_chars = max_chars  # the chunker's cap on a chunk's source characters
        self.hard = max_tokens - SPECIAL_TOKENS  # wordpieces a chunk may hold
        self.start: list[int] = []
        self.end: list[int] = []
        self.tok: list[int] = []  # wordpieces, special tokens excluded
        self.strength: list[float] = []
        self.glue: list[bool] = []  # a chunk may not end after this atom
        self.content: list[bool] = []  # False for headings
        self.overlap: list[bool] = []  # a prose sentence: may open the next chunk too
        self.section: list[int] = []
        # Wordpieces of the headings waiting for their first content atom: the block that
        # follows them is judged against the budget left after them, so that a heading
        # and the start of its text always fit one chunk together.
        self.lead = 0
        self.lead_cap = int(max_tokens * PREFIX_MAX_SHARE)

    def __len__(self) -> int:
        return len(self.start)

    def add(self, s, e, tok, strength, section, glue=False, content=True, overlap=False):
        while e > s and self.text[e - 1].isspace():  # "# " or a row with trailing spaces
            e -= 1
        if content and self.markup.blank(s, e):
            # Nothing a reader sees (an anchor comment) is not embedded, so it costs no
            # tokens; glued to what follows like a heading, it never ends a chunk nor makes
            # one of its own.
            tok, content, glue, overlap = 0, False, True, False
        self.start.append(s)
        self.end.append(e)
        self.tok.append(tok)
        self.strength.append(strength)
        self.glue.append(glue)
        self.content.append(content)
        self.overlap.append(overlap)
        self.section.append(section)
        self.lead = 0 if content else self.lead + tok

    def counts(self, spans: list[tuple[int, int]]) -> list[int]:
        """Wordpieces of each span, special tokens excluded.

        Spans are counted as written, links and all: an upper bound of their visible text's
        count, so chunks still break where they did before visible text was embedded
        (measured: counting visible text moved boundaries of link-heavy notes and cost a
        BM25 hit on examples/questions.jsonl). Spans longer than max_chars are too big
        whatever their count, so they are not counted (a 1 MB line would cost a second of
        tokenizer time for nothing)."""
        text, max_chars = self.text, self.max_chars
        short = [(s, e) for s, e in spans if e - s <= max_chars]
        got = iter(self.counter.count_many([text[s:e] for s, e in short]))
        return [next(got) - SPECIAL_TOKENS if e - s <= max_chars else _UNCOUNTED for s, e in spans]

    @property
    def waiting(self) -> int:
        return self.lead if self.lead <= self.lead_cap else 0

    def too_big(self, s: int, e: int, tok: int, budget: int) -> bool:
        return tok > budget - self.waiting or e - s > self.max_chars

    # -- first-level units: what one count_many per note measures

    def units(self, block: Block) -> list[tuple[int, int]]:
        if block.kind in ("paragraph", "quote"):
            return split_sentences(self.text, block.start_char, block.end_char)
        return [(block.start_char, block.end_char)]

    def block(self, block: Block, units, counts, section: int, budget: int) -> None:
        kind = block.kind
        if kind == "heading":
            s, e = units[0]
            if self.too_big(s, e, counts[0], budget):
                self.long(s, e, budget, section, BREAK_BLOCK, glue=True, content=False)
            else:
                self.add(s, e, counts[0], BREAK_BLOCK, section, glue=True, content=False)
        elif kind in ("paragraph", "quote"):
            self.prose(units, counts, section, budget, block_end=True)
        elif kind == "hr":
            self.add(block.start_char, block.end_char, counts[0], BREAK_BLOCK, section)
        elif (
            counts[0] + self.waiting <= self.hard
            and block.end_char - block.start_char <= self.max_chars
        ):
            # Code, tables, lists and HTML stay whole whenever the model can take them
            # (with the headings right above them).
            self.add(block.start_char, block.end_char, counts[0], BREAK_BLOCK, section)
        elif kind == "table":
            self.rows(block, section, budget)
        elif kind == "list":
            self.list_items(block, section, budget)
        else:
            self.code_lines(block, section, budget)

    def prose(self, units, counts, section, budget, block_end: bool) -> None:
        text = self.text
        last = len(units) - 1
        for k, ((s, e), n) in enumerate(zip(units, counts, strict=False)):
            strength = BREAK_SENTENCE
            if k == last and block_end:
                strength = BREAK_INTRO if text[e - 1] == ":" else BREAK_BLOCK
            if self.too_big(s, e, n, budget):
                self.long(s, e, budget, section, strength)
            else:
                self.add(s, e, n, strength, section, overlap=block_end)

    def code_lines(self, block: Block, section: int, budget: int) -> None:
        text = self.text
        spans = _line_spans(text, block.start_char, block.end_char)
        counts = self.counts(spans)
        opened = fence_open(text[spans[0][0] : spans[0][1]]) if block.info is not None else None
        closed = bool(opened) and len(spans) > 1 and fence_closes(
            text[spans[-1][0] : spans[-1][1]], opened[0], opened[1]
        )
        last = len(spans) - 1
        for k, ((s, e), n) in enumerate(zip(spans, counts, strict=False)):
            gap = k < last and text.count("\n", e, spans[k + 1][0]) > 1
            strength = BREAK_BLOCK if k == last else BREAK_LINE_GAP if gap else BREAK_LINE
            # The opening fence sticks to the first line, the closing one to the last.
            glue = (k == 0 and opened is not None) or (closed and k == last - 1)
            if self.too_big(s, e, n, budget):
                self.long(s, e, budget, section, strength, glue=glue)
            else:
                self.add(s, e, n, strength, section, glue=glue)

    def rows(self, block: Block, section: int, budget: int) -> None:
        spans = _line_spans(self.text, block.start_char, block.end_char)
        counts = self.counts(spans)
        last = len(spans) - 1
        for k, ((s, e), n) in enumerate(zip(spans, counts, strict=False)):
            strength = BREAK_BLOCK if k == last else BREAK_LINE
            glue = k < 2  # the header row and the delimiter row go with the first row
            if self.too_big(s, e, n, budget):
                self.long(s, e, budget, section, strength, glue=glue)
            else:
                self.add(s, e, n, strength, section, glue=glue)

    def list_items(self, block: Block, section: int, budget: int) -> None:
        items = self._groups(block, list_item_starts(self.text, block))
        counts = self.counts(items)
        last = len(items) - 1
        for k, ((s, e), n) in enumerate(zip(items, counts, strict=False)):
            strength = BREAK_BLOCK if k == last else BREAK_ITEM
            if not self.too_big(s, e, n, budget):
                self.add(s, e, n, strength, section)
                continue
            sub = Block("list", 0, 0, s, e)
            groups = self._groups(sub, marker_lines(self.text, sub))
            sub_counts = self.counts(groups)
            for g, ((gs, ge), gn) in enumerate(zip(groups, sub_counts, strict=False)):
                g_strength = strength if g == len(groups) - 1 else BREAK_SENTENCE
                if not self.too_big(gs, ge, gn, budget):
                    self.add(gs, ge, gn, g_strength, section)
                    continue
                sentences = split_sentences(self.text, gs, ge)
                self.prose(sentences, self.counts(sentences), section, budget, block_end=False)
                self.strength[-1] = g_strength

    def _groups(self, block: Block, line_starts: list[int]) -> list[tuple[int, int]]:
        """Spans of the runs of block lines that begin at each of line_starts."""
        text = self.text
        lines = _line_offsets(text, block.start_char, block.end_char)
        spans = []
        for k, first in enumerate(line_starts):
            stop = line_starts[k + 1] if k + 1 < len(line_starts) else len(lines)
            s, e = lines[first][0], lines[stop - 1][1]
            while e > s and text[e - 1].isspace():
                e -= 1
            if e > s and not text[s:e].isspace():
                spans.append((s, e))
        return spans

    def long(self, s, e, budget, section, last_strength, glue=False, content=True) -> None:
        """Atoms for one over-long span: its lines, else words, else characters."""
        if self.text.find("\n", s, e) != -1:
            spans = _line_spans(self.text, s, e)
            counts = self.counts(spans)
            for k, ((ls, le), n) in enumerate(zip(spans, counts, strict=False)):
                if k == len(spans) - 1:
                    strength = last_strength
                elif starts_item(self.text, spans[k + 1][0]):
                    strength = BREAK_ITEM_LINE  # "[x] done" lines under a paragraph
                else:
                    strength = BREAK_WRAPPED
                if self.too_big(ls, le, n, budget):
                    self._words(ls, le, budget, section, strength, content)
                else:
                    self.add(ls, le, n, strength, section, glue=not content, content=content)
        else:
            self._words(s, e, budget, section, last_strength, content)
        self.glue[-1] = glue

    def _words(self, s, e, budget, section, last_strength, content) -> None:
        budget = max(1, budget - self.waiting)
        pieces = split_long(self.text, s, e, budget, self.max_chars, self.counter)
        for k, (ps, pe, n, whole_words) in enumerate(pieces):
            strength = BREAK_WORD if whole_words else BREAK_CHAR
            if k == len(pieces) - 1:
                strength = last_strength
            self.add(ps, pe, n, strength, section, glue=not content, content=content)


def _line_offsets(text: str, start: int, end: int) -> list[tuple[int, int]]:
    lines = []
    pos = start
    while True:
        nl = text.find("\n", pos, end)
        if nl == -1:
            lines.append((pos, end))
            return lines
        lines.append((pos, nl))
        pos = nl + 1
