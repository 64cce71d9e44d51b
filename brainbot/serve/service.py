"""The index side of a long-running server (`brainbot mcp`, `brainbot serve`): one
Searcher, the lock that guards it, and the bodies of the tools and routes.

The Searcher (one SQLite connection, the loaded arrays, their caches) is used by one call
at a time, under ``IndexLock``. Taking it first lets the store pick up a file that was
rebuilt or replaced at the path (``store.refresh()``), so every body answers from the
index as it now is (issue 32, M6); a call that loaded a new generation then starts a
re-warm (serve/warmup.py). A search holds it for milliseconds.

An ask is different: most of its time is the Messages API's (seconds; minutes with
retries). It never holds the lock across a model call: ``ask(..., lock=IndexLock)``
takes it for each piece of index work (its first search, each tool call, the check of
its citations), so searches, `get`, `status` and `related` go on while any number of
asks wait on the model (issue 32, M4). Asks run in threads of their own (``Asks``), never
in the thread pool the other calls share (anyio's, 40 threads), so waiting asks cannot
starve them either; at most ASK_WORKERS run at once and ASK_QUEUE more wait, and one more
is refused at once (ServerBusyError: a 503, a tool error) rather than queued for minutes.
A streamed ask (serve/sse.py) fits the same shape: its thread hands the model's text on
as it comes (``answer(..., on_text=...)``), outside the lock, and takes the lock as above.

What the MCP tools and the HTTP routes add (argument schemas, status codes, the
handshake) lives in serve/mcp.py and serve/http.py; text that is not UTF-8 is refused
here, where both come in (issue 32, M10).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from brainbot.errors import BrainbotError, NotUTF8Error, ServerBusyError

log = logging.getLogger("brainbot.serve.service")

# Asks answered at once: each mostly waits on the Messages API, which rate-limits a key
# long before this many, and a personal daemon has one user, a page and a few agents.
ASK_WORKERS = 4
# Asks waiting for a worker; past this many more an ask is refused (503) at once: at a
# few seconds to a minute an answer, the last one queued would wait several minutes.
ASK_QUEUE = 16


class IndexLock:
    """The Searcher's lock for one piece of index work, as a reusable context manager:
    on entry the store picks up what changed at its path, on exit a new generation is
    re-warmed. Not re-entrant: a body holding it calls no other body."""

    def __init__(self, service: Service) -> None:
        self.service = service

    def acquire(self, timeout: float = -1) -> bool:
        """Take the lock (False when ``timeout`` passed first) and refresh the store."""
        if not self.service.lock.acquire(timeout=timeout):
            return False
        try:
            if not self.service.closed:
                self.service.searcher.store.refresh()
        except BaseException:
            self.service.lock.release()
            raise
        return True

    def release(self) -> None:
        try:
            if not self.service.closed:
                self.service.rewarm.check()
        finally:
            self.service.lock.release()

    def __enter__(self) -> IndexLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


class Asks:
    """Where a server's asks run: threads of their own, ASK_WORKERS at once, ASK_QUEUE
    more waiting, and ServerBusyError beyond. ``run`` is awaited on the server's event
    loop (the count of asks in flight is only touched there)."""

    def __init__(self, workers: int = ASK_WORKERS, queue: int = ASK_QUEUE) -> None:
        import anyio

        self.workers, self.queue = workers, queue
        self.limiter = anyio.CapacityLimiter(workers)  # bound to the loop on first use
        self.in_flight = 0

    async def run(self, fn, *args):
        """``fn(*args)`` in an ask's thread, once one is free."""
        self.admit()
        try:
            return await self.work(fn, *args)
        finally:
            self.leave()

    def admit(self) -> None:
        """Count one more ask in flight, or ServerBusyError when ASK_QUEUE already wait;
        each admit is paired with a leave(). A streamed ask is admitted before its first
        byte, so that a full queue is still a 503 (serve/sse.py)."""
        if self.in_flight >= self.workers + self.queue:
            raise ServerBusyError(f"this server is answering {self.workers} questions and "
                                  f"{self.queue} more are waiting; ask again shortly")
        self.in_flight += 1

    def leave(self) -> None:
        self.in_flight -= 1

    async def work(self, fn, *args):
        """``fn(*args)`` of an admitted ask in an ask's thread, once one is free. Cancelled
        while it waits for one, it never runs; once running, it runs to its end (anyio
        waits for the thread), so a turn is saved whole or not at all."""
        import functools

        import anyio.to_thread

        return await anyio.to_thread.run_sync(functools.partial(fn, *args),
                                              limiter=self.limiter)

    def state(self) -> dict[str, int]:
        """How many asks are being answered and how many wait for a worker."""
        running = min(self.in_flight, self.workers)
        return {"answering": running, "waiting": self.in_flight - running}


class Service:
    """The index side of the server: one Searcher, used under one lock."""

    def __init__(self, db, embedder=None) -> None:
        from brainbot.ask.conversation import Unsaved
        from brainbot.search.searcher import Searcher

        from .warmup import Rewarm

        self.db = db
        self.unsaved = Unsaved("until this server stops")  # turns it could not save
        self.lock = threading.Lock()
        self.closed = False
        self.searcher = Searcher(db, embedder=embedder)
        self.index_lock = IndexLock(self)
        self.asks = Asks()
        self.watching: tuple | None = None  # (Watcher, its thread) with --watch
        self.rewarm = Rewarm(self)

    def warm(self) -> None:
        """Load the vectors, the ONNX session, the common terms' postings and the int8
        copy where it pays before the first call (serve/warmup.py)."""
        from .warmup import prepare

        try:
            with self.lock:
                self.searcher.search("warm up", 1)
                loaded = prepare(self.searcher.store)
                self.rewarm.warmed()
            log.debug("warm-up: %s", loaded)
        except BrainbotError as exc:  # an empty index, say: the calls will say so
            log.warning("warm-up: %s", exc)

    def locked(self, fn, *args, **kwargs):
        """``fn`` under the index lock (the store refreshed first, a re-warm after)."""
        with self.index_lock:
            return fn(*args, **kwargs)

    def close(self) -> None:
        """Close the index; a re-warm in flight stops at its next hold of the lock."""
        with self.lock:
            self.closed = True
            self.searcher.close()

    # -- the bodies, each called under the index lock (but ask) ---------------------------
    def search(self, query, k, mode, path, tag, since, before, linked_to) -> dict[str, Any]:
        hits = self.hits(query, k, mode, path, tag, since, before, linked_to)
        result = {"query": query, "mode": mode, "hits": [h.to_dict() for h in hits]}
        return result if mode == "bm25" else self.noted(result)

    def hits(self, query, k, mode, path, tag, since, before, linked_to) -> list:
        """The Hits themselves (serve renders the CLI's text from them)."""
        from brainbot.notes.vault import parse_when

        for value, what in ((query, "the query"), (path, "path"), (tag, "tag"),
                            (since, "since"), (before, "before"), (linked_to, "linked_to")):
            if value is not None:
                NotUTF8Error.check(value, what)
        return self.searcher.search(query, k, mode=mode, path_glob=path or None,
                                    tags=[tag] if tag else None,
                                    since=parse_when(since) if since else None,
                                    before=parse_when(before) if before else None,
                                    linked_to=linked_to or None)

    def get(self, ref, count) -> dict[str, Any]:
        from brainbot.index.links import backlinks_of
        from brainbot.index.reading import get_lines

        NotUTF8Error.check(ref, "the note reference")
        store = self.searcher.store
        reading = get_lines(store, ref, count)
        text = "\n".join(f"{n:>6}  {line}" for n, line in reading.lines)
        return {"ref": ref, "path": reading.path, "root": reading.root,
                "stale": reading.stale,
                "lines": [{"line": n, "text": t} for n, t in reading.lines], "text": text,
                "backlinks": backlinks_of(store, ref)}

    def resolve(self, source, kind, target) -> dict[str, Any]:
        """{"root", "path"} of the note a link in ``source`` names (the page's note links)."""
        from brainbot.index.links import resolve_link

        NotUTF8Error.check(source, "the note")
        NotUTF8Error.check(target, "the link")
        return resolve_link(self.searcher.store, source, kind, target)

    def related(self, note, k, unlinked) -> dict[str, Any]:
        from brainbot.search.related import related

        NotUTF8Error.check(note, "the note")
        report = related(self.searcher.store, note, k, unlinked=unlinked).to_dict()
        return self.noted(report, "related notes")

    def status(self) -> dict[str, Any]:
        from brainbot.doctor import status

        info = status(self.db, store=self.searcher.store)
        info["asks"] = self.asks.state()
        if self.watching:
            watcher, thread = self.watching
            info["watch"] = {"running": thread.is_alive(), **watcher.state()}
        return self.noted(info)

    def ask(self, question, conversation: str | None = None) -> dict[str, Any]:
        """The MCP ask's record. Called without the lock (in an ask's thread)."""
        answer = self.answer(question, conversation=conversation)
        with self.index_lock:
            return self.noted(answer.to_dict())

    def answer(self, question, k: int = 8, conversation: str | None = None,
               follow_up: bool = False, on_text=None):
        """The Answer itself (serve renders the CLI's text from it); ``k`` chunks per
        search, as `ask -k`; the next turn of ``conversation`` (of the latest with
        ``follow_up``, else of a new one), saved beside the index (ask/conversation.py:
        its own file or tables, so not under the index lock), or kept in this server's
        memory when it cannot be (``self.unsaved``). Called without the lock:
        the ask takes it for each piece of index work and lets it go while the model
        thinks. ``on_text(piece)`` receives the model's text as it streams (in this
        thread, outside the lock: serve/sse.py relays it)."""
        from brainbot.ask.conversation import converse

        NotUTF8Error.check(question, "the question")
        if conversation is not None:
            NotUTF8Error.check(conversation, "the conversation")
        return converse(question, db=self.db, conversation=conversation,
                        follow_up=follow_up, kept=self.unsaved, k=k, searcher=self.searcher,
                        lock=self.index_lock, on_text=on_text)

    def partial_index(self, what: str = "vector and hybrid results") -> str | None:
        """One line while chunks lack a vector: how many are embedded, what fills in the
        rest (this server's watch, or `brainbot index`) and that ``what`` covers only the
        embedded chunks; None on a whole index."""
        from brainbot.index.indexer import embedded_line

        vectors, chunks = self.searcher.coverage()
        if vectors >= chunks:
            return None
        how = ("this server is embedding the rest in the background" if self.watching
               else "`brainbot index` embeds the rest")
        return (f"{embedded_line(vectors, chunks)}; {how}; {what} cover only the embedded "
                "chunks and may improve")

    def noted(self, result: dict[str, Any], what: str = "vector and hybrid results"
              ) -> dict[str, Any]:
        """``result`` with ``partial_index`` while the index is partly embedded."""
        note = self.partial_index(what)
        if note:
            result["partial_index"] = note
        return result
