"""Building and updating the index, in two phases.

Lexical phase: discover → read → chunk (on every usable core) → write documents, chunks,
postings, links, tags and dates, in committed batches. At its end every note is
searchable by BM25, links, tags and the filters. Semantic phase (``index/semantic.py``):
the chunks that have no vector are embedded and their vectors written, one committed
batch at a time, the writer lock taken for each write and released while the phase waits
for the model, so a `brainbot index` can run between two batches. The model runs in a
thread of its own, a batch ahead of the writes, and starts during the lexical phase on
its first new texts. A partly embedded index is a normal state: search says so.

Incremental: a file whose size and mtime match the stored row is skipped unread; one
whose bytes hash the same is only touched. A changed file is re-chunked, and any chunk
whose retrieval text already has a vector (in this file, another file, or a renamed one)
reuses it, so only new text reaches the embedder. Files that disappeared leave with their
chunks, vectors and postings.

The model: an index embeds with one model record (``model/records.py``), which it records
and keeps; ``choose_model`` gives a new index of mostly non-English notes the
multilingual one (and the line saying so), and chunks are counted in the model's own
tokenizer. Another model needs ``--rebuild``: its vectors are made again (the old file's
are another model's, which the salvage never reuses).

`--rebuild`: the lexical phase writes a new index beside the old one, which readers keep
answering from; at its end the new one replaces the old whole (``store.publish()``; on
SQLite a file moved over the path, ``store/sqlite/rebuild.py``; on Postgres a schema
swapped in, ``store/pg/rebuild.py``), and the semantic phase runs on it as on any index.
A rebuild stopped or killed before that leaves the old index as it was. The old index's
vectors are reused by text hash when the same model and embedder made them
(``store/sqlite/salvage.py``). A rebuild never replaces an index holding notes with an
empty one unless ``allow_empty`` (an empty or mistyped folder, every note ignored or
unreadable: EmptyRebuildError, the old index kept), and the old index's notes it did not
carry over count as removed.

Resumable: work is written one batch per transaction, so a killed run keeps every
committed batch and the next run picks up what is left: the notes not yet written, then
the chunks not yet embedded (a text's vector does not depend on its batch, so the result
is the clean index's, bit for bit). A second indexer on the same index is refused while one runs (the
store's writer lock).

This module talks to the index only through the store interface (``store/interface.py``), so it
indexes into SQLite and Postgres alike. It does not rank or answer anything.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import closing, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from brainbot.errors import EmptyRebuildError, IndexStopped, ReadOnlyStoreError
from brainbot.notes import files as notes
from brainbot.notes import language
from brainbot.store.records import NewChunk, NewDocument
from brainbot.store.target import open_store, recorded_precision
from brainbot.text import analyzers, documents
from brainbot.text.documents import Chunked, Document

from . import semantic
from .freshness import stat_vouches
from .lease import held_elsewhere as lease_held_elsewhere
from .model_choice import ModelChoice, check_fits, choose_model

# Chunks per lexical write transaction: at least BATCH_CHUNKS, then committed once
# BATCH_SECONDS have passed since the batch began, and never more than BATCH_MAX_CHUNKS.
# Each commit rewrites the postings pages it touches and bumps the generation readers
# reload by, so a big vault in commits of 64 chunks spent most of its lexical phase
# writing (121k chunks: ~1,900 commits, ~4.8 GB of page writes); a kill still loses at
# most a couple of seconds of chunking, and a first batch is searchable within seconds.
BATCH_CHUNKS = 64
BATCH_MAX_CHUNKS = 4096
BATCH_SECONDS = 2.0
# Chunks per semantic-phase batch: one write transaction and one take of the writer lock.
# About 8 s of the model on 2 cores; a kill loses at most that.
EMBED_CHUNKS = 256
LOCK_RETRY_SECONDS = 0.25  # the semantic phase waits this long between takes of a busy lock
STAGES = ("discover", "read", "chunk", "write", "links")


class _Pending:
    """What the next write transaction holds."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.batch: list[Chunked] = []  # new or changed documents
        self.touched: list[tuple] = []  # (id, size, mtime, read_ns): same bytes
        self.refreshed: list[tuple[int, Chunked]] = []  # unchanged: vault facts to fill
        self.chunks = 0

    def add(self, item: Chunked) -> None:
        self.batch.append(item)
        self.chunks += len(item.chunks)

    @property
    def full(self) -> bool:
        size = self.chunks + len(self.refreshed)
        if size >= BATCH_MAX_CHUNKS:
            return True
        return size >= BATCH_CHUNKS and time.monotonic() - self.started >= BATCH_SECONDS

    def __bool__(self) -> bool:
        return bool(self.batch or self.touched or self.refreshed)


@dataclass
class IndexStats:
    new: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    chunks: int = 0
    embedded: int = 0  # texts embedded by this run
    vectors: int = 0  # chunks of the index that have a vector, at the end
    lexical_seconds: float = 0.0  # start to the end of the lexical phase
    embed_seconds: float = 0.0  # the semantic phase
    seconds: float = 0.0
    skipped: list[notes.Problem] = field(default_factory=list)
    warnings: list[notes.Problem] = field(default_factory=list)
    non_english: float = 0.0  # share of the index's chunks that do not read as English
    model: str = ""  # the model the index embeds with (model/records.py)
    model_note: str | None = None  # why, when it was chosen for the notes (model_choice)
    language_note: str | None = None  # said once, when that share is high
    # Seconds of the lexical phase by stage, in this process: discover, read, chunk (the
    # wait for the chunking workers, reading excluded), write, links.
    stages: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))

    def summary(self) -> str:
        return (f"{self.new:,} new, {self.updated:,} updated, {self.unchanged:,} unchanged, "
                f"{self.removed:,} removed · {self.chunks:,} chunks · {self.embedded:,} embedded"
                f" · {self.seconds:.1f} s")

    @property
    def partial(self) -> bool:
        return self.vectors < self.chunks

    def embedded_line(self) -> str:
        """The count every surface shows: "4,210 of 5,674 chunks embedded"."""
        return embedded_line(self.vectors, self.chunks)

    def to_dict(self) -> dict:
        return {"new": self.new, "updated": self.updated, "unchanged": self.unchanged,
                "removed": self.removed, "chunks": self.chunks, "embedded": self.embedded,
                "vectors": self.vectors, "lexical_seconds": round(self.lexical_seconds, 3),
                "embed_seconds": round(self.embed_seconds, 3),
                "seconds": round(self.seconds, 3),
                "skipped": [{"path": p.path, "reason": p.reason} for p in self.skipped],
                "warnings": [{"path": p.path, "reason": p.reason} for p in self.warnings],
                "non_english": round(self.non_english, 4), "language_note": self.language_note,
                "model": self.model, "model_note": self.model_note,
                "stages_seconds": {k: round(v, 3) for k, v in self.stages.items()}}


@contextmanager
def _timed(stages: dict[str, float], name: str):
    start = time.perf_counter()
    try:
        yield
    finally:
        stages[name] += time.perf_counter() - start


def _sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Indexer:
    """Writes documents into one index through its store. Use as a context manager: the
    store's writer lock is held from enter to exit, except while the semantic phase runs
    the model (it is taken again for each batch's write). Progress is only reported:
    ``progress(done, total)`` per file, ``embed_progress(done, total)`` per chunk; the
    caller draws it (the CLI's bars are ``render.progress_printer``)."""

    embed_chunks: int | None = None  # chunks per semantic batch; None: EMBED_CHUNKS

    def __init__(self, target, *, precision: str | None = None, embedder=None, params=None,
                 rebuild: bool = False, progress: Callable[[int, int], None] | None = None,
                 stop=None, embed: bool = True,
                 embed_progress: Callable[[int, int], None] | None = None,
                 workers: int | None = None, model=None, allow_empty: bool = False):
        from brainbot.model.records import record
        from brainbot.text.chunking import ChunkParams

        self.target = target  # the --db target: a path or a postgresql:// URL
        self.params = params or ChunkParams()
        # None: the given embedder's, else the one the index records, else the default
        # (resolved on __enter__, when the index is read)
        self.precision = precision or getattr(embedder, "precision", None)
        self.stats = IndexStats()
        if isinstance(model, ModelChoice):  # chosen for the notes: its line is the run's
            model, self.stats.model_note = model.record, model.line
        model = model or getattr(embedder, "model", None)
        self.model = record(model) if model is not None else None
        self.identity = None
        self._embedder = embedder
        self.counter = None  # the model's TokenCounter, made on __enter__
        self.progress = progress
        self.embed_progress = embed_progress
        self.embed = embed  # False: stop after the lexical phase (--no-embed)
        self.workers = workers  # chunking processes; None: every usable core
        self.rebuild = rebuild
        self.allow_empty = allow_empty  # a rebuild may replace notes with an empty index
        self.store = None
        self.refreshing = False  # an index from before links and tags: fill them for all
        self.analyzer = ""  # the BM25 analyzer it writes with (__enter__: _analyzer)
        self.languages: dict[str, int] = {}  # chunks analysed in each language
        self.dirty = False  # something was written: links may point elsewhere now
        self.stop = stop  # a threading.Event: set, the run ends before its next transaction
        self._model: semantic.Embedding | None = None  # the model's thread, while it runs
        self._head_start: semantic.HeadStart | bool | None = None  # None: not decided yet

    # -- lifecycle -------------------------------------------------------------------
    def __enter__(self) -> Indexer:
        from brainbot.store.identity import current
        from brainbot.text.tokens import TokenCounter

        if self.precision is None:  # an index keeps the precision it was built with
            from brainbot.model.embed import DEFAULT_PRECISION

            self.precision = recorded_precision(self.target) or DEFAULT_PRECISION
        if self.model is None:  # and its model
            self.model = choose_model(self.target, ()).record
        check_fits(self.params, self.model)
        self.stats.model = self.model.name
        self.identity = current(self.precision, self.params, self.model)
        self.counter = TokenCounter(model=self.model)
        self.analyzer = self._analyzer()
        self.identity = replace(self.identity, analyzer=self.analyzer)
        self.store = open_store(self.target, write=True, identity=self.identity,
                                rebuild=self.rebuild)
        try:
            self.store.record_identity(self.identity)
            meta = self.store.meta()
            self.refreshing = meta.get("vault_refresh") == "1"
            self.languages = analyzers.recorded_languages(meta)
        except BaseException:
            self.store.close()
            self.store = None
            raise
        self.started = time.perf_counter()
        return self

    def _analyzer(self) -> str:
        """The BM25 analyzer this run writes with (``analyzers.writes_with``): an index
        keeps the English-only analyzer it was built with until a --rebuild."""
        from brainbot.store.target import recorded_meta

        return analyzers.writes_with(recorded_meta(self.target).get("analyzer"), self.rebuild)

    def __exit__(self, exc_type, *exc) -> None:
        self._close_embedding()
        store, self.store = self.store, None
        if store is None:
            return
        refused = None
        if exc_type is None:  # a rebuild whose caller did not finish() is complete too
            try:
                self._settle_replacement(store)
                store.publish()
            except BaseException as error:  # the store closes all the same
                refused = error
        try:
            store.close()
        except Exception:  # noqa: BLE001
            if exc_type is None and refused is None:  # else the error in flight is the one
                raise
        if refused is not None:
            raise refused

    def _release(self) -> None:
        """Close the store: the writer lock is free while the model runs."""
        store, self.store = self.store, None
        store.close()

    def _retake(self) -> None:
        """Open the store again, waiting while another writer holds the lock."""
        from brainbot.errors import StoreBusyError

        while True:
            self._check_stop()
            try:
                self.store = open_store(self.target, write=True, identity=self.identity)
                return
            except StoreBusyError:
                time.sleep(LOCK_RETRY_SECONDS)

    @property
    def embedder(self):
        if self._embedder is None:
            from brainbot.model.embed import Embedder

            self._embedder = Embedder(precision=self.precision, model=self.model)
        return self._embedder

    # -- public entry points -------------------------------------------------------------
    def index_paths(self, paths: Iterable) -> IndexStats:
        """Index folders or single files; removes vanished files under each folder."""
        with _timed(self.stats.stages, "discover"):
            roots = list(documents.roots(paths))
        folders = []
        for root in roots:
            self.stats.skipped.extend(root.problems)
            known = self.store.known_documents(root.path)
            self._index_documents(root.path, self._changed(root, known), root.scope, known)
            folders += [root.path] if root.scope is None else []
        self.store.add_folder_roots(folders)  # only folders count new notes (freshness)
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
        self.store.add_folder_roots(())  # the forgotten root leaves folder_roots
        return self.finish()

    def finish(self) -> IndexStats:
        """Resolve links if anything changed, end the lexical phase, run the semantic
        phase (unless ``embed`` is False), and total up."""
        if self.dirty or self.stats.removed:
            with _timed(self.stats.stages, "links"), self.store.batch():
                self.store.resolve_links()
            self.dirty = False
        # every note is written: a rebuild's new index replaces the old one now, so a kill
        # from here on leaves it, partly embedded, never less than a whole index
        self._settle_replacement(self.store)
        self.store.publish()
        self.stats.lexical_seconds = time.perf_counter() - self.started
        if self.embed:
            self.embed_missing()
        counts = self.store.counts()
        self.stats.chunks, self.stats.vectors = counts["chunks"], counts["embeddings"]
        other, known = self.store.language_share()
        self.stats.non_english = other / known if known else 0.0
        if self.stats.non_english >= language.NON_ENGLISH_WARN and not self.model.multilingual:
            self.stats.language_note = language_note(self.stats.non_english)
        self.stats.seconds = time.perf_counter() - self.started
        return self.stats

    def _settle_replacement(self, store) -> None:
        """Before a rebuild replaces the old index: refuse to replace its notes with an
        empty index (unless ``allow_empty``), and count the old notes it does not carry
        over as removed."""
        replaced = store.replaced()
        if replaced is None:
            return
        old, lacking = replaced
        if old and lacking == old and not self.allow_empty and not store.counts()["documents"]:
            raise EmptyRebuildError(store.target, old, skipped=self.stats.skipped)
        self.stats.removed += lacking

    def index_documents(self, root: str, docs: Iterable[Document],
                        scope: set[str] | None = None) -> None:
        """Index already-read ``docs`` under ``root`` (dataset records); documents of the
        root not among them are removed (only those named in ``scope`` when given)."""
        self._index_documents(root, ((d.relpath, d) for d in docs), scope,
                              self.store.known_documents(root))

    # -- the semantic phase ---------------------------------------------------------------
    def embed_missing(self) -> int:
        """Embed every chunk without a vector, one committed batch at a time, in chunk-id
        order, the writer lock released while the phase waits for the model; the model runs
        in a thread of its own, a batch ahead of the writes (``index/semantic.py``). Returns
        how many texts this run embedded. One semantic phase runs the model at a time
        (``index/lease.py``): while another holds the lease, this one waits with the lock
        free, reporting that one's progress, and takes over if it stops."""
        started = time.perf_counter()
        try:
            semantic.run(self, self._embedding(), self.embed_chunks or EMBED_CHUNKS)
        finally:
            self._close_embedding()
        self.stats.embed_seconds += time.perf_counter() - started
        return self.stats.embedded

    def _embedding(self) -> semantic.Embedding:
        if self._model is None:
            self._model = semantic.Embedding(self.embedder)
        return self._model

    def _close_embedding(self) -> None:
        model, self._model, self._head_start = self._model, None, None
        if model is not None:
            model.close()

    def _offer(self, item: Chunked) -> None:
        """A new or changed note's texts, for the model's head start (index/semantic.py):
        decided once a run, when the semantic phase follows and no other phase holds the
        lease."""
        if self._head_start is None:
            wanted = self.embed and not lease_held_elsewhere(self.store)
            self._head_start = semantic.HeadStart(self._embedding()) if wanted else False
        if self._head_start:
            self._head_start.offer(((_sha256_text(c.retrieval_text), c.retrieval_text)
                                    for c in item.chunks), self.store)

    def stopped(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    # -- the lexical phase ----------------------------------------------------------------
    def _changed(self, root: documents.Root, known: dict):
        """(relpath, Document or None): None for a file whose size and mtime match the
        index, which is never read (unless its vault facts are still to be filled). An
        unreadable file is reported and left out."""
        for done, note in enumerate(root.files, 1):
            if self.progress:
                self.progress(done, len(root.files))
            refusal = self.store.refused_path(root.path, note.relpath)
            if refusal:  # per file: one note the store cannot hold never fails a batch
                self.stats.skipped.append(notes.Problem(note.relpath, refusal))
                continue
            prior = known.get(note.relpath)
            same = prior and stat_vouches(prior, note.size, note.mtime_ns)
            if same and not self.refreshing:
                yield note.relpath, None
                continue
            try:
                with _timed(self.stats.stages, "read"):
                    doc = documents.read(note)
                yield note.relpath, doc
            except notes.UnreadableNote as exc:
                self.stats.skipped.append(notes.Problem(note.relpath, str(exc)))

    def _chunked(self, items, known: dict):
        """((relpath, Document or None), Chunked or None) in input order, chunked on
        every usable core: a document is chunked when it is new or changed, or when its
        vault facts are to be filled."""
        from brainbot.text.parallel import chunk_in_order

        def to_chunk(pair):
            relpath, doc = pair
            prior = known.get(relpath)
            if doc is None or (prior and prior.sha256 == doc.sha256 and not self.refreshing):
                return None
            return doc

        stages = self.stats.stages
        chunked = chunk_in_order(items, to_chunk, self.params, counter=self.counter,
                                 workers=self.workers, analyze=self.analyzer)
        with closing(chunked):
            while True:  # the wait for each result is the chunk stage, less its reading
                start, read = time.perf_counter(), stages["read"]
                pair, item = next(chunked, (None, None))
                stages["chunk"] += time.perf_counter() - start - (stages["read"] - read)
                if pair is None:
                    return
                if item is not None:
                    self.stats.warnings.extend(
                        notes.Problem(item.doc.relpath, w, skipped=False) for w in item.warnings)
                yield pair, item

    def _index_documents(self, root: str, items, scope, known: dict) -> None:
        seen: set[str] = set()
        pending = _Pending()
        for (relpath, doc), item in self._chunked(items, known):
            seen.add(relpath)
            prior = known.get(relpath)
            if doc is None or (prior and prior.sha256 == doc.sha256):
                self.stats.unchanged += 1
                if doc is not None:
                    pending.touched.append((prior.id, doc.size, doc.mtime_ns, doc.read_ns))
                if item is not None:  # refreshing: facts only, nothing re-embedded
                    pending.refreshed.append((prior.id, item))
            else:
                pending.add(item)
                self._offer(item)
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

    def _write_batch(self, pending: _Pending, known: dict) -> None:
        """Documents, chunks, postings and facts in one transaction. A chunk whose text
        already has a vector in the index gets it now; the others wait for the semantic
        phase."""
        self._check_stop()
        with _timed(self.stats.stages, "write"):
            try:
                self._write(pending, known)
            except ReadOnlyStoreError:
                if pending.batch or pending.refreshed:
                    raise
                return  # only re-read times to record: the next run re-hashes those files
        for item in pending.batch:
            if known.get(item.doc.relpath):
                self.stats.updated += 1
            else:
                self.stats.new += 1
            item.doc.text = ""  # let the text go: large vaults should not pile up in memory
        self.dirty = True

    def _write(self, pending: _Pending, known: dict) -> None:
        # a rebuild's store also has the old file's vectors (store/sqlite/salvage.py)
        vectors = self.store.vectors_for(
            [_sha256_text(c.retrieval_text) for item in pending.batch for c in item.chunks])
        with self.store.batch():
            if pending.touched:
                self.store.touch_documents(pending.touched)
            for doc_id, item in pending.refreshed:
                self.store.record_facts(doc_id, item.facts, _english(item))
            for item in pending.batch:
                prior = known.get(item.doc.relpath)
                if prior:
                    self.store.delete_documents([prior.id])
                self.store.add_document(_new_document(item, vectors))
            self._record_languages(pending.batch)

    def _record_languages(self, batch: list[Chunked]) -> None:
        """Count this batch's chunks by the language they were analysed in, in the index's
        meta (``analyzers.LANGUAGES_KEY``): a query is analysed in the index's languages
        it may be in. Counts only grow (a language whose notes left costs a query a few
        unmatched terms); a rebuild starts them anew."""
        if self.analyzer != analyzers.VERSION:
            return  # an English-only index: its queries are analysed in English
        seen = Counter(lang for item in batch for *_, lang in _analysis(item))
        if seen:
            for lang, n in seen.items():
                self.languages[lang] = self.languages.get(lang, 0) + n
            self.store.set_meta(analyzers.LANGUAGES_KEY,
                                json.dumps(self.languages, sort_keys=True))

    def _check_stop(self) -> None:
        if self.stopped():
            raise IndexStopped("stopped before the next transaction; run again to finish")


def embedded_line(vectors: int, chunks: int) -> str:
    return f"{vectors:,} of {chunks:,} chunks embedded"


def language_note(share: float) -> str:
    return (f"{share:.0%} of your notes look non-English; all-MiniLM-L6-v2 is English-only, "
            "BM25 carries them (`--rebuild --model multilingual-e5-small` embeds them all)")


def _analysis(item: Chunked) -> list[tuple]:
    """(terms, length, english, language) of each chunk, as the chunking step analysed
    it (``_chunked`` asks it to, in the index's analyzer)."""
    assert item.lexical is not None, "chunked without analysis"
    return item.lexical


def _english(item: Chunked) -> list[bool]:
    return [english for _, _, english, _ in _analysis(item)]


def _new_document(item: Chunked, vectors: dict) -> NewDocument:
    doc = item.doc
    chunks = []
    for c, (terms, length, english, _) in zip(item.chunks, _analysis(item), strict=True):
        h = _sha256_text(c.retrieval_text)
        chunks.append(NewChunk(c, h, vectors.get(h), terms, length, english))
    return NewDocument(doc.root, doc.relpath, doc.sha256, doc.size, doc.mtime_ns, item.title,
                       item.parsed.front_matter, doc.kind, list(item.warnings), chunks,
                       item.facts, read_ns=doc.read_ns)
