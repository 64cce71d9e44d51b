"""`brainbot watch`: edits, atomic saves, deletes, renames, bulk changes and a re-created
folder are each seen within a bounded wait, and every scenario ends with the index equal
to a clean index of the folder."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest
from reliability_kit import snapshot

from brainbot.index.indexer import Indexer
from brainbot.search.searcher import Searcher
from brainbot.serve.watch import Watcher

WAIT_S = 30  # generous: CI machines are shared; a save is normally seen in well under 2 s


def wait_until(condition, what: str, timeout: float = WAIT_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout} s: {what}")


class Running:
    """A Watcher on its own thread, with the passes it reported."""

    def __init__(self, root, db, embedder):
        self.reports = []
        self.watcher = Watcher([root], str(db), embedder=embedder, on_pass=self.reports.append)
        self.thread = threading.Thread(target=self.watcher.run, daemon=True)
        self.root, self.db, self.embedder = root, db, embedder

    def __enter__(self):
        self.thread.start()
        wait_until(lambda: self.reports, "the first pass")
        time.sleep(0.3)  # armed before that pass began; let it settle
        return self

    def __exit__(self, *exc):
        self.watcher.stop.set()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive()

    def finds(self, text: str) -> list[str]:
        with Searcher(self.db, embedder=self.embedder) as s:
            return [h.path for h in s.search(text, 3, mode="bm25")]

    def equals_clean_index(self, tmp_path):
        clean = tmp_path / f"clean{len(self.reports)}.db"
        with Indexer(clean, embedder=self.embedder) as ix:
            ix.index_paths([self.root])
        return snapshot(self.db) == snapshot(clean)


@pytest.fixture
def running(tmp_path, vault, shared_embedder):
    with Running(vault, tmp_path / "w.db", shared_embedder) as r:
        yield r


def test_edit(running, tmp_path):
    note = running.root / "alpha.md"
    note.write_text(note.read_text() + "\nThe kiwi harvest slipped to April.\n")
    wait_until(lambda: "alpha.md" in running.finds("kiwi harvest"), "the edit")
    wait_until(lambda: running.equals_clean_index(tmp_path), "a clean index")


def test_atomic_save(running, tmp_path):
    note = running.root / "gamma.md"
    temp = running.root / ".gamma.md.tmp1234"
    temp.write_text("Plain note. The quince jam needs 40 minutes of boiling.\n")
    os.replace(temp, note)
    wait_until(lambda: running.finds("quince jam") == ["gamma.md"], "the atomic save")
    wait_until(lambda: running.equals_clean_index(tmp_path), "a clean index")


def test_delete_and_rename(running, tmp_path):
    (running.root / "gamma.md").unlink()
    wait_until(lambda: not running.finds("Smith results Friday"), "the delete")
    os.rename(running.root / "alpha.md", running.root / "sub" / "omega.md")
    wait_until(lambda: running.finds("alpha project ships") == ["sub/omega.md"], "the rename")
    wait_until(lambda: running.equals_clean_index(tmp_path), "a clean index")


def test_folder_renamed_in_and_away(running, tmp_path):
    os.rename(running.root / "sub", running.root / "moved")
    wait_until(lambda: running.finds("tomatoes full sun") == ["moved/beta.md"],
               "the folder rename")
    wait_until(lambda: running.equals_clean_index(tmp_path), "a clean index")


def test_bulk_change_is_one_batched_pass(running, tmp_path):
    before = len(running.reports)
    notes = running.root / "bulk"
    notes.mkdir()
    for i in range(1000):  # like a checkout: 1,000 files in well under a second
        (notes / f"n{i:04}.md").write_text(f"# Bulk\n\nBulk note {i:04} about lanterns.\n")
    wait_until(lambda: sum(r.stats.new for r in running.reports[before:]) >= 1000,
               "1,000 new notes", timeout=180)
    passes = running.reports[before:]
    assert len(passes) <= 3, [r.line() for r in passes]
    assert sum(r.stats.embedded for r in passes) <= 1000
    wait_until(lambda: running.equals_clean_index(tmp_path), "a clean index")


def test_folder_deleted_and_recreated(running, tmp_path):
    saved = tmp_path / "saved"
    shutil.copytree(running.root, saved)
    shutil.rmtree(running.root)
    wait_until(lambda: not running.finds("tomatoes full sun"), "the deletion")
    shutil.copytree(saved, running.root)
    (running.root / "late.md").write_text("# Late\n\nWritten after the folder came back.\n")
    wait_until(lambda: running.finds("written after folder came back") == ["late.md"],
               "the re-created folder")
    (running.root / "later.md").write_text("# Later\n\nA persimmon tree by the gate.\n")
    wait_until(lambda: running.finds("persimmon tree") == ["later.md"], "events re-armed")
    wait_until(lambda: running.equals_clean_index(tmp_path), "a clean index")


def test_the_lock_is_held_per_pass_only(running, tmp_path, shared_embedder):
    """Between passes another writer may index; a pass that finds the lock taken waits."""
    from brainbot.store.sqlite.store import WriterLock

    with Indexer(running.db, embedder=shared_embedder) as ix:  # not refused: idle watcher
        ix.index_paths([running.root])
    with WriterLock(running.db):
        (running.root / "held.md").write_text("# Held\n\nWritten while the lock was held.\n")
        time.sleep(1.5)
        assert "held.md" not in running.finds("written while lock held")
    wait_until(lambda: running.finds("written while lock held") == ["held.md"],
               "the pass after the lock was released")


def test_sigterm_stops_the_watcher_cleanly(tmp_path, vault):
    db = tmp_path / "t.db"
    proc = subprocess.Popen([sys.executable, "-m", "brainbot", "watch", str(vault), "--db",
                             str(db)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        first = proc.stdout.readline()
        assert "3 new" in first, first + proc.stderr.read()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "Traceback" not in proc.stderr.read()
    assert len(snapshot(db)["documents"]) == 3


def test_folder_replaced_at_once(running, tmp_path):
    """Deleted and re-created before the watcher looks: the new folder may even reuse the
    old one's inode, so only the deletion event tells the watcher to re-arm."""
    saved = tmp_path / "saved2"
    shutil.copytree(running.root, saved)
    for attempt in range(3):
        shutil.rmtree(running.root)
        shutil.copytree(saved, running.root)
        (running.root / f"fresh{attempt}.md").write_text(f"# F\n\nA loquat{attempt} tree.\n")
        wait_until(lambda a=attempt: running.finds(f"loquat{a}") == [f"fresh{a}.md"],
                   f"a note in the folder replaced (attempt {attempt})")
    wait_until(lambda: running.equals_clean_index(tmp_path), "a clean index")
