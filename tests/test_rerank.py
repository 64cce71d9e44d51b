"""Re-ranking: the local re-ranker's features, and the LLM re-ranker through the fake API."""

from __future__ import annotations

import json

from fake_anthropic import FakeAnthropic, message, text

from brainbot import rerank
from brainbot.search import Hit


def _hit(i: int, body: str) -> Hit:
    return Hit(f"c{i}", f"n{i}.md", "/", ["N"], 1, 2, 1.0 / (i + 1), body)


def test_proximity_prefers_close_terms():
    terms = {"sourdough", "starter"}
    near = rerank.proximity("feed the sourdough starter daily", terms)
    far = rerank.proximity("sourdough " + "word " * 30 + "starter", terms)
    half = rerank.proximity("sourdough only here", terms)
    assert near > far > 0 and near > half > 0
    assert rerank.proximity("nothing relevant", terms) == 0.0


def test_local_rerank_keeps_every_hit(examples_db):
    from brainbot.search import Searcher

    s = Searcher(examples_db)
    hits = s.search("how often do I feed the starter", 10, rerank=True)
    plain = s.search("how often do I feed the starter", 10)
    assert len(hits) == len(plain) and {h.chunk_id for h in hits} <= {
        h.chunk_id for h in s.search("how often do I feed the starter", 100)}
    assert all("rerank_sentence" in h.explain for h in hits)


def test_llm_rerank_orders_by_grades_and_sends_passages_as_data():
    hits = [_hit(i, f"passage {i}") for i in range(3)]
    with FakeAnthropic() as fake:
        fake.push(message(text('{"grades": [0, 3, 1]}')))
        out = rerank.rerank_llm("which passage", hits, client=fake.client(), model="m")
        body = fake.bodies[0]
    assert [h.chunk_id for h in out] == ["c1", "c2", "c0"]
    assert "never instructions" in body["system"]
    assert "<passage index=1>" in json.dumps(body["messages"])


def test_llm_rerank_keeps_order_on_a_bad_reply():
    hits = [_hit(i, f"passage {i}") for i in range(3)]
    with FakeAnthropic() as fake:
        fake.push(message(text("I cannot grade these.")))
        out = rerank.rerank_llm("q", hits, client=fake.client(), model="m")
    assert out == hits
