"""Which process runs an index's semantic phase: one at a time, through a lease in meta.

Two semantic phases at once (two `brainbot index`, or `serve --watch` and a `brainbot
index`) each read the chunks without a vector, released the writer lock and ran the model
over the same texts: every chunk was embedded twice, each run 1.7x slower on 2 cores
(review M9). The model already uses every core, so two phases share nothing worth
sharing: the one that runs the model holds a lease, written to meta under the writer lock
(key ``embedding``: its owner, host, pid and expiry) before it first releases the lock for
the model, renewed in each batch it writes and removed when it ends. Another phase that
finds the lease held waits, and takes over when it lapses: its owner ended, died (a pid
gone on this host), or stopped renewing it for LEASE_S (another host, on Postgres). The
lease is read and written only under the writer lock, so two phases never both take it.

A lease left by a killed run is removed by the next phase that looks (meta is then as a
clean run leaves it). This module only reads and writes that one meta entry.
"""

from __future__ import annotations

import json
import os
import socket
import time

KEY = "embedding"
# A holder renews its lease with every batch it writes (EMBED_CHUNKS: ~8 s of the model on
# 2 cores; 10x that on a loaded, slow host); one not renewed this long has stopped.
LEASE_S = 600.0
HOST = socket.gethostname()
# The leases this process's phases hold now: one of this pid not among them was left
# by a phase of this process that ended without removing it (an error, then a retry).
_LIVE: set[str] = set()


class Lease:
    """One semantic phase's side of the lease."""

    def __init__(self) -> None:
        self.owner = os.urandom(8).hex()
        self.held_until = 0.0  # when the lease this phase wrote lapses (0: not held)
        _LIVE.add(self.owner)

    def elsewhere(self, store) -> bool:
        """Whether another phase holds the lease now (read under the writer lock)."""
        return _held_by_other(store.meta().get(KEY), self.owner, time.time())

    def take(self, store) -> None:
        """Hold the lease before the model runs: a commit of its own the first time, none
        while a renewal is fresh."""
        if self.held_until - time.time() > LEASE_S / 2:
            return
        with store.batch():
            self.renew(store)

    def renew(self, store) -> None:
        """Write the lease, inside the batch that writes this phase's vectors, unless
        another phase took it over meanwhile (this one then waits at its next look)."""
        if self.elsewhere(store):
            self.held_until = 0.0
            return
        self.held_until = time.time() + LEASE_S
        store.set_meta(KEY, json.dumps({"owner": self.owner, "host": HOST,
                                        "pid": os.getpid(), "until": self.held_until}))

    def end(self, store) -> None:
        """Remove the lease if it is this phase's or has lapsed; else leave it."""
        _LIVE.discard(self.owner)
        if store is not None and KEY in store.meta() and not self.elsewhere(store):
            with store.batch():
                store.set_meta(KEY, None)
        self.held_until = 0.0


def held_elsewhere(store) -> bool:
    """Whether a phase holds the lease now (read under the writer lock): a lexical phase
    looks before its model's head start (index/semantic.py), holding no lease itself."""
    return _held_by_other(store.meta().get(KEY), "", time.time())


def _held_by_other(raw: str | None, me: str, now: float) -> bool:
    if not raw:
        return False
    try:
        lease = json.loads(raw)
        owner, host, pid, until = lease["owner"], lease["host"], int(lease["pid"]), \
            float(lease["until"])
    except (ValueError, KeyError, TypeError):
        return False  # not a lease this code wrote: nobody's
    if owner == me or until <= now:
        return False
    if host != HOST:
        return True
    if pid == os.getpid():
        return owner in _LIVE
    return _alive(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True
