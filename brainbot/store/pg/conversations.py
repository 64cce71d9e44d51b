"""A Postgres index's conversations: two tables in the index's own schema.

Why there (and why a SQLite index keeps them in a file beside it instead):
``store/conversations.py``. The tables are created by the first saved turn, in the
schema the URL selects, and a rebuild leaves them (``pg/schema.TABLES`` does not list
them; ``check_ours`` does not count them as another application's). A role that may only
read the index can read them but not save a turn: the ask says the turn was not saved.
Each operation opens its own connection: an ask writes once, after its answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from brainbot.store.conversations import DDL, TABLES, Conversations

from . import schema as ps


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
            with ps.translate_errors(self.target):
                if not set(TABLES) <= ps.tables_of(conn, ps.current_schema(conn)):
                    for statement in DDL:
                        conn.execute(statement)
                with conn.transaction():
                    yield conn
        finally:
            conn.close()

    def _hold(self, db, cid: str) -> None:
        db.execute("SELECT 1 FROM conversations WHERE id = %s FOR UPDATE", (cid,))
