"""`--rebuild` and `copy --replace` on Postgres: the new index is written into a schema of
its own beside the index's and swapped in by one transaction, so the index's schema always
holds a whole index: the old one until that commit, the new one after it.

The rebuild schema is ``<schema>_brainbot_rebuild`` (a hashed name where that would pass
Postgres' 63 bytes), created with a comment that names the schema it rebuilds (``MARK``):
only a schema bearing that comment is ever dropped. The writer holds the index schema's
lock (``schema.try_lock``) from start to end, so the rebuild schema has one writer, and
one left behind is written by nobody. The writer's connection has the rebuild schema
first on its search_path, so every statement of the store (unqualified names) writes the
new index. Until the swap the old tables stay where readers find them, untouched: readers
and servers answer from them, and the rebuild reads their vectors by text hash when the
same model and embedder made them.

The swap, one transaction: lock the old tables (ACCESS EXCLUSIVE with NOWAIT: while a
reader's query holds one it lets go and tries again a moment later, so it never waits
holding a lock, never deadlocks with a reader and never queues readers behind it; past
SWAP_PATIENCE_S, for a reader that never pauses, each try may wait SWAP_WAIT_MS in the
queue), give their grants to the new tables, drop them, move the new tables and view into the index's schema (``ALTER ... SET SCHEMA``
carries each table's indexes, constraints, sequences and row type), and drop the then
empty rebuild schema. Postgres DDL is transactional: a kill at any moment leaves the old
index whole or the new one. The conversations' tables in the index's schema
(``store/pg/conversations.py``) are not the index's tables, and are never touched.

A rebuild killed before the swap leaves its schema behind; the next writer drops it. This
module knows nothing of documents: ``store/pg/store.py`` writes the new index.
"""

from __future__ import annotations

import hashlib
import time

from brainbot.errors import StoreBusyError, StoreError
from brainbot.store.identity import same_vectors

from . import schema as ps

SUFFIX = "_brainbot_rebuild"
MARK = "brainbot: the rebuild of schema "  # + the schema's name: the rebuild schema's comment
NAME_BYTES = 63  # Postgres' NAMEDATALEN - 1: a longer identifier is cut short
# While readers' queries hold the old tables the swap tries its locks again this often (a
# query takes milliseconds; 20 ms is a few of them), for at most SWAP_PATIENCE_S, then
# waits for them in the lock queue (stalling the readers that come after, briefly).
SWAP_RETRY_S = 0.02
SWAP_PATIENCE_S = 30.0
# A try past that patience waits this long in the lock queue, stalling readers behind it
# at most this long: below deadlock_timeout's default 1 s, so a reader's deadlock check
# never fires while it waits. Past SWAP_GIVE_UP_S (a transaction left open holds the old
# tables), the rebuild ends unpublished.
SWAP_WAIT_MS = 500
SWAP_GIVE_UP_S = 600.0
_VIEW = "chunk_view"


def rebuild_schema(schema: str) -> str:
    """The schema a rebuild of ``schema`` writes its new index into."""
    name = schema + SUFFIX
    if len(name.encode("utf-8")) <= NAME_BYTES:
        return name
    return "brainbot_rebuild_" + hashlib.sha256(schema.encode("utf-8")).hexdigest()[:24]


def clear_leftover(conn, schema: str, target: str, *, refuse: bool) -> None:
    """Drop the rebuild schema a killed rebuild of ``schema`` left (the caller holds the
    index's lock: nobody writes it). A schema by that name without brainbot's mark is left
    alone, and refused (StoreError) when ``refuse``: a rebuild needs the name."""
    from psycopg import sql

    name = rebuild_schema(schema)
    row = conn.execute("SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace "
                       "WHERE nspname = %s", (name,)).fetchone()
    if row is None:
        return
    if row[0] != MARK + schema:
        if refuse:
            raise StoreError(f"{target}: schema {name} is in the way of the rebuild and is "
                             "not brainbot's; drop or rename it and run again")
        return
    conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))


class PgRebuild:
    """A new index being written beside the one in ``schema`` (module docstring)."""

    def __init__(self, schema: str, name: str, search_path: str, salvage: bool) -> None:
        self.schema = schema  # the index's schema: the old index until the swap
        self.name = name  # the rebuild schema: the new index
        self.search_path = search_path  # the connection's own, given back after the swap
        self.salvage = salvage  # the old vectors were made as the new ones would be

    @classmethod
    def begin(cls, conn, schema: str, target: str, identity) -> PgRebuild | None:
        """Create the rebuild schema and point the connection at it; None when ``schema``
        holds no index yet (nothing to keep: it is written in place). ``identity``: the
        old vectors made as it would make them are reused (None: none)."""
        from psycopg import errors, sql

        clear_leftover(conn, schema, target, refuse=True)
        if not ps.check_ours(conn, schema, target):  # refuses another application's tables
            return None
        _check_owner(conn, schema, target)
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")  # never inside the new schema
        ps.register_vector(conn, target)
        extension = conn.execute(
            "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n "
            "ON n.oid = e.extnamespace WHERE e.extname = 'vector'").fetchone()[0]
        name = rebuild_schema(schema)
        own_path = conn.execute("SELECT current_setting('search_path')").fetchone()[0]
        try:
            with conn.transaction():  # never without its mark
                conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
                conn.execute(sql.SQL("COMMENT ON SCHEMA {} IS {}").format(
                    sql.Identifier(name), sql.Literal(MARK + schema)))
        except errors.InsufficientPrivilege as exc:
            raise StoreError(
                f"{target}: a rebuild writes the new index into a schema of its own ({name}), "
                f"and this role may not create one ({str(exc).splitlines()[0]}); grant it CREATE "
                "on the database, or rebuild as its owner") from None
        path = sql.SQL("{}, {}").format(sql.Identifier(name), sql.Identifier(extension))
        conn.execute("SELECT set_config('search_path', %s, false)", (path.as_string(conn),))
        old = dict(conn.execute(sql.SQL("SELECT key, value FROM {}.meta").format(
            sql.Identifier(schema))).fetchall())
        return cls(schema, name, own_path, identity is not None and same_vectors(old, identity))

    def vectors(self, conn, text_hashes) -> dict:
        """text_sha256 -> pgvector Vector of those the old index has (made alike)."""
        from psycopg import sql

        if not self.salvage or not text_hashes:
            return {}
        return dict(conn.execute(sql.SQL(
            "SELECT DISTINCT ON (c.text_sha256) c.text_sha256, e.vector FROM {0}.chunks c "
            "JOIN {0}.embeddings e ON e.chunk = c.id WHERE c.text_sha256 = ANY(%s)").format(
                sql.Identifier(self.schema)), (sorted(set(text_hashes)),)).fetchall())

    def replaced(self, conn) -> tuple[int, int]:
        """(documents of the old index, how many of them the new one lacks, by root and
        path)."""
        from psycopg import sql

        row = conn.execute(sql.SQL(
            "SELECT count(*), count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM {}.documents n "
            "WHERE n.root = o.root AND n.path = o.path)) FROM {}.documents o").format(
                sql.Identifier(self.name), sql.Identifier(self.schema))).fetchone()
        return int(row[0]), int(row[1])

    def swap(self, conn, target: str) -> None:
        """The new index takes the old one's place, in one transaction (module docstring);
        the connection then writes it there."""
        from psycopg import errors

        start = time.monotonic()
        while True:
            waited = time.monotonic() - start
            if waited >= SWAP_GIVE_UP_S:
                raise StoreBusyError(
                    f"{target}: other sessions held the index's tables for {waited:.0f} s (a "
                    "transaction left open?); the rebuild was not put in place and the old "
                    "index is as it was: run it again once they are done")
            try:
                with conn.transaction():
                    self._move_in(conn, wait=waited >= SWAP_PATIENCE_S)
                break
            except (errors.LockNotAvailable, errors.QueryCanceled,
                    errors.DeadlockDetected):  # a reader holds a table: again soon
                time.sleep(SWAP_RETRY_S)
        conn.execute("SELECT set_config('search_path', %s, false)", (self.search_path,))

    def _move_in(self, conn, wait: bool) -> None:
        from psycopg import sql

        old, new = sql.Identifier(self.schema), sql.Identifier(self.name)
        present = ps.tables_of(conn, self.schema)
        held = [sql.SQL("{}.{}").format(old, sql.Identifier(t))
                for t in (*ps.TABLES, _VIEW) if t in present]
        lock = sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(sql.SQL(", ").join(held))
        if wait:  # the queue, for SWAP_WAIT_MS at most (the session's own timeout after)
            own = conn.execute("SELECT current_setting('statement_timeout')").fetchone()[0]
            conn.execute("SELECT set_config('statement_timeout', %s, true)", (str(SWAP_WAIT_MS),))
            conn.execute(lock)
            conn.execute("SELECT set_config('statement_timeout', %s, true)", (own,))
        else:
            conn.execute(lock + sql.SQL(" NOWAIT"))
        grants = _grants(conn, self.schema)
        conn.execute(sql.SQL("DROP VIEW IF EXISTS {}.{}").format(old, sql.Identifier(_VIEW)))
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(sql.SQL(", ").join(
            sql.SQL("{}.{}").format(old, sql.Identifier(t)) for t in ps.TABLES)))
        for table in ps.TABLES:
            conn.execute(sql.SQL("ALTER TABLE {}.{} SET SCHEMA {}").format(
                new, sql.Identifier(table), old))
        conn.execute(sql.SQL("ALTER VIEW {}.{} SET SCHEMA {}").format(
            new, sql.Identifier(_VIEW), old))
        for grant in grants:
            conn.execute(grant)
        conn.execute(sql.SQL("DROP SCHEMA {}").format(new))  # empty now: never CASCADE

    def discard(self, conn) -> None:
        """The rebuild ends without its swap: its schema goes, the old index stays. Best
        effort: a schema left (a lost server) is dropped by the next writer."""
        from psycopg import Error, sql

        if conn is None:
            return
        try:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                sql.Identifier(self.name)))
        except Error:
            pass


def _check_owner(conn, schema: str, target: str) -> None:
    """Only the owner of the index's tables may drop them at the swap: a role that may
    not is refused now, before the rebuild's work, not after it."""
    row = conn.execute(
        "SELECT coalesce(bool_and(pg_has_role(c.relowner, 'USAGE')), true) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
        "AND c.relname = ANY(%s)", (schema, [*ps.TABLES, _VIEW])).fetchone()
    if not row[0]:
        raise StoreError(f"{target}: permission denied; a rebuild replaces the index's tables, "
                         "which only their owner may do: rebuild as the role that owns them")


def _grants(conn, schema: str) -> list:
    """GRANT statements that give the new tables what the old ones granted to other roles
    (a role that may only read keeps reading after a rebuild)."""
    from psycopg import sql

    rows = conn.execute(
        "SELECT c.relname, a.privilege_type, a.is_grantable, "
        "CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.rolname) END "
        "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "CROSS JOIN LATERAL aclexplode(c.relacl) a LEFT JOIN pg_roles r ON r.oid = a.grantee "
        "WHERE n.nspname = %s AND c.relname = ANY(%s) AND a.grantee <> c.relowner",
        (schema, [*ps.TABLES, _VIEW])).fetchall()
    return [sql.SQL("GRANT {} ON {}.{} TO {}{}").format(
        sql.SQL(privilege), sql.Identifier(schema), sql.Identifier(table), sql.SQL(grantee),
        sql.SQL(" WITH GRANT OPTION" if grantable else "")) for table, privilege, grantable,
        grantee in rows]
