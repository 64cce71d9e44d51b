"""A rebuild never publishes less than the user meant (issue 40, review H1), on SQLite.

`--rebuild` without folders (`index --prune --rebuild` too) is refused; a rebuild that
would replace an index holding notes with an empty one (an empty or mistyped folder,
every note ignored or unreadable) is refused unless `--allow-empty`, and the old file
stays byte for byte; `copy --replace` of an index without notes likewise. The summary
counts the old index's notes a rebuild did not carry over as removed. Postgres:
test_pg_rebuild.py.
"""

from __future__ import annotations

import json

import pytest
from reliability_kit import check_consistent, db_files

from brainbot.cli import main
from brainbot.errors import EmptyRebuildError
from brainbot.index.copying import copy_index
from brainbot.index.indexer import Indexer
from brainbot.store.target import open_store


@pytest.fixture
def indexed(tmp_path, vault, shared_embedder):
    """The vault's three notes indexed, every chunk embedded; (db, its files' bytes)."""
    db = tmp_path / "n.db"
    with Indexer(db, embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    return db, _bytes(db)


def _bytes(db) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in db_files(db)}


def _error(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("brainbot: error: "), lines
    return lines[0]


@pytest.mark.parametrize("argv", [["--prune", "--rebuild"], ["--rebuild"],
                                  ["--rebuild", "--allow-empty"]])
def test_a_rebuild_without_folders_is_refused(indexed, capsys, argv):
    db, before = indexed
    assert main(["index", *argv, "--db", str(db)]) == 2
    assert "--rebuild starts the index over: give the folders to index" in _error(capsys)
    assert _bytes(db) == before and not db.with_name(db.name + ".rebuild").exists()


def _ignored_all(folder):
    (folder / ".brainbotignore").write_text("*.md\n", encoding="utf-8")


def _all_broken(folder):
    for note in folder.rglob("*.md"):
        note.write_bytes(b"\x00binary\x00" * 10)


@pytest.mark.parametrize("make", ["empty", "ignored", "broken"])
def test_a_rebuild_that_would_empty_the_index_is_refused(indexed, tmp_path, vault, capsys,
                                                          make):
    db, before = indexed
    folder = tmp_path / "other"
    if make == "empty":
        folder.mkdir()
    else:
        folder = vault
        (_ignored_all if make == "ignored" else _all_broken)(folder)
    assert main(["index", str(folder), "--rebuild", "--db", str(db)]) == 2
    line = _error(capsys)
    assert "would replace the 3 notes of" in line and "--allow-empty" in line
    if make == "broken":
        assert "indexed no note (3 skipped; " in line and "binary file" in line
    assert _bytes(db) == before  # byte for byte: the rebuild was never published
    assert not db.with_name(db.name + ".rebuild").exists()
    assert len(check_consistent(db)) == 3  # and whole, every chunk with its vector


def test_a_rebuild_left_without_indexing_anything_is_not_published(indexed):
    """The library's path: a rebuild whose caller never indexed is published on exit,
    and refused there like any rebuild that would empty the index."""
    db, before = indexed
    with pytest.raises(EmptyRebuildError, match="would replace the 3 notes of"):
        with Indexer(db, rebuild=True, embed=False):
            pass
    assert _bytes(db) == before and not db.with_name(db.name + ".rebuild").exists()
    with Indexer(db, rebuild=True, embed=False, allow_empty=True):
        pass
    with open_store(db) as store:
        assert store.counts()["documents"] == 0


def test_allow_empty_empties_it_and_counts_the_notes_removed(indexed, tmp_path, capsys):
    db, _ = indexed
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["index", str(empty), "--rebuild", "--allow-empty", "--db", str(db),
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["removed"] == 3
    with open_store(db) as store:
        assert store.counts()["documents"] == 0


def test_an_empty_index_may_be_rebuilt_empty(tmp_path):
    """Nothing to lose: an index without notes is rebuilt from an empty folder."""
    empty = tmp_path / "empty"
    empty.mkdir()
    db = tmp_path / "e.db"
    for _ in range(2):
        with Indexer(db, rebuild=True, embed=False) as ix:
            assert ix.index_paths([empty]).removed == 0


def test_the_summary_counts_the_notes_a_rebuild_left_out_as_removed(indexed, vault, capsys):
    db, _ = indexed
    assert main(["index", str(vault / "sub"), "--rebuild", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("1 new, 0 updated, 0 unchanged, 3 removed"), out
    with open_store(db) as store:
        assert [d.path for d in store.documents()] == ["beta.md"]
    # a rebuild of the same notes removes none: a note that moved root is another note
    assert main(["index", str(vault / "sub"), "--rebuild", "--db", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["removed"] == 0


def test_a_damaged_old_index_counts_nothing_it_cannot_read(tmp_path, vault):
    db = tmp_path / "d.db"
    with Indexer(db, embed=False) as ix:
        ix.index_paths([vault])
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 2 // 4096 * 4096])  # pages lost
    empty = tmp_path / "empty"
    empty.mkdir()
    with Indexer(db, rebuild=True, embed=False) as ix:  # nothing readable left to keep
        assert ix.index_paths([empty]).removed == 0


def test_copy_replace_of_an_index_without_notes_is_refused(indexed, tmp_path, capsys):
    db, before = indexed
    empty = tmp_path / "empty"
    empty.mkdir()
    source = tmp_path / "empty.db"
    with Indexer(source, embed=False) as ix:
        ix.index_paths([empty])
    with pytest.raises(EmptyRebuildError, match="holds no notes, and copying it would replace"):
        copy_index(source, db, replace=True)
    assert _bytes(db) == before
    assert main(["copy", "--from", str(source), "--to", str(db), "--replace"]) == 2
    assert "--allow-empty" in _error(capsys) and _bytes(db) == before
    assert main(["copy", "--from", str(source), "--to", str(db), "--replace",
                 "--allow-empty"]) == 0
    with open_store(db) as store:
        assert store.counts()["documents"] == 0
