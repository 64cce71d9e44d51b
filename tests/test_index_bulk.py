"""The lexical phase's bulk writes: postings held per transaction and written at its
commit give the rows the analyzer says, whatever the batch size; and the stage timings."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from brainbot.index import indexer as ix
from brainbot.index.indexer import Indexer
from brainbot.store.records import NewChunk, NewDocument
from brainbot.store.sqlite import file as sf
from brainbot.store.target import open_store
from brainbot.text import lexical
from brainbot.text.analyzers import note_analysis

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "vault"


def _lexical_index(db, paths, batch_chunks, monkeypatch):
    monkeypatch.setattr(ix, "BATCH_CHUNKS", batch_chunks)
    monkeypatch.setattr(ix, "BATCH_MAX_CHUNKS", batch_chunks)
    with Indexer(db, embed=False, workers=1) as indexer:
        return indexer.index_paths(paths)


def _dump(db) -> dict:
    """Every row of the BM25 tables and the chunks, ids included."""
    con = sf.connect(db)
    try:
        return {
            "postings": con.execute("SELECT term, chunk, tf FROM postings "
                                    "ORDER BY term, chunk").fetchall(),
            "terms": con.execute("SELECT id, term, df FROM terms ORDER BY id").fetchall(),
            "chunks": con.execute(
                "SELECT id, chunk_id, document_id, chunk_index, retrieval_text, text_sha256, "
                "lexical_length, english FROM chunks ORDER BY id").fetchall(),
        }
    finally:
        con.close()


def _oracle_holds(db) -> None:
    """Postings are the analyzer's terms of each chunk (a note's chunks analysed together,
    in its language: text/analyzers.note_analysis over the file; a document the test
    wrote itself, in English); df counts the chunks holding them."""
    dump = _dump(db)
    names = {i: t for i, t, _ in dump["terms"]}
    stored: dict[int, Counter] = {}
    for term, chunk, tf in dump["postings"]:
        stored.setdefault(chunk, Counter())[names[term]] = tf
    con = sf.connect(db)
    files = {i: Path(root) / path for i, root, path in
             con.execute("SELECT id, root, path FROM documents")}
    con.close()
    by_note: dict[int, list] = {}
    for row in dump["chunks"]:
        by_note.setdefault(row[2], []).append(row)
    df: Counter = Counter()
    for note, rows in by_note.items():
        rows.sort(key=lambda r: r[3])
        texts = [r[4] for r in rows]
        if files[note].is_file():
            got = note_analysis(files[note].read_text(encoding="utf-8"), texts)
        else:  # written through the store by the test itself (_doc), in English
            got = [(*lexical.term_frequencies(t), None, None) for t in texts]
        for (chunk, *_, length, _), (terms, n, _, _) in zip(rows, got, strict=True):
            assert stored.get(chunk, Counter()) == terms and length == n
            df.update(terms.keys())
    assert {t: d for _, t, d in dump["terms"] if d} == dict(df)


def test_batch_size_does_not_change_the_index(tmp_path, monkeypatch):
    """One chunk per transaction (about the old per-document writes) and everything in
    one transaction write the same rows, term ids included."""
    small, large = tmp_path / "small.db", tmp_path / "large.db"
    a = _lexical_index(small, [EXAMPLES], 1, monkeypatch)
    b = _lexical_index(large, [EXAMPLES], 10**9, monkeypatch)
    assert a.chunks == b.chunks > 0 and a.vectors == 0
    assert _dump(small) == _dump(large)
    _oracle_holds(large)


def test_changes_in_one_batch_keep_postings_and_df_exact(tmp_path, monkeypatch):
    """Edit, delete and add notes, re-indexed in a single transaction: the deletes and
    the buffered adds of that batch still leave every df exact."""
    vault = tmp_path / "vault"
    shutil.copytree(EXAMPLES, vault)
    db = tmp_path / "b.db"
    _lexical_index(db, [vault], 8, monkeypatch)
    edited = vault / "inbox.md"
    edited.write_text(edited.read_text() + "\n\nZygomorphic quokkas arrive.\n")
    sorted((vault / "recipes").glob("*.md"))[0].unlink()
    (vault / "new note.md").write_text("# New\n\nQuokkas and the alpha project.\n")
    stats = _lexical_index(db, [vault], 10**9, monkeypatch)
    assert (stats.new, stats.updated, stats.removed) == (1, 1, 1)
    _oracle_holds(db)


def _doc(path: str, text: str) -> NewDocument:
    from brainbot.store.records import now_iso  # noqa: F401 - the store stamps it
    from brainbot.text.chunking import chunk_text
    from brainbot.text.tokens import TokenCounter

    chunks = []
    for c in chunk_text(text, path, TokenCounter()):
        terms, n = lexical.term_frequencies(c.retrieval_text)
        chunks.append(NewChunk(c, path + str(c.chunk_index), None, terms, n))
    return NewDocument("/r", path, "sha-" + path, 1, 1, path, {}, chunks=chunks)


def test_delete_in_the_batch_that_added_it(tmp_path):
    """A document added and removed in one transaction leaves no postings and no df
    (its buffered postings are written before the delete reads them)."""
    db = tmp_path / "b.db"
    with open_store(db, write=True) as store:
        with store.batch():
            keep = store.add_document(_doc("keep.md", "Alpha beta gamma."))
            gone = store.add_document(_doc("gone.md", "Alpha delta epsilon."))
            store.delete_documents([gone])
        assert keep != gone
    _oracle_holds(db)
    held = {t for _, t, d in _dump(db)["terms"] if d}
    assert {"alpha", "beta", "gamma"} <= held and not {"delta", "epsilon"} & held


def test_a_failed_batch_leaves_no_buffered_postings(tmp_path):
    db = tmp_path / "b.db"
    with open_store(db, write=True) as store:
        with pytest.raises(RuntimeError), store.batch():
            store.add_document(_doc("lost.md", "Lost words here."))
            raise RuntimeError("mid-batch")
        with store.batch():
            store.add_document(_doc("kept.md", "Kept words."))
    _oracle_holds(db)
    held = {t for _, t, d in _dump(db)["terms"] if d}
    assert "kept" in held and "lost" not in held


def test_stage_timings_cover_the_lexical_phase(tmp_path, monkeypatch):
    stats = _lexical_index(tmp_path / "b.db", [EXAMPLES], 64, monkeypatch)
    stages = stats.to_dict()["stages_seconds"]
    assert set(stages) == {"discover", "read", "chunk", "write", "links"}
    assert all(v >= 0 for v in stats.stages.values())
    assert stats.stages["write"] > 0 and stats.stages["read"] > 0
    # disjoint parts of the phase: together no longer than it
    assert sum(stats.stages.values()) <= stats.lexical_seconds + 1e-6


def test_a_lexical_batch_commits_by_size_then_by_time(monkeypatch):
    """At least BATCH_CHUNKS chunks; past that, committed once BATCH_SECONDS have gone by
    since the batch began; never more than BATCH_MAX_CHUNKS (the clock is the test's)."""
    from types import SimpleNamespace

    clock = [100.0]
    monkeypatch.setattr(ix.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(ix, "BATCH_CHUNKS", 4)
    monkeypatch.setattr(ix, "BATCH_MAX_CHUNKS", 10)
    monkeypatch.setattr(ix, "BATCH_SECONDS", 2.0)
    pending = ix._Pending()
    item = SimpleNamespace(chunks=[object()] * 3)
    pending.add(item)
    clock[0] += 5  # late, but below the minimum
    assert not pending.full
    pending.add(item)  # 6 chunks, 5 s in
    assert pending.full
    fresh = ix._Pending()
    for _ in range(3):
        fresh.add(item)  # 9 chunks at once: above the minimum, before the time is up
    assert not fresh.full
    fresh.add(item)  # 12 >= the maximum
    assert fresh.full


def test_removing_notes_leaves_no_orphans(tmp_path, shared_embedder):
    """The writer runs without foreign-key enforcement and cascades itself: removing notes
    that have vectors, postings, tags, links out and links in leaves no row pointing at
    them (SQLite's own foreign_key_check), and links to them become unresolved."""
    vault = tmp_path / "vault"
    shutil.copytree(EXAMPLES, vault)
    db = tmp_path / "o.db"
    with Indexer(db, embedder=shared_embedder) as indexer:
        indexer.index_paths([vault])
    con = sf.connect(db)
    gone = con.execute(  # notes that others link to and that have tags and links of their own
        "SELECT DISTINCT d.id, d.path FROM documents d JOIN links l ON l.target_document = d.id "
        "WHERE d.id IN (SELECT document FROM tags) AND d.id IN "
        "(SELECT source_document FROM links) AND l.source_document != d.id").fetchall()
    con.close()
    assert gone
    for _, path in gone[:3]:
        (vault / path).unlink()
    with Indexer(db, embedder=shared_embedder) as indexer:
        stats = indexer.index_paths([vault])
    assert stats.removed == len(gone[:3])
    con = sf.connect(db)
    try:
        assert con.execute("PRAGMA foreign_key_check").fetchall() == []
        ids = [i for i, _ in gone[:3]]
        marks = ",".join("?" * len(ids))
        assert con.execute(f"SELECT count(*) FROM links WHERE target_document IN ({marks})",
                           ids).fetchone()[0] == 0
        assert con.execute("SELECT count(*) FROM embeddings WHERE chunk NOT IN "
                           "(SELECT id FROM chunks)").fetchone()[0] == 0
        assert con.execute("SELECT count(*) FROM chunks WHERE id NOT IN "
                           "(SELECT chunk FROM embeddings)").fetchone()[0] == 0
    finally:
        con.close()
    _oracle_holds(db)
