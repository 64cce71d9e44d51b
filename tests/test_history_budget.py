"""The earlier turns' budget counts what is sent (review L10): each search_result block's
source, title and wrapper, or the numbered text of the text-citation mode, not only the
passage's words. Many short citations are where the two part: a one-line passage is ~8
tokens of text in a ~60-token block."""

from __future__ import annotations

import json

import pytest

from brainbot.ask import history
from brainbot.ask.tools import Conversation
from brainbot.store.conversations import Turn

CITE = {"n": 1, "path": "cooking/ramen.md", "start_line": 14, "end_line": 14,
        "cited_text": "Keeps 3 months in the fridge."}


def _turns(n: int) -> list[Turn]:
    cites = [dict(CITE, n=i) for i in range(1, 9)]  # one line, cited eight times a turn
    return [Turn(f"question {i}?", " ".join(f"[{j}]" for j in range(1, 9)), "answer",
                 "claude", cites) for i in range(n)]


def _sent_tokens(sent: list[dict]) -> int:
    """What the turns cost as sent: every block as its JSON (search results) or text."""
    total = 0
    for msg in sent:
        for block in msg["content"]:
            total += history.tokens(json.dumps(block) if block["type"] == "search_result"
                                    else block["text"])
    return total


@pytest.mark.parametrize("mode", ["search_results", "text"])
def test_many_short_citations_stay_within_the_budget_as_sent(searcher, mode):
    conversation = Conversation(searcher, 8, "and then?", citations=mode)
    sent = history.messages(_turns(400), conversation, budget=history.HISTORY_TOKENS)
    kept = sum(1 for m in sent if m["role"] == "assistant")
    assert 1 <= kept < 400
    note = sent[0]["content"][0]["text"]  # "(N earlier turns ... are left out.)"
    assert note.endswith("are left out.)")
    assert _sent_tokens(sent) - history.tokens(note) <= history.HISTORY_TOKENS
    # and the budget is used, not just undercut: one more turn would not have fitted
    one_more = history.messages(_turns(kept + 1)[:kept + 1], Conversation(
        searcher, 8, "and then?", citations=mode), budget=10 ** 6)
    assert _sent_tokens(one_more) > history.HISTORY_TOKENS * 0.8
