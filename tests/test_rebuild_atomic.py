"""Rebuild and replace are atomic (issue 32; review H1 and M11).

`brainbot index --rebuild` and `brainbot copy --replace` write a new file beside the
target and move it over the path only when it is complete. Killed with SIGKILL at any
moment (its lexical phase, just before the move, its semantic phase), the path holds the
old index, whole (documents, vectors, integrity), or the new one with every note written;
the next `brainbot index` finishes either and removes a leftover `<db>.rebuild`. Readers
answer from the old index until the move. A file that is not a brainbot index is never
removed or overwritten.

The kills are exact code points of the real CLI (tests/reliability_kit.py's harness), not
times.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import sqlean
from conftest import EXAMPLES, REPO, copy_tree
from reliability_kit import (
    check_consistent,
    cli_env,
    copy_db,
    db_files,
    meta_value,
    one_line_error,
    run_cli,
    snapshot,
    write_harness,
)
from wait_kit import still_running, wait_until

# A note the old index does not have: the rebuild embeds its text (a semantic phase).
KITES = ("# Kites\n\nA delta kite flies in light wind; a box kite needs a steady breeze.\n\n"
         "## Lines\n\nBraided dyneema line stretches less than nylon and cuts the hands.\n")


class Lab:
    def __init__(self, work: Path, harness: Path) -> None:
        self.work, self.harness = work, harness
        self.vault = copy_tree(EXAMPLES, work / "vault")
        self.old = work / "old.db"
        self.complete(self.old)
        self.old_snapshot = snapshot(self.old)
        (self.vault / "kites.md").write_text(KITES, encoding="utf-8")
        self.new = work / "new.db"
        self.complete(self.new)
        self.new_snapshot = snapshot(self.new)

    def start(self, *argv, **hooks: str) -> subprocess.Popen:
        """The CLI through the harness (its BB_TEST_* hooks), in a process."""
        return subprocess.Popen([sys.executable, str(self.harness), *map(str, argv)],
                                cwd=REPO, env=cli_env(**hooks), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def index(self, db: Path, *extra: str, **hooks: str) -> subprocess.Popen:
        return self.start("index", self.vault, "--db", db, *extra, **hooks)

    def complete(self, db: Path, *extra: str) -> None:
        proc = self.index(db, *extra)
        _, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err

    def trial(self, name: str) -> Path:
        db = self.work / name
        for f in [*db_files(db), *leftovers(db)]:
            f.unlink()
        return copy_db(self.old, db)


def leftovers(db: Path) -> list[Path]:
    return sorted(db.parent.glob(db.name + ".rebuild*"))


def documents(db: Path) -> list[tuple]:
    return sorted(check_consistent(db, complete=False))


def index_id(db: Path) -> str | None:
    return meta_value(db, "index_id")


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Lab:
    work = tmp_path_factory.mktemp("rebuild")
    return Lab(work, write_harness(work))


# (kill point, what the path must hold after it): the lexical phase writes the new file
# beside the old one; "swap" is the last moment before os.replace; the semantic phase
# runs on the new index, after the move.
KILLS = [("insert:1", "old"), ("commit:4", "old"), ("swap:1", "old"),
         ("vectors:1", "new"), ("model:1", "new")]


@pytest.mark.slow
@pytest.mark.parametrize("kill_at,left", KILLS, ids=[k for k, _ in KILLS])
def test_a_killed_rebuild_leaves_the_old_index_or_the_new_one(lab, kill_at, left):
    db = lab.trial("trial.db")
    old_id = index_id(db)
    proc = lab.index(db, "--rebuild", BB_TEST_KILL_AT=kill_at,
                     BB_TEST_BATCH="4", BB_TEST_EMBED_BATCH="1")
    _, err = proc.communicate(timeout=900)
    assert proc.returncode == -signal.SIGKILL, f"{kill_at} was never reached: {err}"
    if left == "old":
        check_consistent(db)  # integrity, invariants, and every chunk has its vector
        assert snapshot(db) == lab.old_snapshot and index_id(db) == old_id
    else:
        assert documents(db) == sorted(check_consistent(lab.new))  # every note written
        assert index_id(db) != old_id
    # the next run finishes either, and removes what the killed one left beside it
    lab.complete(db)
    check_consistent(db)
    assert snapshot(db) == lab.new_snapshot
    assert leftovers(db) == []


@pytest.mark.slow
def test_a_killed_copy_replace_leaves_the_old_index(lab):
    db = lab.trial("copied.db")
    proc = lab.start("copy", "--from", lab.new, "--to", db, "--replace",
                     BB_TEST_KILL_AT="insert:3", BB_TEST_BATCH="4")
    _, err = proc.communicate(timeout=900)
    assert proc.returncode == -signal.SIGKILL, err
    check_consistent(db)
    assert snapshot(db) == lab.old_snapshot
    result = run_cli("copy", "--from", lab.new, "--to", db, "--replace")
    assert result.returncode == 0, result.stderr
    assert snapshot(db) == lab.new_snapshot and leftovers(db) == []


@pytest.mark.slow
def test_readers_answer_from_the_old_index_until_the_move(lab, shared_embedder):
    """A rebuild held after its third commit (mid lexical phase): `brainbot query` and
    `status`, and a Searcher opened before, see the old index; once the rebuild ends, the
    new one."""
    from brainbot.search.searcher import Searcher

    db = lab.trial("held.db")
    gate = lab.work / "gate"
    gate.unlink(missing_ok=True)
    Path(str(gate) + ".held").unlink(missing_ok=True)
    with Searcher(db, embedder=shared_embedder) as searcher:
        assert searcher.search("dyneema", 3, mode="bm25") == []
        proc = lab.index(db, "--rebuild", BB_TEST_BATCH="4",
                         BB_TEST_HOLD_COMMIT=f"3:{gate}")
        try:
            wait_until(lambda: Path(str(gate) + ".held").exists(), "the rebuild holds",
                       alive=still_running(proc))
            assert leftovers(db), "the new index is written beside the old one"
            status = run_cli("status", "--db", db, "--json")
            assert json.loads(status.stdout)["documents"] == len(lab.old_snapshot["documents"])
            query = run_cli("query", "dyneema", "--db", db, "--json", "--mode", "bm25")
            assert query.returncode == 0 and json.loads(query.stdout) == [], query.stderr
            assert searcher.search("dyneema", 3, mode="bm25") == []
            assert searcher.search("sourdough starter", 3, mode="bm25")
        finally:
            gate.touch()
            _, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err
        hits = searcher.search("dyneema", 3, mode="bm25")
        assert [h.path for h in hits][:1] == ["kites.md"]


@pytest.mark.slow
def test_long_lived_readers_answer_through_rebuilds(lab, shared_embedder):
    """Two Searchers (a server's readers) query in a loop while the index is rebuilt three
    times under them: every query answers, from the old index or the new one, and the
    file stays whole."""
    import threading

    from brainbot.search.searcher import Searcher

    db = lab.trial("busy.db")
    stop, errors, answered = threading.Event(), [], [0, 0]

    def read(slot: int) -> None:
        with Searcher(db, embedder=shared_embedder) as searcher:
            while not stop.is_set():
                mode = ("bm25", "hybrid")[answered[slot] % 2]
                try:
                    hits = searcher.search("sourdough starter feeding", 5, mode=mode)
                    assert hits and hits[0].path.startswith("cooking/"), hits
                except Exception as exc:  # noqa: BLE001 - any error is the failure
                    errors.append(f"{mode}: {exc!r}")
                answered[slot] += 1

    readers = [threading.Thread(target=read, args=(i,), daemon=True) for i in range(2)]
    for t in readers:
        t.start()
    try:
        wait_until(lambda: all(answered), "both readers answer")
        for _ in range(3):
            before = list(answered)
            lab.complete(db, "--rebuild")
            wait_until(lambda b=before: all(a > x for a, x in zip(answered, b, strict=True)),
                       "the readers answer after the rebuild")
    finally:
        stop.set()
        for t in readers:
            t.join(timeout=120)
    assert errors == []
    check_consistent(db)
    assert snapshot(db) == lab.new_snapshot and leftovers(db) == []


# -- only brainbot's own files are removed or overwritten (review M11) --------------------


def _listing(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def _other_app(db: Path) -> None:
    conn = sqlean.connect(str(db))
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO customers(name) VALUES ('Ada')")
    conn.commit()
    conn.close()


def test_rebuild_and_replace_refuse_a_file_that_is_not_an_index(tmp_path, vault, examples_db):
    folder = tmp_path / "files"
    folder.mkdir()
    precious = folder / "precious.txt"
    precious.write_text("important notes, not a database\n", encoding="utf-8")
    app = folder / "app.sqlite"
    _other_app(app)
    before = _listing(folder)
    for argv in (("index", vault, "--db", precious, "--rebuild"),
                 ("index", vault, "--db", app, "--rebuild"),
                 ("copy", "--from", examples_db, "--to", precious, "--replace"),
                 ("copy", "--from", examples_db, "--to", app, "--replace")):
        line = one_line_error(run_cli(*argv))
        assert "is not a brainbot index" in line and "replaces only its own files" in line
        assert _listing(folder) == before, argv  # byte for byte, nothing left beside


def test_a_damaged_index_may_be_rebuilt(tmp_path, vault):
    db = tmp_path / "d.db"
    assert run_cli("index", vault, "--db", db, "--no-embed").returncode == 0
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 2 // 4096 * 4096])  # pages lost
    result = run_cli("index", vault, "--db", db, "--rebuild", "--no-embed")
    assert result.returncode == 0, result.stderr
    assert len(check_consistent(db, complete=False)) == 3


def test_a_rebuild_keeps_a_symlinked_db_a_symlink(tmp_path, vault, counting):
    from brainbot.index.indexer import Indexer

    real = tmp_path / "real.db"
    link = tmp_path / "link.db"
    with Indexer(real, embedder=counting) as ix:
        ix.index_paths([vault])
    link.symlink_to(real)
    with Indexer(link, embedder=counting, rebuild=True) as ix:
        ix.index_paths([vault])
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert len(check_consistent(real)) == 3
    assert leftovers(real) == [] and leftovers(link) == []


def test_a_foreign_file_by_the_temporary_name_is_left_alone(tmp_path, vault, counting):
    from brainbot.errors import StoreError
    from brainbot.index.indexer import Indexer

    db = tmp_path / "n.db"
    with Indexer(db, embedder=counting) as ix:
        ix.index_paths([vault])
    squatter = tmp_path / "n.db.rebuild"
    squatter.write_text("someone else's file\n", encoding="utf-8")
    with Indexer(db, embedder=counting) as ix:  # a plain writer leaves it be
        ix.index_paths([vault])
    with pytest.raises(StoreError, match="in the way"), Indexer(db, embedder=counting,
                                                                rebuild=True):
        pass
    assert squatter.read_text(encoding="utf-8") == "someone else's file\n"
    assert len(check_consistent(db)) == 3
