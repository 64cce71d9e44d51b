"""A follow-up question answered in the light of its conversation: offline, its search
carries the earlier questions (ask/followup.py); with Claude, the earlier turns go back to
the model compacted to what they cited, within a budget (ask/history.py), and a
follow-up's citations are verified like any other. The local Messages server plays the
model. Also `brainbot eval --conversations`."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fake_anthropic import (
    FakeAnthropic,
    cite_text,
    earlier_turns,
    message,
    no_credentials,
    questions,
    search_results,
    text,
    tool_use,
)

from brainbot.ask import followup, history
from brainbot.ask.agent import ask
from brainbot.ask.conversation import turn_of
from brainbot.ask.tools import Conversation
from brainbot.store.conversations import Turn

STARTER = "How do I make the tare for my shoyu ramen?"
FOLLOW = "how long does it keep?"


@pytest.fixture(autouse=True)
def no_key(monkeypatch, tmp_path):
    no_credentials(monkeypatch, tmp_path)  # offline unless a test passes the fake's client


@pytest.fixture
def fake():
    with FakeAnthropic() as server:
        yield server


def offline(question, searcher, earlier=()):
    return ask(question, db=searcher.target, searcher=searcher, history=list(earlier))


# -- offline ------------------------------------------------------------------------------
def test_a_follow_up_is_searched_with_its_conversation(searcher):
    alone = offline(FOLLOW, searcher)
    assert alone.searched == FOLLOW and "3 months" not in alone.answer
    first = offline(STARTER, searcher)
    within = offline(FOLLOW, searcher, [turn_of(first)])
    assert within.outcome == "answer" and "3 months" in within.answer
    (c,) = within.citations
    assert c.path == "cooking/ramen.md" and c.verified and "Keeps 3 months" in c.cited_text
    assert within.searched == f"{STARTER} / {FOLLOW}"


def test_a_new_topic_inside_a_conversation_is_searched_as_itself(searcher):
    first = offline(STARTER, searcher)
    second = offline(FOLLOW, searcher, [turn_of(first)])
    shift = offline("What tire pressure should the Subaru run at?", searcher,
                    [turn_of(first), turn_of(second)])
    assert shift.outcome == "answer" and "35 psi" in shift.answer
    assert {c.path for c in shift.citations} == {"home/car maintenance.md"}


def test_the_context_weighs_half_the_question_in_both_legs(searcher):
    earlier = [Turn(STARTER, "", "answer", "extractive", searched=STARTER)]
    plan = followup.plan(FOLLOW, earlier, searcher)
    assert plan.follow_up and plan.terms["keep"] == 1.0
    assert plan.terms["tare"] == followup.DEFAULT.terms == followup.CONTEXT_WEIGHT == 0.5
    assert plan.terms["how"] == 1.0  # an earlier question's question words add nothing
    own, ctx = (searcher.embedder.embed_query(t) for t in (FOLLOW, STARTER))
    blend = own + 0.5 * ctx
    assert np.allclose(plan.qvec, blend / np.linalg.norm(blend), atol=1e-5)
    alone = followup.plan(FOLLOW, [], searcher)
    assert alone.terms is None and alone.text == FOLLOW and not alone.follow_up


def test_the_context_weighs_the_same_after_one_question_as_after_three(searcher):
    """One block: until issue 43 each earlier question added its own share, so the
    context counted three times as much after three questions as after one."""
    chain = f"{STARTER} / what goes into it? / and the dashi?"
    earlier = [Turn("and the dashi?", "", "answer", "extractive", searched=chain)]
    plan = followup.plan(FOLLOW, earlier, searcher)
    assert plan.text == f"{chain} / {FOLLOW}"
    own = searcher.embedder.embed_query(FOLLOW)
    block = searcher.embedder.embed_query(chain)
    blend = own + 0.5 * block
    assert np.allclose(plan.qvec, blend / np.linalg.norm(blend), atol=1e-5)
    # until issue 43, each earlier question added its own 0.25: three of them pull the
    # vector further from the question than one did
    turns = [Turn(q, "", "answer", "extractive") for q in chain.split(" / ")]
    one, three = (followup.plan(FOLLOW, t, searcher, followup.UNTIL_43).qvec
                  for t in (turns[:1], turns))
    assert float(three @ own) < float(one @ own)


@pytest.mark.parametrize("question, back", [
    ("and in the fridge?", True), ("how long does it keep?", True),
    ("what about the eggs?", True), ("Rust?", True),
    ("What tire pressure should the Subaru run at?", False),
    ("When is the search service cutover scheduled?", False)])
def test_what_refers_back(question, back):
    assert followup.refers_back(question) is back


def test_a_question_that_stands_alone_restarts_the_topic(searcher):
    earlier = [Turn(STARTER, "", "answer", "extractive", searched=STARTER)]
    new = "What tire pressure should the Subaru run at?"
    embed = searcher.embedder.embed_query
    # the notes hold the new question closer alone than joined to the tare's
    assert searcher.best_cosine(embed(new)) >= searcher.best_cosine(embed(f"{STARTER} / {new}"))
    plan = followup.plan(new, earlier, searcher)
    assert plan.text == new and not plan.follow_up and plan.terms is None
    assert np.allclose(plan.qvec, embed(new))
    # after a new topic, the context is that topic alone
    cut = earlier + [Turn(new, "", "answer", "extractive", searched=new)]
    plan = followup.plan("and in winter?", cut, searcher)
    assert plan.follow_up and plan.text == f"{new} / and in winter?"


def test_a_follow_up_without_a_pronoun_keeps_its_topic(searcher):
    """No pronoun, no opening, three words of its own: a gate on cue words reads it alone
    and the topic restarts there (the first version of issue 43's method did, on the
    Homebrew and lang-team sets: examples/README.md); the notes hold it closer joined."""
    question = "how much mirin goes into the batch?"
    assert not followup.refers_back(question)
    earlier = [Turn(STARTER, "", "answer", "extractive", searched=STARTER)]
    plan = followup.plan(question, earlier, searcher)
    assert plan.follow_up and plan.text == f"{STARTER} / {question}"
    cue = followup.plan(question, earlier, searcher, followup.Method(gate="cue"))
    assert not cue.follow_up and cue.text == question


class _Stub:
    """A searcher whose joined readings are always closer than a question alone."""

    class embedder:  # noqa: N801 - stands in for an Embedder instance
        @staticmethod
        def embed_query(text):
            return text

    @staticmethod
    def best_cosine(vec):
        return 0.9 if " / " in vec else 0.5


@pytest.mark.parametrize("gate, follow, new", [
    ("closer", True, True), ("cue", True, False), ("both", True, False),
    ("either", True, True), ("always", True, True)])
def test_the_gates(gate, follow, new):
    method = followup.Method(gate=gate)
    ask = {"and in the fridge?": follow, "What tire pressure should the Subaru run at?": new}
    for question, want in ask.items():
        assert followup.follows(question, f"ctx / {question}", question, _Stub, method) is want
    far = type("Far", (_Stub,), {"best_cosine": staticmethod(lambda vec: 0.5)})
    assert followup.follows("and in the fridge?", "ctx / and in the fridge?", "x", far,
                            method) is (gate in ("cue", "either", "always"))


def test_the_context_reaches_back_at_most_chain_questions(searcher):
    chain = " / ".join(f"question {i} about the tare" for i in range(9))
    earlier = [Turn("q", "", "answer", "extractive", searched=chain)]
    context = followup.context_of(earlier, followup.DEFAULT)
    assert len(context) == followup.CHAIN and context[-1] == "question 8 about the tare"
    assert followup.context_of(earlier, followup.Method(context="last")) == ["q"]


# -- with Claude -----------------------------------------------------------------------------
def _cites(body, prefix: str, needle: str):
    """A citation of ``needle`` in the first search result from ``prefix`` holding it."""
    i = next(i for i, b in enumerate(search_results(body)) if b["source"].startswith(prefix)
             and needle.lower() in "".join(c["text"] for c in b["content"]).lower())
    return cite_text(body, i, needle)


def test_earlier_turns_go_back_compacted_to_what_they_cited(fake, searcher):
    def first(body):
        return message(text("Keep the tare 3 months in the fridge.",
                            [_cites(body, "cooking/ramen.md", "Keeps 3 months")]))

    fake.push(first)
    one = ask(STARTER, db=searcher.target, searcher=searcher, client=fake.client())
    assert one.outcome == "answer"
    seen = {}

    def follow(body):  # the model cites the earlier turn's passage again
        seen["body"] = body
        return message(text("It keeps for 3 months.", [cite_text(body, 0, "3 months")]))

    fake.push(follow)
    two = ask(FOLLOW, db=searcher.target, searcher=searcher, client=fake.client(),
              history=[turn_of(one)])
    body = seen["body"]
    ((asked, answered, sources),) = earlier_turns(body)
    assert asked == STARTER and answered == one.answer
    c = one.citations[0]
    assert sources == [f"cooking/ramen.md:{c.start_line}-{c.end_line}"]  # what was cited
    assert questions(body) == [STARTER, FOLLOW]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert two.outcome == "answer" and two.citations[0].verified
    assert two.citations[0].path == "cooking/ramen.md"
    assert two.answer == "It keeps for 3 months. [1]"
    # the first search of the follow-up was already about the tare
    current = body["messages"][-1]["content"]
    assert any(b.get("source", "").startswith("cooking/ramen.md") for b in current)


def test_a_follow_up_may_search_again_and_its_new_citations_are_verified(fake, searcher):
    earlier = [Turn(STARTER, "Keeps 3 months in the fridge. [1]", "answer", "extractive",
                    [{"n": 1, "path": "cooking/ramen.md", "start_line": 14, "end_line": 14,
                      "cited_text": "Keeps 3 months in the fridge."}])]
    fake.push(message(tool_use("search_notes", {"query": "ajitama eggs marinate", "k": 3}),
                      stop_reason="tool_use"),
              lambda body: message(text("12 hours in the chashu liquid.", [
                  _cites(body, "cooking/ramen.md", "12 hours")])))
    answer = ask("and the eggs?", db=searcher.target, searcher=searcher, client=fake.client(),
                 history=earlier)
    assert answer.steps == 2 and answer.outcome == "answer"
    (c,) = answer.citations
    assert c.verified and c.path == "cooking/ramen.md" and "12 hours" in c.cited_text
    assert questions(fake.bodies[1]) == [STARTER, "and the eggs?"]  # the thread, kept


def test_a_citation_of_an_earlier_passage_that_no_longer_matches_is_dropped(fake, searcher):
    stale = Turn(STARTER, "The tare keeps forever. [1]", "answer", "claude",
                 [{"n": 1, "path": "cooking/ramen.md", "start_line": 14, "end_line": 14,
                   "cited_text": "Keeps forever in the fridge."}])
    seen = {}

    def reply(body):
        seen["body"] = body
        return message(text("3 months.", [_cites(body, "cooking/ramen.md", "3 months")]))

    fake.push(reply)
    answer = ask(FOLLOW, db=searcher.target, searcher=searcher, client=fake.client(),
                 history=[stale])
    ((_, _, sources),) = earlier_turns(seen["body"])
    assert sources == []  # its lines no longer hold what it cited: the passage stays out
    assert answer.citations[0].verified


def test_a_long_thread_keeps_within_the_budget_dropping_the_oldest_first(searcher):
    cite = {"n": 1, "path": "cooking/ramen.md", "start_line": 14, "end_line": 14,
            "cited_text": "Keeps 3 months in the fridge."}
    turns = [Turn(f"question {i}", "word " * 300, "answer", "claude", [cite])
             for i in range(12)]
    conversation = Conversation(searcher, 8, FOLLOW)
    sent = history.messages(turns, conversation, budget=2_000)
    asked = [b["text"] for m in sent for b in m["content"]
             if b.get("text", "").startswith("Question: ")]
    assert asked and asked[-1] == "Question: question 11"  # the newest is kept
    assert asked == [f"Question: question {i}" for i in range(12 - len(asked), 12)]
    assert 1 <= len(asked) < 12
    assert sent[0]["content"][0]["text"].startswith(f"({12 - len(asked)} earlier turns")
    size = sum(history.tokens(json.dumps(m)) for m in sent)
    assert size <= 2_000 * 1.3  # the estimate counts text; the JSON adds a little
    assert len(history.fit(turns, searcher.store, history.HISTORY_TOKENS)) > len(asked)
    # a turn too long to go back with its passages goes back without them
    fitted = history.fit(turns[-1:], searcher.store, history.tokens("word " * 300) + 20)
    assert fitted == [(turns[-1], [])]


def test_show_context_holds_the_earlier_turns(searcher):
    first = offline(STARTER, searcher)
    context = ask(FOLLOW, db=searcher.target, searcher=searcher, history=[turn_of(first)],
                  show_context=True)
    assert questions(context) == [STARTER, FOLLOW]
    assert earlier_turns(context)[0][1] == first.answer


def test_claude_text_reaches_the_callback_as_it_streams(fake, searcher):
    def reply(body):
        return message(text("Twice a day on the counter.",
                            [_cites(body, "cooking/sourdough.md", "feed twice a day")]))

    fake.push(reply)
    pieces = []
    answer = ask("How often do I feed the sourdough starter?", db=searcher.target,
                 searcher=searcher, client=fake.client(), on_text=pieces.append)
    assert answer.streamed and len(pieces) >= 2  # the fake sends the text in two deltas
    assert "".join(pieces) == "Twice a day on the counter."
    assert fake.bodies[0]["stream"] is True


# -- the eval ---------------------------------------------------------------------------------
def test_eval_conversations_measures_follow_ups_alone_and_within(examples_db, tmp_path):
    from brainbot.cli import main

    path = tmp_path / "set.jsonl"
    path.write_text(json.dumps({"id": "tare", "turns": [
        {"question": STARTER, "expected": ["cooking/ramen.md"]},
        {"question": FOLLOW, "expected": ["cooking/ramen.md"], "kind": "pronoun",
         "answer_contains": ["3 months"]}]}) + "\n"
        + json.dumps({"id": "car", "turns": [
            {"question": "What tire pressure should the Subaru run at?",
             "expected": ["home/car maintenance.md#Quick reference"]},
            {"question": "when did I last replace them?",
             "expected": ["home/car maintenance.md"], "kind": "pronoun"}]}) + "\n",
        encoding="utf-8")
    from brainbot.evaluation.conversations import run_conversations

    result = run_conversations(path, db=examples_db, k=5)
    assert result["conversations"] == 2 and result["mode"] == "extractive"
    within = result["follow_ups"]["within"]
    assert (within["n"], within["found"], within["hit@5"]) == (2, 1.0, 1.0)
    assert result["follow_ups"]["alone"]["found"] < 1.0
    assert result["first"]["alone"]["n"] == 2 and result["first"]["inside_unrelated"]["n"] == 1
    assert result["first"]["inside_unrelated"]["found"] == 1.0
    assert result["first"]["alone_paired"]["n"] == 1  # the car's first question, alone
    rows = {(r["id"], r["n"]): r for r in result["rows"]}
    assert rows["tare", 2]["within"]["cited"] == ["cooking/ramen.md"]
    assert rows["tare", 2]["within"]["answered"] and not rows["tare", 2]["alone"]["answered"]
    assert "inside_unrelated" in rows["car", 1] and "inside_unrelated" not in rows["tare", 1]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "turns": [{"question": "q", "expected": ["a.md"]}]}\n')
    assert main(["eval", "--conversations", str(bad), "--db", str(examples_db)]) == 2
