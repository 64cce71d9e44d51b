"""A local stand-in for the Anthropic Messages API, for tests that must not touch the network.

``FakeAnthropic`` is an ``http.server`` on 127.0.0.1 (port 0) in a thread. It answers
``POST /v1/messages`` from a script of replies, as JSON or, when the request says
``"stream": true``, as server-sent events in the API's order (message_start,
content_block_start / *_delta / content_block_stop, message_delta, message_stop), with
citations_delta for cited text and input_json_delta for tool input. It records every
request's headers and body. The real ``anthropic.Anthropic`` client is pointed at it, so
what is tested is the bytes brainbot sends and what it does with the bytes it gets.

A reply is a ``Reply``, or a callable taking the request body and returning one: that is
how a scripted model cites the n-th search result it was sent, as the real API does, and
reads the earlier turns of a conversation the request carries (``earlier_turns``,
``questions``) to answer a follow-up.
``hold()`` keeps every request waiting, as a model still thinking, until ``release()``;
``held`` counts the requests waiting (a test waits for that condition, not for a time).
``pace()`` lets a streamed reply start but stops it after each text delta, as a model
between two words, until ``step()`` lets the next one out (or ``release()`` the rest):
a test sees the text that came so far while the model is still held. ``Reply.pieces``
says how many text deltas each text block streams in.
``FakeAnthropic(local=True)`` behaves as Ollama (>= 0.14) and llama.cpp's llama-server do
at /v1/messages (issue 42): search_result blocks are dropped without a word, in the user
turn and inside a tool_result, before the script sees the request (``seen``: what reached
the model); replies never carry citations; ``tool_choice`` is ignored (the script decides);
a script may stop with tool_use and ``stop_reason="max_tokens"``. Its scripted answers
stand in for what a 270M base model cannot produce on demand: ``quote(body, prefix, words)``
marks words of the numbered passage from a note the way brainbot asks a model to.
``/v1/messages/count_tokens`` answers in both modes with a count of the text that reaches
the model (four characters a token), so a probe can tell whether search results arrive.
What this fake does not do: check the model name, or validate the request beyond parsing
it as JSON.
"""

from __future__ import annotations

import json
import os
import re
import threading
import uuid
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@dataclass
class Reply:
    status: int = 200
    body: dict | None = None  # a message (200) or an error object
    raw: bytes | None = None  # sent as is, for malformed responses
    headers: dict = field(default_factory=dict)
    content_type: str = "application/json"
    stream_error: dict | None = None  # an SSE "error" event sent after message_start
    error_after_text: bool = False  # the error event comes after the first text delta
    pieces: int = 2  # text deltas a streamed text block is cut into


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict
    raw: bytes
    body: dict | None


# -- building replies ----------------------------------------------------------------------
def message(*content: dict, stop_reason: str = "end_turn", input_tokens: int = 100,
            output_tokens: int = 20, model: str = "claude-test") -> Reply:
    return Reply(body={"id": f"msg_{uuid.uuid4().hex[:12]}", "type": "message",
                       "role": "assistant", "model": model, "content": list(content),
                       "stop_reason": stop_reason, "stop_sequence": None,
                       "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}})


def text(value: str, citations: list[dict] | None = None) -> dict:
    block = {"type": "text", "text": value}
    if citations is not None:
        block["citations"] = citations
    return block


def tool_use(name: str, args: dict, id: str | None = None) -> dict:
    return {"type": "tool_use", "id": id or f"toolu_{uuid.uuid4().hex[:12]}", "name": name,
            "input": args}


def error(status: int, kind: str, msg: str, retry_after: str | None = "0.01") -> Reply:
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    return Reply(status=status, body={"type": "error", "error": {"type": kind, "message": msg}},
                 headers=headers)


def search_results(body: dict) -> list[dict]:
    """Every search_result block of a request, in the order the API numbers them."""
    found = []
    for msg in body.get("messages", []):
        content = msg.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") == "search_result":
                found.append(block)
            elif block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                found.extend(b for b in block["content"] if b.get("type") == "search_result")
    return found


def cite(body: dict, index: int, start: int = 0, end: int = 1) -> dict:
    """A search_result_location citation of result ``index``, as the API would build it."""
    result = search_results(body)[index]
    return {"type": "search_result_location", "source": result["source"],
            "title": result.get("title"), "search_result_index": index,
            "start_block_index": start, "end_block_index": end,
            "cited_text": "".join(b["text"] for b in result["content"][start:end])}


def cite_text(body: dict, index: int, needle: str) -> dict:
    """A citation of the blocks of result ``index`` that hold ``needle``: the narrowest
    range whose concatenated text contains it, as a model citing one fact would."""
    blocks = [b["text"] for b in search_results(body)[index]["content"]]
    for width in range(1, len(blocks) + 1):
        for start in range(len(blocks) - width + 1):
            if needle.lower() in "".join(blocks[start:start + width]).lower():
                return cite(body, index, start, start + width)
    raise AssertionError(f"{needle!r} is in no block of result {index}")


def questions(body: dict) -> list[str]:
    """The question of each user turn that asks one ("Question: ..."), oldest first: the
    earlier turns of a conversation, then the question asked now."""
    found = []
    for msg in body.get("messages", []):
        if msg.get("role") != "user" or not isinstance(msg.get("content"), list):
            continue
        for block in msg["content"]:
            text = block.get("text", "") if block.get("type") == "text" else ""
            if text.startswith("Question: "):
                found.append(text[len("Question: "):])
    return found


def earlier_turns(body: dict) -> list[tuple[str, str, list[str]]]:
    """(question, answer, sources of the search results sent with it) of each earlier turn
    of the conversation a request carries back, oldest first."""
    turns, messages = [], body.get("messages", [])
    for ask, reply in zip(messages, messages[1:]):
        content = ask.get("content")
        if ask.get("role") != "user" or reply.get("role") != "assistant" or not isinstance(
                content, list):
            continue
        asked = [b["text"][len("Question: "):] for b in content
                 if b.get("type") == "text" and b.get("text", "").startswith("Question: ")]
        if asked:
            answer = "".join(b.get("text", "") for b in reply["content"] if b.get("type") == "text")
            sources = [b["source"] for b in content if b.get("type") == "search_result"]
            turns.append((asked[0], answer, sources))
    return turns


def tool_results(body: dict) -> list[dict]:
    """The tool_result blocks of the request's last user turn."""
    last = body["messages"][-1]
    return [b for b in last.get("content", []) if isinstance(b, dict)
            and b.get("type") == "tool_result"]


# -- the server ------------------------------------------------------------------------------
class FakeAnthropic:
    def __init__(self, local: bool = False):
        self.local = local  # behave as Ollama / llama-server (see the module's docstring)
        self.seen: list[dict] = []  # each messages request as it reached the model
        self.requests: list[Recorded] = []
        self.script: deque = deque()
        self.lock = threading.Lock()
        self.gate = threading.Event()  # set: replies go out; clear: they wait (hold())
        self.gate.set()
        self.held = 0  # requests waiting at the gate now (or between deltas, paced)
        self.pacing = threading.Condition()
        self.paced, self.steps = False, 0  # pace(): deltas wait for step()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,),
                                       daemon=True)

    def __enter__(self) -> FakeAnthropic:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
        self.server.shutdown()
        self.server.server_close()

    def hold(self) -> None:
        """Keep every request from now on waiting, until release()."""
        self.gate.clear()

    def release(self) -> None:
        self.gate.set()
        with self.pacing:
            self.paced, self.steps = False, 0
            self.pacing.notify_all()

    def pace(self) -> None:
        """From now on a streamed reply stops after each text delta until step()."""
        with self.pacing:
            self.paced, self.steps = True, 0

    def step(self) -> None:
        """Let one paced reply go on to its next text delta."""
        with self.pacing:
            self.steps += 1
            self.pacing.notify_all()

    @contextmanager
    def _paced(self, event: dict):
        """Around writing one streamed event: paced, a text delta counts as held from
        before it is written (a client that has read it sees the model held) until
        step() or release()."""
        paced = self.paced and event.get("delta", {}).get("type") == "text_delta"
        if paced:
            with self.lock:
                self.held += 1
        try:
            yield
            if paced:
                with self.pacing:
                    self.pacing.wait_for(lambda: self.steps or not self.paced)
                    if self.paced:
                        self.steps -= 1
        finally:
            if paced:
                with self.lock:
                    self.held -= 1

    def wait_held(self, n: int, timeout: float = 120.0) -> None:
        """Wait until ``n`` requests are waiting at the gate."""
        import time

        deadline = time.monotonic() + timeout
        while self.held < n:
            assert time.monotonic() < deadline, f"{self.held} of {n} requests held"
            time.sleep(0.02)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def push(self, *replies) -> None:
        self.script.extend(replies)

    def client(self, max_retries: int = 0, api_key: str | None = "test-key"):
        import anthropic

        return anthropic.Anthropic(base_url=self.url, api_key=api_key,
                                   max_retries=max_retries, timeout=10.0)

    @property
    def bodies(self) -> list[dict]:
        return [r.body for r in self.requests if r.path.startswith("/v1/messages")
                and not r.path.startswith("/v1/messages/count_tokens")]

    def _next(self, body: dict | None) -> Reply:
        with self.lock:
            item = self.script.popleft() if self.script else None
        if item is None:
            return Reply(status=500, headers={"x-should-retry": "false"},
                         body={"type": "error", "error": {"type": "api_error",
                                                          "message": "fake: script is empty"}})
        return item(body) if callable(item) else item


def _handler(fake: FakeAnthropic):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # keep pytest output clean
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            with fake.lock:
                fake.requests.append(Recorded("POST", self.path, {
                    k.lower(): v for k, v in self.headers.items()}, raw, body))
            if not self.path.startswith("/v1/messages"):
                return self._send(Reply(status=404, body={"type": "error", "error": {
                    "type": "not_found_error", "message": self.path}}))
            if fake.local and isinstance(body, dict):
                body = without_search_results(body)
            if self.path.startswith("/v1/messages/count_tokens"):
                return self._send(Reply(body={"input_tokens": count_tokens(body or {})}))
            with fake.lock:
                fake.seen.append(body)
            if not fake.gate.is_set():
                with fake.lock:
                    fake.held += 1
                fake.gate.wait()
                with fake.lock:
                    fake.held -= 1
            reply = fake._next(body)
            if fake.local and reply.body and reply.status == 200:
                reply = _uncited(reply)
            if reply.status == 200 and reply.raw is None and (body or {}).get("stream"):
                return self._stream(reply)
            self._send(reply)

        def _send(self, reply: Reply) -> None:
            data = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
            self.send_response(reply.status)
            self.send_header("content-type", reply.content_type)
            self.send_header("content-length", str(len(data)))
            self.send_header("request-id", f"req_{uuid.uuid4().hex[:12]}")
            for k, v in reply.headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, reply: Reply) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()
            for event in sse_events(reply.body, reply.stream_error, reply.pieces,
                                    reply.error_after_text):
                with fake._paced(event):
                    self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
                                     .encode())
                    self.wfile.flush()

    return Handler


def sse_events(msg: dict, stream_error: dict | None = None, pieces: int = 2,
               error_after_text: bool = False) -> list[dict]:
    """A message as the API streams it, each text block in ``pieces`` deltas; with
    ``stream_error``, an error event after message_start (or ``error_after_text``: after
    the first text delta) ends it."""
    start = {k: v for k, v in msg.items() if k not in ("content", "stop_reason")}
    start.update(content=[], stop_reason=None,
                 usage={"input_tokens": msg["usage"]["input_tokens"], "output_tokens": 1})
    events = [{"type": "message_start", "message": start}, {"type": "ping"}]
    if stream_error is not None:
        if error_after_text:
            first = next(i for i, e in enumerate(_content_events(msg, pieces))
                         if e.get("delta", {}).get("type") == "text_delta")
            events += _content_events(msg, pieces)[:first + 1]
        return events + [{"type": "error", "error": stream_error}]
    events += _content_events(msg, pieces)
    events.append({"type": "message_delta",
                   "delta": {"stop_reason": msg["stop_reason"], "stop_sequence": None},
                   "usage": {"output_tokens": msg["usage"]["output_tokens"]}})
    events.append({"type": "message_stop"})
    return events


def _content_events(msg: dict, pieces: int) -> list[dict]:
    events = []
    for i, block in enumerate(msg["content"]):
        if block["type"] == "text":
            events.append({"type": "content_block_start", "index": i,
                           "content_block": {"type": "text", "text": ""}})
            for c in block.get("citations") or []:
                events.append({"type": "content_block_delta", "index": i,
                               "delta": {"type": "citations_delta", "citation": c}})
            value = block["text"]
            cuts = [len(value) * i // pieces for i in range(pieces + 1)]
            for piece in (value[a:b] for a, b in zip(cuts, cuts[1:])):
                if piece:
                    events.append({"type": "content_block_delta", "index": i,
                                   "delta": {"type": "text_delta", "text": piece}})
        elif block["type"] == "tool_use":
            events.append({"type": "content_block_start", "index": i, "content_block": {
                "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}})
            payload = json.dumps(block["input"])
            for piece in (payload[: len(payload) // 2], payload[len(payload) // 2:]):
                events.append({"type": "content_block_delta", "index": i,
                               "delta": {"type": "input_json_delta", "partial_json": piece}})
        events.append({"type": "content_block_stop", "index": i})
    return events


def no_credentials(monkeypatch, home: Path) -> None:
    """Leave the SDK nothing to authenticate with: no key or token in the environment, no
    profile or federation settings, and an empty home for its config lookup (the
    brainbot export cache stays where it was)."""
    for name in [n for n in os.environ if n.startswith("ANTHROPIC_")]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME",
                       os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache"))
    monkeypatch.setenv("HOME", str(home))


# -- as a local server (FakeAnthropic(local=True)) --------------------------------------------
def without_search_results(body: dict) -> dict:
    """The request as Ollama and llama-server pass it to the model: search_result blocks
    gone, in user turns and inside tool results."""
    def keep(blocks):
        return [b for b in blocks if not (isinstance(b, dict) and b.get("type") == "search_result")]

    out = json.loads(json.dumps(body))
    for msg in out.get("messages", []):
        if isinstance(msg.get("content"), list):
            msg["content"] = keep(msg["content"])
            for block in msg["content"]:
                if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                    block["content"] = keep(block["content"])
    return out


def _uncited(reply: Reply) -> Reply:
    body = json.loads(json.dumps(reply.body))
    for block in body.get("content", []) if isinstance(body.get("content"), list) else []:
        if isinstance(block, dict):
            block.pop("citations", None)
    return Reply(reply.status, body, reply.raw, reply.headers, reply.content_type,
                 reply.stream_error, reply.error_after_text, reply.pieces)


def count_tokens(body: dict) -> int:
    """Four characters a token, of every string the request carries to the model."""
    def chars(value) -> int:
        if isinstance(value, str):
            return len(value)
        if isinstance(value, dict):
            return sum(chars(v) for k, v in value.items() if k not in ("type", "model"))
        if isinstance(value, list):
            return sum(chars(v) for v in value)
        return 0

    return 1 + chars({k: body.get(k) for k in ("system", "messages", "tools")}) // 4


PASSAGE_HEAD = re.compile(r"^\[(\d+)\] (\S.*?:\d+-\d+)", re.M)


def passages(body: dict) -> dict[int, tuple[str, str]]:
    """The numbered passages a text-citation request carries: number -> (source, text)."""
    found = {}
    for msg in body.get("messages", []):
        content = msg.get("content")
        for block in content if isinstance(content, list) else []:
            parts = [block] + (block.get("content") if isinstance(block.get("content"), list)
                               else [])
            for part in parts:
                said = part.get("text", "") if isinstance(part, dict) else ""
                heads = list(PASSAGE_HEAD.finditer(said))
                for head, after in zip(heads, heads[1:] + [None]):
                    end = after.start() if after else len(said)
                    found[int(head.group(1))] = (head.group(2), said[head.end():end])
    return found


def numbered(body: dict) -> dict[int, str]:
    """The numbered passages a text-citation request carries: number -> source."""
    return {n: source for n, (source, _) in passages(body).items()}


def number_of(body: dict, prefix: str, words: str = "") -> int:
    """The number of the first passage whose source starts with ``prefix`` and which holds
    ``words`` (any case), else of the first from ``prefix``."""
    found = sorted((n, source, said) for n, (source, said) in passages(body).items()
                   if source.startswith(prefix))
    if not found:
        raise AssertionError(f"no numbered passage from {prefix} in the request")
    holding = [n for n, _, said in found if words and words.lower() in said.lower()]
    return holding[0] if holding else found[0][0]


def quote(body: dict, prefix: str, words: str) -> str:
    """``"words" [n]``, n the passage from ``prefix`` that holds them: a correct quote when
    one does, a wrong one (marking the first passage from ``prefix``) when none does."""
    return f'"{words}" [{number_of(body, prefix, words)}]'
