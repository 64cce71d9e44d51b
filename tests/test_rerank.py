"""Re-ranking: the local re-ranker's features, and the LLM re-ranker through the fake API."""

from __future__ import annotations

import json

import pytest
from fake_anthropic import FakeAnthropic, message, text

from brainbot.search import rerank
from brainbot.search.searcher import Hit


def _hit(i: int, body: str) -> Hit:
    return Hit(f"c{i}", f"n{i}.md", "/", ["N"], 1, 2, 1.0 / (i + 1), body)


def test_proximity_prefers_close_terms():
    terms = {"sourdough", "starter"}
    near = rerank.proximity("feed the sourdough starter daily", terms)
    far = rerank.proximity("sourdough " + "word " * 30 + "starter", terms)
    half = rerank.proximity("sourdough only here", terms)
    assert near > far > 0 and near > half > 0
    assert rerank.proximity("nothing relevant", terms) == 0.0


def test_local_rerank_keeps_every_hit_and_orders_by_its_score(examples_db):
    from brainbot.search.searcher import Searcher

    s = Searcher(examples_db)
    query = "how often do I feed the starter"
    hits = s.search(query, 10, rerank=True)
    plain = s.search(query, 10)
    pool = {h.chunk_id for h in s.search(query, 100)}
    assert len(hits) == len(plain) and {h.chunk_id for h in hits} <= pool
    assert all("rerank_sentence" in h.explain for h in hits)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)  # best first, by the re-ranker's score
    # The blend is what it says: prior from the first-stage rank, the best sentence's
    # cosine, and proximity; recompute it for every hit.
    terms = set(rerank.lexical.analyze(query))
    for h in hits:
        prior = 1.0 / (1.0 + (h.explain["first_stage_rank"] - 1) / 10.0)
        expected = (rerank.W_PRIOR * prior + rerank.W_SENTENCE * h.explain["rerank_sentence"]
                    + rerank.W_PROXIMITY * rerank.proximity(h.text, terms))
        assert abs(h.score - expected) < 1e-3
    # and the feeding schedule, which answers the question, is first
    assert "Feeding schedule" in hits[0].heading_path


def test_llm_rerank_orders_by_grades_and_sends_passages_as_data():
    hits = [_hit(i, f"passage {i}") for i in range(3)]
    with FakeAnthropic() as fake:
        fake.push(message(text('{"grades": [0, 3, 1]}')))
        out = rerank.rerank_llm("which passage", hits, client=fake.client(), model="m")
        body = fake.bodies[0]
    assert [h.chunk_id for h in out] == ["c1", "c2", "c0"]
    assert "never instructions" in body["system"]
    assert "<passage index=1>" in json.dumps(body["messages"])


@pytest.mark.parametrize("reply", ["I cannot grade these.", '{"grades": ["x", 1, 2]}',
                                   '{"grades": [1, 2]}', '{"grades": [1, 2, 9]}',
                                   '{"grades": null}'])
def test_llm_rerank_keeps_order_on_a_bad_reply_and_says_so(reply):
    hits = [_hit(i, f"passage {i}") for i in range(3)]
    with FakeAnthropic() as fake:
        fake.push(message(text(reply)))
        out = rerank.rerank_llm("q", hits, client=fake.client(), model="m")
    assert out == hits and all("skipped" in h.explain["rerank"] for h in out)


def test_llm_rerank_server_error_is_one_line_answer_error():
    from fake_anthropic import error

    from brainbot.errors import AnswerError

    hits = [_hit(i, f"passage {i}") for i in range(3)]
    with FakeAnthropic() as fake:
        for _ in range(5):
            fake.push(error(503, "api_error", "upstream down"))
        with pytest.raises(AnswerError, match=r"failed \(503\)") as info:
            rerank.rerank_llm("q", hits, client=fake.client(max_retries=1), model="m")
    assert "\n" not in str(info.value)
