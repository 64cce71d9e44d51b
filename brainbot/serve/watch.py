"""`brainbot watch`: keep an index fresh while notes change, with watchfiles.

One pass brings the index up to date first; after that, every batch of file events
(watchfiles debounces them: a `git checkout` of 1,000 files arrives as one batch) is one
pass through the same Indexer as `brainbot index`, with its writer lock taken for the
pass only, so a `brainbot index` can still run between passes. A pass re-indexes only
the notes named by the events; an event on anything else (a folder renamed in or away, a
`.brainbotignore`) re-walks that folder, which costs a no-op index of it.

Event kinds are not trusted (an editor's atomic save arrives as "added", a folder rename
carries no events for the files inside): every named path is looked at on disk again.
A watched folder that is deleted takes its notes out of the index (as deleting each file
would) and silences the OS watcher, so the watch is re-armed when it comes back, with a
full pass for it. A pass refused by another writer waits and
retries. Setting ``stop`` (SIGTERM, Ctrl-C) ends the watch between transactions.

This module watches and schedules; indexing is ``index/indexer.py``'s.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from brainbot.errors import BrainbotError, IndexStopped, StoreBusyError
from brainbot.index.indexer import IndexStats
from brainbot.notes.files import EXTENSIONS, IGNORE_FILE

# How long a pass waits before retrying when another process holds the writer lock.
BUSY_RETRY_S = 0.5
# How often a missing watched folder is looked for (watchfiles yields empty batches at
# this period while waiting).
MISSING_POLL_MS = 500

log = logging.getLogger("brainbot.serve.watch")


@dataclass
class PassReport:
    """What one pass did: which folders and notes, the index stats, how long it took."""

    root: str
    paths: list[str] | None  # None: the whole folder was walked
    stats: IndexStats
    seconds: float
    error: str | None = None

    def line(self) -> str:
        what = "all notes" if self.paths is None else ", ".join(self.paths[:3]) + (
            f" (+{len(self.paths) - 3})" if len(self.paths) > 3 else "")
        head = f"{time.strftime('%H:%M:%S')}  {self.root}: {what}"
        if self.error:
            return f"{head} · error: {self.error}"
        s = self.stats
        return (f"{head} · {s.new} new, {s.updated} updated, {s.removed} removed, "
                f"{s.embedded} embedded · {self.seconds:.2f} s")


@dataclass
class Watcher:
    """Watches ``roots`` and keeps the index at ``db`` up to date until ``stop`` is set."""

    roots: list[Path]
    db: str
    embedder: object = None
    stop: threading.Event = field(default_factory=threading.Event)
    on_pass: Callable[[PassReport], None] | None = None

    def __post_init__(self) -> None:
        self.roots = [Path(r).absolute() for r in self.roots]
        if self.embedder is None:
            from brainbot.model.embed import Embedder

            self.embedder = Embedder()  # loads on first use, then serves every pass

    def run(self) -> None:
        """Index everything once, then each batch of changes, until stopped."""
        for batch in self._batches():
            for root, paths in batch.items():
                if self.stop.is_set():
                    return
                self.index(root, paths)

    # -- one pass --------------------------------------------------------------------
    def index(self, root: Path, paths: set[str] | None) -> PassReport | None:
        """One pass over ``paths`` of ``root`` (None: the whole folder), retried while
        another writer holds the lock; None when stopped first."""
        from brainbot.index.indexer import Indexer

        while not self.stop.is_set():
            started = time.perf_counter()
            try:
                with Indexer(self.db, embedder=self.embedder, stop=self.stop) as ix:
                    if paths is None:
                        stats = ix.index_paths([root]) if root.is_dir() else ix.forget_root(root)
                    else:
                        stats = ix.index_changes(root, paths)
            except StoreBusyError:
                self.stop.wait(BUSY_RETRY_S)
                continue
            except IndexStopped:
                return None
            except BrainbotError as exc:  # reported; the watch goes on
                report = PassReport(str(root), _listed(paths), IndexStats(), 0.0, str(exc))
            else:
                report = PassReport(str(root), _listed(paths), stats,
                                    time.perf_counter() - started)
            if self.on_pass:
                self.on_pass(report)
            return report
        return None

    # -- events ------------------------------------------------------------------------
    def _batches(self) -> Iterator[dict[Path, set[str] | None]]:
        """Batches of changes as {root: relative note paths, or None for a full pass}.
        A folder gets a full pass once its watch is armed: at the start, and whenever it
        comes back after being deleted (its events in between were never seen)."""
        from watchfiles import Change, watch

        armed: dict[Path, tuple[int, int]] = {}  # root -> the folder (dev, inode) watched
        while not self.stop.is_set():
            present = {r: key for r in self.roots if (key := _folder(r))}
            armed = {r: key for r, key in armed.items() if present.get(r) == key}
            if not present:
                self.stop.wait(MISSING_POLL_MS / 1000)
                continue
            for changes in watch(*present, stop_event=self.stop, yield_on_timeout=True,
                                 rust_timeout=MISSING_POLL_MS, raise_interrupt=False):
                batch = self._classify(changes)
                batch.update({r: None for r in present if r not in armed})
                armed = dict(present)
                gone = {r for r in present if (Change.deleted, str(r)) in changes}
                for r in gone:
                    armed.pop(r, None)  # whatever is there when we look again: a full pass
                if batch:
                    yield batch
                if gone or {r: key for r in self.roots if (key := _folder(r))} != present:
                    break  # re-arm: a deleted folder silences its OS watcher for good,
                    # even when one of the same name is back by now (its inode may even
                    # be the old one's, reused: hence the event, not only the inode)

    def _classify(self, changes) -> dict[Path, set[str] | None]:
        batch: dict[Path, set[str] | None] = {}
        for _, raw in changes:
            path = Path(raw)
            root = next((r for r in self.roots if path == r or r in path.parents), None)
            if root is None or path == root:
                continue
            rel = path.relative_to(root).as_posix()
            if rel.lower().endswith(EXTENSIONS) and not path.is_dir():
                if batch.get(root, set()) is not None:
                    batch.setdefault(root, set()).add(rel)
            elif path.name == IGNORE_FILE or path.is_dir() or not path.suffix:
                batch[root] = None  # a folder moved in or away, or new ignore rules
        return batch


def _folder(path: Path) -> tuple[int, int] | None:
    """(device, inode) of a folder, or None when it is not one."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if path.is_dir() else None


def _listed(paths: set[str] | None) -> list[str] | None:
    return None if paths is None else sorted(paths)


def quiet_library_logs() -> None:
    """watchfiles logs every batch at INFO; brainbot reports passes itself."""
    logging.getLogger("watchfiles").setLevel(logging.WARNING)


def install_stop_signals(stop: threading.Event) -> None:
    """SIGTERM and SIGINT set ``stop`` instead of killing the process mid-transaction."""
    import signal

    def handler(signum, frame):  # noqa: ARG001
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, handler)
