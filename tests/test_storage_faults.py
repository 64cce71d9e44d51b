"""Reliability, storage faults: a full disk, write errors, an immutable file, a read-only
mount and locks held by others. Each must give one line, exit 1, and a byte-identical db."""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO
from reliability_kit import (
    check_consistent,
    cli_env,
    copy_db,
    one_line_error,
    run_cli,
    snapshot,
    write_harness,
)

# --- 2. storage faults -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def harness(tmp_path_factory) -> Path:
    return write_harness(tmp_path_factory.mktemp("harness"))


@pytest.fixture
def indexed(tmp_path, vault, shared_embedder):
    """The tiny vault indexed into tmp_path/b.db, and a long note added afterwards, so the
    next run has ~20 chunks (~150 KB of WAL) to write."""
    from brainbot.index.indexer import Indexer

    db = tmp_path / "b.db"
    with Indexer(db, embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    paragraphs = [f"Paragraph {i} of the long note: the storage test writes the words "
                  f"alpha{i}, beta{i} and gamma{i} so every chunk is new. " * 3 for i in range(40)]
    (vault / "long.md").write_text("# Long\n\n" + "\n\n".join(paragraphs), encoding="utf-8")
    return db


def _clean_of(vault: Path, tmp: Path, embedder) -> dict:
    from brainbot.index.indexer import Indexer

    db = tmp / "reference.db"
    with Indexer(db, embedder=embedder) as ix:
        ix.index_paths([vault])
    return snapshot(db)


@contextlib.contextmanager
def mounted(*args: str, target: Path):
    target.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", *args, str(target)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount here ({r.stderr.strip() or 'not root'})")
    try:
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], capture_output=True)


def _fill(folder: Path, leave: int) -> Path:
    """Fill folder's filesystem until only ``leave`` bytes are free."""
    filler = folder / "filler"
    free = shutil.disk_usage(folder).free
    with open(filler, "wb") as f:
        with contextlib.suppress(OSError):
            f.write(b"\0" * max(0, free - leave))
    return filler


@pytest.mark.slow
def test_full_disk_refuses_cleanly_and_keeps_the_index(tmp_path, vault, indexed, shared_embedder):
    with mounted("-t", "tmpfs", "-o", "size=4m", "tmpfs", target=tmp_path / "small") as mnt:
        db = copy_db(indexed, mnt / "b.db")
        before, raw = snapshot(db), db.read_bytes()
        filler = _fill(mnt, leave=96 * 1024)  # room for the -shm file, not for the batch
        line = one_line_error(run_cli("index", vault, "--db", db))
        assert "disk full" in line and "free some space" in line
        assert db.read_bytes() == raw and snapshot(db) == before
        filler.unlink()  # check_consistent probes a copy, which needs room of its own
        assert len(check_consistent(db)) == 3
        assert run_cli("index", vault, "--db", db).returncode == 0
        assert snapshot(db) == _clean_of(vault, tmp_path, shared_embedder)


@pytest.mark.slow
def test_write_errors_refuse_cleanly_and_keep_the_index(tmp_path, vault, indexed, shared_embedder):
    """Write errors injected without root: RLIMIT_FSIZE caps every file the run writes
    (the WAL cannot grow past 64 KB), so write() fails with EFBIG mid-batch."""
    import resource

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (65_536, 65_536))

    before, raw = snapshot(indexed), indexed.read_bytes()
    result = run_cli("index", vault, "--db", indexed, preexec_fn=limit)
    line = one_line_error(result)
    assert "I/O error" in line or "disk full" in line
    assert indexed.read_bytes() == raw and snapshot(indexed) == before
    assert run_cli("index", vault, "--db", indexed).returncode == 0
    assert snapshot(indexed) == _clean_of(vault, tmp_path, shared_embedder)


@pytest.mark.slow
def test_immutable_db_file_refuses_cleanly(tmp_path, vault, indexed):
    """chmod 444 does not stop root; `chattr +i` does. Queries still work."""
    if subprocess.run(["chattr", "+i", str(indexed)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not possible here (not root, or the filesystem has no "
                    "immutable flag)")
    try:
        before, raw = snapshot(indexed), indexed.read_bytes()
        line = one_line_error(run_cli("index", vault, "--db", indexed))
        assert "read-only" in line and "chattr -i" in line
        assert indexed.read_bytes() == raw and snapshot(indexed) == before
        query = run_cli("query", "tomatoes", "--db", indexed, "--json", "--mode", "bm25")
        assert query.returncode == 0 and json.loads(query.stdout)
        (vault / "long.md").unlink()  # the vault as indexed: nothing to write, so no error
        assert run_cli("index", vault, "--db", indexed).returncode == 0
        assert indexed.read_bytes() == raw
    finally:
        subprocess.run(["chattr", "-i", str(indexed)], capture_output=True)


def test_read_only_mount_refuses_index_and_still_answers(tmp_path, vault, indexed):
    """A read-only bind mount: the index refuses with one line; queries still work (the
    file is read as immutable, since SQLite cannot create its -shm file there)."""
    folder = tmp_path / "dbs"
    folder.mkdir()
    original = copy_db(indexed, folder / "b.db")
    raw = original.read_bytes()
    with mounted("--bind", str(folder), target=tmp_path / "ro") as mnt:
        r = subprocess.run(["mount", "-o", "remount,ro,bind", str(mnt)], capture_output=True)
        if r.returncode != 0:
            pytest.skip("cannot remount read-only here")
        db = mnt / "b.db"
        line = one_line_error(run_cli("index", vault, "--db", db))
        assert "read-only" in line
        query = run_cli("query", "tomatoes sun", "--db", db, "--json")
        assert query.returncode == 0, query.stderr
        assert json.loads(query.stdout)[0]["path"] == "sub/beta.md"
    assert original.read_bytes() == raw and sorted(folder.iterdir()) == [original]


HOLD_SQLITE = r'''
import sys, sqlean
db = sqlean.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("held", flush=True)
sys.stdin.read()
db.execute("ROLLBACK")
'''
HOLD_WRITER = r'''
import sys
from brainbot.store.sqlite.lock import WriterLock
with WriterLock(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()
'''


@contextlib.contextmanager
def holding(script: str, db: Path):
    holder = subprocess.Popen([sys.executable, "-c", script, str(db)], cwd=REPO, env=cli_env(),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)


@pytest.mark.slow
def test_db_locked_by_another_sqlite_writer(tmp_path, vault, indexed, shared_embedder,
                                            harness):
    """Another process inside BEGIN EXCLUSIVE: the index waits BRAINBOT_BUSY_TIMEOUT_MS,
    then refuses with one line and leaves the file alone; readers are not blocked. When
    the lock is released while the index waits, the index goes on and completes."""
    before, raw = snapshot(indexed), indexed.read_bytes()
    quick = cli_env(BRAINBOT_BUSY_TIMEOUT_MS="300")
    with holding(HOLD_SQLITE, indexed):
        line = one_line_error(run_cli("index", vault, "--db", indexed, env=quick))
        assert "locked by another process" in line and "try again" in line
        query = run_cli("query", "alpha project", "--db", indexed, "--json", "--mode", "bm25",
                        env=quick)
        assert query.returncode == 0 and "locked" not in query.stderr
    assert indexed.read_bytes() == raw and snapshot(indexed) == before
    with holding(HOLD_SQLITE, indexed):
        waiting = subprocess.Popen(
            [sys.executable, str(harness), "index", str(vault), "--db", str(indexed)],
            cwd=REPO, env=cli_env(BB_TEST_ANNOUNCE="1", BRAINBOT_BUSY_TIMEOUT_MS="600000"),
            stderr=subprocess.PIPE, text=True)
        assert waiting.stderr.readline().strip() == "bb-test: begin"  # now at BEGIN IMMEDIATE
        time.sleep(0.5)
        assert waiting.poll() is None  # still waiting for the lock, not failed
    _, err = waiting.communicate(timeout=900)
    assert waiting.returncode == 0, err
    assert snapshot(indexed) == _clean_of(vault, tmp_path, shared_embedder)


def test_db_held_by_another_indexer(vault, indexed):
    before, raw = snapshot(indexed), indexed.read_bytes()
    with holding(HOLD_WRITER, indexed):
        line = one_line_error(run_cli("index", vault, "--db", indexed))
        assert "another brainbot writer" in line and "is writing" in line
    assert indexed.read_bytes() == raw and snapshot(indexed) == before


def test_busy_timeout_override_is_validated(monkeypatch, tmp_path):
    from brainbot.errors import InputError
    from brainbot.store.sqlite import file as store

    monkeypatch.setenv("BRAINBOT_BUSY_TIMEOUT_MS", "250")
    db = store.connect(tmp_path / "x.db")
    assert db.execute("PRAGMA busy_timeout").fetchone()[0] == 250
    db.close()
    monkeypatch.setenv("BRAINBOT_BUSY_TIMEOUT_MS", "soon")
    with pytest.raises(InputError, match="BRAINBOT_BUSY_TIMEOUT_MS"):
        store.connect(tmp_path / "x.db")
