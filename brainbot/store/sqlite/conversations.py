"""A SQLite index's conversations: a second SQLite file beside it, ``<index>.conversations``.

Why a file beside the index, not tables in it: ``store/conversations.py``. The file is
named after the index's real path, so every spelling of one index (``./n.db``, a symlink)
finds the same conversations. It is created by the first saved turn and marked as
brainbot's (``PRAGMA application_id``): a file of that name that is not brainbot's is
refused, never written. It keeps SQLite's rollback journal, not WAL: a reader on a
read-only medium needs no ``-shm`` file, and nothing is left beside the index between
writes.

Each operation opens the file and closes it again (a fraction of a millisecond): a
long-running server never holds a file that ``brainbot copy`` or a user has since
replaced.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import sqlean as sqlite3

from brainbot.errors import StoreError
from brainbot.store.conversations import DDL, Conversations

from . import file as sf

SUFFIX = ".conversations"
APPLICATION_ID = 0x62626376  # "bbcv": brainbot conversations
VERSION = 1  # PRAGMA user_version: the layout of store/conversations.py's DDL


def sidecar_path(index) -> Path:
    """The conversations file of the index at ``index``."""
    return Path(os.path.realpath(index) + SUFFIX)


class SidecarConversations(Conversations):
    def __init__(self, index) -> None:
        self.target = str(index)  # messages name the index, as --db does
        self.path = sidecar_path(index)

    @contextmanager
    def _reading(self) -> Iterator:
        if not self.path.exists():
            yield None
            return
        uri = f"file:{quote(self.path.as_posix())}?mode=ro"
        db = self._connect(uri, uri=True)
        try:
            with sf.translate_errors(self.path):
                self._check(db)
                ours = db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
                yield db if ours else None  # None: a first write killed before its commit
        finally:
            db.close()

    @contextmanager
    def _writing(self) -> Iterator:
        if not self.path.parent.is_dir():
            raise StoreError(f"folder {self.path.parent} does not exist")
        db = self._connect(str(self.path))
        try:
            with sf.translate_errors(self.path):
                db.execute("BEGIN IMMEDIATE")
                try:
                    self._prepare(db)
                    yield db
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
                db.execute("COMMIT")
        finally:
            db.close()

    def _connect(self, where: str, uri: bool = False):
        try:
            db = sqlite3.connect(where, uri=uri, isolation_level=None)
            db.execute(f"PRAGMA busy_timeout = {sf.busy_timeout_ms()}")
        except sqlite3.Error as exc:
            raise sf.translate(exc, self.path) from None
        return db

    def _check(self, db) -> None:
        """Refuse a file of this name that another program wrote."""
        app = db.execute("PRAGMA application_id").fetchone()[0]
        if app != APPLICATION_ID and (app or self._has_tables(db)):
            raise StoreError(f"{self.path} is not brainbot's conversations file; move it "
                             "away to keep conversations for this index")
        if db.execute("PRAGMA user_version").fetchone()[0] > VERSION:
            raise StoreError(f"{self.path} was written by a newer brainbot; upgrade it")

    @staticmethod
    def _has_tables(db) -> bool:
        return db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] > 0

    def _prepare(self, db) -> None:
        """The tables and the mark, in the transaction of the first write."""
        self._check(db)
        if db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID:
            return
        for statement in DDL:
            db.execute(statement)
        db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        db.execute(f"PRAGMA user_version = {VERSION}")
