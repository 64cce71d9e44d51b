"""Blocks into chunks: heading paths, sentence-aware packing, a hard token budget.

A note is parsed (`markdown.parse`), cut into *atoms* (``text/atoms.py``) — sentences of
prose, whole code blocks, tables and lists when they fit the model, else their lines, rows
or items, and words only as a last resort — and the atoms of each section are packed into chunks near
``target_tokens``. Where a chunk ends is chosen from a scored table of break points (a
block end beats a list item end beats a sentence end beats a line end beats a word), the
way qmd scores markdown break points; the sizes of a section's chunks are balanced so no
section ends in a crumb. Consecutive chunks of a section share ``overlap_sentences``
whole sentences. Fragments below ``min_tokens`` (a heading alone, a one-line section) are
merged into a neighbour, and the merged chunk takes the heading path of its larger part
(the smaller part's heading line stays in the text).

A chunk is retrieved by what a reader sees (``notes/inline.py``): ``retrieval_text`` is the
heading prefix and the *visible text* of the source, without HTML comments, reference
definitions and link targets. Atoms keep their counts as written (an upper bound), except
that an atom with nothing visible (an anchor comment) counts zero and is glued to what
follows it like a heading, so it never makes a chunk of its own; coverage is unchanged.

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
from dataclasses import dataclass
from pathlib import PurePosixPath

from brainbot.errors import InputError
from brainbot.notes.inline import InlineMarkup
from brainbot.notes.markdown import ParsedNote, parse

from .atoms import PREFIX_MAX_SHARE, Atoms, sections_of
from .tokens import SPECIAL_TOKENS, TokenCounter, split_long

# Bump when the same input would give different chunks: it is part of the fingerprint.
# 3: retrieval_text is the visible text (no comments, definitions or link targets).
# 4: a comment ending a section joins the chunk before it even when that chunk's text
#    left no room for its heading prefix (issue 40; 3 made it a chunk of its own).
CHUNKER_VERSION = "4"
# A merged chunk takes the heading path of a part at least this many times larger than
# the other; otherwise the common ancestor of both.
DOMINANT_SHARE = 2.0

# A chunk ending short of its goal loses this much break strength per goal-width of
# shortfall (and half as much for overshoot): a block end at 2/3 of the goal still beats
# a sentence end right at it, a sentence end at 1/3 does not.
UNDER_PENALTY = 2.0
OVER_PENALTY = 1.0
# Overlapped sentences may take at most this share of a chunk's goal.
OVERLAP_MAX_SHARE = 0.25
PATH_SEPARATOR = " > "
# The largest chunk budget: all-MiniLM-L6-v2's 256 positions (sentence-transformers' cap),
# the smallest of the model records' max_tokens, so chunks fit every model (e5's 512 take
# a chunk and its "passage: " prefix). The Indexer checks params against its model.
MAX_TOKENS = 256


@dataclass(frozen=True)
class ChunkParams:
    """The chunker's knobs. Everything that changes chunks is in fingerprint()."""

    # The model's limit (sentence-transformers caps all-MiniLM-L6-v2 at 256 wordpieces),
    # counted on retrieval_text in the index's model's tokenizer with its two special
    # tokens included. Never exceeded.
    max_tokens: int = MAX_TOKENS
    # Measured (benchmarks/bench_chunking.py --sweep, NFCorpus, vector nDCG@10 with a
    # document's best chunk): target 128 -> 0.3297, 200 -> 0.3286, 256 -> 0.3251, whole
    # documents cut at 256 -> 0.3167. 200 is within noise of 128 with 10 % fewer chunks to
    # embed, and leaves room for the heading prefix and the overlap under max_tokens.
    target_tokens: int = 200
    # One sentence of context carried into the next chunk of a section. Measured: 6 % of
    # the rust book's indexed text is repeated, 2 % of the vault's and the minutes' (short
    # sections have no second chunk to overlap); text/quality.py calls 2-25 % healthy.
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
        """The chunk record (README, "The chunk record"), one line of `brainbot chunks`."""
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
    def __init__(self, atoms: Atoms, params: ChunkParams, fallback: tuple[str, ...]) -> None:
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
                # Over max_chars with few tokens left (a long run of comments costs none):
                # the character limit cuts, the goal stays a full one.
                goal = remaining / math.ceil(remaining / goal_full) if remaining else goal_full
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
        if not (self.tokens(p.first, p.last) and self.tokens(q.first, q.last)):
            # A part with nothing visible (an anchor comment: no tokens) adds nothing to
            # the other, even to one past its prefix's budget, which the heading glued to
            # a near-full block lets ride (choose_end): it joins it rather than make a
            # chunk of its own that shows nothing.
            return m
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
            retrieval = [_retrieval(self.atoms.markup, s, e, pre) for s, e, _, pre, _ in spans]
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


def _retrieval(markup: InlineMarkup, start: int, end: int, prefix: str) -> str:
    """The heading prefix, a blank line, and what a reader sees of text[start:end]."""
    body = markup.visible(start, end)
    if markup.edited(start, end):
        body = body.strip()  # a comment line gone from the start or end of the chunk
    return f"{prefix}\n\n{body}" if prefix and body else prefix or body


# --- the public entry points ---------------------------------------------------------------


def chunk_note(
    parsed: ParsedNote,
    source_file: str,
    counter: TokenCounter,
    params: ChunkParams = ChunkParams(),
    fallback_heading: str | None = None,
    markup: InlineMarkup | None = None,
) -> list[Chunk]:
    """Chunks of a parsed note, in document order.

    fallback_heading stands in for the heading path of text with no heading above it:
    None means the file's stem, "" means no prefix at all (BEIR documents). markup: the
    note's inline markup when the caller has it already.
    """
    text = parsed.text
    blocks = [b for b in parsed.blocks if b.kind != "front_matter"]
    if not blocks:
        return []
    sections = sections_of(blocks)
    markup = markup or InlineMarkup.of_note(parsed)
    atoms = Atoms(text, counter, params.max_tokens, params.max_chars, markup)
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
        if section.shows_text(markup):
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
    # Where markup was removed, the source is no longer the retrieval text minus the prefix.
    edited = [k for k, span in enumerate(spans) if markup.edited(span[0], span[1])]
    counts = counter.count_many([text[spans[k][0] : spans[k][1]] for k in edited], cache=False)
    source_tokens = [n - pre_n for _, _, _, _, pre_n, n in spans]
    for k, n in zip(edited, counts, strict=True):
        source_tokens[k] = n
    return _chunks(parsed, source_file, packer.fallback, spans, markup, source_tokens)


def _chunks(parsed: ParsedNote, source_file: str, fallback, spans, markup,
            source_tokens) -> list[Chunk]:
    text = parsed.text
    line_starts = parsed.line_starts or _line_starts(text)
    chunks = []
    for index, (s, e, path, prefix, _, n) in enumerate(spans):
        source = text[s:e]
        chunks.append(
            Chunk(
                chunk_id=chunk_id(source_file, index, source),
                chunk_index=index,
                source_file=source_file,
                heading_path=path or fallback,
                source_text=source,
                retrieval_text=_retrieval(markup, s, e, prefix),
                start_line=bisect_left(line_starts, s + 1),
                end_line=bisect_left(line_starts, e),
                start_char=s,
                end_char=e,
                source_tokens=source_tokens[index],
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
