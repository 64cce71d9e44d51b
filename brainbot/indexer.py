"""Building and updating the index: discover → read → chunk → embed → write.

Incremental: a file whose size and mtime match the stored row is skipped unread; one
whose bytes hash the same is only touched. A changed file is re-chunked, and any chunk
whose retrieval text already has a vector (in this file, another file, or a renamed one)
reuses it, so only new text reaches the embedder. Files that disappeared leave with their
chunks, vectors and postings.

Resumable: work is written one batch per transaction (documents, chunks, vectors and
postings together), so a killed run keeps every committed batch and the next run picks
up what is left. A second indexer on the same file is refused while one runs.

This module does not rank or answer anything.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import lexical, model, notes, store
from .errors import InputError, StoreBusyError, StoreError

# Chunks per write transaction. Small enough that a kill loses seconds of work, large
# enough that embedding batches stay full (8 texts per ONNX batch was fastest here).
BATCH_CHUNKS = 64


@dataclass
class SourceDoc:
    """One document to index: a note on disk or a record of a dataset (BEIR)."""

    root: str
    relpath: str
    text: str
    sha256: str
    size: int
    mtime_ns: int
    warnings: tuple[str, ...] = ()


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

    def summary(self) -> str:
        return (f"{self.new:,} new, {self.updated:,} updated, {self.unchanged:,} unchanged, "
                f"{self.removed:,} removed · {self.chunks:,} chunks · {self.embedded:,} embedded"
                f" · {self.seconds:.1f} s")

    def to_dict(self) -> dict:
        return {"new": self.new, "updated": self.updated, "unchanged": self.unchanged,
                "removed": self.removed, "chunks": self.chunks, "embedded": self.embedded,
                "seconds": round(self.seconds, 3),
                "skipped": [{"path": p.path, "reason": p.reason} for p in self.skipped],
                "warnings": [{"path": p.path, "reason": p.reason} for p in self.warnings]}


def identity(precision: str = "fp32", params=None):
    """The IndexIdentity of this code: model, tokenizer, chunker, embedder, analyzer."""
    from .chunking import ChunkParams
    from .embed import Embedder

    params = params or ChunkParams()
    return store.IndexIdentity(
        model=model.MODEL_ID,
        model_sha256=model.weights_sha256(),
        dimension=model.DIMENSION,
        tokenizer=model.FILES["tokenizer.json"][:16],
        chunker=params.fingerprint() + "+" + lexical.ANALYZER_VERSION,
        embedder=Embedder(precision=precision).fingerprint,
    )


class WriterLock:
    """An exclusive advisory lock (flock) on the database file, held by its one indexer.

    flock locks are separate from the POSIX record locks SQLite uses, so this does not
    interfere with readers; it only keeps a second indexer out.
    """

    def __init__(self, db_path: Path):
        self.path = Path(db_path)
        self.fd: int | None = None

    def __enter__(self) -> WriterLock:
        try:
            self.fd = os.open(self.path, os.O_RDONLY | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreError(f"cannot open {self.path}: {exc.strerror}") from None
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            self.fd = None
            raise StoreBusyError(
                f"another `brainbot index` is writing {self.path}; wait for it to finish "
                "and run again") from None
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


def _sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Indexer:
    """Writes sources into one database. Use as a context manager."""

    def __init__(self, db_path: str | os.PathLike, *, precision: str = "fp32",
                 embedder=None, params=None, rebuild: bool = False,
                 progress: Callable[[int, int], None] | None = None):
        from .chunking import ChunkParams
        from .tokens import TokenCounter

        self.db_path = Path(db_path)
        self.params = params or ChunkParams()
        self.identity = identity(precision, self.params)
        self.precision = precision
        self._embedder = embedder
        self.counter = TokenCounter()
        self.progress = progress
        self.rebuild = rebuild
        self.stats = IndexStats()
        self.lock = WriterLock(self.db_path)
        self.db = None
        self._terms: dict[str, int] = {}
        self._next_term = 1

    # -- lifecycle -------------------------------------------------------------------
    def __enter__(self) -> Indexer:
        self.lock.__enter__()
        try:
            if self.rebuild:
                self._remove_db_files()
                # The lock was on the file just unlinked: a second indexer opening the path
                # now would get a new file and a lock of its own. Lock the new file (or be
                # refused if one already has).
                self.lock.__exit__()
                self.lock.__enter__()
            self.db = store.open_index(self.db_path, self.identity, create=True)
            with store.translate_errors(self.db_path):
                if not store.identity_recorded(self.db, self.identity):
                    with store.transaction(self.db):
                        store.write_identity(self.db, self.identity)
                self._load_terms()
        except BaseException:
            if self.db is not None:
                self.db.close()
                self.db = None
            self.lock.__exit__()
            raise
        self.started = time.perf_counter()
        return self

    def __exit__(self, exc_type, *exc) -> None:
        db, self.db = self.db, None
        try:
            if db is not None:
                try:
                    db.close()
                except Exception as error:  # noqa: BLE001
                    if exc_type is None:  # else the error in flight is the one to report
                        raise StoreError(f"{self.db_path}: {error}") from None
        finally:
            self.lock.__exit__()

    def _remove_db_files(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            try:
                os.unlink(str(self.db_path) + suffix)
            except FileNotFoundError:
                pass

    @property
    def embedder(self):
        if self._embedder is None:
            from .embed import Embedder

            self._embedder = Embedder(precision=self.precision)
        return self._embedder

    def _load_terms(self) -> None:
        self._terms = dict(self.db.execute("SELECT term, id FROM terms"))
        self._next_term = max(self._terms.values(), default=0) + 1

    # -- public entry points -------------------------------------------------------------
    def index_paths(self, paths: Iterable[str | os.PathLike]) -> IndexStats:
        """Index folders or single files; removes vanished files under each folder."""
        with store.translate_errors(self.db_path):
            return self._index_paths(paths)

    def _index_paths(self, paths: Iterable[str | os.PathLike]) -> IndexStats:
        for raw in paths:
            target = Path(raw)
            if not target.exists():
                raise InputError(f"{raw}: no such file or folder")
            found = notes.discover(target)
            self.stats.skipped.extend(found.problems)
            if target.is_file():
                root, scope = target.absolute().parent, {target.name}
            else:
                root, scope = target.absolute(), None
            self._index_sources(root.as_posix(), found.files, scope,
                                total=len(found.files))
        return self.finish()

    def finish(self) -> IndexStats:
        self.stats.chunks = int(self.db.execute("SELECT count(*) FROM chunks").fetchone()[0])
        self.stats.seconds = time.perf_counter() - self.started
        return self.stats

    def index_sources(self, root: str, sources: Iterable[SourceDoc | notes.NoteFile],
                      scope: set[str] | None = None, total: int | None = None) -> None:
        """Index ``sources`` under ``root``; documents of the root not seen are removed
        (only those named in ``scope`` when it is given)."""
        with store.translate_errors(self.db_path):
            self._index_sources(root, sources, scope, total)

    def _index_sources(self, root: str, sources, scope, total) -> None:
        known = {path: (doc_id, sha, size, mtime) for doc_id, path, sha, size, mtime in
                 self.db.execute("SELECT id, path, sha256, size, mtime_ns FROM documents "
                                 "WHERE root = ?", (root,))}
        seen: set[str] = set()
        batch: list[tuple[SourceDoc, list]] = []
        pending_chunks = 0
        touched: list[tuple[int, int, int]] = []
        done = 0
        for item in sources:
            done += 1
            if self.progress:
                self.progress(done, total or 0)
            if isinstance(item, notes.Problem):
                self.stats.skipped.append(item)
                continue
            seen.add(item.relpath)
            prior = known.get(item.relpath)
            if isinstance(item, notes.NoteFile):
                if prior and prior[2] == item.size and prior[3] == item.mtime_ns:
                    self.stats.unchanged += 1
                    continue
                item = self._read(item)
                if item is None:
                    continue
            if prior and prior[1] == item.sha256:
                self.stats.unchanged += 1
                touched.append((item.size, item.mtime_ns, prior[0]))
                continue
            chunks = self._chunk(item)
            batch.append((item, chunks))
            pending_chunks += len(chunks)
            if pending_chunks >= BATCH_CHUNKS:
                self._write_batch(root, batch, known, touched)
                batch, pending_chunks, touched = [], 0, []
        if batch or touched:
            self._write_batch(root, batch, known, touched)
        gone = [known[p][0] for p in known if p not in seen and (scope is None or p in scope)]
        if gone:
            with store.transaction(self.db):
                self._delete_documents(gone)
            self.stats.removed += len(gone)

    # -- steps ----------------------------------------------------------------------------
    def _read(self, note: notes.NoteFile) -> SourceDoc | None:
        try:
            read = notes.read_note(note.path)
        except notes.UnreadableNote as exc:
            self.stats.skipped.append(notes.Problem(note.relpath, str(exc)))
            return None
        for warning in read.warnings:
            self.stats.warnings.append(notes.Problem(note.relpath, warning, skipped=False))
        return SourceDoc(note.root.as_posix(), note.relpath, read.text, read.sha256,
                         note.size, note.mtime_ns, read.warnings)

    def _chunk(self, doc: SourceDoc):
        from .chunking import chunk_note
        from .markdown import parse

        parsed = parse(doc.text)
        fallback = "" if doc.root.startswith("dataset:") else None
        doc.parsed = parsed  # type: ignore[attr-defined]
        return chunk_note(parsed, doc.relpath, self.counter, self.params,
                          fallback_heading=fallback)

    def _vectors_for(self, chunks: list) -> tuple[dict[str, bytes], int]:
        """Vector bytes for every chunk text hash: reused from the db or embedded now."""
        hashes = sorted({_sha256_text(c.retrieval_text) for c in chunks})
        found: dict[str, bytes] = {}
        for i in range(0, len(hashes), 500):
            part = hashes[i:i + 500]
            marks = ",".join("?" * len(part))
            rows = self.db.execute(
                f"SELECT c.text_sha256, e.vector FROM chunks c JOIN embeddings e "
                f"ON e.chunk = c.id WHERE c.text_sha256 IN ({marks})", part)
            found.update(rows)
        todo: dict[str, str] = {}
        for c in chunks:
            h = _sha256_text(c.retrieval_text)
            if h not in found:
                todo.setdefault(h, c.retrieval_text)
        if todo:
            vectors = self.embedder.embed(list(todo.values()))
            for h, vec in zip(todo, vectors, strict=True):
                found[h] = np.ascontiguousarray(vec, dtype="<f4").tobytes()
        return found, len(todo)

    def _write_batch(self, root: str, batch: list, known: dict, touched: list) -> None:
        all_chunks = [c for _, chunks in batch for c in chunks]
        vectors, embedded = self._vectors_for(all_chunks)
        try:
            with store.transaction(self.db):
                if touched:
                    self.db.executemany("UPDATE documents SET size=?, mtime_ns=? WHERE id=?",
                                        touched)
                for doc, chunks in batch:
                    prior = known.get(doc.relpath)
                    if prior:
                        self._delete_documents([prior[0]])
                    self._insert_document(root, doc, chunks, vectors)
        except Exception:
            try:
                self._load_terms()  # ids handed out in the failed transaction are void
            except Exception:  # noqa: BLE001 - the first error is the one to report
                pass
            raise
        for doc, _ in batch:
            if known.get(doc.relpath):
                self.stats.updated += 1
            else:
                self.stats.new += 1
            doc.text = ""  # let the text go: large vaults should not pile up in memory
        self.stats.embedded += embedded

    def _insert_document(self, root: str, doc: SourceDoc, chunks: list,
                         vectors: dict[str, bytes]) -> None:
        parsed = doc.parsed  # type: ignore[attr-defined]
        front = json.dumps(parsed.front_matter, ensure_ascii=False, default=str, sort_keys=True)
        title = parsed.title or Path(doc.relpath).stem
        cur = self.db.execute(
            "INSERT INTO documents(root, path, sha256, size, mtime_ns, title, front_matter, "
            "indexed_at) VALUES (?,?,?,?,?,?,?,?)",
            (root, doc.relpath, doc.sha256, doc.size, doc.mtime_ns, title, front,
             store.now_iso()))
        doc_id = cur.lastrowid
        df_delta: Counter = Counter()
        postings = []
        for c in chunks:
            h = _sha256_text(c.retrieval_text)
            tf, length = lexical.term_frequencies(c.retrieval_text)
            row = self.db.execute(
                "INSERT INTO chunks(chunk_id, document_id, chunk_index, heading_path, "
                "source_text, retrieval_text, start_line, end_line, start_char, end_char, "
                "source_tokens, retrieval_tokens, text_sha256, lexical_length) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (c.chunk_id, doc_id, c.chunk_index,
                 json.dumps(list(c.heading_path), ensure_ascii=False), c.source_text,
                 c.retrieval_text, c.start_line, c.end_line, c.start_char, c.end_char,
                 c.source_tokens, c.retrieval_tokens, h, length)).lastrowid
            self.db.execute("INSERT INTO embeddings(chunk, vector) VALUES (?, ?)",
                            (row, vectors[h]))
            for term, count in tf.items():
                postings.append((self._term_id(term), row, count))
                df_delta[term] += 1
        self.db.executemany("INSERT INTO postings(term, chunk, tf) VALUES (?,?,?)", postings)
        self.db.executemany("UPDATE terms SET df = df + ? WHERE id = ?",
                            [(n, self._terms[t]) for t, n in df_delta.items()])

    def _term_id(self, term: str) -> int:
        term_id = self._terms.get(term)
        if term_id is None:
            term_id = self._next_term
            self._next_term += 1
            self._terms[term] = term_id
            self.db.execute("INSERT INTO terms(id, term, df) VALUES (?, ?, 0)", (term_id, term))
        return term_id

    def _delete_documents(self, doc_ids: list[int]) -> None:
        for doc_id in doc_ids:
            rows = self.db.execute(
                "SELECT p.term, count(*) FROM postings p JOIN chunks c ON c.id = p.chunk "
                "WHERE c.document_id = ? GROUP BY p.term", (doc_id,)).fetchall()
            self.db.executemany("UPDATE terms SET df = df - ? WHERE id = ?",
                                [(n, term) for term, n in rows])
            self.db.execute("DELETE FROM documents WHERE id = ?", (doc_id,))


def progress_printer(stream=sys.stderr) -> Callable[[int, int], None] | None:
    """A tqdm progress bar with ETA when stderr is a terminal, else None."""
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
