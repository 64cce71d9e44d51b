"""`brainbot watch`: edits, atomic saves, deletes, renames, bulk changes, a re-created
folder, a folder moved away, a new `.brainbotignore` are each seen within a bounded wait,
by passes over just the notes they name; `.git` noise makes no pass; a failing pass or a
name watchfiles cannot decode does not stop the watch; an index is written at its own precision.
Every scenario ends with the index equal to a clean index of the folder."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest
from reliability_kit import snapshot
from wait_kit import WAIT_S, wait_until

from brainbot.index.freshness import missing_root_line
from brainbot.index.indexer import Indexer
from brainbot.search.searcher import Searcher
from brainbot.serve.watch import Watcher


def next_line(stream, timeout: float = WAIT_S) -> str:
    """The next line of a child's output, or an AssertionError after ``timeout``."""
    import queue

    got: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: got.put(stream.readline()), daemon=True).start()
    try:
        return got.get(timeout=timeout)
    except queue.Empty:
        raise AssertionError(f"no line within {timeout} s") from None


class Running:
    """A Watcher on its own thread, with the passes it reported."""

    def __init__(self, root, db, embedder, **options):
        self.reports = []
        self.watcher = Watcher([root], str(db), embedder=embedder, on_pass=self.reports.append,
                               **options)
        self.thread = threading.Thread(target=self.watcher.run, daemon=True)
        self.root, self.db, self.embedder = root, db, embedder

    def __enter__(self):
        self.thread.start()
        wait_until(lambda: self.reports, "the first pass")
        # and its semantic phase, in the background: the watcher is idle then
        wait_until(self.watcher.settled.is_set, "every chunk embedded")
        time.sleep(0.3)  # armed before that pass began; let it settle
        return self

    def __exit__(self, *exc):
        self.watcher.stop.set()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive()

    def paths_since(self, before: int) -> list[list[str] | None]:
        """What each pass since the ``before``-th re-indexed (None: the whole folder)."""
        return [r.paths for r in self.reports[before:]]

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
    before = len(running.reports)
    note = running.root / "alpha.md"
    note.write_text(note.read_text() + "\nThe kiwi harvest slipped to April.\n")
    wait_until(lambda: "alpha.md" in running.finds("kiwi harvest")
               and running.paths_since(before), "the edit")  # a pass reports after commit
    assert set(map(tuple, running.paths_since(before))) == {("alpha.md",)}
    wait_until(lambda: running.equals_clean_index(tmp_path), "a clean index")


def test_atomic_save(running, tmp_path):
    before = len(running.reports)
    note = running.root / "gamma.md"
    temp = running.root / ".gamma.md.tmp1234"
    temp.write_text("Plain note. The quince jam needs 40 minutes of boiling.\n")
    os.replace(temp, note)
    wait_until(lambda: running.finds("quince jam") == ["gamma.md"]
               and running.paths_since(before), "the atomic save")
    assert set(map(tuple, running.paths_since(before))) == {("gamma.md",)}
    wait_until(lambda: running.equals_clean_index(tmp_path), "a clean index")


def test_delete_and_rename(running, tmp_path):
    before = len(running.reports)
    (running.root / "gamma.md").unlink()
    wait_until(lambda: not running.finds("Smith results Friday")
               and running.paths_since(before), "the delete")
    assert running.paths_since(before) == [["gamma.md"]]
    before = len(running.reports)
    os.rename(running.root / "alpha.md", running.root / "sub" / "omega.md")
    wait_until(lambda: running.finds("alpha project ships") == ["sub/omega.md"]
               and {p for ps in running.paths_since(before) for p in ps or ["*"]} >=
               {"alpha.md", "sub/omega.md"}, "the rename")
    assert None not in running.paths_since(before)
    wait_until(lambda: running.equals_clean_index(tmp_path), "a clean index")


def test_folder_renamed_in_and_away(running, tmp_path):
    before = len(running.reports)
    os.rename(running.root / "sub", running.root / "moved")
    wait_until(lambda: running.finds("tomatoes full sun") == ["moved/beta.md"]
               and None in running.paths_since(before), "the folder rename (walked)")
    wait_until(lambda: running.equals_clean_index(tmp_path), "a clean index")


def test_a_dotted_folder_moved_away_takes_its_notes(tmp_path, vault, shared_embedder):
    (vault / "v1.2").mkdir()
    (vault / "v1.2" / "changes.md").write_text("# v1.2\n\nThe marmalade release.\n")
    with Running(vault, tmp_path / "w.db", shared_embedder) as running:
        assert running.finds("marmalade release") == ["v1.2/changes.md"]
        before = len(running.reports)
        os.rename(vault / "v1.2", tmp_path / "elsewhere")  # one event: "v1.2" deleted
        wait_until(lambda: not running.finds("marmalade release")
                   and running.paths_since(before), "the folder moved away")
        assert running.paths_since(before) == [["v1.2/changes.md"]]
        wait_until(lambda: running.equals_clean_index(tmp_path), "a clean index")


def test_git_noise_and_editor_files_make_no_pass(running, tmp_path):
    before = len(running.reports)
    git = running.root / ".git"
    (git / "objects" / "ab").mkdir(parents=True)
    for name in ("index", "HEAD", "objects/ab/cdef0123"):
        (git / name).write_text("x")
    (running.root / ".alpha.md.swp").write_text("swap")
    probe = running.root / "4913"  # vim's write probe: created, then deleted at once
    probe.write_text("")
    probe.unlink()
    time.sleep(1.5)  # let those events arrive on their own
    note = running.root / "alpha.md"
    note.write_text(note.read_text() + "\nThe loganberry cane needs tying in.\n")
    wait_until(lambda: running.finds("loganberry cane") == ["alpha.md"]
               and running.paths_since(before), "the edit")
    assert set(map(tuple, running.paths_since(before))) == {("alpha.md",)}


def test_a_new_ignore_file_walks_the_folder(running, tmp_path):
    before = len(running.reports)
    (running.root / ".brainbotignore").write_text("sub/\n")
    wait_until(lambda: not running.finds("tomatoes full sun")
               and None in running.paths_since(before), "the ignored folder (walked)")
    wait_until(lambda: running.equals_clean_index(tmp_path), "a clean index")


def test_a_watched_folder_moved_away_keeps_its_notes_then_back(tmp_path, vault,
                                                              shared_embedder):
    """Moved away (an unmounted drive, a rename): reported, its notes kept, nothing
    re-embedded when it is back; watched again then."""
    with Running(vault, tmp_path / "w.db", shared_embedder, missing_after_s=1.0) as running:
        away = tmp_path / "away"
        os.rename(vault, away)
        wait_until(lambda: any(r.kept is not None for r in running.reports), "reported")
        missing = [r for r in running.reports if r.kept is not None]
        assert len(missing) == 1 and missing[0].kept == 3
        assert "is not present: its 3 notes are kept; `brainbot index --prune` removes" \
            in missing[0].line()
        assert running.watcher.state()["missing"] == {str(vault): missing_root_line(
            str(vault), 3)}
        time.sleep(1.5)
        assert running.finds("alpha project ships") == ["alpha.md"]  # kept
        assert len(snapshot(running.db)["documents"]) == 3
        before = len(running.reports)
        os.rename(away, vault)
        wait_until(lambda: None in running.paths_since(before), "the full pass when back")
        back = [r for r in running.reports[before:] if r.paths is None]
        assert back[0].stats.embedded == 0 and back[0].stats.removed == 0
        assert running.watcher.state()["missing"] == {}
        (vault / "after.md").write_text("# After\n\nA medlar tree by the wall.\n")
        wait_until(lambda: running.finds("medlar tree") == ["after.md"], "watched again")
        wait_until(lambda: running.equals_clean_index(tmp_path), "a clean index")


def test_a_failing_pass_is_reported_retried_and_the_watch_goes_on(running, monkeypatch):
    from brainbot.index import indexer

    real = indexer.Indexer.index_changes
    calls = []

    def fails_once(self, root, relpaths):
        calls.append(sorted(relpaths))
        if len(calls) == 1:
            raise RuntimeError("simulated bug in a pass")
        return real(self, root, relpaths)

    monkeypatch.setattr(indexer.Indexer, "index_changes", fails_once)
    before = len(running.reports)
    note = running.root / "alpha.md"
    note.write_text(note.read_text() + "\nThe kiwi harvest slipped to April.\n")
    wait_until(lambda: "alpha.md" in running.finds("kiwi harvest") and None in
               running.paths_since(before), "the retry: a full pass")
    first = running.reports[before]
    assert first.paths == ["alpha.md"] and "RuntimeError: simulated bug in a pass" in first.error
    assert running.thread.is_alive() and calls[0] == ["alpha.md"]


def test_a_name_that_is_not_utf8_is_skipped_and_the_watch_goes_on(running, tmp_path, caplog):
    """watchfiles cannot decode such a name and raises for the whole batch: the watch is
    re-armed with a full pass, which reports the file and indexes the rest."""
    with open(os.fsencode(running.root) + b"/caf\xe9.md", "w") as f:
        f.write("# Caf\n\nA note named in Latin-1.\n")
    (running.root / "later.md").write_text("# Later\n\nA persimmon tree by the gate.\n")
    wait_until(lambda: running.finds("persimmon tree") == ["later.md"] and any(
        p.path == "caf\\xe9.md" for r in running.reports for p in r.stats.skipped),
        "the next note, and the Latin-1 name reported")
    assert running.thread.is_alive()
    assert not [r for r in caplog.records if r.exc_info]  # a known cause: no traceback
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
    time.sleep(1.5)  # the folder is gone: its notes are kept until `index --prune`
    assert running.finds("tomatoes full sun")
    shutil.copytree(saved, running.root)
    (running.root / "late.md").write_text("# Late\n\nWritten after the folder came back.\n")
    wait_until(lambda: running.finds("written after folder came back") == ["late.md"],
               "the re-created folder")
    (running.root / "later.md").write_text("# Later\n\nA persimmon tree by the gate.\n")
    wait_until(lambda: running.finds("persimmon tree") == ["later.md"], "events re-armed")
    wait_until(lambda: running.equals_clean_index(tmp_path), "a clean index")


def test_the_lock_is_held_per_pass_only(running, tmp_path, shared_embedder):
    """Between passes another writer may index; a pass that finds the lock taken waits."""
    from brainbot.store.sqlite.lock import WriterLock

    with Indexer(running.db, embedder=shared_embedder) as ix:  # not refused: idle watcher
        ix.index_paths([running.root])
    with WriterLock(running.db):
        (running.root / "held.md").write_text("# Held\n\nWritten while the lock was held.\n")
        time.sleep(1.5)
        assert "held.md" not in running.finds("written while lock held")
    wait_until(lambda: running.finds("written while lock held") == ["held.md"],
               "the pass after the lock was released")


def test_a_refused_pass_retries_soon_then_backs_off():
    """The watch's own embedding holds the lock only to read and write a batch: the first
    retry comes within tens of ms, later ones back off to BUSY_RETRY_MAX_S, no further
    (the background embedding's batches retry on the same schedule)."""
    from brainbot.serve.background import BUSY_RETRY_MAX_S
    from brainbot.serve.watch import _busy_wait

    waits: list[float] = []

    class Stop:
        def wait(self, seconds):
            waits.append(seconds)

    stop, tries = Stop(), 0
    for _ in range(10):
        tries = _busy_wait(stop, tries)
    assert tries == 10 and waits[0] <= 0.05 and waits == sorted(waits)
    assert waits[-1] == max(waits) == BUSY_RETRY_MAX_S


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


@pytest.mark.parametrize("precision", ["int8", "fp32"])
def test_watch_writes_an_index_at_its_own_precision(tmp_path, vault, precision):
    """`brainbot watch` takes its precision from the index: built with `--precision fp32`
    (or int8, the default of a new index), it must not be refused as a writer of the
    other nor write the other's vectors."""
    from brainbot.model.embed import Embedder

    db = tmp_path / f"{precision}.db"
    with Indexer(db, precision=precision, embedder=Embedder(precision=precision)) as ix:
        ix.index_paths([vault])
    proc = subprocess.Popen([sys.executable, "-m", "brainbot", "watch", str(vault), "--db",
                             str(db), "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        first = json.loads(next_line(proc.stdout))
        assert first["error"] is None and first["unchanged"] == 3, first
        note = vault / "alpha.md"
        note.write_text(note.read_text() + "\nThe kiwi harvest slipped to April.\n")
        edit = json.loads(next_line(proc.stdout))
        assert edit["error"] is None and edit["paths"] == ["alpha.md"], edit
        assert edit["updated"] == 1 and edit["phase"] == "lexical"
        semantic = json.loads(next_line(proc.stdout))  # the edit's vectors, in the background
        assert semantic["phase"] == "semantic" and semantic["error"] is None, semantic
        assert semantic["embedded"] >= 1 and semantic["vectors"] == semantic["chunks"]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
    with Searcher(db) as s:
        assert s.meta["embedder"] == Embedder(precision).fingerprint
        assert [h.path for h in s.search("kiwi harvest", 1, mode="vector")] == ["alpha.md"]
