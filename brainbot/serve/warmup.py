"""A long-lived server's warm-up: what it loads before it is asked, and again after a commit.

`brainbot mcp` and `brainbot serve` answer many searches from one process, so two loads
that a one-shot `brainbot query` rightly leaves for later (they would slow its cold
start, benchmarks/bench_coldstart.py) pay here, at start, before the first call:

* the postings of the common terms, those in at least PRELOAD_SHARE of the chunks. BM25
  reads a term's postings on its first use and caches them; a common term's first use
  was the tail of warm search (100k synthetic chunks, bench_serve's 60 queries, in
  process: 52 of them read some postings, the p95 query 26 ms of reading, up to 41 ms;
  notes serve6). At 100k chunks that is 155 terms, 3.3M postings, 0.42 s in one SQL and
  ~27 MB; the terms left are each in under 5 % of the chunks (at most 5,000 postings,
  ~1 ms to read).
* the int8 copy of the vector matrix where int8 scans pay (store/sqlite/arrays.py): a
  server gets past INT8_AFTER_SCANS queries anyway, and the 25th call made the copy
  (~135 ms at 100k chunks) on its own time.

A commit (a new generation) drops both: the arrays reload what changed and clear the
postings cache and the copy. The first call that sees the new generation starts a
Rewarm, which loads them again in a thread once the index has stayed at one generation
for REWARM_QUIET_S (a watch's semantic phase commits a batch about every second: it
would reload after each), a term per hold of the lock, so that a call waits at most one
term's read (~20 ms at 100k chunks), and the int8 copy made outside the lock.

A store that scores in SQL (Postgres) has none of these arrays: the search warms it.
"""

from __future__ import annotations

import logging
import threading
import time

from brainbot.errors import BrainbotError

log = logging.getLogger("brainbot.serve.warmup")

PRELOAD_SHARE = 0.05  # terms in this share of the chunks or more are preloaded
REWARM_QUIET_S = 2.0  # the generation unchanged this long before a re-warm


def arrays(store):
    """The store's in-memory arrays (SQLite's KernelIndex); None for a store that scores
    in SQL."""
    index = getattr(store, "index", None)
    return index if hasattr(index, "preload_common") else None


def prepare(store) -> dict:
    """After a first search, under the caller's lock: the common terms' postings and the
    int8 copy when it pays. What was loaded: {"terms": N, "int8": bool}."""
    index = arrays(store)
    if index is None or index.generation is None:
        return {}
    terms = index.preload_common(PRELOAD_SHARE)
    matrix = index.int8_due()
    if matrix is not None:
        index.adopt_int8(matrix, index.make_int8(matrix))
    return {"terms": terms, "int8": index.int8 is not None}


class Rewarm:
    """Loads again, in a thread, what a new generation dropped. ``service`` has
    ``lock``, ``searcher`` and ``closed``; ``check`` is called under its lock."""

    def __init__(self, service) -> None:
        self.service = service
        self.generation: int | None = None  # the generation last warmed
        self.thread: threading.Thread | None = None

    def loaded(self) -> int | None:
        index = arrays(self.service.searcher.store)
        return None if index is None else index.generation

    def warmed(self) -> None:
        """The loaded generation has been warmed (under the lock)."""
        self.generation = self.loaded()

    def check(self) -> None:
        """Start the thread when the loaded generation is not the warmed one."""
        now = self.loaded()
        if now is None or now == self.generation or (self.thread and self.thread.is_alive()):
            return
        self.thread = threading.Thread(target=self.run, name="re-warm", daemon=True)
        self.thread.start()

    def run(self) -> None:
        try:
            if self.quiet():
                self.load()
        except BrainbotError as exc:  # the index went away, say: the calls will say so
            log.warning("re-warm: %s", exc)

    def quiet(self) -> bool:
        """Wait until the index's committed generation stayed the same for
        REWARM_QUIET_S; False once the service is closed."""
        seen = None
        while True:
            with self.service.lock:
                if self.service.closed:
                    return False
                now = self.service.searcher.store.generation()
            if now == seen:
                return True
            seen = now
            time.sleep(REWARM_QUIET_S)

    def load(self) -> None:
        """The common terms one by one, then the int8 copy, for the loaded generation
        (a call that loads a newer one meanwhile restarts the list)."""
        service, todo, generation = self.service, [], None
        while True:
            with service.lock:
                index = arrays(service.searcher.store)
                if service.closed or index is None or index.generation is None:
                    return
                if index.generation != generation:
                    generation, todo = index.generation, index.common_terms(PRELOAD_SHARE)
                if todo:
                    index.postings(todo.pop(0))
                    continue
                matrix = index.int8_due()
            if matrix is not None:
                scan = index.make_int8(matrix)
                with service.lock:
                    index.adopt_int8(matrix, scan)  # False if a newer matrix came meanwhile
            with service.lock:
                if index.generation == generation:
                    self.generation = generation
            return
