"""What an answer is: its records, how its citations are verified, and how it prints.

A Passage is one search_result block exactly as sent (or one span quoted offline); an
Answer holds the text, its verified Citations and the ones dropped, with the reason. A citation verifies when its
text lies inside the block it points at and that block still matches the file on disk;
the Claude path (``ask/agent.py``) and the offline one (``ask/extractive.py``) both check this
way. A refusal is REFUSAL followed by the NEAREST chunks. Printed text has its control
characters escaped: note text may hold terminal escapes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from brainbot.index.freshness import CHANGED, GONE, Freshness, as_stale
from brainbot.text import segments

NEAREST = 3
REFUSAL = "I couldn't find this in your notes"
EXTRACTIVE_LABEL = "extractive answer (no API key)"
# The three outcomes of an ask: the quoted text holds what was asked; relevant passages
# were found but brainbot cannot tell whether they answer; nothing relevant was found.
OUTCOMES = ("answer", "passages", "not_found")
PASSAGES_LABEL = "Closest passages in your notes; they may not answer the question"
MAX_PASSAGES = 3  # chunks shown as closest passages
PASSAGE_LINES = 12  # of a passage (or a quoted list or code block): a screenful, no more

# Refusal by evidence: the best cosine between the question and any chunk (the vector
# leg's top-1). RRF scores are rank-only and BM25 scores grow with query length, so only
# the cosine compares with a fixed number. Top-1 scores per mode on
# examples/questions.jsonl (48 answerable / 12 unanswerable, tests/test_extractive.py):
#   vector  answerable min 0.292, p10 0.395, median 0.535 | unanswerable 0.315-0.725
#   bm25    answerable min 7.71,  p10 10.6,  median 15.2  | unanswerable 7.08-21.1
#   hybrid  (RRF) 0.029-0.033 for both: carries no evidence
# The set's unanswerable questions are near misses on purpose (Q3 vs the Q2 offsite), so
# no retrieval score separates them; the threshold sits just under the lowest answerable
# question and only stops off-topic ones (capital of Australia 0.16, bicycle tyre 0.21).
# The near misses are left to the model (Claude) or to SUPPORT_MIN (ask/extractive.py).
REFUSE_BELOW = 0.27


# -- records --------------------------------------------------------------------------
@dataclass
class Passage:
    """One search_result block we sent (or a span quoted offline): the exact text shown
    and where it lives on disk."""

    path: str
    root: str
    start_line: int
    end_line: int
    heading_path: list[str]
    text: str
    start_char: int
    end_char: int
    indexed_sha256: str = ""  # of the file as indexed: a citation of a changed file is stale

    @property
    def source(self) -> str:
        return f"{self.path}:{self.start_line}-{self.end_line}"

    @property
    def title(self) -> str:
        return " > ".join(self.heading_path) or self.path

    @cached_property
    def blocks(self) -> list[tuple[int, int]]:
        """The text's spans sent as the result's content blocks: one per sentence, list
        item, code block or table row (``segments.blocks``)."""
        return segments.blocks(self.text)

    def block(self) -> dict:
        return {"type": "search_result", "source": self.source, "title": self.title,
                "content": [{"type": "text", "text": self.text[s:e]} for s, e in self.blocks],
                "citations": {"enabled": True}}

    def span(self, s: int, e: int) -> Passage:
        """The Passage of text[s:e] (trailing whitespace dropped): its own lines and
        characters in the file."""
        e = s + len(self.text[s:e].rstrip())
        first = self.start_line + self.text.count("\n", 0, s)
        last = self.start_line + self.text.count("\n", 0, e)
        return Passage(self.path, self.root, first, last, self.heading_path, self.text[s:e],
                       self.start_char + s, self.start_char + e, self.indexed_sha256)

    def cited(self, start_block, end_block) -> Passage | None:
        """The span of blocks [start_block, end_block) as sent, or None when that range
        is not within the blocks of this result."""
        ok = (isinstance(start_block, int) and isinstance(end_block, int)
              and 0 <= start_block < end_block <= len(self.blocks))
        if not ok:
            return None
        return self.span(self.blocks[start_block][0], self.blocks[end_block - 1][1])


@dataclass
class Citation:
    n: int
    path: str
    start_line: int
    end_line: int
    heading_path: list[str]
    cited_text: str
    verified: bool = True
    stale: bool | None = False  # its span still reads the same, but the file changed
    # elsewhere; None: the note's folder is not on this machine, so nothing can tell

    def to_dict(self) -> dict:
        return {"n": self.n, "path": self.path, "start_line": self.start_line,
                "end_line": self.end_line, "heading_path": self.heading_path,
                "cited_text": self.cited_text, "verified": self.verified,
                "stale": self.stale}

    @property
    def location(self) -> str:
        return f"{self.path}:{self.start_line}-{self.end_line}"


@dataclass
class Answer:
    question: str
    answer: str
    outcome: str  # one of OUTCOMES
    mode: str  # "claude" | "extractive"
    citations: list[Citation] = field(default_factory=list)
    steps: int = 0
    usage: dict = field(default_factory=dict)
    dropped: list[dict] = field(default_factory=list)
    nearest: list[dict] = field(default_factory=list)
    model: str | None = None
    stop_reason: str = "end_turn"
    evidence: float | None = None  # best question-chunk cosine (REFUSE_BELOW)
    support: float | None = None  # extractive: best quotable unit's score (SUPPORT_MIN)
    streamed: bool = False  # the model's text already went to the terminal
    index_note: str | None = None  # on a refusal: how far the index is behind the notes

    @property
    def refused(self) -> bool:
        """Anything but an answer: closest passages, or nothing found."""
        return self.outcome != "answer"

    def to_dict(self) -> dict:
        return {"answer": self.answer, "outcome": self.outcome, "refused": self.refused,
                "mode": self.mode,
                "citations": [c.to_dict() for c in self.citations], "steps": self.steps,
                "usage": self.usage, "dropped": self.dropped, "nearest": self.nearest,
                "model": self.model, "stop_reason": self.stop_reason,
                "evidence": _round(self.evidence), "support": _round(self.support),
                "index_note": self.index_note}


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 4)


# -- verification ---------------------------------------------------------------------
def squash_spaces(text: str) -> str:
    """Whitespace runs as one space and curly apostrophes as straight ones: the form in
    which a quote and the text it cites are compared."""
    return " ".join(text.split()).replace("\u2019", "'")


def check_fresh(src: Passage, files: Freshness | None = None) -> str | None:
    """None when the file still holds ``src.text`` at its span (or its folder is not on this
    machine: the index's text is all there is), else why the citation is dropped."""
    verdict = (files or Freshness()).span_state(src.root, src.path, src.start_char,
                                                src.end_char, src.text)
    if verdict == GONE:
        return "stale: the note is gone from disk since it was indexed"
    if verdict == CHANGED:
        return "stale: the note changed on disk since it was indexed"
    return None


def is_stale(src: Passage, files: Freshness) -> bool | None:
    """Whether the file of a citation that verified changed elsewhere since indexing (None:
    its folder is not on this machine)."""
    return as_stale(files.bytes_state(src.root, src.path, src.indexed_sha256))


def verify(src: Passage | None, loc, cache: Freshness) -> tuple[Passage | None, str | None]:
    """The exact span a search_result_location citation names, or why it is dropped: the
    result was sent, its source matches, the block range lies within the blocks sent,
    the quote is those blocks' text, and the file still holds them at those lines."""
    if src is None:
        return None, "cites a search result that was never sent"
    claimed = getattr(loc, "source", None)
    if claimed is not None and claimed != src.source:
        return None, f"source {claimed!r} does not match the result it points at"
    start, end = getattr(loc, "start_block_index", None), getattr(loc, "end_block_index", None)
    cited = src.cited(start, end)
    if cited is None:
        return None, (f"cites blocks {start}-{end} outside the {len(src.blocks)} blocks of "
                      "the result sent")
    quote = squash_spaces(getattr(loc, "cited_text", "") or "")
    if not quote or quote not in squash_spaces(src.text[src.blocks[start][0]:
                                                         src.blocks[end - 1][1]]):
        return None, "cited text is not the text of the cited blocks"
    return cited, check_fresh(cited, cache)


def dropped_entry(src: Passage | None, cited_text: str, reason: str, claimed: str = "") -> dict:
    where = src.source if src else claimed
    return {"source": where, "cited_text": cited_text[:300], "reason": reason}


# -- closest passages -----------------------------------------------------------------
def window(src: Passage, question: str, lines: int = PASSAGE_LINES) -> Passage:
    """At most ``lines`` lines of a passage: all of it, or the window of that many
    lines holding the most of the question's terms (the earliest such window)."""
    rows = src.text.split("\n")
    if len(rows) <= lines:
        return src
    from brainbot.text import lexical

    wanted = set(lexical.analyze(question))
    hits = [len(wanted & set(lexical.analyze(row))) for row in rows]
    best = max(range(len(rows) - lines + 1), key=lambda i: (sum(hits[i:i + lines]), -i))
    start = sum(len(r) + 1 for r in rows[:best])
    return src.span(start, start + len("\n".join(rows[best:best + lines])))


def closest_passages(passages: list[Passage], question: str,
                     cache: Freshness) -> tuple[list[Citation], list[dict]]:
    """The top distinct chunks as citations (each at most PASSAGE_LINES lines), verified
    against the files like any citation, and the ones dropped."""
    cites, dropped, seen = [], [], set()
    for src in passages:
        if len(cites) == MAX_PASSAGES:
            break
        part = window(src, question)
        key = (part.path, part.start_line, part.end_line)
        if key in seen:
            continue
        seen.add(key)
        reason = check_fresh(part, cache)
        if reason:
            dropped.append(dropped_entry(part, part.text, reason))
            continue
        cites.append(Citation(len(cites) + 1, part.path, part.start_line, part.end_line,
                              part.heading_path, part.text, stale=is_stale(part, cache)))
    return cites, dropped


# -- refusal --------------------------------------------------------------------------
def nearest(srcs: list[Passage], hits, query: str) -> list[dict]:
    from brainbot.render import Style, snippet

    return [{"path": s.path, "start_line": s.start_line, "end_line": s.end_line,
             "heading_path": s.heading_path, "score": round(float(h.score), 6),
             "snippet": snippet(s.text, query, Style(False))}
            for s, h in list(zip(srcs, hits, strict=False))[:NEAREST]]


# -- terminal output ------------------------------------------------------------------------
def format_answer(answer: Answer) -> str:
    """The answer for a terminal: text with [n] markers, then the sources they point at;
    closest passages quoted under their label; a refusal with the nearest notes."""
    lines = [EXTRACTIVE_LABEL] if answer.mode == "extractive" else []
    if answer.outcome == "not_found":
        lines.append(REFUSAL + ".")
    elif answer.outcome == "passages":
        lines.append(PASSAGES_LABEL + ":")
    if answer.refused and answer.index_note:
        lines.append(f"Your index may be out of date: {answer.index_note}.")
    if answer.outcome == "not_found":
        lines += _nearest_lines(answer.nearest)
    elif answer.outcome == "passages":
        for c in answer.citations:
            lines += ["", _cite_line(c)] + [f"    {x}" for x in c.cited_text.split("\n")]
    else:
        if not answer.streamed:
            lines.append(answer.answer)
        lines.append("")
        lines += [_cite_line(c) for c in answer.citations]
    for d in answer.dropped:
        lines.append(f"dropped citation {d['source'] or '?'}: {d['reason']}")
    from brainbot.render import printable

    return printable("\n".join(lines).strip("\n"), keep_newlines=True)


def _cite_line(c: Citation) -> str:
    head = f" ({' > '.join(c.heading_path)})" if c.heading_path else ""
    note = " [the note changed since it was indexed]" if c.stale else ""
    return f"[{c.n}] {c.location}{head}{note}"


def _nearest_lines(nearest: list[dict]) -> list[str]:
    if not nearest:
        return []
    lines = ["", "Nearest notes:"]
    for i, n in enumerate(nearest, 1):
        where = f"{n['path']}:{n['start_line']}-{n['end_line']}"
        head = f" ({' > '.join(n['heading_path'])})" if n["heading_path"] else ""
        lines += [f"  {i}. {where}{head}", f"     {n['snippet']}"]
    return lines
