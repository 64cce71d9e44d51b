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
        with pytest.raises(StoreBusyError, match="is writing"):
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


def _deleted_index_fds(db) -> list[str]:
    """This process's descriptors of a file once at ``db``'s path, now deleted."""
    out = []
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith(str(db)) and target.endswith("(deleted)"):
            out.append(target)
    return out


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_a_long_lived_process_lets_go_of_a_rebuilt_index(tmp_path, vault, counting):
    """M12: a server with --watch (a reader and a writer in one process) kept the lock
    descriptor of the index a rebuild replaced, and with it the deleted file's blocks,
    until it exited."""
    from reliability_kit import run_cli

    from brainbot.index.indexer import Indexer
    from brainbot.search.searcher import Searcher

    db = tmp_path / "w.db"
    with Indexer(db, embedder=counting) as ix:  # a watch's pass: its lock descriptor stays
        ix.index_paths([vault])
    with Searcher(db, embedder=counting) as searcher:
        assert searcher.search("tomatoes", 1, mode="bm25")
        result = run_cli("index", vault, "--db", db, "--rebuild", "--no-embed")
        assert result.returncode == 0, result.stderr
        assert searcher.search("tomatoes", 1, mode="bm25")  # the reader moves to the new file
        (vault / "delta.md").write_text("# Delta\n\nKites over the dunes.\n", encoding="utf-8")
        with Indexer(db, embedder=counting) as ix:  # the next pass
            ix.index_paths([vault])
        assert searcher.search("kites", 1, mode="bm25")
        assert _deleted_index_fds(db) == []
    with WriterLock(db):  # the new file's descriptors are still kept and locked as ever
        with pytest.raises(StoreBusyError):
            WriterLock(db).__enter__()


def test_a_lock_taken_on_a_file_moved_away_is_taken_again_on_the_new_one(tmp_path,
                                                                         monkeypatch):
    """A rebuild moves a new file over the path: a writer that opened the old file a
    moment before must not end up holding the old file's lock (and writing beside the
    rebuild's new file)."""
    db = tmp_path / "b.db"
    db.write_bytes(b"old")
    real_flock = lock_mod.fcntl.flock
    moved = []

    def flock_then_move(fd, op):
        real_flock(fd, op)
        if not moved and op & lock_mod.fcntl.LOCK_EX:  # between open and the check
            (tmp_path / "new").write_bytes(b"new")
            os.replace(tmp_path / "new", db)
            moved.append(True)

    monkeypatch.setattr(lock_mod.fcntl, "flock", flock_then_move)
    with WriterLock(db) as held:
        assert moved and os.fstat(held.fd).st_ino == os.stat(db).st_ino


def test_the_busy_message_names_the_writer_holding_the_lock(tmp_path, vault):
    """L17: a watch holding the lock was called "another `brainbot index`"; the writer is
    named from /proc/locks where it can be, generically elsewhere."""
    import subprocess
    import sys

    from conftest import REPO
    from reliability_kit import cli_env, hooked_env, one_line_error, run_cli
    from wait_kit import still_running, wait_until

    db, gate = tmp_path / "h.db", tmp_path / "gate"
    env = cli_env(**hooked_env(tmp_path / "hooks", BB_TEST_HOLD_COMMIT=f"1:{gate}"))
    holder = subprocess.Popen([sys.executable, "-m", "brainbot", "index", str(vault),
                               "--db", str(db), "--no-embed"], cwd=REPO, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: os.path.exists(f"{gate}.held"), "the first index holds the lock",
                   alive=still_running(holder))
        line = one_line_error(run_cli("index", vault, "--db", db))
        if os.path.exists("/proc/locks"):
            assert f"another `brainbot index` (pid {holder.pid}) is writing" in line, line
        else:
            assert "another brainbot writer" in line, line
    finally:
        gate.touch()
        holder.communicate(timeout=300)
    assert holder.returncode == 0
    with pytest.raises(StoreBusyError, match="another brainbot writer"), WriterLock(db):
        WriterLock(db).__enter__()  # this process is no brainbot command: said generically
