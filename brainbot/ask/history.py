"""A conversation's earlier turns as Messages API turns, within a token budget.

Each earlier turn goes back to the model as a user turn (the passages its answer cited,
as ``search_result`` blocks with citations enabled, then its question) and an assistant
turn (its answer). Only what was cited goes back, not every passage that was sent: the
cited lines, read from the index again, so a follow-up may cite them and the citation is
verified against the file like any other. A passage whose note left the index, or whose
lines no longer hold what was cited, is left out; the answer's own text still says it.

For a server that takes passages only as numbered text (``citations="text"``,
model/claude.py) the cited lines go back as numbered passages instead, numbered on from
the ones before them, and the answer's [n] marks are renumbered to match, so the model
reads "[3]" in an old answer as the passage it sees as [3].

The oldest turns give way first: newest first, each turn goes back whole while it fits
HISTORY_TOKENS, then without its passages, and once even that does not fit, neither it nor
anything older goes back (one line says how many turns were left out). A passage costs
what is sent for it (review L10): the search_result block as JSON, with its source, title
and the wrapper of each of its content blocks, or the numbered text with its header.

This module builds messages; it does not call the API or decide what is a follow-up.
"""

from __future__ import annotations

import json
import re

from brainbot.errors import BrainbotError
from brainbot.index import reading as spans
from brainbot.store.conversations import Turn

from .answers import REFUSAL, Passage
from .citations import squash_spaces

# The earlier turns' share of a request, in tokens. A first request is ~3k tokens (eight
# ~300-token chunks, the system prompt and tools), and each step of the loop sends the
# whole conversation again; with 4k of history a three-step follow-up costs about
# 7k + 9k + 11k = 27k of agent.TOKEN_BUDGET's 40k. A turn of a few cited sentences is
# ~300-600 tokens, so the last six to ten turns go back whole.
HISTORY_TOKENS = 4_000
CHARS_PER_TOKEN = 4  # English prose averages about four characters a token


def tokens(text: str) -> int:
    return len(text) // CHARS_PER_TOKEN + 1


def messages(earlier: list[Turn], conversation, budget: int = HISTORY_TOKENS) -> list[dict]:
    """The Messages API turns for ``earlier`` (oldest first); their passages are registered
    with ``conversation`` in the order the API will count them."""
    text_mode = getattr(conversation, "citations", "search_results") == "text"
    fitted = fit(earlier, conversation.searcher.store, budget, text_mode)
    out: list[dict] = []
    for turn, cited in fitted:
        first = len(conversation.sent) + 1
        blocks = conversation.send([p for _, p in cited])
        answer = turn.answer.strip() or REFUSAL
        if text_mode:
            answer = renumbered(answer, {n: first + i for i, (n, _) in enumerate(cited)})
        content = [*blocks, {"type": "text", "text": f"Question: {turn.question}"}]
        out += [{"role": "user", "content": content},
                {"role": "assistant", "content": [{"type": "text", "text": answer}]}]
    left_out = len(earlier) - len(fitted)
    if out and left_out:
        note = f"({left_out} earlier turns of this conversation are left out.)"
        out[0]["content"].insert(0, {"type": "text", "text": note})
    return out


def renumbered(answer: str, numbers: dict[int, int]) -> str:
    """``answer`` with each [n] mark as the number its passage is sent under now; a mark
    whose passage is not sent again is taken out."""
    def swap(m: re.Match) -> str:
        n = numbers.get(int(m.group(2)))
        return f"{m.group(1)}[{n}]" if n else ""

    return re.sub(r"([ \t]*)\[(\d{1,4})\]", swap, answer)


def cost(passage: Passage, text_mode: bool) -> int:
    """The tokens a passage costs as sent: its numbered text, or its search_result block
    (source, title and each content block's wrapper counted as the JSON sent)."""
    if text_mode:
        return tokens(passage.numbered(999) + "\n\n")
    return tokens(json.dumps(passage.block()))


def fit(earlier: list[Turn], store, budget: int,
        text_mode: bool = False) -> list[tuple[Turn, list[tuple[int, Passage]]]]:
    """The turns that go back, oldest first, each with the passages that go with it (and
    the number of the citation each stands for)."""
    kept: list[tuple[Turn, list[tuple[int, Passage]]]] = []
    left = budget
    for turn in reversed(earlier):
        bare = tokens(f"Question: {turn.question}") + tokens(turn.answer)  # as sent
        passages = cited_passages(turn, store)
        whole = bare + sum(cost(p, text_mode) for _, p in passages)
        if whole <= left:
            kept.insert(0, (turn, passages))
            left -= whole
        elif bare <= left:
            kept.insert(0, (turn, []))
            left -= bare
        else:
            break
    return kept


def cited_passages(turn: Turn, store) -> list[tuple[int, Passage]]:
    """What the turn's answer cited, as Passages of the index's lines (one per citation),
    each with its citation's number."""
    out = []
    for i, c in enumerate(turn.citations, 1):
        p = _passage(store, c)
        if p is not None:
            out.append((int(c.get("n") or i), p))
    return out


def _passage(store, cite: dict) -> Passage | None:
    path, root = cite.get("path"), cite.get("root")
    try:
        doc = spans.document(store, f"{root}::{path}" if root else path)
        lines = spans.stored_lines(store, doc)
    except BrainbotError:
        return None
    start, end = int(cite.get("start_line") or 1), int(cite.get("end_line") or 0)
    if not 1 <= start <= end <= len(lines):
        return None
    start_char = sum(len(line) + 1 for line in lines[:start - 1])
    text = "\n".join(lines[start - 1:end])
    quoted = cite.get("cited_text") or ""
    first = quoted.split(" … ")[0]  # an offline citation may join several quotes
    if not text.strip() or squash_spaces(first) not in squash_spaces(text):
        return None  # the lines no longer hold what was cited
    heading = store.heading_at(doc.id, start)
    return Passage(doc.path, doc.root, start, end, heading, text, start_char,
                   start_char + len(text), doc.sha256)
