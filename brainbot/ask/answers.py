"""What an answer is: a Passage sent (or quoted), the Citations an answer keeps, the Answer
with its outcome, and the labels the outcomes print under.

A Passage is one search_result block exactly as sent (or one numbered passage of the
text-citation mode, or one span quoted offline); an
Answer holds the text, its verified Citations and the ones dropped, with the reason.
How a citation is verified is ``ask/citations.py``; the closest passages and the refusal
are ``ask/passages.py``; how an answer prints in a terminal is ``ask/terminal.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from brainbot.text import segments

REFUSAL = "I couldn't find this in your notes"
EXTRACTIVE_LABEL = "extractive answer (no API key)"
# The three outcomes of an ask: the quoted text holds what was asked; relevant passages
# were found but brainbot cannot tell whether they answer; nothing relevant was found.
OUTCOMES = ("answer", "passages", "not_found")
PASSAGES_LABEL = "Closest passages in your notes; they may not answer the question"


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
        """What the model is shown as the result's source (and a dropped citation names)."""
        return f"{self.path}:{self.start_line}-{self.end_line}"

    @property
    def key(self) -> tuple[str, str, int, int]:
        """Where the passage is, to tell citations apart: with its root, as two indexed
        folders may both hold README.md (issue 32, H3)."""
        return self.root, self.path, self.start_line, self.end_line

    @property
    def title(self) -> str:
        return " > ".join(self.heading_path) or self.path

    @cached_property
    def blocks(self) -> list[tuple[int, int]]:
        """The text's spans sent as the result's content blocks: one per sentence, list
        item, code block or table row (``segments.blocks``)."""
        return segments.blocks(self.text)

    def numbered(self, n: int) -> str:
        """The passage as a server that drops search_result blocks is sent it (text
        citations): its number, where it is, and its text."""
        head = f" ({' > '.join(self.heading_path)})" if self.heading_path else ""
        return f"[{n}] {self.source}{head}\n{self.text}"

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
    root: str = ""  # the indexed folder holding path: ROOT::PATH names the note (H3)

    @classmethod
    def of(cls, n: int, src: Passage, stale: bool | None = False) -> Citation:
        """Citation ``n`` of the passage ``src`` (its text is the cited text)."""
        return cls(n, src.path, src.start_line, src.end_line, src.heading_path, src.text,
                   stale=stale, root=src.root)

    def to_dict(self) -> dict:
        return {"n": self.n, "root": self.root, "path": self.path,
                "start_line": self.start_line, "end_line": self.end_line,
                "heading_path": self.heading_path, "cited_text": self.cited_text,
                "verified": self.verified, "stale": self.stale}

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
    evidence: float | None = None  # best question-chunk cosine (passages.REFUSE_BELOW)
    support: float | None = None  # extractive: best quotable unit's score (SUPPORT_MIN)
    streamed: bool = False  # the model's draft was shown as it streamed (terminal, draft events)
    index_note: str | None = None  # on a refusal: how far the index is behind the notes
    searched: str = ""  # what retrieval searched: the question, or with its conversation's
    conversation: str | None = None  # the conversation it is a turn of (ask/conversation.py)
    turn: int | None = None  # its number there; None: not saved
    conversation_note: str | None = None  # why the turn was not saved

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
                "index_note": self.index_note, "searched": self.searched or self.question,
                "conversation": self.conversation, "turn": self.turn,
                "conversation_note": self.conversation_note}


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 4)
