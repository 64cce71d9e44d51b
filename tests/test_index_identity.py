"""Each index's `index_id` (review H2, M4) on SQLite: written when the index is created (or
first opened by a writer, for a file from before index ids), new after a rebuild, never
copied; and a long-lived reader (the Searcher `brainbot mcp` keeps) that notices when the
file at its path is another one (a `--rebuild`, a `copy --replace`) and reopens it.
Postgres: test_pg_identity.py."""

from __future__ import annotations

import re

import sqlean

from brainbot.index.copying import copy_index
from brainbot.index.indexer import Indexer
from brainbot.search.searcher import Searcher
from brainbot.store.target import open_store


def _index_id(db) -> str | None:
    conn = sqlean.connect(str(db))
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'index_id'").fetchone()
    finally:
        conn.close()
    return row and row[0]


def _vault(folder, notes: dict[str, str]):
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in notes.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def _index(db, folder, embedder, **kw) -> None:
    with Indexer(db, embedder=embedder, **kw) as ix:
        ix.index_paths([folder])


def test_index_id_is_written_at_creation_kept_by_writers_and_new_after_a_rebuild(
        tmp_path, vault, shared_embedder):
    db = tmp_path / "n.db"
    _index(db, vault, shared_embedder)
    first = _index_id(db)
    assert re.fullmatch(r"[0-9a-f]{32}", first or "")
    _index(db, vault, shared_embedder)  # an incremental run keeps it
    with open_store(db) as store:
        assert store.meta()["index_id"] == first
    _index(db, vault, shared_embedder, rebuild=True)
    assert _index_id(db) not in (None, first)


def test_an_index_from_before_index_ids_gets_one_from_its_first_writer(
        tmp_path, vault, shared_embedder):
    db = tmp_path / "old.db"
    _index(db, vault, shared_embedder)
    conn = sqlean.connect(str(db))
    conn.execute("DELETE FROM meta WHERE key = 'index_id'")
    conn.commit()
    conn.close()
    with open_store(db):  # a reader never writes one
        pass
    assert _index_id(db) is None
    with open_store(db, write=True):
        pass
    assert re.fullmatch(r"[0-9a-f]{32}", _index_id(db) or "")


def test_a_copy_has_an_index_id_of_its_own(tmp_path, vault, shared_embedder):
    src, dst = tmp_path / "a.db", tmp_path / "b.db"
    _index(src, vault, shared_embedder)
    copy_index(src, dst)
    assert _index_id(dst) not in (None, _index_id(src))


def _two_vaults(tmp_path):
    old = _vault(tmp_path / "old", {"garden.md": "# Garden\n\nTomatoes need full sun.\n"})
    new = _vault(tmp_path / "new", {"airship.md": "# Airship\n\nThe zeppelin hangar is "
                                                  "north of the lake.\n"})
    return old, new


def test_a_running_reader_sees_a_rebuild_done_under_it(tmp_path, shared_embedder):
    """M4: `--rebuild` writes a new file at the path; a reader that kept the old file's
    connection served the old index until restarted."""
    old, new = _two_vaults(tmp_path)
    db = tmp_path / "n.db"
    _index(db, old, shared_embedder)
    with Searcher(db, embedder=shared_embedder) as searcher:
        assert [h.path for h in searcher.search("tomatoes", 3, mode="bm25")] == ["garden.md"]
        assert searcher.search("zeppelin", 3, mode="bm25") == []
        _index(db, new, shared_embedder, rebuild=True)
        for mode in ("bm25", "vector", "hybrid"):
            assert [h.path for h in searcher.search("zeppelin hangar", 1, mode=mode)] == [
                "airship.md"], mode
        assert searcher.search("tomatoes", 3, mode="bm25") == []
        assert searcher.store.documents()[0].root == str(new.resolve())


def test_a_running_reader_sees_a_copy_replace_done_under_it(tmp_path, shared_embedder):
    old, new = _two_vaults(tmp_path)
    db, other = tmp_path / "n.db", tmp_path / "other.db"
    _index(db, old, shared_embedder)
    _index(other, new, shared_embedder)
    with Searcher(db, embedder=shared_embedder) as searcher:
        assert searcher.search("zeppelin", 3, mode="bm25") == []
        copy_index(other, db, replace=True)
        assert [h.path for h in searcher.search("zeppelin", 3, mode="bm25")] == ["airship.md"]
        assert searcher.store.meta()["index_id"] == _index_id(db)
