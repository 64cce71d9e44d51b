"""The Postgres store: an index in a PostgreSQL database with pgvector, read and written
through the ``Store`` interface, with the same meaning as the SQLite store.

Readers connect in autocommit mode (every query sees the last committed batch), check
that the schema is a brainbot index at this version whose model, dimension and analyzer
match, and never write. The one writer holds a session advisory lock from
``open(write=True)`` to ``close()`` (a second writer is refused at once with
StoreBusyError; readers never take it), migrates the schema, and writes one transaction
per ``batch()``; each committed batch bumps ``meta.generation``, which readers compare to
know what changed, exactly as on SQLite.

A writer opened with ``rebuild=True`` writes a new index into a schema of its own beside
the old one, which ``publish()`` swaps in with one transaction (``store/pg/rebuild.py``);
``close()`` without it drops the new one and the old index stays as it was.

Searching is ``store/pg/legs.py``'s; buffering and COPY are ``store/pg/write.py``'s; connecting,
schema, migrations and error translation are ``store/pg/schema.py``'s. Driver errors leave
every method as one-line StoreErrors naming the URL without its password.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from brainbot.errors import WRITERS, StoreBusyError, StoreError
from brainbot.store import identity as identity_mod
from brainbot.store.reads import chunk_records_sql, translated
from brainbot.store.records import Filter, NewDocument, now_iso
from brainbot.store.rows import chunk_record

from . import schema as ps
from .legs import PgLegs
from .rebuild import PgRebuild, clear_leftover
from .vault import PgVault
from .write import Pending

_COUNTERS = ("chunk_count", "length_sum")  # meta keys: BM25's N and summed lengths
# documents UNIQUE (root, path) is a btree, whose entries hold at most 2,704 bytes (a
# third of an 8 kB page, less headers): a longer root and path fail the insert, and with
# it the whole batch. Below this their entry fits even uncompressed.
MAX_PATH_BYTES = 2600


class PostgresStore(PgVault):
    """An open Postgres index (see the module docstring)."""

    def __init__(self, url: str, conn, schema: str, *, writer: bool = False) -> None:
        self.url = url
        self.target = ps.public_url(url)
        self.conn = conn
        self.schema = schema
        self.writer = writer
        self.legs = PgLegs(conn)
        self._meta: dict[str, str] | None = None
        self._pending: Pending | None = None
        self._index_id: str | None = None  # the index_id the legs were loaded from
        self._rebuild: PgRebuild | None = None  # writing a new index beside it

    # -- opening and closing -------------------------------------------------------------
    @classmethod
    def open(cls, url: str, *, write: bool = False, identity=None,
             rebuild: bool = False) -> PostgresStore:
        conn = ps.connect(url)
        target = ps.public_url(url)
        try:
            with ps.translate_errors(target):
                schema = ps.current_schema(conn)
                if write:
                    return cls._open_writer(url, conn, schema, identity, rebuild)
                return cls._open_reader(url, conn, schema)
        except BaseException:
            conn.close()
            raise

    @classmethod
    def _open_reader(cls, url: str, conn, schema: str) -> PostgresStore:
        target = ps.public_url(url)
        ps.check_readable(conn, schema, target)
        if not ps.register_vector(conn, target):
            raise StoreError(f"{target}: the pgvector extension is missing; run "
                             "`CREATE EXTENSION vector` as its owner, or rebuild the index")
        identity_mod.check(ps.read_meta(conn), target)
        # iterative scans: a filtered HNSW query keeps scanning until it has its k rows
        conn.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', false)")
        return cls(url, conn, schema)

    @classmethod
    def _open_writer(cls, url: str, conn, schema: str, identity, rebuild: bool):
        target = ps.public_url(url)
        if not ps.try_lock(conn, schema):
            raise StoreBusyError(f"{WRITERS} is writing {target}; wait for it to finish "
                                 "and run again")
        ps.register_vector(conn, target)
        replacing = PgRebuild.begin(conn, schema, target, identity) if rebuild else None
        try:
            return cls._ready_writer(url, conn, schema, identity, replacing)
        except BaseException:
            if replacing is not None:
                replacing.discard(conn)
            raise

    @classmethod
    def _ready_writer(cls, url: str, conn, schema: str, identity, replacing):
        """Migrate (the rebuild schema, when ``replacing``) and check the role may write."""
        target = ps.public_url(url)
        if replacing is None:
            clear_leftover(conn, schema, target, refuse=False)
            if identity is not None and ps.check_ours(conn, schema, target):
                # before migrating: refuse without touching it
                identity_mod.check(ps.read_meta(conn), target, writer=identity)
        ps.migrate(conn, replacing.name if replacing else schema, target)
        row = conn.execute("SELECT has_table_privilege('documents', 'INSERT') AND "
                           "has_table_privilege('postings', 'DELETE')").fetchone()
        if not row[0]:
            raise StoreError(f"{target}: permission denied; this role may only read: index "
                             "with a role that may write, or grant it")
        store = cls(url, conn, schema, writer=True)
        store._rebuild = replacing
        store._repair()
        conn.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', false)")
        return store

    def _repair(self) -> None:
        """What a killed bulk load or an older writer may have left out: the HNSW index,
        the count keys, the index_id and the folder roots."""
        self._create_hnsw()
        first = self._first_meta()
        if first:
            self._write_meta(first)
        meta = ps.read_meta(self.conn)
        if all(k in meta for k in _COUNTERS):
            return
        n, total = self.conn.execute(
            "SELECT count(*), coalesce(sum(lexical_length), 0) FROM chunks").fetchone()
        self._write_meta({"chunk_count": str(n), "length_sum": str(total)})

    def _create_hnsw(self) -> None:
        self.conn.execute(
            f"CREATE INDEX IF NOT EXISTS embeddings_hnsw ON embeddings USING hnsw "
            f"(vector vector_cosine_ops) WITH (m = {ps.HNSW_M}, "
            f"ef_construction = {ps.HNSW_EF_CONSTRUCTION})")

    def close(self) -> None:
        """Close the connection (releasing the writer lock); a rebuild not published is
        dropped, and the old index stays as it was."""
        conn, self.conn = self.conn, None
        rb, self._rebuild = self._rebuild, None
        if rb is not None:
            rb.discard(conn)
        if conn is not None:
            try:
                conn.close()  # also releases the writer's advisory lock
            except Exception:  # noqa: BLE001 - a dead server's socket: nothing to release
                pass

    # -- meta ------------------------------------------------------------------------------
    def _write_meta(self, values: dict[str, str]) -> None:
        self.conn.execute(
            "INSERT INTO meta(key, value) SELECT * FROM unnest(%s::text[], %s::text[]) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (list(values), list(values.values())))
        self._meta = None

    @translated
    def record_identity(self, identity) -> None:
        """Write ``identity`` to meta unless it is there already."""
        rows = {**identity.as_meta(), "schema_version": str(ps.SCHEMA_VERSION)}
        meta = ps.read_meta(self.conn)
        if any(meta.get(k) != v for k, v in rows.items()):
            self._write_meta(rows)

    @translated
    def set_meta(self, key: str, value: str | None) -> None:
        """Set (or with None remove) one meta entry; inside a batch."""
        if value is None:
            self.conn.execute("DELETE FROM meta WHERE key = %s", (key,))
            self._meta = None
        else:
            self._write_meta({key: value})

    # -- writing ---------------------------------------------------------------------------
    def refused_path(self, root: str, path: str) -> str | None:
        """Why a note at ``path`` under ``root`` cannot be indexed here (None: it can): a
        root and path past the btree limit, refused per file before any batch."""
        size = len(root.encode("utf-8", "replace")) + len(path.encode("utf-8", "replace"))
        if size <= MAX_PATH_BYTES:
            return None
        return (f"its folder and path take {size:,} bytes, more than the {MAX_PATH_BYTES:,} "
                "a Postgres index can hold (its (root, path) btree); rename or move it "
                "higher up")

    @contextmanager
    def batch(self) -> Iterator[None]:
        """One transaction; its commit bumps the generation. A failure rolls it all back."""
        if not self.writer:
            raise StoreError(f"{self.target} was opened for reading")
        try:
            with ps.translate_errors(self.target), self.conn.transaction():
                self._pending = Pending(self.generation() + 1)
                yield
                self._pending.flush(self.conn)
                self._commit_counts(self._pending)
        finally:
            self._pending = None

    def _commit_counts(self, p: Pending) -> None:
        self.conn.execute(
            "UPDATE meta SET value = CASE key WHEN 'generation' THEN %s "
            "WHEN 'chunk_count' THEN (value::bigint + %s)::text "
            "ELSE (value::bigint + %s)::text END "
            "WHERE key IN ('generation', 'chunk_count', 'length_sum')",
            (str(p.generation), p.chunk_delta, p.length_delta))
        self._meta = None

    def _flushed(self) -> Pending:
        if self._pending is None:
            raise StoreError(f"{self.target}: writes go inside store.batch()")
        self._pending.flush(self.conn)
        return self._pending

    @translated
    def vectors_for(self, text_hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """A text's vector where the index has one: a rebuild also takes the old index's."""
        found = dict(self.conn.execute(
            "SELECT DISTINCT ON (c.text_sha256) c.text_sha256, e.vector FROM chunks c "
            "JOIN embeddings e ON e.chunk = c.id WHERE c.text_sha256 = ANY(%s)",
            (sorted(set(text_hashes)),)).fetchall())
        if self._rebuild is not None:
            found.update(self._rebuild.vectors(
                self.conn, [h for h in text_hashes if h not in found]))
        return {h: v.to_numpy() for h, v in found.items()}

    @translated
    def touch_documents(self, updates: Sequence[tuple[int, int, int, int | None]]) -> None:
        """(document id, size, mtime_ns, read_ns): a file whose bytes did not change."""
        self._flushed()
        if updates:
            ids, sizes, mtimes, reads = (list(x) for x in zip(*updates))
            self.conn.execute(
                "UPDATE documents d SET size = u.size, mtime_ns = u.mtime, read_ns = u.read "
                "FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[]) "
                "AS u(id, size, mtime, read) WHERE d.id = u.id", (ids, sizes, mtimes, reads))

    @translated
    def delete_documents(self, doc_ids: Sequence[int]) -> None:
        self._flushed().delete(self.conn, doc_ids)

    @translated
    def add_document(self, doc: NewDocument) -> int:
        if self._pending is None:
            raise StoreError(f"{self.target}: writes go inside store.batch()")
        return self._pending.add(self.conn, doc, now_iso())

    @translated
    def add_vectors(self, rows: Sequence[tuple[int, str, np.ndarray]]) -> None:
        """(chunk id, text hash, vector): each stored if that chunk still holds that text
        and has none yet; inside a batch."""
        self._flushed()
        with self.conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO embeddings(chunk, vector) SELECT %s, %s WHERE EXISTS "
                "(SELECT 1 FROM chunks WHERE id = %s AND text_sha256 = %s) "
                "ON CONFLICT (chunk) DO NOTHING",
                [(i, np.ascontiguousarray(v, np.float32), i, h) for i, h, v in rows])

    def publish(self) -> None:
        """A rebuild's new index takes the old one's place, whole, in one transaction
        (store/pg/rebuild.py); this store then writes it there. Nothing to do for any
        other writer."""
        rb, self._rebuild = self._rebuild, None
        if rb is None:
            return
        try:
            with ps.translate_errors(self.target):
                rb.swap(self.conn, self.target)
        except BaseException:
            rb.discard(self.conn)
            raise
        self._meta = None

    @translated
    def replaced(self) -> tuple[int, int] | None:
        """Before a rebuild's publish(): (documents of the index it replaces, how many of
        them the new one lacks, by root and path); None for any other writer."""
        return None if self._rebuild is None else self._rebuild.replaced(self.conn)

    @contextmanager
    def bulk_load(self) -> Iterator[None]:
        """Around a load into an empty index: the HNSW index is dropped and built once
        at the end (pgvector builds it in parallel, far faster than row by row). A load
        killed before the end leaves no index; the next writer to open creates it."""
        with ps.translate_errors(self.target):
            empty = self.conn.execute("SELECT NOT EXISTS (SELECT 1 FROM embeddings)"
                                      ).fetchone()[0]
            if empty:
                self.conn.execute("DROP INDEX IF EXISTS embeddings_hnsw")
        yield
        with ps.translate_errors(self.target):
            # the graph must fit in maintenance_work_mem or the build slows many times
            # (~1.8 kB a 384-d vector with m = 16): at least 1 GB, more if the session
            # has it (PGOPTIONS='-c maintenance_work_mem=4GB' for tens of millions)
            self.conn.execute(
                "SELECT set_config('maintenance_work_mem', '1GB', false) FROM pg_settings "
                "WHERE name = 'maintenance_work_mem' AND setting::bigint < 1048576")
            self._create_hnsw()

    # -- the legs --------------------------------------------------------------------------
    @translated
    def refresh(self) -> bool:
        """Pick up what another process committed since the last call; False if nothing.
        A rebuild restarts the generation but writes a new index_id: the legs and their
        caches are then reloaded whatever the generation."""
        rows = dict(self.conn.execute(
            "SELECT key, value FROM meta WHERE key IN ('generation', 'index_id')").fetchall())
        generation = int(rows.get("generation", 0))
        if rows.get("index_id") != self._index_id:
            self.legs.generation, self._index_id = None, rows.get("index_id")
        if generation == self.legs.generation:
            return False
        self._meta = None
        meta = self.meta()
        if all(k in meta for k in _COUNTERS):
            n, total = int(meta["chunk_count"]), int(meta["length_sum"])
        else:
            n, total = self.conn.execute(
                "SELECT count(*), coalesce(sum(lexical_length), 0) FROM chunks").fetchone()
        return self.legs.sync(generation, int(n), int(total))

    @translated
    def bm25_topk(self, terms: Counter, n: int, flt: Filter | None = None):
        self._ready()
        return self.legs.bm25(terms, n, self.legs.allowed(flt, self.filtered_documents))

    @translated
    def vector_topk(self, qvec: np.ndarray, n: int, flt: Filter | None = None):
        self._ready()
        return self.legs.vector(qvec, n, self.legs.allowed(flt, self.filtered_documents))

    def _ready(self) -> None:
        if self.legs.generation is None:
            self.refresh()

    # -- the seam of the shared reads (store/reads.py) ---------------------------------------
    COLLATE = ' COLLATE "C"'  # SQLite's byte order, whatever the database's collation

    def _errors(self):
        return ps.translate_errors(self.target)

    def _sql(self, query: str, params=()) -> list[tuple]:
        with ps.translate_errors(self.target):
            return self.conn.execute(query.replace("?", "%s"), params).fetchall()

    def _sql_in(self, query: str, values) -> list[tuple]:
        if not len(values):
            return []
        return self._sql(query.replace("{in}", "= ANY(?)"), (list(values),))

    def _vector(self, value) -> np.ndarray:
        return value.to_numpy()

    # -- the vault (pg/vault.PgVault), with driver errors translated -------------------------
    resolve_links = translated(PgVault.resolve_links)
    language_share = translated(PgVault.language_share)
    record_facts = translated(PgVault.record_facts)

    # -- reading back ------------------------------------------------------------------------
    def chunk_records(self) -> Iterator[dict]:
        """The chunk records (README "The chunk record") of every chunk, by path and index."""
        for r in self._stream(chunk_records_sql(self.COLLATE)):
            yield chunk_record(r)

    def _stream(self, sql: str, params=()) -> Iterator[tuple]:
        """Rows of ``sql`` through a server-side cursor (a big index never sits in
        memory), in one snapshot."""
        with ps.translate_errors(self.target), self.conn.transaction():
            with self.conn.cursor(name="brainbot_stream") as cur:
                cur.itersize = 2000
                yield from cur.execute(sql, params)

    def export_documents(self) -> Iterator[NewDocument]:
        """Every document with its chunks, vectors and terms, ids kept, in id order,
        from one snapshot (a writer may go on committing meanwhile)."""
        with ps.translate_errors(self.target), self.conn.transaction():
            self.conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            yield from self._export_pages()

    @translated
    def chunk_count(self) -> int:
        meta = ps.read_meta(self.conn)
        if "chunk_count" in meta:
            return int(meta["chunk_count"])
        return int(self.conn.execute("SELECT count(*) FROM chunks").fetchone()[0])

    @translated
    def vector_count(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM embeddings").fetchone()[0])

    @translated
    def integrity(self) -> str:
        from .checks import problems

        found = problems(self.conn)
        return "; ".join(found) if found else "ok"

    @translated
    def size_bytes(self) -> int:
        """Tables with their indexes and TOAST, in brainbot's schema."""
        row = self.conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
            "AND c.relkind = 'r' AND c.relname = ANY(%s)", (self.schema, list(ps.TABLES)))
        return int(row.fetchone()[0])

