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
replaced. A reader opens it read-write when it and its folder are writable (it writes
nothing, but a writer killed inside its commit leaves a hot journal that only a
read-write connection can roll back: a read-only one fails); ``mode=ro`` only where it is
not, and then a hot journal is said as what it is.

Its errors are its own (``translate``): a damaged file is moved away, never rebuilt with
``brainbot index`` as the index would be, and a folder or a device in its place says so.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import sqlean as sqlite3

from brainbot.errors import ReadOnlyStoreError, StoreError
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
        if not self._present():
            yield None
            return
        writable = os.access(self.path, os.W_OK) and os.access(self.path.parent, os.W_OK)
        mode = "rw" if writable else "ro"  # rw: it rolls back a hot journal; ro: it cannot
        db = self._connect(f"file:{quote(self.path.as_posix())}?mode={mode}", uri=True)
        try:
            with self._translated(reading_ro=not writable):
                self._check(db)
                ours = db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
                yield db if ours else None  # None: a first write killed before its commit
        finally:
            db.close()

    @contextmanager
    def _writing(self) -> Iterator:
        if not self.path.parent.is_dir():
            raise StoreError(f"folder {self.path.parent} does not exist")
        self._present()  # a folder or a device in its place: said as such
        db = self._connect(str(self.path))
        try:
            with self._translated():
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

    def _present(self) -> bool:
        """Whether the file exists; StoreError when something else is in its place."""
        if not self.path.exists():
            return False
        if not self.path.is_file():
            what = "a folder" if self.path.is_dir() else "not a regular file"
            raise StoreError(f"{self.path} is {what}, not a conversations file; move it away "
                             "(brainbot keeps this index's conversations there)")
        return True

    def _connect(self, where: str, uri: bool = False):
        try:
            db = sqlite3.connect(where, uri=uri, isolation_level=None)
            db.execute(f"PRAGMA busy_timeout = {sf.busy_timeout_ms()}")
        except sqlite3.Error as exc:
            raise self.translate(exc) from None
        return db

    @contextmanager
    def _translated(self, reading_ro: bool = False) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise self.translate(exc, reading_ro) from None

    def translate(self, exc: Exception, reading_ro: bool = False) -> StoreError:
        """A SQLite error on this file as one line. A read-only reader that is told it
        cannot write met a hot journal: a save that stopped inside its commit."""
        text = str(exc)
        if "not a database" in text or "malformed" in text or "file is encrypted" in text:
            return StoreError(f"{self.path} is not a conversations file or is damaged (SQLite "
                              f"says: {text}); move it away (brainbot then keeps this index's "
                              "conversations in a new one)")
        if reading_ro and ("readonly" in text or "read-only" in text):
            return ReadOnlyStoreError(
                f"{self.path} holds a save that was interrupted ({self.path.name}-journal), "
                "which only a writer can roll back, but it or its folder is read-only; make "
                "them writable, then run again")
        return sf.translate(exc, self.path)  # locked, read-only, disk full, I/O

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
