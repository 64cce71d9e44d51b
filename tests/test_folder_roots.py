"""Which roots were indexed as folders (review L3): only those count notes not yet indexed
as "new" in status, doctor and a refusal's note. The old guess, "more than one indexed
note", missed a folder of one note and counted a single file's neighbours."""

from __future__ import annotations

import sqlean

from brainbot.index.copying import copy_index
from brainbot.index.freshness import vault_changes
from brainbot.index.indexer import Indexer
from brainbot.store.target import open_store


def _notes(folder, *names):
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_text(f"# {name}\n\nA note called {name}.\n", encoding="utf-8")
    return folder


def _index(db, paths, embedder) -> None:
    with Indexer(db, embedder=embedder) as ix:
        ix.index_paths(paths)


def _changes(db) -> dict:
    with open_store(db) as store:
        return vault_changes(store)


def test_a_folder_of_one_note_counts_a_new_note(tmp_path, shared_embedder):
    folder = _notes(tmp_path / "solo", "only.md")
    db = tmp_path / "n.db"
    _index(db, [folder], shared_embedder)
    _notes(folder, "second.md")
    assert _changes(db)["new"] == ["second.md"]
    with open_store(db) as store:
        assert store.folder_roots() == {folder.resolve().as_posix()}
    copy_index(db, tmp_path / "copy.db")  # the record travels with a copy
    assert _changes(tmp_path / "copy.db")["new"] == ["second.md"]


def test_two_single_files_of_one_folder_count_no_new_notes(tmp_path, shared_embedder):
    folder = _notes(tmp_path / "mixed", "a.md", "b.md", "c.md", "d.md")
    db = tmp_path / "n.db"
    _index(db, [folder / "a.md", folder / "b.md"], shared_embedder)
    assert _changes(db) == {"changed": [], "missing": [], "new": []}
    with open_store(db) as store:
        assert store.folder_roots() == set()
    _index(db, [folder], shared_embedder)  # the folder itself, later: now it counts
    _notes(folder, "e.md")
    assert _changes(db)["new"] == ["e.md"]


def test_an_index_from_before_the_record_keeps_the_old_guess_until_written(
        tmp_path, shared_embedder):
    big = _notes(tmp_path / "big", "a.md", "b.md")
    solo = _notes(tmp_path / "solo", "only.md")
    db = tmp_path / "n.db"
    _index(db, [big, solo], shared_embedder)
    conn = sqlean.connect(str(db))
    conn.execute("DELETE FROM meta WHERE key = 'folder_roots'")
    conn.commit()
    conn.close()
    _notes(big, "c.md")
    _notes(solo, "two.md")
    assert _changes(db)["new"] == ["c.md"]  # the guess: big has 2 notes, solo 1
    _index(db, [solo], shared_embedder)  # a writer records the guess plus this folder
    with open_store(db) as store:
        assert store.folder_roots() == {big.resolve().as_posix(), solo.resolve().as_posix()}
