"""Building and updating the index: discover → read → chunk → embed → write.

Incremental: a file whose size and mtime match the stored row is skipped unread; one
whose bytes hash the same is only touched. A changed file is re-chunked, and any chunk
whose retrieval text already has a vector (in this file, another file, or a renamed one)
reuses it, so only new text reaches the embedder. Files that disappeared leave with their
chunks, vectors and postings.

Resumable: work is written one batch per transaction (documents, chunks, vectors and
postings together), so a killed run keeps every committed batch and the next run picks
up what is left. A second indexer on the same index is refused while one runs (the
store's writer lock).

This module talks to the index only through the store interface (``store/interface.py``), so it
indexes into SQLite and Postgres alike. It does not rank or answer anything.
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from brainbot.errors import IndexStopped
from brainbot.notes import files as notes
from brainbot.notes import language
from brainbot.store.interface import NewChunk, NewDocument
from brainbot.store.target import open_store
from brainbot.text import documents, lexical
from brainbot.text.documents import Chunked, Document

# Chunks per write transaction. Small enough that a kill loses seconds of work, large
# enough that embedding batches stay full (8 texts per ONNX batch was fastest here).
BATCH_CHUNKS = 64


class _Pending:
    """What the next write transaction holds."""

    def __init__(self) -> None:
        self.batch: list[Chunked] = []  # new or changed documents
        self.touched: list[tuple[int, int, int]] = []  # (id, size, mtime): same bytes
        self.refreshed: list[tuple[int, Chunked]] = []  # unchanged: vault facts to fill
        self.chunks = 0

    def add(self, item: Chunked) -> None:
        self.batch.append(item)
        self.chunks += len(item.chunks)

    @property
    def full(self) -> bool:
        return self.chunks + len(self.refreshed) >= BATCH_CHUNKS

    def __bool__(self) -> bool:
        return bool(self.batch or self.touched or self.refreshed)


@dataclass
class IndexStats:
    new: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    chunks: int = 0
    embedded: int = 0
    seconds: float = 0.0
    skipped: list[notes.Problem] = field(default_factory=list)
    warnings: list[notes.Problem] = field(default_factory=list)
    non_english: float = 0.0  # share of the index's chunks that do not read as English
    language_note: str | None = None  # said once, when that share is high

    def summary(self) -> str:
        return (f"{self.new:,} new, {self.updated:,} updated, {self.unchanged:,} unchanged, "
                f"{self.removed:,} removed · {self.chunks:,} chunks · {self.embedded:,} embedded"
                f" · {self.seconds:.1f} s")

    def to_dict(self) -> dict:
        return {"new": self.new, "updated": self.updated, "unchanged": self.unchanged,
                "removed": self.removed, "chunks": self.chunks, "embedded": self.embedded,
                "seconds": round(self.seconds, 3),
                "skipped": [{"path": p.path, "reason": p.reason} for p in self.skipped],
                "warnings": [{"path": p.path, "reason": p.reason} for p in self.warnings],
                "non_english": round(self.non_english, 4), "language_note": self.language_note}


def _sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Indexer:
    """Writes documents into one index through its store. Use as a context manager: the
    store's writer lock is held from enter to exit."""

    def __init__(self, db_path, *, precision: str = "fp32", embedder=None, params=None,
                 rebuild: bool = False, progress: Callable[[int, int], None] | None = None,
                 stop=None):
        from brainbot.store.identity import current
        from brainbot.text.chunking import ChunkParams
        from brainbot.text.tokens import TokenCounter

        self.db_path = db_path
        self.params = params or ChunkParams()
        self.identity = current(precision, self.params)
        self.precision = precision
        self._embedder = embedder
        self.counter = TokenCounter()
        self.progress = progress
        self.rebuild = rebuild
        self.stats = IndexStats()
        self.store = None
        self.refreshing = False  # an index from before links and tags: fill them for all
        self.dirty = False  # something was written: links may point elsewhere now
        self.stop = stop  # a threading.Event: set, the run ends before its next transaction

    # -- lifecycle -------------------------------------------------------------------
    def __enter__(self) -> Indexer:
        self.store = open_store(self.db_path, write=True, identity=self.identity,
                                rebuild=self.rebuild)
        try:
            self.store.record_identity(self.identity)
            self.refreshing = self.store.meta().get("vault_refresh") == "1"
        except BaseException:
            self.store.close()
            self.store = None
            raise
        self.started = time.perf_counter()
        return self

    def __exit__(self, exc_type, *exc) -> None:
        store, self.store = self.store, None
        if store is None:
            return
        try:
            store.close()
        except Exception:  # noqa: BLE001
            if exc_type is None:  # else the error in flight is the one to report
                raise

    @property
    def embedder(self):
        if self._embedder is None:
            from brainbot.model.embed import Embedder

            self._embedder = Embedder(precision=self.precision)
        return self._embedder

    # -- public entry points -------------------------------------------------------------
    def index_paths(self, paths: Iterable) -> IndexStats:
        """Index folders or single files; removes vanished files under each folder."""
        for root in documents.roots(paths):
            self.stats.skipped.extend(root.problems)
            known = self.store.known_documents(root.path)
            self._index_documents(root.path, self._changed(root, known), root.scope, known)
        if self.refreshing:
            self._check_stop()
            with self.store.batch():
                self.store.set_meta("vault_refresh", None)
            self.refreshing = False
        return self.finish()

    def index_changes(self, root, relpaths: Iterable[str]) -> IndexStats:
        """Re-index only ``relpaths`` (POSIX, relative to the folder ``root``): the ones
        that are notes on disk are indexed, the others leave the index."""
        relpaths = set(relpaths)
        found = notes.discover_some(Path(root), relpaths)
        target = documents.Root(Path(root).absolute().as_posix(), relpaths, found.files,
                                found.problems)
        self.stats.skipped.extend(found.problems)
        known = self.store.known_documents(target.path)
        self._index_documents(target.path, self._changed(target, known), relpaths, known)
        return self.finish()

    def forget_root(self, root) -> IndexStats:
        """Remove every document of a folder that no longer exists."""
        path = Path(root).absolute().as_posix()
        self._index_documents(path, iter(()), None, self.store.known_documents(path))
        return self.finish()

    def finish(self) -> IndexStats:
        """Resolve links if anything changed, and total up."""
        if self.dirty or self.stats.removed:
            with self.store.batch():
                self.store.resolve_links()
            self.dirty = False
        self.stats.chunks = self.store.chunk_count()
        other, known = self.store.language_share()
        self.stats.non_english = other / known if known else 0.0
        if self.stats.non_english >= language.NON_ENGLISH_WARN:
            self.stats.language_note = language_note(self.stats.non_english)
        self.stats.seconds = time.perf_counter() - self.started
        return self.stats

    def index_documents(self, root: str, docs: Iterable[Document],
                        scope: set[str] | None = None) -> None:
        """Index already-read ``docs`` under ``root`` (dataset records); documents of the
        root not among them are removed (only those named in ``scope`` when given)."""
        self._index_documents(root, ((d.relpath, d) for d in docs), scope,
                              self.store.known_documents(root))

    # -- steps ----------------------------------------------------------------------------
    def _changed(self, root: documents.Root, known: dict):
        """(relpath, Document or None): None for a file whose size and mtime match the
        index, which is never read (unless its vault facts are still to be filled). An
        unreadable file is reported and left out."""
        for done, note in enumerate(root.files, 1):
            if self.progress:
                self.progress(done, len(root.files))
            prior = known.get(note.relpath)
            same = prior and (prior.size, prior.mtime_ns) == (note.size, note.mtime_ns)
            if same and not self.refreshing:
                yield note.relpath, None
                continue
            try:
                yield note.relpath, documents.read(note)
            except notes.UnreadableNote as exc:
                self.stats.skipped.append(notes.Problem(note.relpath, str(exc)))

    def _index_documents(self, root: str, items, scope, known: dict) -> None:
        seen: set[str] = set()
        pending = _Pending()
        for relpath, doc in items:
            seen.add(relpath)
            prior = known.get(relpath)
            if doc is None or (prior and prior.sha256 == doc.sha256):
                self.stats.unchanged += 1
                if doc is not None:
                    pending.touched.append((prior.id, doc.size, doc.mtime_ns))
                if doc is not None and self.refreshing:  # facts only: nothing re-embedded
                    pending.refreshed.append((prior.id, self._chunk(doc)))
            else:
                pending.add(self._chunk(doc))
            if pending.full:
                self._write_batch(pending, known)
                pending = _Pending()
        if pending:
            self._write_batch(pending, known)
        gone = [known[p].id for p in known if p not in seen and (scope is None or p in scope)]
        if gone:
            self._check_stop()
            with self.store.batch():
                self.store.delete_documents(gone)
            self.stats.removed += len(gone)

    def _chunk(self, doc: Document) -> Chunked:
        item = documents.chunk(doc, self.counter, self.params)
        self.stats.warnings.extend(notes.Problem(doc.relpath, w, skipped=False)
                                   for w in item.warnings)
        return item

    def _vectors_for(self, chunks: list) -> tuple[dict, int]:
        """A vector for every chunk text hash: reused from the index or embedded now."""
        hashes = {_sha256_text(c.retrieval_text): c.retrieval_text for c in chunks}
        found = self.store.vectors_for(list(hashes))
        todo = {h: text for h, text in hashes.items() if h not in found}
        if todo:
            found.update(zip(todo, self.embedder.embed(list(todo.values())), strict=True))
        return found, len(todo)

    def _write_batch(self, pending: _Pending, known: dict) -> None:
        self._check_stop()
        vectors, embedded = self._vectors_for([c for item in pending.batch
                                               for c in item.chunks])
        with self.store.batch():
            if pending.touched:
                self.store.touch_documents(pending.touched)
            for doc_id, item in pending.refreshed:
                self.store.record_facts(doc_id, item.facts, [
                    language.looks_english(c.retrieval_text) for c in item.chunks])
            for item in pending.batch:
                prior = known.get(item.doc.relpath)
                if prior:
                    self.store.delete_documents([prior.id])
                self.store.add_document(_new_document(item, vectors))
        for item in pending.batch:
            if known.get(item.doc.relpath):
                self.stats.updated += 1
            else:
                self.stats.new += 1
            item.doc.text = ""  # let the text go: large vaults should not pile up in memory
        self.stats.embedded += embedded
        self.dirty = True

    def _check_stop(self) -> None:
        if self.stop is not None and self.stop.is_set():
            raise IndexStopped("stopped before the next transaction; run again to finish")


def language_note(share: float) -> str:
    return (f"{share:.0%} of your notes look non-English; vector search is English-only, "
            "BM25 carries them")


def _new_document(item: Chunked, vectors: dict) -> NewDocument:
    doc = item.doc
    chunks = []
    for c in item.chunks:
        h = _sha256_text(c.retrieval_text)
        terms, length = lexical.term_frequencies(c.retrieval_text)
        chunks.append(NewChunk(c, h, vectors[h], terms, length,
                               language.looks_english(c.retrieval_text)))
    return NewDocument(doc.root, doc.relpath, doc.sha256, doc.size, doc.mtime_ns, item.title,
                       item.parsed.front_matter, doc.kind, list(item.warnings), chunks,
                       item.facts)


def progress_printer(stream=None) -> Callable[[int, int], None] | None:
    """A tqdm progress bar with ETA when stderr is a terminal, else None."""
    stream = stream or sys.stderr  # looked up now: tests and tools swap sys.stderr
    if not stream.isatty():
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    bar = {"bar": None}

    def update(done: int, total: int) -> None:
        if bar["bar"] is None:
            bar["bar"] = tqdm(total=total, unit="file", file=stream, leave=False,
                              mininterval=0.5)
        bar["bar"].update(1)
        if done >= total:
            bar["bar"].close()

    return update
