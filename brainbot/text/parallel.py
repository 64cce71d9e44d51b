"""Chunking on every usable core: documents in, chunked documents out, in input order.

`chunk_in_order` takes any iterable of items, asks ``document(item)`` for the Document to
chunk (None: nothing to chunk, the item passes through) and yields ``(item, Chunked|None)``
in input order, lazily. Documents go to worker processes in batches (a few hundred kB of
text each), a bounded window of batches in flight, so a 70 MB vault never sits in memory
whole. Each worker has its own TokenCounter, run single-threaded; chunks depend only on
the text and the parameters, never on a cache, so the output is byte-identical to
``documents.chunk`` in one process (tests/test_parallel.py compares them).

What comes back from a worker is the chunks, warnings, facts and (``analyze``: True for
this code's analyzer, or the name an older index records) the postings analysis of every
chunk, each in its language (``text/analyzers.py``); the Document stays the caller's own, and ``parsed`` is a
light ParsedNote (its title and front matter; no text or blocks, which nothing after
chunking reads).

A worker ends when the process that started it does: one killed with SIGKILL cannot shut
its pool down, and its workers (and with them multiprocessing's resource tracker, which
ends once nothing holds its pipe) ran on under init for good (issue 32). Each worker
looks every PARENT_POLL_S whether its parent is still its parent.

Errors, as the serial loop has them: a document whose chunking raised in a worker is chunked
again here at its turn, so the same exception comes from the same place with its traceback;
a worker that died (killed, out of memory) makes the rest run in this process. Small inputs
never start a pool: it starts only once a whole first batch is waiting.

This module does not read files (``documents.readable`` does), embed or store anything.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TypeVar

from brainbot.notes import files as notes
from brainbot.notes.markdown import ParsedNote

from . import documents
from .chunking import ChunkParams
from .documents import Chunked, Document
from .tokens import TokenCounter

T = TypeVar("T")
# A batch closes at this much text or this many documents (or items, for streams that are
# mostly unchanged notes). The first full batch is also the threshold for starting a pool.
BATCH_CHARS = 256_000
BATCH_DOCUMENTS = 64
BATCH_ITEMS = 512
# Batches in flight per worker: enough to keep every worker busy while the caller consumes,
# and while it writes a lexical batch (at 3, a 121k-chunk vault's indexer waited 11 s for
# chunks its workers had been stalled on; at 8, 1.6 s).
WINDOW_PER_WORKER = 8
# How often a worker looks whether its parent is alive (a reparented worker has another
# parent): an orphan lingers this long at most; the look costs microseconds.
PARENT_POLL_S = 0.5


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _same(item):
    return item


def chunk_in_order(
    items: Iterable[T],
    document: Callable[[T], Document | None] = _same,
    params: ChunkParams | None = None,
    *,
    counter: TokenCounter | None = None,
    workers: int | None = None,
    analyze: bool | str = False,
) -> Iterator[tuple[T, Chunked | None]]:
    """``(item, documents.chunk(document(item)))`` for every item, in input order (None where
    ``document(item)`` is None), on ``workers`` processes (default: usable_cpus())."""
    params = params or ChunkParams()
    local = _Local(counter or TokenCounter(), params, analyze)
    workers = usable_cpus() if workers is None else max(1, workers)
    batches = _batches(items, document)
    first = next(batches, None)
    if first is None:
        return
    second = next(batches, None) if workers > 1 else None
    if second is None:  # one batch or one worker: no pool to pay for
        for batch in (first,) if workers > 1 else _chain(first, batches):
            yield from local.batch(batch)
        return
    yield from _pooled(_chain(first, _chain(second, batches)), local, workers)


def chunk_paths(paths: Iterable[str | Path], counter: TokenCounter | None = None,
                params: ChunkParams | None = None, *,
                workers: int | None = None) -> Iterator[Chunked | notes.Problem]:
    """``documents.chunk_paths`` on every core: the same items, in the same order."""
    for item, chunked in chunk_in_order(documents.readable(paths), _if_document, params,
                                        counter=counter, workers=workers):
        yield item if chunked is None else chunked


def _if_document(item):
    return item if isinstance(item, Document) else None


def _chain(head, rest):
    yield head
    yield from rest


def _batches(items, document) -> Iterator[list[tuple[object, Document | None]]]:
    batch, chars, docs = [], 0, 0
    for item in items:
        doc = document(item)
        batch.append((item, doc))
        if doc is not None:
            chars, docs = chars + len(doc.text), docs + 1
        if chars >= BATCH_CHARS or docs >= BATCH_DOCUMENTS or len(batch) >= BATCH_ITEMS:
            yield batch
            batch, chars, docs = [], 0, 0
    if batch:
        yield batch


class _Local:
    """Chunking in this process, and putting a worker's results back together."""

    def __init__(self, counter: TokenCounter, params: ChunkParams,
                 analyze: bool | str) -> None:
        self.counter, self.params, self.analyze = counter, params, analyze

    def one(self, doc: Document) -> Chunked:
        item = documents.chunk(doc, self.counter, self.params)
        if self.analyze:
            item.lexical = _analysis(item, self.analyze)
        return item

    def batch(self, batch) -> Iterator[tuple[object, Chunked | None]]:
        for item, doc in batch:
            yield item, None if doc is None else self.one(doc)

    def joined(self, batch, results) -> Iterator[tuple[object, Chunked | None]]:
        done = iter(results)
        for item, doc in batch:
            if doc is None:
                yield item, None
                continue
            got = next(done)
            if got is None:  # it raised in the worker: raise it here, at its turn
                yield item, self.one(doc)
                continue
            parsed, chunks, warnings, facts, lexical = got
            yield item, Chunked(doc, parsed, chunks, warnings, facts, lexical)


def _pooled(batches, local: _Local, workers: int):
    import multiprocessing

    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_start_worker,
                               initargs=(local.params, local.analyze, os.getpid(),
                                         local.counter.model))
    window: deque = deque()
    try:
        for batch in batches:
            window.append((batch, pool.submit(_work, [d for _, d in batch if d is not None])))
            while len(window) >= workers * WINDOW_PER_WORKER:
                yield from _collect(window.popleft(), local)
        while window:
            yield from _collect(window.popleft(), local)
    except BrokenProcessPool:  # a worker died: the rest, in this process
        pool.shutdown(wait=False, cancel_futures=True)
        for batch, _ in window:
            yield from local.batch(batch)
        for batch in batches:
            yield from local.batch(batch)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _collect(entry, local: _Local):
    batch, future = entry
    try:
        results = future.result()
    except BrokenProcessPool:
        yield from local.batch(batch)
        raise
    yield from local.joined(batch, results)


# --- in the worker process --------------------------------------------------------------

_WORKER: _Local | None = None


def _start_worker(params: ChunkParams, analyze: bool | str, parent: int, model: str) -> None:
    global _WORKER
    import threading

    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # the processes are the parallelism
    _WORKER = _Local(TokenCounter(model=model), params, analyze)  # the parent's model
    threading.Thread(target=_end_with, args=(parent,), daemon=True,
                     name="brainbot-parent-watch").start()


def _end_with(parent: int) -> None:
    """End this worker once ``parent`` is no longer its parent (it died: the worker was
    handed to init or a subreaper). Polling works wherever getppid does; Linux's
    PR_SET_PDEATHSIG would fire when the parent's thread that started the pool ends."""
    import time

    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(1)


def _work(docs: list[Document]) -> list[tuple | None]:
    out: list[tuple | None] = []
    for doc in docs:
        try:
            item = _WORKER.one(doc)
        except Exception:  # noqa: BLE001 - the caller chunks it again and raises it there
            out.append(None)
            continue
        p = item.parsed
        light = ParsedNote("", p.front_matter, p.body_start_char, [], p.title,
                           p.front_matter_error)
        out.append((light, item.chunks, item.warnings, item.facts, item.lexical))
    return out


def _analysis(item: Chunked, analyze: bool | str) -> list[tuple]:
    """(terms, length, looks English, language) of each chunk, as the analyzer named by
    ``analyze`` gives them (True: this code's own)."""
    from .analyzers import VERSION, note_analysis

    version = VERSION if analyze is True else str(analyze)
    return note_analysis(item.doc.text, [c.retrieval_text for c in item.chunks], version)
