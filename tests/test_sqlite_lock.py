"""store/sqlite/lock.py: one writer at a time, and a released lock's descriptor is never
closed (closing it would drop the POSIX locks SQLite's own connections hold on the file)."""

from __future__ import annotations

import os
import sqlite3

import pytest

from brainbot.errors import StoreBusyError
from brainbot.store.sqlite import lock as lock_mod
from brainbot.store.sqlite.lock import WriterLock


def test_second_lock_is_refused_then_granted_after_release(tmp_path):
    db = tmp_path / "b.db"
    with WriterLock(db):
        with pytest.raises(StoreBusyError, match="another `brainbot index`"):
            WriterLock(db).__enter__()
    with WriterLock(db):  # released: the next writer gets it
        pass


def test_released_descriptor_is_kept_open_and_reused(tmp_path, monkeypatch):
    db = tmp_path / "b.db"
    closed = []
    real_close = os.close
    monkeypatch.setattr(lock_mod.os, "close", lambda fd: (closed.append(fd), real_close(fd)))
    first = WriterLock(db)
    with first:
        fd = first.fd
    assert fd not in closed
    os.fstat(fd)  # still open
    second = WriterLock(db)
    with second:
        assert second.fd == fd  # the idle descriptor, not a new one


def test_a_reader_in_the_same_process_survives_writers_coming_and_going(tmp_path):
    db = tmp_path / "b.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE t(x)")
    conn.commit()
    reader = sqlite3.connect(db)
    reader.execute("BEGIN")
    assert reader.execute("SELECT count(*) FROM t").fetchone() == (0,)  # holds a SHARED lock
    for _ in range(3):
        with WriterLock(db):
            pass
    # the reader's POSIX lock is still held: a writer connection cannot take EXCLUSIVE
    conn.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        conn.execute("PRAGMA busy_timeout = 0")
        conn.commit()
    reader.rollback()
    conn.commit()
