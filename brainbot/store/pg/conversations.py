"""A Postgres index's conversations: two tables in the index's own schema.

Why there (and why a SQLite index keeps them in a file beside it instead):
``store/conversations.py``. The tables are created by the first saved turn, in the
schema the URL selects, and a rebuild leaves them (``pg/schema.TABLES`` does not list
them; ``check_ours`` does not count them as another application's). A role that may only
read the index can read them but not save a turn: the ask says the turn was not saved.
Each operation opens its own connection: an ask writes once, after its answer.

The first saves of a new index may come at once (a daemon, agents and the page asking
together), and concurrent ``CREATE TABLE IF NOT EXISTS`` is not safe in PostgreSQL: the
loser fails on pg_type's unique index and its turn is lost. So the tables are created
inside the save's own transaction, under a transaction advisory lock on the schema, and
looked for again once it is held.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from brainbot.store.conversations import DDL, TABLES, Conversations

from . import schema as ps

# The advisory lock that creates the tables: keyed by (this constant, hash of the schema),
# as the writer lock is by ps.LOCK_CLASS, but its own, so that a save never waits for an
# index run (which holds the writer lock for its whole run).
TABLES_LOCK_CLASS = 0x626263  # "bbc"


class PgConversations(Conversations):
    mark = "%s"

    def __init__(self, url: str) -> None:
        self.url = url
        self.target = ps.public_url(url)

    @contextmanager
    def _reading(self) -> Iterator:
        conn = ps.connect(self.url)
        try:
            with ps.translate_errors(self.target):
                present = ps.tables_of(conn, ps.current_schema(conn))
                yield conn if set(TABLES) <= present else None
        finally:
            conn.close()

    @contextmanager
    def _writing(self) -> Iterator:
        conn = ps.connect(self.url)
        try:
            with ps.translate_errors(self.target), conn.transaction():
                self._create_tables(conn)
                yield conn
        finally:
            conn.close()

    @staticmethod
    def _create_tables(conn) -> None:
        """The tables, in the open transaction, when they are missing: one save at a time
        creates them, and the ones that waited find them."""
        schema = ps.current_schema(conn)
        if set(TABLES) <= ps.tables_of(conn, schema):
            return
        conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                     (TABLES_LOCK_CLASS, schema))
        if set(TABLES) <= ps.tables_of(conn, schema):  # created while this one waited
            return
        for statement in DDL:
            conn.execute(statement)

    def _hold(self, db, cid: str) -> None:
        db.execute("SELECT 1 FROM conversations WHERE id = %s FOR UPDATE", (cid,))
