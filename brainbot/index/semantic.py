"""The semantic phase: every chunk without a vector embedded and written, the model never
left waiting on the index.

The model runs in a thread of its own (``Embedding``), fed by text hash. The phase reads
the chunks without a vector in chunk-id order, EMBED_CHUNKS at a time, and hands each
batch's texts to the model AHEAD batches ahead of its writes: while one batch's vectors
are written (the writer lock taken for that transaction, as before), the model is already
on the next batch. Issue 43: with the model in line, each batch's write, its lock
round trip and the next batch's read left both cores idle, and so did the whole lexical
phase before it.

The lexical phase gives the model a head start (``HeadStart``): the texts of the first
new chunks, as they come out of the chunker, at most HEAD_START_TEXTS of them, so the model
loads and embeds while notes are still being chunked and written. Their vectors wait in
memory for the semantic phase, which finds them done.

Vectors are written only here, one committed batch at a time, in chunk-id order, with the
writer lock released while the phase waits for the model: the same transactions, the
same points a kill can hit, and the same resumability as a phase that ran the model in
line. A text's vector does not depend on the texts embedded beside it (model/embed.py),
so the bytes are the same as well. One semantic phase runs the model at a time
(``index/lease.py``); the head start runs only when no other phase holds the lease, and
while the lexical phase holds the writer lock, so none can take it meanwhile.

This module does not chunk, read notes or choose the model.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from brainbot.errors import BrainbotError, IndexStopped

from .lease import Lease

# Texts per call of the model in its thread: a stop waits for at most this many (about
# 0.4 s at int8 on 2 cores), and enough for fp32 to batch texts of one length.
GROUP = 64
# Batches whose texts are with the model at once: the one being waited for and written,
# and the next, which the model runs meanwhile.
AHEAD = 2
# The lexical phase's head start, in texts: about 6 s of int8 on 2 cores (~170 texts/s,
# benchmarks/results/first_run.json), enough to cover a small folder's lexical phase,
# while a 10k-note folder's lexical phase (31 s) shares its cores for a few seconds only
# and the vectors waiting for the semantic phase stay a few MB.
HEAD_START_TEXTS = 1024
# While another semantic phase holds the lease (index/lease.py), this one looks again
# this often: a look takes the writer lock for a moment, and shows that phase's progress.
LEASE_POLL_S = 1.0


class Embedding:
    """The model in a thread of its own: texts in by text hash, vectors out.

    ``submit`` hands texts over (a hash already handed over is not run again; ``claim``
    counts a batch that will ``take`` it); ``take`` waits for the vectors of claimed
    hashes. An error in the model's thread is raised by the next ``take``."""

    def __init__(self, embedder, group: int = GROUP) -> None:
        self.embedder, self.group = embedder, group
        self._cond = threading.Condition()
        self._queue: deque[tuple[str, str]] = deque()
        self._asked: set[str] = set()  # handed over: queued, running or done
        self._claims: dict[str, int] = {}  # batches that will take each hash
        self._done: dict[str, np.ndarray] = {}
        self._running = 0
        self._error: BaseException | None = None
        self._closed = False
        self._thread: threading.Thread | None = None

    @property
    def waiting(self) -> int:
        """Texts handed over and not embedded yet."""
        with self._cond:
            return len(self._queue) + self._running

    def submit(self, items: Iterable[tuple[str, str]], claim: bool = True) -> int:
        """Hand (hash, text) pairs to the model; returns how many it had not been given."""
        new = 0
        with self._cond:
            if self._closed:
                return 0
            for h, text in items:
                if claim:
                    self._claims[h] = self._claims.get(h, 0) + 1
                if h not in self._asked:
                    self._asked.add(h)
                    self._queue.append((h, text))
                    new += 1
            if new and self._thread is None:
                self._thread = threading.Thread(target=self._run, name="brainbot-embed",
                                                daemon=True)
                self._thread.start()
            self._cond.notify_all()
        return new

    def take(self, hashes: list[str], stopped: Callable[[], bool]) -> dict[str, np.ndarray]:
        """The vectors of ``hashes`` (claimed by a submit), once the model has them; a hash
        leaves when the last batch that claimed it has taken it."""
        with self._cond:
            while True:
                if self._error is not None:
                    raise self._error
                if all(h in self._done for h in hashes):
                    break
                if stopped():
                    raise IndexStopped("stopped during the model run; run again to finish")
                self._cond.wait(0.1)
            out = {}
            for h in hashes:
                out[h] = self._done[h]
                left = self._claims.get(h, 1) - 1
                if left > 0:
                    self._claims[h] = left
                    continue
                self._claims.pop(h, None)
                del self._done[h]
                self._asked.discard(h)
        return out

    def drop(self) -> None:
        """Forget every text not embedded yet and every vector not taken (another phase
        holds the lease now; what this one had asked for is that one's to embed)."""
        with self._cond:
            self._queue.clear()
            self._done.clear()
            self._claims.clear()
            self._asked.clear()

    def close(self) -> None:
        """End the model's thread: texts not started are dropped; a call in progress ends
        on its own (a daemon thread: it never holds the process up)."""
        with self._cond:
            self._closed = True
            self._queue.clear()
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                group = [self._queue.popleft() for _ in range(min(self.group, len(self._queue)))]
                self._running = len(group)
            try:
                vectors = self.embedder.embed([text for _, text in group])
            except BaseException as exc:  # noqa: BLE001 - raised again by the phase's take()
                with self._cond:
                    self._error, self._running = exc, 0
                    self._cond.notify_all()
                return
            with self._cond:
                self._running = 0
                for (h, _), vector in zip(group, vectors, strict=True):
                    if h in self._asked:  # not dropped meanwhile
                        self._done[h] = vector
                self._cond.notify_all()


class HeadStart:
    """The lexical phase's new texts for the model, before their notes are written: at most
    ``limit`` of them, those the index has no vector for, handed over a group at a time
    (one look-up of the index's vectors per group)."""

    def __init__(self, embedding: Embedding, limit: int = HEAD_START_TEXTS) -> None:
        self.embedding, self.left = embedding, limit
        self._offered: dict[str, str] = {}

    def offer(self, pairs: Iterable[tuple[str, str]], store) -> None:
        """(hash, text) of new chunks; handed over when the model is idle or a group is
        gathered."""
        if self.left <= 0:
            return
        self._offered.update(pairs)
        if len(self._offered) >= self.embedding.group or not self.embedding.waiting:
            self._flush(store)

    def _flush(self, store) -> None:
        pairs = list(self._offered.items())[: self.left]
        self._offered = {}
        have = store.vectors_for([h for h, _ in pairs])
        self.left -= self.embedding.submit(((h, t) for h, t in pairs if h not in have),
                                           claim=False)


@dataclass
class _Batch:
    rows: list[tuple[int, str, str]]  # (chunk id, text hash, text)
    found: dict[str, np.ndarray]  # vectors the index had for these texts
    todo: list[str]  # the hashes the model embeds


def run(ix, embedding: Embedding, size: int) -> None:
    """The phase over the indexer ``ix`` (its store open, the writer lock held): batches of
    ``size`` chunks, the model in ``embedding``'s thread."""
    lease = Lease()
    try:
        _all(ix, lease, embedding, size)
    finally:
        _end_lease(ix, lease)


def _all(ix, lease: Lease, embedding: Embedding, size: int) -> None:
    """Every chunk without a vector, in chunk-id order. A second pass from the start
    catches chunks written meanwhile behind the cursor (by another `brainbot index`)."""
    counts = ix.store.counts()
    total, done = counts["chunks"], counts["embeddings"]
    after, queued = 0, deque()
    while True:
        ix._check_stop()
        if lease.elsewhere(ix.store):
            embedding.drop()
            queued.clear()
            _await_other(ix)
            after = 0  # whatever it leaves, from the start
            continue
        while len(queued) < AHEAD:
            rows = ix.store.unembedded_chunks(after, size)
            if not rows:
                break
            after = rows[-1][0]
            queued.append(_hand_over(ix, rows, lease, embedding))
        if not queued:
            if after:
                after = 0
                continue
            break
        batch = queued.popleft()
        _write(ix, batch, lease, embedding)
        done += len(batch.rows)
        if ix.embed_progress:
            ix.embed_progress(min(done, total), total)


def _hand_over(ix, rows, lease: Lease, embedding: Embedding) -> _Batch:
    """Vectors reused by text hash where the index has them; the other texts go to the
    model, the lease held first."""
    found = ix.store.vectors_for([h for _, h, _ in rows])
    todo = {h: text for _, h, text in rows if h not in found}
    if todo:
        lease.take(ix.store)
        embedding.submit(todo.items())
    return _Batch(rows, found, list(todo))


def _write(ix, batch: _Batch, lease: Lease, embedding: Embedding) -> None:
    """Wait for the batch's vectors with the writer lock released, then write them in one
    transaction that renews the lease."""
    if batch.todo:
        lease.take(ix.store)
        ix._release()
        try:
            batch.found.update(embedding.take(batch.todo, ix.stopped))
        finally:
            ix._retake()
    ix._check_stop()
    with ix.store.batch():
        ix.store.add_vectors([(i, h, batch.found[h]) for i, h, _ in batch.rows])
        if batch.todo:
            lease.renew(ix.store)
    ix.stats.embedded += len(batch.todo)


def _await_other(ix) -> None:
    """Another phase holds the lease: leave it the lock for LEASE_POLL_S, then look again;
    its progress is this run's to show meanwhile."""
    store, ix.store = ix.store, None
    store.close()
    deadline = time.monotonic() + LEASE_POLL_S
    while time.monotonic() < deadline:
        ix._check_stop()
        time.sleep(min(0.05, LEASE_POLL_S))
    ix._retake()
    if ix.embed_progress:
        counts = ix.store.counts()
        ix.embed_progress(counts["embeddings"], counts["chunks"])


def _end_lease(ix, lease: Lease) -> None:
    """Remove this phase's lease (or one a killed run left), best effort: one that cannot
    be removed now lapses when this process ends."""
    from brainbot.store.target import open_store

    store = ix.store
    try:
        if store is None:  # stopped while waiting for the lock: one try, no wait
            store = open_store(ix.target, write=True, identity=ix.identity)
        try:
            lease.end(store)
        finally:
            if store is not ix.store:
                store.close()
    except BrainbotError:
        pass
