"""The SQLite store: one file, read and written through the ``Store`` interface.

Readers open the file without writing anything and check that it is a brainbot index at
this schema whose model, dimension and analyzer match. The one writer holds an exclusive
flock on the file from ``open(write=True)`` to ``close()`` (flock locks are separate from
the POSIX record locks SQLite uses, so readers are never blocked by it), migrates the
file, and writes one transaction per ``batch()``; each committed batch bumps the
generation that readers compare to know what to reload.

Searching is ``store/sqlite/arrays.py``'s: the arrays the C kernel scans. Schema, pragmas and
error translation are ``store/sqlite/file.py``'s.
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path

import numpy as np

from brainbot.errors import NoIndexError, StoreError
from brainbot.store import identity as identity_mod
from brainbot.store.reads import chunk_records_sql, translated
from brainbot.store.records import Filter, NewDocument, now_iso
from brainbot.store.rows import chunk_record

from . import file as sf
from . import rebuild as rebuild_mod
from .arrays import KernelIndex
from .lock import WriterLock, release_stale
from .postings import PostingsBuffer
from .vault import VaultTables

log = logging.getLogger("brainbot.store")

# The writer's page cache, KiB (an upper bound: pages are cached as they are touched).
# With SQLite's 2 MB default, a big vault's lexical batches evicted and re-read the
# postings B-tree's pages on every commit; 64 MiB was as fast as 256 MiB on a 121k-chunk
# vault (and 2 MB 15 % slower).
WRITER_CACHE_KIB = 64 * 1024


# What ON DELETE CASCADE / SET NULL would do for one document, done by the writer itself:
# its connection runs with foreign_keys OFF, because checking two parents for each of a
# big vault's millions of postings cost a seventh of the lexical phase (121k chunks:
# 42.8 s against 36.8 s). The schema keeps its REFERENCES clauses, so `PRAGMA
# foreign_key_check` (the reliability suite runs it) still proves no row is orphaned.
_CASCADE = (
    "DELETE FROM postings WHERE chunk IN (SELECT id FROM chunks WHERE document_id = ?1)",
    "DELETE FROM embeddings WHERE chunk IN (SELECT id FROM chunks WHERE document_id = ?1)",
    "DELETE FROM links WHERE source_document = ?1",
    "UPDATE links SET target_document = NULL WHERE target_document = ?1",
    "DELETE FROM tags WHERE document = ?1",
    "DELETE FROM chunks WHERE document_id = ?1",
    "DELETE FROM documents WHERE id = ?1",
)


def _writer_pragmas(db) -> None:
    db.execute("PRAGMA journal_mode = WAL")
    db.execute(f"PRAGMA cache_size = -{WRITER_CACHE_KIB}")
    db.execute("PRAGMA foreign_keys = OFF")  # see _CASCADE


def _file_key(path: Path) -> tuple[int, int] | None:
    """(st_dev, st_ino) of the file at ``path``: a new file there (a rebuild, a copy
    --replace, a ``mv``) has another; None when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class SQLiteStore(VaultTables):
    """An open SQLite index (see the module docstring)."""

    def __init__(self, path: Path, db, *, lock: WriterLock | None = None) -> None:
        self.path = path
        self.target = str(path)
        self.db = db
        self.lock = lock
        self._meta: dict[str, str] | None = None
        self._terms: dict[str, int] | None = None
        self._next_term = 1
        self._writing_generation: int | None = None
        self._postings = PostingsBuffer()  # the open batch's BM25 rows, written at commit
        self._index: KernelIndex | None = None
        self._file = _file_key(path)  # the file this connection has open
        self._index_id: str | None = None  # the index_id the arrays were loaded from
        self._rebuild: rebuild_mod.Rebuild | None = None  # writing a new file beside it
        self._refused: tuple | None = None  # (file key, error): a file at the path refused

    # -- opening and closing -------------------------------------------------------------
    @classmethod
    def open(cls, target, *, write: bool = False, identity=None,
             rebuild: bool = False) -> SQLiteStore:
        path = Path(target)
        if not write:
            return cls._open_reader(path)
        if not path.parent.exists():
            raise StoreError(f"folder {path.parent} does not exist")
        lock = WriterLock(path).__enter__()
        try:
            if rebuild:
                return cls._open_rebuild(path, lock, identity)
            rebuild_mod.clear_leftover(rebuild_mod.real_path(path), refuse=False)
            return cls._open_writer(path, lock, identity)
        except BaseException:
            lock.__exit__()
            raise

    @classmethod
    def _open_rebuild(cls, path: Path, lock: WriterLock, identity) -> SQLiteStore:
        """A writer into a new file beside ``path`` (store/sqlite/rebuild.py): ``publish()``
        moves it over the path, ``close()`` without it discards it. ``identity``: the
        old file's vectors made as it would make them are reused (None: none)."""
        real = rebuild_mod.real_path(path)
        rebuild_mod.check_replaceable(real)
        rebuild_mod.clear_leftover(real, refuse=True)
        temp = rebuild_mod.temp_path(real)
        temp_lock = WriterLock(temp).__enter__()
        try:
            store = cls._open_writer(temp, temp_lock, None)
        except BaseException:
            rebuild_mod.remove(temp)
            temp_lock.__exit__()
            raise
        store.target = str(path)
        store._rebuild = rebuild_mod.Rebuild(real, lock, identity)
        return store

    def publish(self) -> None:
        """A rebuild's new file takes the old one's place, whole (store/sqlite/rebuild.py);
        this store then writes to it at the path. Nothing to do for any other writer."""
        rb, self._rebuild = self._rebuild, None
        if rb is None:
            return
        temp, db, self.db = self.path, self.db, None
        try:
            rb.move_over(db, temp, self.lock)
        except BaseException:
            rb.discard(db, temp, self.lock)
            self.lock = None
            raise
        self.path = Path(self.target)
        self.db = sf.connect(self.path)
        with sf.translate_errors(self.path):
            _writer_pragmas(self.db)
        self._file = _file_key(self.path)

    def replaced(self) -> tuple[int, int] | None:
        """Before a rebuild's publish(): (documents of the file it replaces, how many of
        them the new file lacks, by root and path); None for any other writer."""
        if self._rebuild is None:
            return None
        with sf.translate_errors(self.path):
            new = set(self.db.execute("SELECT root, path FROM documents"))
        return self._rebuild.replaced(new)

    @classmethod
    def _open_reader(cls, path: Path) -> SQLiteStore:
        db = sf.connect(path, readonly=True)
        try:
            with sf.translate_errors(path):
                sf.check_readable(db, path)
                identity_mod.check(sf.read_meta(db), path)
        except BaseException:
            db.close()
            raise
        return cls(path, db)

    @classmethod
    def _open_writer(cls, path: Path, lock: WriterLock, identity) -> SQLiteStore:
        db = sf.connect(path)
        try:
            with sf.translate_errors(path):
                sf.check_ours(db, path)
                if identity is not None:  # before migrating: refuse without touching it
                    identity_mod.check(sf.read_meta(db), path, writer=identity)
                sf.migrate(db, path)
                _writer_pragmas(db)
                store = cls(path, db, lock=lock)
                store._load_terms()
                first = store._first_meta()  # a file that has them is left byte for byte
                db.executemany("INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)",
                               list(first.items()))
                store._meta = None
        except BaseException:
            db.close()
            raise
        return store

    def close(self) -> None:
        """Close the file and release the writer lock; a rebuild not published is
        discarded (the old index stays as it was)."""
        db, self.db = self.db, None
        rb, self._rebuild = self._rebuild, None
        if rb is not None:
            rb.discard(db, self.path, self.lock)
            return
        try:
            if db is not None:
                with sf.translate_errors(self.path):
                    db.close()
        finally:
            if self.lock is not None:
                self.lock.__exit__()

    # -- meta ------------------------------------------------------------------------------
    def record_identity(self, identity) -> None:
        """Write ``identity`` to meta unless it is there already: then a run with nothing
        to do leaves the file as it was, byte for byte."""
        rows = list(identity.as_meta().items()) + [("schema_version", str(sf.SCHEMA_VERSION))]
        meta = sf.read_meta(self.db)
        if all(meta.get(k) == v for k, v in rows):
            return
        with sf.translate_errors(self.path), sf.transaction(self.db):
            self.db.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", rows)
        self._meta = None

    @translated
    def set_meta(self, key: str, value: str | None) -> None:
        """Set (or with None remove) one meta entry; inside a batch."""
        if value is None:
            self.db.execute("DELETE FROM meta WHERE key = ?", (key,))
        else:
            self.db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                            (key, value))
        self._meta = None

    # -- writing ---------------------------------------------------------------------------
    @contextmanager
    def batch(self) -> Iterator[None]:
        """One transaction; its commit bumps the generation. A failure rolls it all back."""
        try:
            with sf.translate_errors(self.path), sf.transaction(self.db):
                self._writing_generation = self.generation() + 1
                yield
                self._postings.flush(self.db)
                self.db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES "
                                "('generation', ?)", (str(self._writing_generation),))
        except BaseException:
            try:
                self._load_terms()  # ids handed out in the failed transaction are void
            except Exception:  # noqa: BLE001 - the first error is the one to report
                pass
            raise
        finally:
            self._writing_generation = None
            self._postings.clear()

    def _load_terms(self) -> None:
        """Forget the term ids; the next ``_term_id`` reads them (a writer that only adds
        vectors, as the semantic phase does, never reads the vocabulary)."""
        self._terms = None

    def _read_terms(self) -> dict[str, int]:
        if self._terms is None:
            self._terms = dict(self.db.execute("SELECT term, id FROM terms"))
            self._next_term = max(self._terms.values(), default=0) + 1
        return self._terms

    @translated
    def vectors_for(self, text_hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """The vectors the index has for these texts; while it is rebuilt, also the old
        file's (when the same model and embedder made them: store/sqlite/salvage.py)."""
        found: dict[str, np.ndarray] = {}
        hashes = sorted(set(text_hashes))
        for i in range(0, len(hashes), 500):
            part = hashes[i:i + 500]
            marks = ",".join("?" * len(part))
            for h, blob in self.db.execute(
                    f"SELECT c.text_sha256, e.vector FROM chunks c JOIN embeddings e "
                    f"ON e.chunk = c.id WHERE c.text_sha256 IN ({marks})", part):
                found[h] = np.frombuffer(blob, dtype="<f4")
        if self._rebuild is not None:
            old = self._rebuild.vectors([h for h in hashes if h not in found])
            found.update((h, np.frombuffer(blob, dtype="<f4")) for h, blob in old.items())
        return found

    @translated
    def touch_documents(self, updates: Sequence[tuple[int, int, int, int | None]]) -> None:
        """(document id, size, mtime_ns, read_ns): a file whose bytes did not change."""
        self.db.executemany("UPDATE documents SET size=?, mtime_ns=?, read_ns=? WHERE id=?",
                            [(size, mtime, read, doc_id) for doc_id, size, mtime, read in updates])

    @translated
    def delete_documents(self, doc_ids: Sequence[int]) -> None:
        """Documents with their chunks, vectors and postings; term df kept exact."""
        self._postings.flush(self.db)  # the batch's own documents count too
        for doc_id in doc_ids:
            rows = self.db.execute(
                "SELECT p.term, count(*) FROM postings p JOIN chunks c ON c.id = p.chunk "
                "WHERE c.document_id = ? GROUP BY p.term", (doc_id,)).fetchall()
            self.db.executemany("UPDATE terms SET df = df - ? WHERE id = ?",
                                [(n, term) for term, n in rows])
            for statement in _CASCADE:
                self.db.execute(statement, (doc_id,))

    @translated
    def add_document(self, doc: NewDocument) -> int:
        doc_id = self.db.execute(  # an id of None: SQLite assigns the next rowid
            "INSERT INTO documents(id, root, path, sha256, size, mtime_ns, title, front_matter, "
            "indexed_at, warnings, kind, read_ns) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (doc.id, doc.root, doc.path, doc.sha256, doc.size, doc.mtime_ns, doc.title,
             doc.front_matter_json(), now_iso(), json.dumps(doc.warnings, ensure_ascii=False),
             doc.kind, doc.read_ns)).lastrowid
        rows = {}
        for new in doc.chunks:
            c = new.chunk
            row = rows[c.chunk_index] = self.db.execute(
                "INSERT INTO chunks(id, chunk_id, document_id, chunk_index, heading_path, "
                "source_text, retrieval_text, start_line, end_line, start_char, end_char, "
                "source_tokens, retrieval_tokens, text_sha256, lexical_length, generation, "
                "english) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (new.id, c.chunk_id, doc_id, c.chunk_index,
                 json.dumps(list(c.heading_path), ensure_ascii=False), c.source_text,
                 c.retrieval_text, c.start_line, c.end_line, c.start_char, c.end_char,
                 c.source_tokens, c.retrieval_tokens, new.text_sha256, new.length,
                 self._writing_generation or 0,
                 None if new.english is None else int(new.english))).lastrowid
            if new.vector is not None:  # None: the semantic phase embeds it later
                self.db.execute("INSERT INTO embeddings(chunk, vector) VALUES (?, ?)",
                                (row, np.ascontiguousarray(new.vector, dtype="<f4").tobytes()))
            known = self._read_terms()  # postings are written in bulk at the commit
            self._postings.add(row, [known.get(t) or self._term_id(t) for t in new.terms],
                               new.terms.values())
        if self._writing_generation is None:  # outside a batch: nothing commits later
            self._postings.flush(self.db)
        self.write_facts(doc_id, doc.facts, rows)
        return doc_id

    @translated
    def add_vectors(self, rows: Sequence[tuple[int, str, np.ndarray]]) -> None:
        """(chunk id, text hash, vector): each stored if that chunk still holds that text
        and has none yet; inside a batch. The chunk takes the batch's generation, so
        readers reload its vector."""
        self.db.executemany(
            "INSERT OR IGNORE INTO embeddings(chunk, vector) SELECT ?, ? WHERE EXISTS "
            "(SELECT 1 FROM chunks WHERE id = ? AND text_sha256 = ?)",
            [(i, np.ascontiguousarray(v, dtype="<f4").tobytes(), i, h) for i, h, v in rows])
        self.db.executemany("UPDATE chunks SET generation = ? WHERE id = ?",
                            [(self._writing_generation or 0, i) for i, _, _ in rows])

    def bulk_load(self):
        """Nothing to prepare on SQLite: the kernel's arrays are built when read."""
        return nullcontext()

    def _term_id(self, term: str) -> int:
        term_id = self._read_terms().get(term)
        if term_id is None:
            term_id = self._next_term
            self._next_term += 1
            self._terms[term] = term_id
            self._postings.terms.append((term_id, term))
        return term_id

    # -- the legs --------------------------------------------------------------------------
    @property
    def index(self) -> KernelIndex:
        if self._index is None:
            dim = int(self.meta().get("dimension", 384))
            self._index = KernelIndex(self.db, dim)
        return self._index

    @translated
    def refresh(self) -> bool:
        """Reload what another process committed since the last call; False if nothing.
        A reader whose file was replaced (``--rebuild`` and ``copy --replace`` write a new
        file at the path) reopens the path first, and arrays loaded from another index_id
        are dropped: a long-lived server never serves the old index."""
        reopened = self.lock is None and self._reopen_if_replaced()
        meta = dict(self.db.execute(
            "SELECT key, value FROM meta WHERE key IN ('generation', 'index_id')"))
        index_id = meta.get("index_id")
        if self._index_id is not None and index_id != self._index_id:
            self._index = self._meta = None
        self._index_id = index_id
        return self.index.sync(int(meta.get("generation", 0))) or reopened

    def _reopen_if_replaced(self) -> bool:
        """Open the file now at the path when it is not the one this connection holds.

        Rebuilds and copies move a whole index over the path, so the only file kept in
        the meantime is one whose schema is not written yet (an index being created at a
        path whose file was deleted): the old one answers until it is. No file at the
        path, or one a reader refuses (another model or analyzer, a newer schema, not an
        index), fails this call and the next ones with that message, logged once (review
        M7): a server never answers from a file that is gone without saying so."""
        now = _file_key(self.path)
        if now == self._file:
            self._refused = None
            return False
        if now is None:
            self._refuse(None, NoIndexError(self.path))
        if self._refused is not None and self._refused[0] == now:
            raise self._refused[1].with_traceback(None)  # no traceback piling up
        try:
            fresh = type(self)._open_reader(self.path)
        except NoIndexError:  # created a moment ago: its first commit writes the schema
            return False
        except StoreError as exc:
            self._refuse(now, exc)
        self._refused = None
        old, self.db, fresh.db = self.db, fresh.db, None
        self._file, self._index, self._meta, self._terms = fresh._file, None, None, None
        self._index_id = None
        old.close()
        release_stale()  # the old file's idle lock descriptors, if that was its last user
        return True

    def _refuse(self, key, exc: StoreError):
        """Fail with ``exc``; said in the log the first time for this file."""
        if self._refused is None or self._refused[0] != key:
            log.warning("%s changed under this reader and cannot be read (%s); calls fail "
                        "until it can", self.path, exc)
        self._refused = (key, exc)
        raise exc.with_traceback(None)

    @translated
    def bm25_topk(self, terms: Counter, n: int, flt: Filter | None = None):
        self._ready()
        return self.index.bm25(terms, n, self._mask(flt))

    @translated
    def vector_topk(self, qvec: np.ndarray, n: int, flt: Filter | None = None):
        self._ready()
        return self.index.cosine(qvec, n, self._mask(flt))

    def _ready(self) -> None:
        if self.index.generation is None:
            self.refresh()

    def _mask(self, flt: Filter | None):
        if not flt:
            return None
        return self.index.mask(flt, lambda: self._filtered_chunk_ids(flt))

    def _filtered_chunk_ids(self, flt: Filter) -> list[int]:
        return [r[0] for r in self._sql_in("SELECT id FROM chunks WHERE document_id {in}",
                                           self.filtered_documents(flt))]

    # -- the seam of the shared reads (store/reads.py) ---------------------------------------
    def _errors(self):
        return sf.translate_errors(self.path)

    def _sql(self, query: str, params=()) -> list[tuple]:
        with sf.translate_errors(self.path):
            return self.db.execute(query, params).fetchall()

    def _sql_in(self, query: str, values) -> list[tuple]:
        out: list[tuple] = []
        with sf.translate_errors(self.path):
            for i in range(0, len(values), 500):  # SQLite's limit on bound variables
                part = list(values[i:i + 500])
                marks = f"IN ({','.join('?' * len(part))})"
                out += self.db.execute(query.replace("{in}", marks), part).fetchall()
        return out

    def _vector(self, value) -> np.ndarray:
        return np.frombuffer(value, dtype="<f4").copy()

    # -- the vault (sqlite_vault.VaultTables), with SQLite errors translated -----------------
    resolve_links = translated(VaultTables.resolve_links)
    language_share = translated(VaultTables.language_share)
    record_facts = translated(VaultTables.record_facts)

    # -- reading back ------------------------------------------------------------------------
    def chunk_records(self) -> Iterator[dict]:
        """The chunk records (README "The chunk record") of every chunk, by path and index."""
        with sf.translate_errors(self.path):
            for r in self.db.execute(chunk_records_sql("")):
                yield chunk_record(r)

    def export_documents(self) -> Iterator[NewDocument]:
        """Every document with its chunks, vectors and terms, ids kept, in id order, from
        one read transaction (a writer may go on committing meanwhile)."""
        with sf.translate_errors(self.path), sf.transaction(self.db, immediate=False):
            yield from self._export_pages()

    @translated
    def chunk_count(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM chunks").fetchone()[0])

    @translated
    def vector_count(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM embeddings").fetchone()[0])

    @translated
    def integrity(self) -> str:
        return "; ".join(r[0] for r in self.db.execute("PRAGMA integrity_check").fetchall())

    def size_bytes(self) -> int:
        return sum(os.path.getsize(str(self.path) + s) for s in ("", "-wal")
                   if os.path.exists(str(self.path) + s))
