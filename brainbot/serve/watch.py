"""`brainbot watch`: keep an index fresh while notes change, with watchfiles.

One pass brings the index up to date first; after that, every batch of file events
(watchfiles debounces them: a `git checkout` of 1,000 files arrives as one batch) is one
pass through the same Indexer as `brainbot index`, with its writer lock taken for the
pass only, so a `brainbot index` can still run between passes. A pass re-indexes only
the notes named by the events; a folder that appears, or a changed `.brainbotignore`,
re-walks the whole folder, which costs a no-op index of it. Hidden paths (`.git/…`, an
editor's `.note.md.swp`) are skipped, as discovery skips them.

Event kinds are not trusted (an editor's atomic save arrives as "added", a folder rename
carries no events for the files inside): every named path is looked at on disk again. A
path that is gone takes out the notes the index holds under it, so a folder moved away
(`v1.2`, `notes.old`: one event for the folder itself) leaves with its notes. A watched
folder that goes away silences its OS watcher: the watch is re-armed when it comes back,
with a full pass for it. While it is away its notes are kept (an unmounted drive, or a
folder renamed back, must not cost a re-embedding of every note): no pass runs for it,
and once it has been away for MISSING_AFTER_S the watch's log and `status` say so; only
`brainbot index --prune` removes them.

A pass refused by another writer waits and retries. A pass that fails for any other
reason (or the OS watcher itself: watchfiles cannot decode a name that is not UTF-8) is
reported, and the folder gets a full pass after a back-off of 1 s, doubling to 5 min;
the watch goes on. Setting ``stop`` (SIGTERM, Ctrl-C) ends the watch between
transactions.

Passes never wait for embeddings: each runs only the lexical phase, so what it wrote is
searchable by BM25 at once, and the semantic phase runs on a background thread
(``serve/background.py``), woken by a pass that leaves chunks without a vector. Stopping
ends it between model runs; run() returns once it has.

This module watches and schedules; indexing is ``index/indexer.py``'s.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from brainbot.errors import BrainbotError, IdentityMismatchError, IndexStopped, StoreBusyError
from brainbot.index.freshness import missing_root_line
from brainbot.index.indexer import IndexStats
from brainbot.notes.files import EXTENSIONS, IGNORE_FILE

from .background import Embedding, EmbedReport, Halt, Interruptible, busy_retry_s

# How often a missing watched folder is looked for (watchfiles yields empty batches at
# this period while waiting).
MISSING_POLL_MS = 500
# After a failed pass the folder waits this long for its retry, doubled at each failure
# in a row up to BACKOFF_MAX_S: a lasting failure (a full disk, an index another brainbot
# built) is reported every five minutes, not in a loop; a pass that succeeds resets it.
BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 300.0
# How long a watched folder must stay gone before it is reported as missing (its notes
# are kept either way). Tools that swap a folder (git, sync clients,
# `mv notes old && mv new notes`) put one back well within a second.
MISSING_AFTER_S = 10.0
# How long the end of run() waits for the background semantic phase's model run in flight.
EMBED_JOIN_S = 30.0

log = logging.getLogger("brainbot.serve.watch")

Batch = dict[Path, "set[str] | None"]  # root -> relative note paths; None: a full pass


@dataclass
class PassReport:
    """What one pass did: which folders and notes, the index stats, how long it took."""

    root: str
    paths: list[str] | None  # None: the whole folder was walked
    stats: IndexStats
    seconds: float
    error: str | None = None
    kept: int | None = None  # not a pass: the folder is missing, the index keeps its notes

    def line(self) -> str:
        if self.kept is not None:
            return f"{time.strftime('%H:%M:%S')}  {missing_root_line(self.root, self.kept)}"
        what = "all notes" if self.paths is None else ", ".join(self.paths[:3]) + (
            f" (+{len(self.paths) - 3})" if len(self.paths) > 3 else "")
        head = f"{time.strftime('%H:%M:%S')}  {self.root}: {what}"
        if self.error:
            return f"{head} · error: {self.error}"
        s = self.stats
        skipped = f", {len(s.skipped)} skipped" if s.skipped else ""
        return (f"{head} · {s.new} new, {s.updated} updated, {s.removed} removed{skipped}"
                f" · {s.embedded_line()} · {self.seconds:.2f} s")


@dataclass
class _Failing:
    """A folder whose last pass failed: what it owes and when it is retried."""

    error: str
    since: float  # time.time() of the first failure in a row
    count: int
    retry_at: float  # time.monotonic()
    owed: set[str] | None = None  # paths still to index; None: a full pass


@dataclass
class Watcher:
    """Watches ``roots`` and keeps the index at ``db`` up to date until ``stop`` is set.
    ``embedder``: one to share (its precision is tried first); else one is made at the
    precision the index was built with."""

    roots: list[Path]
    db: str
    embedder: object = None
    stop: threading.Event = field(default_factory=threading.Event)
    on_pass: Callable[[PassReport], None] | None = None
    on_embed: Callable[[EmbedReport], None] | None = None
    missing_after_s: float = MISSING_AFTER_S
    # what `mcp --watch` reports in `status`
    passes: int = field(default=0, init=False)
    last: PassReport | None = field(default=None, init=False)
    failing: dict[Path, _Failing] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.roots = [Path(r).absolute() for r in self.roots]
        self.precision = getattr(self.embedder, "precision", None)
        self._missing_since: dict[Path, float] = {}
        self.missing: dict[Path, int] = {}  # reported missing: the notes the index keeps
        self._ended = threading.Event()  # run() is over: the semantic phase stops too
        self.semantic = Embedding(self._background_indexer, self._said, _backoff)

    @property
    def settled(self) -> threading.Event:
        """Set while the index has a vector for every chunk (as last seen)."""
        return self.semantic.settled

    def share(self, embedder) -> None:
        """Index with ``embedder`` (the server's searcher's: one ONNX session)."""
        self.embedder, self.precision = embedder, getattr(embedder, "precision", None)

    def prepare(self) -> None:
        """Create or migrate the index, as a writer does when it opens one, waiting while
        another writer holds it."""
        tries = 0
        while not self.stop.is_set():
            try:
                with self._indexer():
                    return
            except StoreBusyError:
                tries = _busy_wait(self.stop, tries)

    def run(self) -> None:
        """Index everything once, then each batch of changes, until stopped. Whatever
        goes wrong is reported and retried after a back-off; only ``stop`` ends it."""
        for root in self.roots:
            if _folder(root) is None and not self._missing(root):
                self._report(PassReport(str(root), None, IndexStats(), 0.0,
                                        "not a folder (yet); watching for one to appear"))
        self._ended.clear()
        embedding = threading.Thread(target=self.semantic.run, args=(Halt(self.stop,
                                     self._ended),), name="semantic", daemon=True)
        embedding.start()
        try:
            self._watch_loop()
        finally:
            self._ended.set()
            embedding.join(timeout=EMBED_JOIN_S)

    def _watch_loop(self) -> None:
        failures = 0
        while not self.stop.is_set():
            try:
                for batch in self._batches():
                    self._run(batch)
                    failures = 0
                return
            except Exception as exc:  # noqa: BLE001 - the OS watcher: re-armed, full passes
                failures += 1  # its message says it all (a Latin-1 name): no traceback
                self._report(PassReport(", ".join(map(str, self.roots)), None, IndexStats(),
                                        0.0, f"watching failed ({_describe(exc)}); "
                                        "watching again with a full pass"))
                self.stop.wait(_backoff(failures))

    def _run(self, batch: Batch) -> None:
        now = time.monotonic()
        for root, failing in list(self.failing.items()):
            if root in batch:  # the folder waits out its back-off with the new events
                failing.owed = _merged(failing.owed, batch.pop(root))
            if now >= failing.retry_at:
                batch[root] = _merged(failing.owed, batch.get(root, set()))
        for root, paths in batch.items():
            if self.stop.is_set():
                return
            self.index(root, paths)

    # -- one pass --------------------------------------------------------------------
    def index(self, root: Path, paths: set[str] | None) -> PassReport | None:
        """One pass over ``paths`` of ``root`` (None: the whole folder), retried while
        another writer holds the lock; None when stopped first, or when the folder is not
        there (its notes are kept: the pass when it is back catches up)."""
        tries = 0
        while not self.stop.is_set():
            started = time.perf_counter()
            if not root.is_dir():
                self.failing.pop(root, None)
                return None
            try:
                with self._indexer() as ix:
                    if paths is None:
                        stats = ix.index_paths([root])
                    else:
                        stats = ix.index_changes(root, paths)
            except StoreBusyError:
                tries = _busy_wait(self.stop, tries)
                continue
            except IndexStopped:
                return None
            except Exception as exc:  # noqa: BLE001 - reported, retried; the watch goes on
                self._fail(root, paths, exc)
                return self.last
            self.failing.pop(root, None)
            self.semantic.owe(stats.partial)
            self._report(PassReport(str(root), _listed(paths), stats,
                                    time.perf_counter() - started))
            return self.last
        return None

    def _background_indexer(self, halt: Halt):
        """The semantic phase's Indexer: stopped by ``halt``, between model runs too."""
        return self._indexer(stop=halt, interruptible=True)

    def _said(self, report: EmbedReport) -> None:
        if self.on_embed:
            self.on_embed(report)

    @contextmanager
    def _indexer(self, stop=None, interruptible: bool = False):
        """An open Indexer at the index's own precision: `index --precision int8` records
        it in the index's embedder ("…:int8:…"), and a writer of another precision is
        refused; a refusal for nothing but the precision switches to the recorded one.
        It runs the lexical phase only: the semantic phase is the background's, whose
        model runs stop in between (``interruptible``)."""
        from brainbot.index.indexer import Indexer
        from brainbot.model.embed import DEFAULT_PRECISION
        from brainbot.store.target import recorded_precision

        precision = self.precision or recorded_precision(self.db) or DEFAULT_PRECISION
        model = self._model()
        while True:
            embedder = self._embedder(precision, model)
            if interruptible:
                embedder = Interruptible(embedder, stop or self.stop)
            ix = Indexer(self.db, precision=precision, embedder=embedder,
                         stop=stop or self.stop, embed=False, model=model)
            try:
                ix.__enter__()
                break
            except IdentityMismatchError as exc:
                recorded = _precision_of(exc, model)
                if recorded is None or recorded == precision:
                    raise
                precision = recorded
        self.precision = precision
        try:
            yield ix
        except BaseException as exc:
            ix.__exit__(type(exc), exc, exc.__traceback__)
            raise
        ix.__exit__(None, None, None)

    def _model(self):
        """The index's model (model_choice.choose_model: the one it records, else for a
        new index the one its notes call for, said once); a shared embedder's when the
        index records none yet."""
        from brainbot.index.model_choice import choose_model
        from brainbot.store.target import recorded_meta

        if "model" not in recorded_meta(self.db) and getattr(self.embedder, "model", None):
            return self.embedder.model
        choice = choose_model(self.db, [str(r) for r in self.roots])
        if choice.line:
            log.info("%s", choice.line)
        return choice.record

    def _embedder(self, precision: str, model):
        if (self.embedder is None or getattr(self.embedder, "precision", precision) != precision
                or getattr(self.embedder, "model", model) != model):
            from brainbot.model.embed import Embedder

            self.embedder = Embedder(precision=precision, model=model)  # loads on first use
        return self.embedder

    def _fail(self, root: Path, paths: set[str] | None, exc: Exception) -> None:
        before = self.failing.get(root)
        count = before.count + 1 if before else 1
        error = str(exc) if isinstance(exc, BrainbotError) else _describe(exc)
        # Part of the pass may have committed: the retry walks the whole folder.
        self.failing[root] = _Failing(error, before.since if before else time.time(), count,
                                      time.monotonic() + _backoff(count), None)
        report = PassReport(str(root), _listed(paths), IndexStats(), 0.0,
                            f"{error}; retrying in {_backoff(count):.0f} s")
        self._report(report, None if isinstance(exc, BrainbotError) else exc)

    def _report(self, report: PassReport, exc: Exception | None = None) -> None:
        if exc is not None:  # not one of brainbot's own errors: a bug; keep its traceback
            log.warning("%s", report.line(), exc_info=exc)
        self.passes += report.error is None and report.kept is None
        self.last = report
        if self.on_pass:
            self.on_pass(report)

    def state(self) -> dict:
        """For `status`: the folders watched, the passes so far, the last one, the folders
        whose passes are failing (with the error and since when), and the missing ones."""
        return {"roots": [str(r) for r in self.roots], "passes": self.passes,
                "missing": {str(r): missing_root_line(str(r), n)
                            for r, n in list(self.missing.items()) if n},
                "last_pass": self.last.line() if self.last else None,
                "semantic": dict(self.semantic.state),
                "failing": {str(r): {"error": f.error, "since": _iso(f.since),
                                     "failures": f.count}
                            for r, f in list(self.failing.items())}}

    # -- events ------------------------------------------------------------------------
    def _batches(self) -> Iterator[Batch]:
        """Batches of changes (empty ones every MISSING_POLL_MS, for retries). A folder
        gets a full pass once its watch is armed: at the start, and whenever it comes
        back after being deleted (its events in between were never seen)."""
        from watchfiles import Change, watch

        armed: dict[Path, tuple[int, int]] = {}  # root -> the folder (dev, inode) watched
        while not self.stop.is_set():
            present = {r: key for r in self.roots if (key := _folder(r))}
            armed = {r: key for r, key in armed.items() if present.get(r) == key}
            if not present:
                self._note_missing(present)
                yield {}
                self.stop.wait(MISSING_POLL_MS / 1000)
                continue
            for changes in watch(*present, stop_event=self.stop, yield_on_timeout=True,
                                 rust_timeout=MISSING_POLL_MS, raise_interrupt=False):
                batch = self._classify(changes)
                batch.update({r: None for r in present if r not in armed})
                armed = dict(present)
                now = {r: key for r in self.roots if (key := _folder(r))}
                self._note_missing(now)
                gone = {r for r in present if (Change.deleted, str(r)) in changes}
                for r in gone:
                    armed.pop(r, None)  # whatever is there when we look again: a full pass
                yield batch
                if gone or now != present:
                    break  # re-arm: a deleted folder silences its OS watcher for good,
                    # even when one of the same name is back by now (its inode may even
                    # be the old one's, reused: hence the event, not only the inode)

    def _note_missing(self, present) -> None:
        """Report, once, each watched folder away for missing_after_s: its notes are kept.
        One that is back is watched again (a full pass when it is re-armed)."""
        now = time.monotonic()
        for root in self.roots:
            if root in present:
                self._missing_since.pop(root, None)
                self.missing.pop(root, None)
            elif root not in self.missing and (
                    now - self._missing_since.setdefault(root, now) >= self.missing_after_s):
                self._missing(root)

    def _missing(self, root: Path) -> bool:
        """Report ``root`` missing if the index keeps notes of it; whether it does."""
        kept = self.missing[root] = len(self._known(root))  # 0: not reported, not asked again
        if kept:
            self._report(PassReport(str(root), None, IndexStats(), 0.0, kept=kept))
        return bool(kept)

    def _classify(self, changes) -> Batch:
        batch: Batch = {}
        vanished: dict[Path, set[str]] = {}
        for _, raw in changes:
            path = Path(raw)
            root = next((r for r in self.roots if path == r or r in path.parents), None)
            if root is None or path == root:
                continue
            rel = path.relative_to(root).as_posix()
            if rel == IGNORE_FILE or (not _hidden(rel) and path.is_dir()):
                batch[root] = None  # new ignore rules, or a folder moved in
            elif _hidden(rel):
                continue  # .git/…, an editor's swap file: discovery never indexes them
            elif rel.lower().endswith(EXTENSIONS) and path.exists():
                _add(batch, root, {rel})
            elif not path.exists():
                vanished.setdefault(root, set()).add(rel)  # a note, or a folder of them
        for root, rels in vanished.items():
            gone = {r for r in rels if r.lower().endswith(EXTENSIONS)}
            _add(batch, root, gone | self._notes_under(root, rels))
        return batch

    def _notes_under(self, root: Path, prefixes: set[str]) -> set[str]:
        """The notes the index holds under the vanished paths ``prefixes``: a folder moved
        away arrives as one event for itself. Read with a reader: no writer lock."""
        known = self._known(root)
        return {p for p in known if any(p.startswith(pre + "/") for pre in prefixes)}

    def _known(self, root: Path) -> set[str]:
        """The notes the index holds under ``root``, read with a reader: no writer lock."""
        from brainbot.store.target import open_store

        try:
            with open_store(self.db) as store:
                return set(store.known_documents(root.as_posix()))
        except BrainbotError:  # no index yet, or one to migrate: nothing under it
            return set()


def _hidden(rel: str) -> bool:
    return any(part.startswith(".") for part in rel.split("/"))


def _add(batch: Batch, root: Path, rels: set[str]) -> None:
    if rels and batch.get(root, set()) is not None:
        batch.setdefault(root, set()).update(rels)


def _merged(a: set[str] | None, b: set[str] | None) -> set[str] | None:
    return None if a is None or b is None else a | b


def _precision_of(exc: IdentityMismatchError, model) -> str | None:
    """The precision an index records, when it differs from ours in nothing else."""
    from brainbot.model.embed import PRECISIONS, Embedder

    if exc.key != "embedder":
        return None
    return next((p for p in PRECISIONS
                 if Embedder(precision=p, model=model).fingerprint == exc.theirs), None)


def _busy_wait(stop: threading.Event, tries: int) -> int:
    """Wait before retry ``tries`` (from 0) of a pass refused by another writer
    (background.busy_retry_s); returns the next retry's number."""
    stop.wait(busy_retry_s(tries))
    return tries + 1


def _backoff(failures: int) -> float:
    return min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2 ** (failures - 1))


def _describe(exc: Exception) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(seconds))


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
