"""`ask` through a server that drops search_result blocks and never cites (Ollama,
llama-server, LM Studio: issue 42), played by the fake Messages API in its local mode.

The passages must reach the model as numbered text (what the fake's model sees has no
search_result block, and the passages are there); the model's marks are checked: a
correct quote becomes a verified citation of the lines that hold it, a wrong one and a
bare mark are dropped and reported; refusal and the passages fallback stay. Which mode is
used follows the server's address unless a setting says otherwise. Streaming: a read
timeout between events, never for the whole answer, and no retry from scratch. The
scripted answers stand in for what a 270M model cannot write on demand; the real
llama-server is tests/test_llama_server.py.
"""

from __future__ import annotations

import io
import threading
from pathlib import Path

import anthropic
import pytest
from fake_anthropic import (
    FakeAnthropic,
    message,
    number_of,
    numbered,
    questions,
    quote,
    text,
    tool_results,
    tool_use,
)

from brainbot.ask import agent, terminal
from brainbot.ask.agent import ask
from brainbot.ask.answers import PASSAGES_LABEL, REFUSAL, Passage
from brainbot.ask.citations import ground_marks
from brainbot.errors import AnswerError, InputError
from brainbot.model import claude
from brainbot.store.conversations import Turn

QUESTION = "How often do I feed the sourdough starter on the counter?"
SOURDOUGH = "cooking/sourdough.md:"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "notes"


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.delenv("BRAINBOT_CITATIONS", raising=False)  # the mode its address gives
    monkeypatch.delenv("BRAINBOT_TOOLS", raising=False)
    with FakeAnthropic(local=True) as server:
        yield server


def run(fake, searcher, question=QUESTION, **kw):
    kw.setdefault("client", fake.client())
    return ask(question, db=searcher.target, searcher=searcher, **kw)


def says(words: str, prefix: str = SOURDOUGH, before: str = "", after: str = ""):
    """A scripted local model that quotes ``words`` as passage n of the note ``prefix``."""
    return lambda body: message(text(f"{before}{quote(body, prefix, words)}{after}"))


# -- what reaches the model ---------------------------------------------------------------
def test_the_passages_reach_the_model_as_numbered_text(fake, searcher):
    fake.push(says("feed twice a day, at 09:00 and 21:00"))
    run(fake, searcher)
    (body,) = fake.bodies
    assert "tools" not in body and "tool_choice" not in body  # one grounded step
    assert not any(b.get("type") == "search_result" for b in body["messages"][-1]["content"])
    seen = fake.seen[0]  # the request after the server dropped what it does not take
    sources = numbered(seen)
    assert len(sources) >= 3 and sorted(sources) == list(range(1, len(sources) + 1))
    assert any(s.startswith(SOURDOUGH) for s in sources.values())
    assert 'like this: "feed it twice a day" [2]' in body["system"]
    assert questions(seen) == [QUESTION]


def test_a_correct_quote_becomes_a_verified_citation_of_its_lines(fake, searcher):
    fake.push(says("feed twice a day, at 09:00 and 21:00", before="On the counter you ",
                   after="."))
    answer = run(fake, searcher)
    assert answer.outcome == "answer" and not answer.dropped
    assert answer.answer == 'On the counter you "feed twice a day, at 09:00 and 21:00" [1].'
    (c,) = answer.citations
    assert c.verified and c.path == "cooking/sourdough.md" and c.start_line == c.end_line
    assert "feed twice a day, at 09:00 and 21:00" in c.cited_text
    line = (EXAMPLES / c.path).read_text(encoding="utf-8").split("\n")[c.start_line - 1]
    assert c.cited_text == line.rstrip()  # the whole line that holds the quote, no more


def test_a_wrong_quote_is_dropped_and_the_answer_falls_back_to_passages(fake, searcher):
    fake.push(says("feed it four times a day with rye"))
    answer = run(fake, searcher)
    assert answer.outcome == "passages" and answer.answer == PASSAGES_LABEL
    (d,) = [d for d in answer.dropped if d["cited_text"]]
    assert d["source"].startswith(SOURDOUGH)
    assert d["reason"] == "the quoted words are not in the passage it marks"
    assert answer.citations and all(c.verified for c in answer.citations)


def test_a_bare_mark_is_dropped_and_reported_and_a_quote_beside_it_kept(fake, searcher):
    def reply(body):
        n = number_of(body, SOURDOUGH)
        return message(text(f'Twice a day [{n}]; "at 09:00 and 21:00" [{n}].'))

    fake.push(reply)
    answer = run(fake, searcher)
    assert answer.answer == 'Twice a day; "at 09:00 and 21:00" [1].'
    (bare,) = answer.dropped
    assert bare["reason"] == "a bare mark with no quoted words before it"
    assert len(answer.citations) == 1 and "09:00" in answer.citations[0].cited_text


def test_a_mark_of_a_passage_never_sent_is_dropped(fake, searcher):
    fake.push(message(text('"feed twice a day" [99]')))
    answer = run(fake, searcher)
    assert answer.outcome == "passages"
    assert answer.dropped[0] == {"source": "[99]", "cited_text": "feed twice a day",
                                 "reason": "cites a passage that was never sent"}


def test_the_refusal_and_the_prompt_leak_check_stay(fake, searcher):
    fake.push(message(text("I couldn't find this in your notes.")),
              lambda body: message(text(body["system"].split("\n")[0])))
    assert run(fake, searcher).outcome == "not_found"
    leaked = run(fake, searcher)
    assert leaked.outcome == "not_found" and leaked.answer == REFUSAL
    assert leaked.dropped[-1]["reason"] == "the answer repeated the system prompt"


def test_a_quote_of_an_edited_line_is_dropped_as_stale(tmp_path):
    note = tmp_path / "a.md"
    note.write_text("# A\nFeed the starter twice a day.\nKeep it warm.\n", encoding="utf-8")
    body = "Feed the starter twice a day.\nKeep it warm."
    src = Passage("a.md", str(tmp_path), 2, 3, ["A"], body, 4, 4 + len(body))
    text_, cites, dropped = ground_marks('"twice a day" [1]', [src].__getitem__)
    assert cites and cites[0].start_line == 2 and not dropped and text_ == '"twice a day" [1]'
    note.write_text("# A\nFeed the starter thrice a day.\nKeep it warm.\n", encoding="utf-8")
    text_, cites, dropped = ground_marks('"twice a day" [1]', [src].__getitem__)
    assert not cites and dropped[0]["reason"].startswith("stale:")
    assert text_ == '"twice a day"'


@pytest.mark.parametrize("said, kept", [
    ('"Feed the STARTER  twice\na day." [1]', True),  # case, spaces and edge punctuation
    ("\u201cfeed the starter \u2026 a day\u201d [1]", True),  # curly quotes, an ellipsis
    ('"a day" [1]', True),
    ('"30" [1]', False),  # too short to say where it is
    ('"feed the starter" [0]', False),
])
def test_what_a_quote_may_differ_in(said, kept, tmp_path):
    body = "Feed the starter twice a day."
    src = Passage("a.md", str(tmp_path / "gone"), 1, 1, [], body, 0, len(body))
    _, cites, dropped = ground_marks(said, lambda i: [src][i] if 0 <= i < 1 else None)
    assert bool(cites) is kept and bool(dropped) is not kept


# -- which mode -------------------------------------------------------------------------------
def test_the_mode_follows_the_address_and_a_setting_overrides_it(monkeypatch):
    monkeypatch.delenv("BRAINBOT_CITATIONS", raising=False)
    monkeypatch.delenv("BRAINBOT_TOOLS", raising=False)
    for name in ("BRAINBOT_READ_TIMEOUT", "BRAINBOT_RETRIES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://api.anthropic.com")
    api = claude.server()
    assert (api.citations, api.tools, api.retries) == ("search_results", True, 3)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:11434")
    local = claude.server()
    assert (local.citations, local.tools, local.retries) == ("text", False, 0)
    assert local.read_timeout > api.read_timeout
    assert local.name == "the model server at http://127.0.0.1:11434"
    monkeypatch.setenv("BRAINBOT_CITATIONS", "search_results")
    monkeypatch.setenv("BRAINBOT_TOOLS", "off")
    monkeypatch.setenv("BRAINBOT_READ_TIMEOUT", "900")
    forced = claude.server()
    assert (forced.citations, forced.tools, forced.read_timeout) == ("search_results", False, 900)
    assert forced.why == "BRAINBOT_CITATIONS=search_results"
    monkeypatch.setenv("BRAINBOT_CITATIONS", "json")
    with pytest.raises(InputError, match="BRAINBOT_CITATIONS='json' is not one of"):
        claude.server()


def test_make_client_reads_the_timeout_and_retries_of_its_server(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:8080")
    monkeypatch.setenv("BRAINBOT_READ_TIMEOUT", "42")
    client = claude.make_client()
    assert client.max_retries == 0 and client.timeout.read == 42


# -- tools, when asked for ----------------------------------------------------------------
def test_with_tools_their_results_are_numbered_text_and_the_last_step_is_told(fake, searcher,
                                                                            monkeypatch):
    monkeypatch.setenv("BRAINBOT_TOOLS", "on")
    seen = {}

    def answer_from_tool(body):
        seen["results"] = tool_results(body)
        return message(text(quote(body, "cooking/ramen.md:", "3 months in the fridge")))

    fake.push(message(tool_use("search_notes", {"query": "tare fridge"}), stop_reason="tool_use"),
              answer_from_tool)
    answer = run(fake, searcher, max_steps=2)
    first, second = fake.bodies
    assert "tools" in first and "tool_choice" not in second  # never relied upon
    (result,) = seen["results"]
    assert result["content"][0]["type"] == "text" and "[" in result["content"][0]["text"]
    assert second["messages"][-1]["content"][-1] == {"type": "text", "text": agent.LAST_STEP}
    before = len(numbered(first))
    assert min(n for n in numbered(second) if n > before) == before + 1  # numbers run on
    assert answer.outcome == "answer" and answer.citations[0].path == "cooking/ramen.md"


def test_a_tool_call_cut_off_by_max_tokens_is_never_run(fake, searcher, monkeypatch):
    monkeypatch.setenv("BRAINBOT_TOOLS", "on")
    fake.push(message(text("Let me search"), tool_use("search_notes", {"query": "sta"}),
                      stop_reason="max_tokens"))
    answer = run(fake, searcher)
    assert len(fake.bodies) == 1 and answer.stop_reason == "max_tokens"
    assert answer.outcome == "passages"


def test_a_model_that_ignores_the_last_step_still_stops(fake, searcher, monkeypatch):
    monkeypatch.setenv("BRAINBOT_TOOLS", "on")
    for _ in range(3):
        fake.push(message(tool_use("search_notes", {"query": "starter"}), stop_reason="tool_use"))
    answer = run(fake, searcher, max_steps=3)
    assert len(fake.bodies) == 3 and answer.stop_reason == "step_limit" and answer.refused


def test_every_request_caps_the_answer(fake, searcher):
    fake.push(message(text('"feed twice a day" [1] and on and on'), stop_reason="max_tokens"))
    answer = run(fake, searcher)
    assert fake.bodies[0]["max_tokens"] == agent.MAX_TOKENS
    assert answer.stop_reason == "max_tokens"


# -- a follow-up -------------------------------------------------------------------------------
def test_a_follow_up_sends_the_earlier_passages_numbered_and_its_marks_renumbered(fake,
                                                                                 searcher):
    earlier = [Turn("How long does the tare keep?",
                    '"Keeps 3 months in the fridge." [1]', "answer", "claude",
                    [{"n": 1, "path": "cooking/ramen.md", "start_line": 14, "end_line": 14,
                      "cited_text": "Keeps 3 months in the fridge."}])]
    fake.push(lambda body: message(text(quote(body, "cooking/ramen.md:14-14",
                                              "3 months in the fridge"))))
    answer = ask("and in the freezer?", db=searcher.target, searcher=searcher,
                 client=fake.client(), history=earlier)
    seen = fake.seen[0]
    assert numbered(seen)[1] == "cooking/ramen.md:14-14"  # the earlier turn's passage first
    old = seen["messages"][1]["content"][0]["text"]
    assert old == '"Keeps 3 months in the fridge." [1]'
    assert answer.outcome == "answer" and answer.citations[0].start_line == 14


# -- streaming and timeouts ------------------------------------------------------------------
def test_a_slow_but_live_stream_never_times_out(fake, searcher):
    """Each gap between two pieces is well under the read timeout, the whole answer well
    over it: the answer comes (the timeout is between events, issue 42)."""
    reply = says("feed twice a day, at 09:00 and 21:00")
    fake.push(lambda body: _in_pieces(reply(body), 12))
    fake.pace()
    stop = threading.Event()

    def slow_model():  # one piece every 0.4 s: ~5 s in all, against a 2 s read timeout
        while not stop.wait(0.4):
            fake.step()

    stepper = threading.Thread(target=slow_model, daemon=True)
    stepper.start()
    client = fake.client().with_options(timeout=anthropic.Timeout(2.0, connect=2.0))
    try:
        answer = run(fake, searcher, client=client, on_text=lambda piece: None)
    finally:
        stop.set()
        fake.release()
    assert answer.outcome == "answer" and answer.streamed


def test_a_stream_gone_quiet_is_an_interrupted_answer_not_retried(fake, searcher):
    fake.push(lambda body: _in_pieces(says("feed twice a day")(body), 4))
    fake.pace()  # the first piece comes, then nothing
    client = fake.client(max_retries=2).with_options(
        timeout=anthropic.Timeout(0.5, connect=2.0))
    out = io.StringIO()
    try:
        with pytest.raises(AnswerError) as err:
            run(fake, searcher, client=client, stream=True, out=out)
    finally:
        fake.release()
    assert str(err.value).startswith("the answer was interrupted: the model server at")
    assert "sent nothing for 0.5 s (BRAINBOT_READ_TIMEOUT sets how long" in str(err.value)
    assert len(fake.bodies) == 1  # never started again from scratch
    assert out.getvalue().endswith(terminal.DRAFT_BROKEN + "\n")


def _in_pieces(reply, pieces: int):
    reply.pieces = pieces
    return reply


# -- the draft on a terminal --------------------------------------------------------------------
class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_draft_that_fits_on_the_screen_is_erased(monkeypatch):
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setattr(terminal.shutil, "get_terminal_size",
                        lambda fallback=None: terminal.os.terminal_size((20, 10)))
    out = _Tty()
    draft = terminal.Draft(out)
    draft.write("Twice a day\nat nine, every day of the week")  # 1 + 1 + 2 rows (wrapped)
    draft.settle()
    label_rows = terminal.screen_rows(terminal.DRAFT_LABEL, 20)
    assert out.getvalue().endswith(f"\r\x1b[{label_rows + 3 - 1}A\x1b[J")


def test_a_draft_taller_than_the_screen_is_closed_by_a_line(monkeypatch):
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setattr(terminal.shutil, "get_terminal_size",
                        lambda fallback=None: terminal.os.terminal_size((20, 4)))
    out = _Tty()
    draft = terminal.Draft(out)
    draft.write("one\ntwo\nthree\nfour\nfive")
    draft.settle()
    assert out.getvalue().endswith("five\n" + terminal.DRAFT_CLOSED + "\n")
    assert "\x1b[J" not in out.getvalue()


def test_screen_rows_counts_wrapped_and_wide_characters():
    assert terminal.screen_rows("abcd", 4) == 1 and terminal.screen_rows("abcde", 4) == 2
    assert terminal.screen_rows("\u65e5\u672c\u8a9e", 4) == 2  # three double-width characters
    assert terminal.screen_rows("a\n\nb", 10) == 3

