"""POST /api/ask with ``Accept: text/event-stream`` (issue 34): the model's text as it
comes, as drafts (issue 42), then the checked text and the whole answer's JSON; the
offline answer as one text event; an error as the last event; a client gone mid-answer
leaves the server answering.

The fake Messages API paces its stream (``FakeAnthropic.pace``): it stops after each text
delta until the test lets it go on, so "the text came before the model finished" is a
condition on the fake, never a time. The daemons are real processes (test_serve.Daemon);
the relay itself (serve/sse.py) is also driven in-process, through its ASGI interface.
"""

from __future__ import annotations

import http.client
import json
import threading

import anyio
import fake_anthropic as fa
import pytest
from conftest import index_copy
from test_serve import Daemon
from wait_kit import wait_until

from brainbot.serve import sse
from brainbot.serve.service import Asks

QUESTION = "How often do I feed the sourdough starter?"
STREAM = {"Accept": "text/event-stream"}


def reply(body):
    """The model's answer, in four deltas: one sentence citing the sourdough result."""
    i = next(i for i, b in enumerate(fa.search_results(body)) if "sourdough" in b["source"])
    said = fa.message(fa.text("Twice a day, at nine and at nine.",
                              [fa.cite_text(body, i, "twice")]))
    said.pieces = 4
    return said


class Events:
    """A streamed reply of the daemon, read one event at a time as it arrives."""

    def __init__(self, d: Daemon, body: dict, headers: dict | None = None) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=120)
        self.conn.request("POST", "/api/ask", body=json.dumps(body).encode(),
                          headers={"Content-Type": "application/json", **STREAM,
                                   **(headers or {})})
        self.resp = self.conn.getresponse()
        self.comments = 0

    def next(self) -> tuple[str, dict] | None:
        """The next event as (name, data); None at the end of the stream."""
        name, data = None, []
        while True:
            line = self.resp.readline().decode()
            if not line:
                return None
            line = line.rstrip("\n")
            if line.startswith(":"):
                self.comments += 1
            elif line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: "):
                data.append(line[len("data: "):])
            elif not line and name:
                return name, json.loads("\n".join(data))

    def rest(self) -> list[tuple[str, dict]]:
        out = []
        while (e := self.next()) is not None:
            out.append(e)
        self.close()
        return out

    def close(self) -> None:
        self.conn.close()


@pytest.fixture(scope="module")
def claude(examples_db, tmp_path_factory, fake):
    db = index_copy(examples_db, tmp_path_factory.mktemp("stream") / "n")
    d = Daemon(db, env={"ANTHROPIC_BASE_URL": fake.url, "ANTHROPIC_API_KEY": "test-key"})
    yield d
    fake.release()
    assert d.stop() in (0, -15)


@pytest.fixture(scope="module")
def offline(examples_db, tmp_path_factory):
    d = Daemon(index_copy(examples_db, tmp_path_factory.mktemp("offline") / "n"))
    yield d
    assert d.stop() in (0, -15)


def test_the_text_comes_before_the_model_has_finished(claude, fake):
    """The first text event is read while the model is still held after its first delta;
    then each delta is one event, and the last event is the answer: the same record as a
    plain ask's, cited and verified."""
    fake.push(reply)
    fake.pace()
    try:
        events = Events(claude, {"question": QUESTION})
        assert events.resp.status == 200
        assert events.resp.getheader("Content-Type").startswith("text/event-stream")
        assert events.resp.getheader("Cache-Control") == "no-cache"
        first = events.next()
        assert first == ("draft", {"text": "Twice a ", "provisional": True})
        assert fake.held == 1
    finally:
        fake.release()
    rest = events.rest()
    assert [name for name, _ in rest] == ["draft", "draft", "draft", "text", "answer"]
    assert "".join(d["text"] for _, d in [first, *rest[:-2]]) == \
        "Twice a day, at nine and at nine."
    answer = rest[-1][1]
    assert rest[-2][1] == {"text": answer["answer"]}  # the checked text replaces the drafts
    fake.push(reply)
    status, plain = claude.json("POST", "/api/ask", {"question": QUESTION})
    assert status == 200 and set(answer) == set(plain)
    for key in ("answer", "outcome", "mode", "citations", "searched", "turn", "model"):
        assert answer[key] == plain[key], key
    assert answer["answer"].startswith("Twice a day") and answer["citations"][0]["verified"]
    assert isinstance(answer["conversation"], str)
    assert answer["conversation"] != plain["conversation"]  # each a new conversation


def test_a_streamed_follow_up_continues_its_conversation(claude, fake):
    """The answer event names the conversation; a follow-up sent with it streams too, and
    the model is sent the earlier turn."""
    def follow(body):
        assert [q for q, _, _ in fa.earlier_turns(body)] == [QUESTION]
        return reply(body)

    fake.push(reply, follow)
    first = Events(claude, {"question": QUESTION}).rest()[-1]
    assert first[0] == "answer" and first[1]["turn"] == 1
    cid = first[1]["conversation"]
    then = Events(claude, {"question": "and how much flour each time?",
                           "conversation": cid}).rest()
    assert then[0][0] == "draft" and then[-1][0] == "answer"
    assert then[-1][1]["conversation"] == cid and then[-1][1]["turn"] == 2


def test_the_offline_answer_is_one_text_event_then_the_answer(offline):
    events = Events(offline, {"question": QUESTION}).rest()
    assert [name for name, _ in events] == ["text", "answer"]
    (_, said), (_, answer) = events
    assert answer["mode"] == "extractive" and answer["citations"]
    assert said["text"] == answer["answer"] and answer["conversation"]
    status, plain = offline.json("POST", "/api/ask", {"question": QUESTION})
    assert status == 200 and set(answer) == set(plain)
    assert {k: v for k, v in answer.items() if k != "conversation"} == \
        {k: v for k, v in plain.items() if k != "conversation"}


def test_an_error_mid_stream_is_the_last_event(claude, fake):
    """The model says a few words and searches; its next call fails in the middle of its
    stream: the client has the words, then one error event with one line."""
    searching = fa.message(fa.text("Let me look that up."),
                           fa.tool_use("search_notes", {"query": "starter feeding"}),
                           stop_reason="tool_use")
    fake.push(searching, fa.Reply(body=fa.message(fa.text("x")).body,
                                  stream_error={"type": "overloaded_error",
                                                "message": "Overloaded"}))
    events = Events(claude, {"question": QUESTION}).rest()
    assert [name for name, _ in events] == ["draft", "draft", "error"]
    error = events[-1][1]["error"]
    assert "is overloaded (overloaded_error in the stream)" in error and "\n" not in error
    assert claude.json("POST", "/api/search", {"query": "sourdough", "k": 1})[0] == 200


def test_a_client_gone_mid_answer_leaves_the_server_answering(claude, fake):
    """The client reads one text event and hangs up while the model is held: searches
    still answer; once the model goes on, the ask runs to its end (no ask left in
    flight) and its turn is saved whole."""
    before = claude.json("GET", "/api/status")[1]["conversations"]
    fake.push(reply)
    fake.pace()
    try:
        events = Events(claude, {"question": QUESTION})
        assert events.next()[0] == "draft"
        events.close()
        status, found = claude.json("POST", "/api/search", {"query": "sourdough", "k": 2})
        assert status == 200 and found["hits"] and fake.held == 1
    finally:
        fake.release()
    wait_until(lambda: claude.json("GET", "/api/status")[1]["asks"] == {
        "answering": 0, "waiting": 0}, "the ask runs to its end")
    assert claude.json("GET", "/api/status")[1]["conversations"] == before + 1
    assert claude.json("POST", "/api/search", {"query": "proofing", "k": 1})[0] == 200
    assert "Traceback" not in claude.output()


def test_what_the_plain_ask_refuses_a_stream_refuses_the_same_way(claude):
    """Bad input, a foreign Origin and a body over the limit are the plain replies, not
    a stream."""
    for body, headers, status in (({"question": ""}, {}, 400),
                                  ({"question": QUESTION}, {"Origin": "http://evil.example"},
                                   403),
                                  ({"question": "x" * 70_000}, {}, 413)):
        code, got, raw = claude.request("POST", "/api/ask", body, {**STREAM, **headers})
        assert code == status and "error" in json.loads(raw), raw
        assert got["content-type"].startswith("application/json")


# -- the relay in-process (serve/sse.py) -------------------------------------------------
def run_stream(stream, gone: anyio.Event | None = None, until=None) -> list[dict]:
    """``stream`` called as uvicorn would; the messages it sent. ``gone`` set: the client
    disconnects; ``until(sent)``: awaited beside it (a test's side of the conversation)."""
    sent: list[dict] = []

    async def receive():
        await (gone.wait() if gone else anyio.sleep_forever())
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    async def main():
        with anyio.fail_after(120):  # a hang guard, not a measurement
            async with anyio.create_task_group() as tg:
                if until:
                    tg.start_soon(until, sent)
                await stream({"type": "http"}, receive, send)

    anyio.run(main)
    return sent


def bodies(sent: list[dict]) -> list[bytes]:
    return [m["body"] for m in sent if m["type"] == "http.response.body" and m["body"]]


def test_heartbeats_while_the_answer_is_quiet():
    """A comment line goes out while the ask says nothing; then its events."""
    quiet = threading.Event()

    def ask(question, on_text):
        quiet.wait(120)
        return {"answer": f"about {question}"}

    async def wait_for_heartbeat(sent):
        while sse.HEARTBEAT not in bodies(sent):
            await anyio.sleep(0.01)
        quiet.set()

    stream = sse.AnswerStream(Asks(), ask, ("bread",), str, heartbeat_s=0.05)
    sent = run_stream(stream, until=wait_for_heartbeat)
    events = [b for b in bodies(sent) if b != sse.HEARTBEAT]
    assert events == [sse.event("text", {"text": "about bread"}),
                      sse.event("answer", {"answer": "about bread"})]
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}


def test_a_client_gone_mid_answer_never_blocks_the_ask():
    """The client hangs up after the first piece; the ask goes on handing pieces over
    (none of them waits), runs to its end, and leaves no ask in flight."""
    asks, said, finished = Asks(), threading.Event(), []
    gone = anyio.Event()

    def ask(on_text):
        on_text("first ")
        said.wait(120)
        for i in range(10_000):
            on_text(f"{i} ")
        finished.append(True)
        return {"answer": "whole"}

    async def hang_up(sent):
        while sse.event("draft", {"text": "first ", "provisional": True}) not in bodies(sent):
            await anyio.sleep(0.01)
        gone.set()
        await anyio.sleep(0)
        said.set()

    run_stream(sse.AnswerStream(asks, ask, (), str), gone, hang_up)
    assert finished == [True] and asks.in_flight == 0


def test_an_ask_whose_client_went_while_it_waited_for_a_worker_never_runs():
    """One worker, busy; a streamed ask waits for it and its client hangs up: the ask
    leaves the queue at once and never runs, even once the worker is free."""
    asks, busy, ran = Asks(workers=1, queue=1), threading.Event(), []
    gone = anyio.Event()

    async def until(condition):
        while not condition():
            await anyio.sleep(0.01)

    async def main():
        with anyio.fail_after(120):  # a hang guard, not a measurement
            async with anyio.create_task_group() as tg:
                tg.start_soon(asks.run, busy.wait, 120)
                await until(lambda: asks.in_flight == 1)
                stream = sse.AnswerStream(asks, lambda on_text: ran.append(1), (), str)
                tg.start_soon(run_stream_here, stream, gone)
                await until(lambda: asks.in_flight == 2)
                gone.set()
                await until(lambda: asks.in_flight == 1)
                busy.set()

    anyio.run(main)
    assert not ran and asks.in_flight == 0


async def run_stream_here(stream, gone: anyio.Event) -> None:
    async def receive():
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message):
        pass

    await stream({"type": "http"}, receive, send)


def test_a_full_queue_is_a_503_before_the_stream():
    asks = Asks(workers=1, queue=0)
    asks.admit()  # one ask in flight: no room for another
    called = []
    sent = run_stream(sse.AnswerStream(asks, lambda on_text: called.append(1), (), str))
    assert sent[0]["status"] == 503 and not called and asks.in_flight == 1
    assert "ask again shortly" in json.loads(bodies(sent)[0])["error"]


def test_an_error_is_the_last_event_with_one_line():
    def ask(on_text):
        on_text("Twice ")
        raise ValueError("boom")

    sent = run_stream(sse.AnswerStream(Asks(), ask, (), lambda exc: f"failed: {exc}"))
    assert bodies(sent) == [sse.event("draft", {"text": "Twice ", "provisional": True}),
                            sse.event("error", {"error": "failed: boom"})]


@pytest.mark.parametrize("accept, wanted", [
    ("text/event-stream", True), ("application/json, text/event-stream", True),
    ("Text/Event-Stream; q=0.5", True), ("text/event-stream;q=0", False),
    ("application/json", False), ("", False), ("*/*", False)])
def test_a_stream_is_what_accept_asks_for(accept, wanted):
    assert sse.wanted(accept) is wanted
