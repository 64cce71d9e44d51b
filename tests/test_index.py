"""brainbot index: incremental scenarios, counted at the embedder, and the store contract."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from brainbot.errors import IncompatibleIndexError, InputError, StoreBusyError
from brainbot.index.indexer import Indexer
from brainbot.store.sqlite import file as store
from brainbot.store.sqlite.lock import WriterLock


def run(db, paths, embedder):
    with Indexer(db, embedder=embedder) as ix:
        return ix.index_paths(paths)


def snapshot(db_path):
    """Everything that defines an index's content, independent of row ids."""
    db = store.connect(db_path)
    try:
        docs = db.execute("SELECT path, sha256, title, front_matter FROM documents "
                          "ORDER BY path").fetchall()
        chunks = db.execute(
            "SELECT d.path, c.chunk_id, c.chunk_index, c.source_text, c.start_char, "
            "c.end_char, e.vector FROM chunks c JOIN documents d ON d.id = c.document_id "
            "JOIN embeddings e ON e.chunk = c.id ORDER BY c.chunk_id").fetchall()
        postings = db.execute(
            "SELECT t.term, c.chunk_id, p.tf FROM postings p JOIN terms t ON t.id = p.term "
            "JOIN chunks c ON c.id = p.chunk ORDER BY 1, 2").fetchall()
        df = db.execute("SELECT term, df FROM terms WHERE df > 0 ORDER BY term").fetchall()
    finally:
        db.close()
    return docs, chunks, postings, df


def test_first_index_counts_everything(tmp_path, vault, counting):
    stats = run(tmp_path / "b.db", [vault], counting)
    assert (stats.new, stats.updated, stats.unchanged, stats.removed) == (3, 0, 0, 0)
    assert stats.chunks >= 3 and stats.embedded == len(counting.texts) == stats.chunks


def test_noop_reindex_embeds_nothing(tmp_path, vault, counting):
    db = tmp_path / "b.db"
    run(db, [vault], counting)
    before = snapshot(db)
    counting.texts.clear()
    stats = run(db, [vault], counting)
    assert (stats.new, stats.updated, stats.unchanged) == (0, 0, 3)
    assert counting.texts == [] and snapshot(db) == before


def test_modify_one_paragraph_embeds_only_that_chunk(tmp_path, vault, counting):
    db = tmp_path / "b.db"
    run(db, [vault], counting)
    counting.texts.clear()
    note = vault / "alpha.md"
    note.write_text(note.read_text().replace("old data", "legacy records"), encoding="utf-8")
    stats = run(db, [vault], counting)
    assert (stats.new, stats.updated, stats.unchanged) == (0, 1, 2)
    assert len(counting.texts) == 1 and "legacy records" in counting.texts[0]


def test_delete_removes_chunks_vectors_postings(tmp_path, vault, counting):
    db = tmp_path / "b.db"
    run(db, [vault], counting)
    (vault / "gamma.md").unlink()
    stats = run(db, [vault], counting)
    assert stats.removed == 1
    conn = store.connect(db)
    assert conn.execute("SELECT count(*) FROM documents WHERE path='gamma.md'").fetchone()[0] == 0
    orphans = conn.execute("SELECT count(*) FROM embeddings WHERE chunk NOT IN "
                           "(SELECT id FROM chunks)").fetchone()[0]
    orphan_postings = conn.execute("SELECT count(*) FROM postings WHERE chunk NOT IN "
                                   "(SELECT id FROM chunks)").fetchone()[0]
    smith = conn.execute("SELECT df FROM terms WHERE term = 'smith'").fetchone()
    assert orphans == 0 and orphan_postings == 0 and smith[0] == 0


def test_rename_does_not_reembed(tmp_path, vault, counting):
    # A note with headings keeps its retrieval text when renamed, so no vector is
    # recomputed. (A heading-less note's file name is its heading path, so its retrieval
    # text, and rightly its vector, change with the name.)
    db = tmp_path / "b.db"
    run(db, [vault], counting)
    counting.texts.clear()
    (vault / "alpha.md").rename(vault / "alpha2.md")
    stats = run(db, [vault], counting)
    assert (stats.new, stats.removed, stats.unchanged) == (1, 1, 2)
    assert counting.texts == []


def test_touch_without_change(tmp_path, vault, counting):
    db = tmp_path / "b.db"
    run(db, [vault], counting)
    counting.texts.clear()
    later = time.time() + 10
    os.utime(vault / "alpha.md", (later, later))
    stats = run(db, [vault], counting)
    assert (stats.updated, stats.unchanged) == (0, 3) and counting.texts == []
    # the new mtime was recorded, so the next run does not even hash the file
    conn = store.connect(db)
    mtime = conn.execute("SELECT mtime_ns FROM documents WHERE path='alpha.md'").fetchone()[0]
    assert mtime == (vault / "alpha.md").stat().st_mtime_ns


def test_front_matter_only_change(tmp_path, vault, counting):
    db = tmp_path / "b.db"
    run(db, [vault], counting)
    counting.texts.clear()
    note = vault / "sub" / "beta.md"
    note.write_text(note.read_text().replace("spring", "summer"), encoding="utf-8")
    stats = run(db, [vault], counting)
    assert stats.updated == 1 and counting.texts == []
    conn = store.connect(db)
    front = conn.execute("SELECT front_matter FROM documents WHERE path='sub/beta.md'").fetchone()[0]
    assert "summer" in front


def test_vectors_are_unit_f32_blobs(tmp_path, vault, counting):
    db = tmp_path / "b.db"
    run(db, [vault], counting)
    conn = store.connect(db)
    for (blob,) in conn.execute("SELECT vector FROM embeddings"):
        v = np.frombuffer(blob, dtype="<f4")
        assert v.shape == (384,) and abs(float(np.linalg.norm(v)) - 1) < 1e-4


def test_sqlite_vec_ranks_like_brainbot(tmp_path, vault, counting):
    from brainbot.search.searcher import Searcher

    db = tmp_path / "b.db"
    run(db, [vault], counting)
    query = "when does the project ship"
    qvec = counting.embed_query(query)
    hits = Searcher(db, embedder=counting).search(query, 10, mode="vector")
    conn = store.connect(db)
    assert store.load_extension_vec(conn), "sqlite-vec must load through sqlean"
    rows = conn.execute(
        "SELECT c.chunk_id, vec_distance_cosine(e.vector, vec_f32(?)) AS d FROM embeddings e "
        "JOIN chunks c ON c.id = e.chunk ORDER BY d, c.id", (qvec.astype("<f4").tobytes(),)
    ).fetchall()
    assert [r[0] for r in rows] == [h.chunk_id for h in hits]
    for (_cid, dist), hit in zip(rows, hits):
        assert abs((1 - dist) - hit.score) < 1e-5


def test_missing_path_is_input_error(tmp_path, counting):
    with pytest.raises(InputError), Indexer(tmp_path / "b.db", embedder=counting) as ix:
        ix.index_paths([tmp_path / "nope"])


def test_second_writer_is_refused(tmp_path, vault, counting):
    db = tmp_path / "b.db"
    run(db, [vault], counting)
    with WriterLock(db), pytest.raises(StoreBusyError):
        run(db, [vault], counting)


def test_newer_schema_refused_and_untouched(tmp_path, vault, counting):
    db = tmp_path / "b.db"
    run(db, [vault], counting)
    conn = store.connect(db)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    before = db.read_bytes()
    with pytest.raises(IncompatibleIndexError, match="newer brainbot"):
        run(db, [vault], counting)
    assert db.read_bytes() == before


def test_other_chunker_refused(tmp_path, vault, counting):
    db = tmp_path / "b.db"
    run(db, [vault], counting)
    conn = store.connect(db)
    conn.execute("UPDATE meta SET value = 'other-chunker' WHERE key = 'chunker'")
    conn.close()
    with pytest.raises(IncompatibleIndexError, match="--rebuild"):
        run(db, [vault], counting)


def test_not_sqlite_refused(tmp_path, vault, counting):
    db = tmp_path / "b.db"
    db.write_bytes(b"hello, this is not a database" * 100)
    before = db.read_bytes()
    with pytest.raises(IncompatibleIndexError):
        run(db, [vault], counting)
    assert db.read_bytes() == before
