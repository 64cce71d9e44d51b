"""Server-Sent Events: an answer of ``POST /api/ask`` streamed as it comes, when the
request says ``Accept: text/event-stream`` (issue 34).

The ask runs in an ask's thread as a plain one does (serve/service.py: ``Asks``); the
thread hands each piece of the model's text to the event loop (``Relay.text``), which
writes it to the client at once, as a draft: what the model said as it said it, before
brainbot checked a word of it (issue 42). Then comes the checked answer: its text in one
``text`` event, and the whole answer:

    event: draft
    data: {"text": "Twice a ", "provisional": true}

    event: text
    data: {"text": "Twice a day. [1]"}     (the checked answer's text: it replaces the drafts)

    event: answer
    data: {...}                      (the whole answer: exactly the plain response's JSON)

So a client that shows ``text`` events shows only checked text, and one that shows drafts
knows them by their name and replaces them when ``text`` comes (the page does). An answer
that did not stream (offline, a refusal before any model call) has no drafts. A failure
once the stream has begun is a last ``event: error`` whose data is ``{"error": "<one
line>"}``: any drafts before it were not an answer; before the stream (a full queue, bad
input) the reply is the plain one, a 503 or a 4xx. While no event comes for HEARTBEAT_S, a
comment line keeps a proxy from closing the connection as idle.

A client that goes away mid-answer stops the writing, not the answer: the thread never
waits on the relay (an unbounded buffer, no reader awaited), runs to its end and saves its
turn whole, as a plain ask does, and the response ends when its thread does. An ask still
waiting for a worker when its client goes is never run.

This module knows nothing of routes or of the index: http.py decides when a request
streams and what an ask is.
"""

from __future__ import annotations

import json
import math
import time

from brainbot.errors import ServerBusyError

# A comment line after this long without an event. nginx closes a proxied connection idle
# for 60 s (proxy_read_timeout); an answer can be quiet longer than that (a 429's
# retry-after, a tool call's search, a queue of asks ahead of it).
HEARTBEAT_S = 15.0
HEARTBEAT = b": keep-alive\n\n"
HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"),
           (b"cache-control", b"no-cache"),
           (b"x-accel-buffering", b"no")]  # nginx: pass each event on, do not buffer


def wanted(accept: str) -> bool:
    """Whether an Accept header asks for an event stream (not with q=0)."""
    for item in accept.split(","):
        kind, *params = (p.strip() for p in item.split(";"))
        if kind.lower() != "text/event-stream":
            continue
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    return float(value) > 0
                except ValueError:
                    return False
        return True
    return False


def event(name: str, data: dict) -> bytes:
    """One event. json.dumps writes no newline, so ``data`` is one data line."""
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


class Relay:
    """The ask thread's side of the stream: each piece of text goes into the event loop's
    buffer without waiting for anyone to read it; once the client is gone (the buffer
    closed) the pieces are dropped and the answer goes on."""

    def __init__(self, out) -> None:
        self.out = out
        self.texts = 0  # pieces handed on

    def text(self, piece: str) -> None:
        """Called in the ask's thread (``on_text``)."""
        import anyio
        import anyio.from_thread

        self.texts += 1
        try:
            anyio.from_thread.run_sync(self.out.send_nowait,
                                       ("draft", {"text": piece, "provisional": True}))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, RuntimeError):
            pass  # the client went away, or the server is stopping: the answer goes on


class AnswerStream:
    """The ASGI response of one streamed ask: ``fn(*args, on_text)`` in an ask's thread
    of ``asks``, its text relayed as events, then its reply (a dict) as the answer event,
    or ``describe(exc)`` as the error event."""

    def __init__(self, asks, fn, args: tuple, describe, heartbeat_s: float = HEARTBEAT_S):
        self.asks, self.fn, self.args, self.describe = asks, fn, args, describe
        self.heartbeat_s = heartbeat_s

    async def __call__(self, scope, receive, send) -> None:
        try:
            self.asks.admit()  # before the first byte: a full queue is still a 503
        except ServerBusyError as exc:
            from starlette.responses import JSONResponse

            await JSONResponse({"error": str(exc)}, status_code=503)(scope, receive, send)
            return
        try:
            await self.stream(receive, send)
        finally:
            self.asks.leave()

    async def stream(self, receive, send) -> None:
        import anyio

        out, inbox = anyio.create_memory_object_stream(math.inf)
        writer = Writer(send)
        await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self.answer, out)
            tasks.start_soon(heartbeats, writer, self.heartbeat_s)
            tasks.start_soon(gone, receive, tasks.cancel_scope)
            await forward(inbox, writer)  # until the answer's last event
            tasks.cancel_scope.cancel()  # the heartbeats and the watch for a disconnect
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def answer(self, out) -> None:
        """Run the ask; put its last events after its text, and close ``out``."""
        import anyio

        relay = Relay(out)
        try:
            try:
                reply = await self.asks.work(self.fn, *self.args, relay.text)
            except Exception as exc:  # noqa: BLE001 - any failure is the stream's last event
                last = [("error", {"error": self.describe(exc)})]
            else:
                last = [("text", {"text": reply.get("answer") or ""}), ("answer", reply)]
            for item in last:
                out.send_nowait(item)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the client is gone; its turn was saved all the same
        finally:
            out.close()


class Writer:
    """The response body's writes, one at a time (events and heartbeats come from two
    tasks), and when the last one was."""

    def __init__(self, send) -> None:
        import anyio

        self.send, self.lock, self.last = send, anyio.Lock(), time.monotonic()

    async def write(self, data: bytes) -> None:
        async with self.lock:
            await self.send({"type": "http.response.body", "body": data, "more_body": True})
            self.last = time.monotonic()


async def forward(inbox, writer: Writer) -> None:
    """Each event as it comes, until the answer closes the stream."""
    async with inbox:
        async for name, data in inbox:
            await writer.write(event(name, data))


async def heartbeats(writer: Writer, every: float) -> None:
    """A comment line whenever nothing was written for ``every`` seconds."""
    import anyio

    while True:
        await anyio.sleep(max(0.0, writer.last + every - time.monotonic()))
        if time.monotonic() - writer.last >= every:
            await writer.write(HEARTBEAT)


async def gone(receive, scope) -> None:
    """Cancel ``scope`` once the client disconnects (the request body was read already,
    so the next message is the disconnect). uvicorn's send drops writes to a closed
    connection without a word, so this is how the stream learns of it."""
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()
