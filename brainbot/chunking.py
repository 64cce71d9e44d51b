"""Blocks into chunks: heading paths, sentence-aware packing, a hard token budget.

A note is parsed (`markdown.parse`), cut into *atoms* — sentences of prose, whole code
blocks, tables and lists when they fit the model, else their lines, rows or items, and
words only as a last resort — and the atoms of each section are packed into chunks near
``target_tokens``. Where a chunk ends is chosen from a scored table of break points (a
block end beats a list item end beats a sentence end beats a line end beats a word), the
way qmd scores markdown break points; the sizes of a section's chunks are balanced so no
section ends in a crumb. Consecutive chunks of a section share ``overlap_sentences``
whole sentences. Fragments below ``min_tokens`` (a heading alone, a one-line section) are
merged into a neighbour, and the merged chunk takes the heading path of its larger part
(the smaller part's heading line stays in the text).

Invariants, all tested: ``text[start_char:end_char] == source_text``; every non-blank
character after the front matter lies in some chunk; ``retrieval_tokens <= max_tokens``
for every chunk, counted on the actual retrieval text with MiniLM's tokenizer; the same
input gives byte-identical chunks. Atoms are counted once; because two texts joined by
whitespace tokenize to the sum of their wordpieces under BERT's pre-tokenizer, a chunk's
count is a sum, and only the final retrieval texts are counted again to verify it.

This module does not read files, embed, or store anything.
"""

from __future__ import annotations

import hashlib
import math
from bisect import bisect_left
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from .errors import InputError
from .markdown import (
    Block,
    ParsedNote,
    fence_closes,
    fence_open,
    list_item_starts,
    marker_lines,
    parse,
    starts_item,
)
from .model import MAX_TOKENS
from .sentences import split_sentences
from .tokens import SPECIAL_TOKENS, TokenCounter, split_long

# Bump when the same input would give different chunks: it is part of the fingerprint.
CHUNKER_VERSION = "2"
# A merged chunk takes the heading path of a part at least this many times larger than
# the other; otherwise the common ancestor of both.
DOMINANT_SHARE = 2.0

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
# A chunk ending short of its goal loses this much break strength per goal-width of
# shortfall (and half as much for overshoot): a block end at 2/3 of the goal still beats
# a sentence end right at it, a sentence end at 1/3 does not.
UNDER_PENALTY = 2.0
OVER_PENALTY = 1.0
# Overlapped sentences may take at most this share of a chunk's goal.
OVERLAP_MAX_SHARE = 0.25
# The heading prefix of a retrieval text may take at most this share of max_tokens; deeper
# paths keep their last headings ("Ownership > Borrowing"), never the leading ones.
PREFIX_MAX_SHARE = 0.25
PATH_SEPARATOR = " > "
_UNCOUNTED = 1 << 40  # the count of a span too long to be worth counting


@dataclass(frozen=True)
class ChunkParams:
    """The chunker's knobs. Everything that changes chunks is in fingerprint()."""

    # The model's limit (sentence-transformers caps all-MiniLM-L6-v2 at 256 wordpieces),
    # counted on retrieval_text with [CLS]/[SEP] included. Never exceeded.
    max_tokens: int = MAX_TOKENS
    # Measured (benchmarks/bench_chunking.py --sweep, NFCorpus, vector nDCG@10 with a
    # document's best chunk): target 128 -> 0.3297, 200 -> 0.3286, 256 -> 0.3251, whole
    # documents cut at 256 -> 0.3167. 200 is within noise of 128 with 10 % fewer chunks to
    # embed, and leaves room for the heading prefix and the overlap under max_tokens.
    target_tokens: int = 200
    # One sentence of context carried into the next chunk of a section. Measured: 6 % of
    # the rust book's indexed text is repeated, 2 % of the vault's and the minutes' (short
    # sections have no second chunk to overlap); quality.py calls 2-25 % healthy.
    overlap_sentences: int = 1
    # Fragments with fewer source tokens than this merge into a neighbour: 40 wordpieces is
    # about two short sentences; less rarely answers a question on its own.
    min_tokens: int = 40
    # A chunk's source_text is also capped in characters, so a token-poor run (base64, a
    # 1 MB "word" that is one [UNK], whitespace art) cannot make a megabyte chunk. 256
    # wordpieces of prose are ~1.3 KB; 8 KB is never reached by real text.
    max_chars: int = 8192

    def __post_init__(self) -> None:
        if not 32 <= self.max_tokens <= MAX_TOKENS:
            # Above the model's limit the embedder would cut chunks off silently.
            raise InputError(
                f"max_tokens must be between 32 and {MAX_TOKENS}, got {self.max_tokens}"
            )
        if not 8 <= self.target_tokens <= self.max_tokens:
            raise InputError(
                f"target_tokens must be between 8 and max_tokens ({self.max_tokens}), "
                f"got {self.target_tokens}"
            )
        if not 0 <= self.min_tokens <= self.target_tokens:
            raise InputError(
                f"min_tokens must be between 0 and target_tokens, got {self.min_tokens}"
            )
        if not 0 <= self.overlap_sentences <= 8:
            raise InputError(
                f"overlap_sentences must be between 0 and 8, got {self.overlap_sentences}"
            )
        if self.max_chars < 256:
            raise InputError(f"max_chars must be at least 256, got {self.max_chars}")

    def fingerprint(self) -> str:
        return (
            f"chunker{CHUNKER_VERSION}-max{self.max_tokens}-target{self.target_tokens}"
            f"-overlap{self.overlap_sentences}-min{self.min_tokens}-chars{self.max_chars}"
        )


@dataclass(frozen=True)
class Chunk:
    chunk_id: str
    chunk_index: int
    source_file: str
    heading_path: tuple[str, ...]
    source_text: str
    retrieval_text: str
    start_line: int
    end_line: int
    start_char: int
    end_char: int
    source_tokens: int
    retrieval_tokens: int

    @classmethod
    def from_record(cls, record: dict) -> Chunk:
        """The inverse of to_record (records from `brainbot chunks` or the database)."""
        meta, meas = record["metadata"], record["measurements"]
        return cls(
            record["chunk_id"], int(record["chunk_index"]), meta["source_file"],
            tuple(meta["heading_path"]), record["source_text"], record["retrieval_text"],
            int(meta["start_line"]), int(meta["end_line"]), int(meta["start_char"]),
            int(meta["end_char"]), int(meas["source_tokens"]), int(meas["retrieval_tokens"]),
        )

    def to_record(self) -> dict:
        """The chunk record of DESIGN.md, one line of `brainbot chunks`."""
        return {
            "chunk_id": self.chunk_id,
            "chunk_index": self.chunk_index,
            "source_text": self.source_text,
            "retrieval_text": self.retrieval_text,
            "metadata": {
                "source_file": self.source_file,
                "heading_path": list(self.heading_path),
                "start_line": self.start_line,
                "end_line": self.end_line,
                "start_char": self.start_char,
                "end_char": self.end_char,
            },
            "measurements": {
                "source_tokens": self.source_tokens,
                "retrieval_tokens": self.retrieval_tokens,
            },
        }


def chunk_id(source_file: str, chunk_index: int, source_text: str) -> str:
    data = f"{source_file}\x00{chunk_index}\x00{source_text}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:16]


def fallback_for(source_file: str, fallback_heading: str | None) -> tuple[str, ...]:
    """The heading path of text with no heading above it."""
    if fallback_heading is None:
        fallback_heading = PurePosixPath(source_file.replace("\\", "/")).stem
    return (fallback_heading,) if fallback_heading else ()


# --- atoms -------------------------------------------------------------------------------


@dataclass
class _Section:
    path: tuple[str, ...]
    blocks: list[Block] = field(default_factory=list)

    @property
    def has_content(self) -> bool:
        return any(b.kind != "heading" for b in self.blocks)


def _sections(blocks: list[Block]) -> list[_Section]:
    stack: list[tuple[int, str]] = []
    sections: list[_Section] = []
    for block in blocks:
        if block.kind == "heading":
            while stack and stack[-1][0] >= block.level:
                stack.pop()
            stack.append((block.level, " ".join((block.heading or "").split())))
            sections.append(_Section(tuple(t for _, t in stack if t), [block]))
        else:
            if not sections:
                sections.append(_Section(()))
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


class _Atoms:
    """Parallel arrays of atoms, in document order, and how to make them."""

    def __init__(self, text: str, counter: TokenCounter, params: ChunkParams) -> None:
        self.text = text
        self.counter = counter
        self.params = params
        self.hard = params.max_tokens - SPECIAL_TOKENS  # wordpieces a chunk may hold
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
        self.lead_cap = int(params.max_tokens * PREFIX_MAX_SHARE)

    def __len__(self) -> int:
        return len(self.start)

    def add(self, s, e, tok, strength, section, glue=False, content=True, overlap=False):
        while e > s and self.text[e - 1].isspace():  # "# " or a row with trailing spaces
            e -= 1
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

        Spans longer than max_chars are too big whatever their count, so they are not
        counted (a 1 MB line would cost a second of tokenizer time for nothing)."""
        text, max_chars = self.text, self.params.max_chars
        short = [(s, e) for s, e in spans if e - s <= max_chars]
        got = iter(self.counter.count_many([text[s:e] for s, e in short]))
        return [next(got) - SPECIAL_TOKENS if e - s <= max_chars else _UNCOUNTED for s, e in spans]

    @property
    def waiting(self) -> int:
        return self.lead if self.lead <= self.lead_cap else 0

    def too_big(self, s: int, e: int, tok: int, budget: int) -> bool:
        return tok > budget - self.waiting or e - s > self.params.max_chars

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
            and block.end_char - block.start_char <= self.params.max_chars
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
        pieces = split_long(self.text, s, e, budget, self.params.max_chars, self.counter)
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


# --- packing -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Piece:
    first: int  # atom index, inclusive
    last: int  # atom index, inclusive
    path: tuple[str, ...]  # common prefix of the section paths of its content atoms
    has_content: bool  # False when it holds headings only


def _common(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return a[:n]


class _Packer:
    def __init__(self, atoms: _Atoms, params: ChunkParams, fallback: tuple[str, ...]) -> None:
        self.atoms = atoms
        self.params = params
        self.fallback = fallback
        self.hard = params.max_tokens - SPECIAL_TOKENS
        self.prefix_cap = int(params.max_tokens * PREFIX_MAX_SHARE)
        self.cum: list[int] = [0]
        self.section_paths: list[tuple[str, ...]] = []
        self.prefixes: dict[tuple[tuple[str, ...], int], tuple[str, int]] = {}

    def finish_atoms(self) -> None:
        cum = self.cum = [0]
        for t in self.atoms.tok:
            cum.append(cum[-1] + t)

    def tokens(self, first: int, last: int) -> int:
        return self.cum[last + 1] - self.cum[first]

    def warm(self, paths) -> None:
        """Count every full path in one batch (a note may have 10,000 headings); shorter
        tails are counted when a path turns out too long."""
        texts = {PATH_SEPARATOR.join(p or self.fallback) for p in paths}
        # A tail longer than max_chars is never a prefix (a heading of a megabyte).
        texts = sorted(t for t in texts if len(t) <= self.params.max_chars)
        self.atoms.counter.count_many(texts)

    def prefix(self, path: tuple[str, ...], room: int) -> tuple[str, int]:
        """The longest tail of path (or of the fallback) whose wordpieces fit room."""
        key = (path, room)
        found = self.prefixes.get(key)
        if found is None:
            found = self.prefixes[key] = self._prefix(path or self.fallback, room)
        return found

    def _prefix(self, path: tuple[str, ...], room: int) -> tuple[str, int]:
        room = min(room, self.prefix_cap)
        for k in range(len(path)):
            text = PATH_SEPARATOR.join(path[k:])
            if len(text) > self.params.max_chars:
                continue
            n = self.atoms.counter.count(text) - SPECIAL_TOKENS
            if n <= room:
                return text, n
        return "", 0

    def budget(self, path: tuple[str, ...]) -> int:
        """Wordpieces a chunk's source text may hold next to the path's (capped) prefix."""
        return self.hard - self.prefix(path, self.prefix_cap)[1]

    def goal(self, path: tuple[str, ...]) -> int:
        prefix = self.prefix(path, self.prefix_cap)[1]
        return max(8, min(self.budget(path), self.params.target_tokens - SPECIAL_TOKENS - prefix))

    # -- phase 1: pack each run of sections into balanced pieces

    def pack(self, lo: int, hi: int, path: tuple[str, ...]) -> list[_Piece]:
        atoms, max_chars = self.atoms, self.params.max_chars
        budget, goal_full = self.budget(path), self.goal(path)
        pieces: list[_Piece] = []
        i = min_j = lo
        while i < hi:
            remaining = self.tokens(i, hi - 1)
            if remaining <= budget and atoms.end[hi - 1] - atoms.start[i] <= max_chars:
                j = hi - 1
            else:
                goal = remaining / math.ceil(remaining / goal_full)
                j = self.choose_end(i, hi, budget, goal, min_j)
            pieces.append(self.piece(i, j, path))
            if j >= hi - 1:
                break
            min_j = j + 1
            i = self.overlap_start(i, min_j, budget, goal_full)
        return pieces

    def piece(self, first: int, last: int, path: tuple[str, ...]) -> _Piece:
        content = self.atoms.content
        if any(content[k] for k in range(first, last + 1)):
            return _Piece(first, last, path, True)
        sections = self.section_paths
        heads = sections[self.atoms.section[first]]
        for k in range(first + 1, last + 1):
            heads = _common(heads, sections[self.atoms.section[k]])
        return _Piece(first, last, heads, False)

    def choose_end(self, i: int, hi: int, budget: int, goal: float, min_j: int) -> int:
        atoms = self.atoms
        tok, strength, glue, end = atoms.tok, atoms.strength, atoms.glue, atoms.end
        char_limit = atoms.start[i] + self.params.max_chars
        acc, best, best_score, last_fit = 0, -1, -math.inf, -1
        for j in range(i, hi):
            if acc + tok[j] > budget or end[j] > char_limit:
                break
            acc += tok[j]
            last_fit = j
            if j >= min_j and (not glue[j] or j == hi - 1):
                if acc < goal:
                    score = strength[j] - UNDER_PENALTY * (goal - acc) / goal
                else:
                    score = strength[j] - OVER_PENALTY * (acc - goal) / goal
                if score >= best_score:
                    best, best_score = j, score
        if best >= 0:
            return best
        # Nothing fits the budget with a break allowed after it. Let headings glued to a
        # block that only fits without the heading prefix ride along with it (the prefix
        # shrinks at emission); else break the glue where the budget runs out.
        acc = 0
        for j in range(i, hi):
            acc += tok[j]
            if acc > self.hard or end[j] > char_limit:
                break
            if j >= min_j and (not glue[j] or j == hi - 1):
                return j
        return max(last_fit, min_j)

    def overlap_start(self, i: int, nxt: int, budget: int, goal: int) -> int:
        atoms = self.atoms
        k, taken, count = nxt, 0, 0
        cap = goal * OVERLAP_MAX_SHARE
        while (
            count < self.params.overlap_sentences
            and k - 1 > i
            and atoms.overlap[k - 1]
            and taken + atoms.tok[k - 1] <= cap
        ):
            k -= 1
            taken += atoms.tok[k]
            count += 1
        if k < nxt and (
            taken + atoms.tok[nxt] > budget
            or atoms.end[nxt] - atoms.start[k] > self.params.max_chars
        ):
            return nxt
        return k

    # -- phase 2: merge fragments into a neighbour

    def tiny(self, p: _Piece) -> bool:
        source_tokens = self.tokens(p.first, p.last) + SPECIAL_TOKENS
        return not p.has_content or source_tokens < self.params.min_tokens

    def merged(self, p: _Piece, q: _Piece) -> _Piece | None:
        """p and q (q after p) as one piece, or None when that would not fit."""
        if p.has_content and q.has_content:
            # The larger part names the chunk: a tiny section merged into a big one
            # should not strip the big one's heading (measured on examples/questions:
            # common-prefix paths hid "Broth" behind "Shoyu ramen"). The smaller part's
            # own heading line is in the text.
            # When neither part dominates (both small), the common ancestor is honest.
            tp, tq = self.tokens(p.first, p.last), self.tokens(q.first, q.last)
            if max(tp, tq) >= DOMINANT_SHARE * min(tp, tq):
                path = p.path if tp >= tq else q.path
            else:
                path = _common(p.path, q.path)
            has = True
        elif p.has_content or q.has_content:
            path, has = (p.path if p.has_content else q.path), True
        else:
            path, has = _common(p.path, q.path), False
        m = _Piece(p.first, max(p.last, q.last), path, has)
        if self.atoms.end[m.last] - self.atoms.start[m.first] > self.params.max_chars:
            return None
        limit = self.budget(path) if has else self.hard
        return m if self.tokens(m.first, m.last) <= limit else None

    def merge_small(self, pieces: list[_Piece]) -> list[_Piece]:
        out: list[_Piece] = []
        pieces = list(pieces)
        for i, p in enumerate(pieces):
            if not self.tiny(p):
                out.append(p)
                continue
            options = []
            if out and (m := self.merged(out[-1], p)) is not None:
                options.append((self.merge_score(m, out[-1], True), "prev", m))
            if i + 1 < len(pieces) and (m := self.merged(p, pieces[i + 1])) is not None:
                options.append((self.merge_score(m, pieces[i + 1], False), "next", m))
            if not options:
                out.append(p)
                continue
            _, where, m = max(options, key=lambda o: o[0])
            if where == "prev":
                out[-1] = m
            else:
                pieces[i + 1] = m  # examined in turn: still tiny, it merges on
        return self.rescue(out)

    def rescue(self, pieces: list[_Piece]) -> list[_Piece]:
        """Give each heading-only piece that could not merge some text of a neighbour:
        the start of what follows it, else the end of what precedes it (a note that
        ends with a heading)."""
        out = list(pieces)
        for i, p in enumerate(out):
            if p.has_content:
                continue
            if i + 1 < len(out) and (pair := self.steal(p, out[i + 1], forward=True)):
                out[i], out[i + 1] = pair
            elif i > 0 and (pair := self.steal(out[i - 1], p, forward=False)):
                out[i - 1], out[i] = pair
        return out

    def steal(self, p: _Piece, q: _Piece, forward: bool) -> tuple[_Piece, _Piece] | None:
        """Move the cut between p and q (q after p) into the neighbour that has text."""
        atoms = self.atoms
        donor = q if forward else p
        if not donor.has_content or donor.first == donor.last:
            return None
        budget = self.budget(donor.path)
        best, best_key = -1, None
        for k in range(donor.first, donor.last):  # the new cut falls after atom k
            taker = (p.first, k) if forward else (k + 1, q.last)
            if self.tokens(*taker) > budget or (
                atoms.end[taker[1]] - atoms.start[taker[0]] > self.params.max_chars
            ):
                continue
            if atoms.glue[k]:
                continue
            balance = abs(self.tokens(p.first, k) - self.tokens(k + 1, q.last))
            key = (atoms.strength[k], -balance)
            if best_key is None or key > best_key:
                best, best_key = k, key
        if best < 0:
            return None
        if forward:
            return _Piece(p.first, best, q.path, True), _Piece(best + 1, q.last, q.path, True)
        return _Piece(p.first, best, p.path, True), _Piece(best + 1, q.last, p.path, True)

    def merge_score(self, m: _Piece, neighbour: _Piece, is_prev: bool):
        # Keep the path as specific as possible, then stay near the target, then keep
        # filling the chunk before it (so runs of tiny sections pack up to the target).
        within_goal = self.tokens(m.first, m.last) <= self.goal(m.path)
        return (len(m.path), within_goal, is_prev)

    # -- phase 3: texts, prefixes, verified counts

    def emit(self, pieces: list[_Piece]) -> list[tuple[int, int, tuple[str, ...], str, int]]:
        """(start_char, end_char, heading_path, prefix, prefix_tokens) for every chunk."""
        atoms = self.atoms
        spans = []
        text = atoms.text
        for p in pieces:
            content = self.tokens(p.first, p.last)
            prefix, n = self.prefix(p.path, self.hard - content)
            start = atoms.start[p.first]
            line_start = text.rfind("\n", 0, start) + 1
            if (text[line_start:start].isspace()
                    and atoms.end[p.last] - line_start <= self.params.max_chars):
                start = line_start  # keep the indentation of the first line with it
            spans.append((start, atoms.end[p.last], p.path, prefix, n))
        return self.verify(spans)

    def verify(self, spans):
        """Count every retrieval text; re-cut the rare chunk whose sum underestimated."""
        text, counter = self.atoms.text, self.atoms.counter
        for _ in range(8):
            retrieval = [_retrieval(text[s:e], pre) for s, e, _, pre, _ in spans]
            counts = counter.count_many(retrieval, cache=False)
            if all(n <= self.params.max_tokens for n in counts):
                return [(*span, n) for span, n in zip(spans, counts, strict=False)]
            fixed = []
            for span, n in zip(spans, counts, strict=False):
                if n <= self.params.max_tokens:
                    fixed.append(span)
                    continue
                s, e, path, prefix, pre_n = span
                excess = n - self.params.max_tokens
                budget = max(1, self.hard - pre_n - excess)
                for ps, pe, _, _ in split_long(text, s, e, budget, self.params.max_chars, counter):
                    fixed.append((ps, pe, path, prefix, pre_n))
            spans = fixed
        raise AssertionError("chunk budget could not be met")  # pragma: no cover


def _retrieval(source: str, prefix: str) -> str:
    return f"{prefix}\n\n{source}" if prefix else source


# --- the public entry points ---------------------------------------------------------------


def chunk_note(
    parsed: ParsedNote,
    source_file: str,
    counter: TokenCounter,
    params: ChunkParams = ChunkParams(),
    fallback_heading: str | None = None,
) -> list[Chunk]:
    """Chunks of a parsed note, in document order.

    fallback_heading stands in for the heading path of text with no heading above it:
    None means the file's stem, "" means no prefix at all (BEIR documents).
    """
    text = parsed.text
    blocks = [b for b in parsed.blocks if b.kind != "front_matter"]
    if not blocks:
        return []
    sections = _sections(blocks)
    atoms = _Atoms(text, counter, params)
    packer = _Packer(atoms, params, fallback_for(source_file, fallback_heading))
    packer.section_paths = [s.path for s in sections]
    packer.warm(packer.section_paths)

    # One count_many for every sentence, heading and whole block of the note.
    units = [atoms.units(b) for sec in sections for b in sec.blocks]
    counts = atoms.counts([u for us in units for u in us])

    # A heading with nothing under it before the next heading travels with what follows.
    runs, pending = [], []
    for index, section in enumerate(sections):
        pending.append(index)
        if section.has_content:
            runs, pending = [*runs, pending], []
    if pending:
        runs.append(pending)

    ranges, k, c = [], 0, 0
    for run in runs:
        path = sections[run[-1]].path
        budget = packer.budget(path)
        lo = len(atoms)
        for index in run:
            for block in sections[index].blocks:
                n = len(units[k])
                atoms.block(block, units[k], counts[c : c + n], index, budget)
                k, c = k + 1, c + n
        ranges.append((lo, len(atoms), path))
    packer.finish_atoms()

    pieces = [p for lo, hi, path in ranges for p in packer.pack(lo, hi, path)]
    spans = packer.emit(packer.merge_small(pieces))
    return _chunks(parsed, source_file, packer.fallback, spans)


def _chunks(parsed: ParsedNote, source_file: str, fallback, spans) -> list[Chunk]:
    text = parsed.text
    line_starts = parsed.line_starts or _line_starts(text)
    chunks = []
    for index, (s, e, path, prefix, prefix_tokens, n) in enumerate(spans):
        source = text[s:e]
        chunks.append(
            Chunk(
                chunk_id=chunk_id(source_file, index, source),
                chunk_index=index,
                source_file=source_file,
                heading_path=path or fallback,
                source_text=source,
                retrieval_text=_retrieval(source, prefix),
                start_line=bisect_left(line_starts, s + 1),
                end_line=bisect_left(line_starts, e),
                start_char=s,
                end_char=e,
                source_tokens=n - prefix_tokens,
                retrieval_tokens=n,
            )
        )
    return chunks


def _line_starts(text: str) -> list[int]:
    starts = [0]
    pos = text.find("\n")
    while pos != -1:
        starts.append(pos + 1)
        pos = text.find("\n", pos + 1)
    return starts


def chunk_text(
    text: str,
    source_file: str,
    counter: TokenCounter,
    params: ChunkParams = ChunkParams(),
    fallback_heading: str | None = None,
) -> list[Chunk]:
    """parse() then chunk_note()."""
    return chunk_note(parse(text), source_file, counter, params, fallback_heading)
