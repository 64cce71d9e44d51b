"""The semantic phase in the background, for `brainbot watch` and the servers' ``--watch``.

The watch's passes write the lexical phase only (a note is a BM25 hit as soon as its pass
commits). A pass that leaves chunks without a vector wakes this thread, which runs the
indexer's own semantic phase (``Indexer.embed_missing``) in batches of
BACKGROUND_EMBED_CHUNKS: the writer lock is taken for each batch's write and free while
the model runs, so a pass, or a `brainbot index`, gets in between. Queries meanwhile see
the vector leg over what is embedded.

Stopping (the watch's ``stop``, or its run() ending) is looked at between model runs of
EMBED_SLICE texts: the batch in flight is dropped, never half written, and the next run
embeds it. A failure is reported and retried after a back-off; the watch goes on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from brainbot.errors import BrainbotError, IndexStopped, StoreBusyError
from brainbot.index.indexer import embedded_line

# Chunks per background semantic batch: one write transaction, about 1 s of the model on
# 2 cores; a kill loses at most that.
BACKGROUND_EMBED_CHUNKS = 64
# Texts per model run: a stop is seen between two of them, so it need not wait for a
# whole batch's run. The Embedder's vectors do not depend on the batch: no bit changes.
EMBED_SLICE = 16
# How often the semantic phase says how far it is, while it runs.
EMBED_REPORT_S = 60.0
# How often an idle semantic phase looks whether the watch is stopping.
EMBED_POLL_S = 0.5
# A write refused by another writer (a batch here, or a watch pass) is retried soon at
# first: that writer is usually this watch's own pass or batch, which holds the lock only
# to read and write. The wait doubles up to BUSY_RETRY_MAX_S (a `brainbot index` may hold
# the lock for minutes). With a flat 0.5 s, an edit saved while the previous edit's
# vectors were being written took ~0.65-0.76 s to be searchable, against ~0.22-0.28 s.
BUSY_RETRY_FIRST_S = 0.02
BUSY_RETRY_MAX_S = 0.5

log = logging.getLogger("brainbot.serve.watch")


@dataclass
class EmbedReport:
    """What the background semantic phase did: texts embedded since it woke, the index's
    vectors and chunks after it, how long; ``running``: a progress report, not its end."""

    embedded: int
    vectors: int
    chunks: int
    seconds: float
    running: bool = False
    error: str | None = None

    def line(self) -> str:
        head = f"{time.strftime('%H:%M:%S')}  semantic phase"
        if self.error:
            return f"{head} · error: {self.error}"
        done = " done" if not self.running and self.vectors >= self.chunks else ""
        return (f"{head}{done} · {self.embedded:,} embedded in {self.seconds:.1f} s · "
                f"{embedded_line(self.vectors, self.chunks)}")

    def to_dict(self) -> dict:
        return {"phase": "semantic", "embedded": self.embedded, "vectors": self.vectors,
                "chunks": self.chunks, "seconds": round(self.seconds, 3),
                "running": self.running, "error": self.error}


class Halt:
    """The semantic phase's stop: set when any of ``events`` is (the watch's ``stop``,
    or its run() having ended)."""

    def __init__(self, *events: threading.Event) -> None:
        self.events = events

    def is_set(self) -> bool:
        return any(e.is_set() for e in self.events)


class Interruptible:
    """An embedder run EMBED_SLICE texts at a time, with ``halt`` looked at between runs
    (IndexStopped when it is set)."""

    def __init__(self, embedder, halt) -> None:
        self.embedder, self.halt = embedder, halt

    def __getattr__(self, name):
        return getattr(self.embedder, name)

    def embed(self, texts):
        import numpy as np

        texts = list(texts)
        parts = []
        for start in range(0, len(texts), EMBED_SLICE):
            if self.halt.is_set():
                raise IndexStopped("stopped during the model run; run again to finish")
            parts.append(self.embedder.embed(texts[start:start + EMBED_SLICE]))
        return np.concatenate(parts) if parts else self.embedder.embed(texts)


class Embedding:
    """The background semantic phase of one watch. ``open_indexer(stop)`` is a context
    manager giving an open Indexer whose embedder stops with ``stop``; ``report`` gets
    each EmbedReport. ``settled`` is set while the index has a vector for every chunk, as
    last seen by a pass or by this phase (tests wait on it)."""

    def __init__(self, open_indexer: Callable, report: Callable[[EmbedReport], None],
                 backoff: Callable[[int], float]) -> None:
        self.open_indexer, self.report, self.backoff = open_indexer, report, backoff
        self.settled = threading.Event()
        self.owed = threading.Event()  # a pass left chunks without a vector
        self.lock = threading.Lock()  # orders `settled` between a pass and this phase
        self.state: dict = {"running": False, "progress": None, "last": None}

    def owe(self, partial: bool) -> None:
        """After a pass: wake when chunks lack a vector, else the index is settled (unless
        vectors are still owed)."""
        with self.lock:
            if partial:
                self.settled.clear()
                self.owed.set()
            elif not self.owed.is_set() and not self.state["running"]:
                self.settled.set()

    def run(self, halt: Halt) -> None:
        """Embed what the passes leave without a vector, until ``halt``."""
        failures = 0
        while not halt.is_set():
            if not self.owed.wait(EMBED_POLL_S):
                continue
            self.owed.clear()
            try:
                self.embed(halt)
            except IndexStopped:
                return
            except Exception as exc:  # noqa: BLE001 - reported, retried; the watch goes on
                failures += 1
                self.failed(exc, failures)
                self.owed.set()
                _sleep(halt, self.backoff(failures))
                continue
            finally:
                self.state["running"] = False
            failures = 0
            with self.lock:
                if not self.owed.is_set():
                    self.settled.set()

    def embed(self, halt: Halt) -> None:
        """One wake: every chunk without a vector, through the indexer's semantic phase."""
        started = time.perf_counter()
        last = [started]

        def progress(done: int, total: int) -> None:
            self.state["progress"] = embedded_line(done, total)
            if done < total and time.perf_counter() - last[0] >= EMBED_REPORT_S:
                last[0] = time.perf_counter()
                self.said(EmbedReport(ix.stats.embedded, done, total, last[0] - started,
                                      running=True))

        tries = 0
        while True:
            try:
                with self.open_indexer(halt) as ix:
                    self.state["running"] = True
                    ix.embed_chunks = BACKGROUND_EMBED_CHUNKS
                    ix.embed_progress = progress
                    ix.embed_missing()
                    counts = ix.store.counts()
                break
            except StoreBusyError:  # a pass or a `brainbot index` is writing: wait
                _sleep(halt, busy_retry_s(tries))
                tries += 1
                if halt.is_set():
                    raise IndexStopped("stopped") from None
        vectors, chunks = counts["embeddings"], counts["chunks"]
        self.state["progress"] = embedded_line(vectors, chunks)
        if ix.stats.embedded or vectors < chunks:
            self.said(EmbedReport(ix.stats.embedded, vectors, chunks,
                                  time.perf_counter() - started))

    def failed(self, exc: Exception, failures: int) -> None:
        ours = isinstance(exc, BrainbotError)
        error = str(exc) if ours else " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        report = EmbedReport(0, 0, 0, 0.0, error=f"{error}; retrying in "
                                                 f"{self.backoff(failures):.0f} s")
        if not ours:  # a bug: keep its traceback
            log.warning("%s", report.line(), exc_info=exc)
        self.said(report)

    def said(self, report: EmbedReport) -> None:
        self.state["last"] = report.line()
        self.report(report)


def busy_retry_s(tries: int) -> float:
    """How long retry ``tries`` (from 0) of a write refused by another writer waits."""
    return min(BUSY_RETRY_FIRST_S * 2**tries, BUSY_RETRY_MAX_S)


def _sleep(halt: Halt, seconds: float) -> None:
    """Wait ``seconds``, or less when ``halt`` is set."""
    deadline = time.monotonic() + seconds
    while not halt.is_set() and (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, EMBED_POLL_S))
