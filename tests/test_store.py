"""The store interface on SQLite: identity checks, migrations, warnings kept, generations,
and readers that pick up another process's commits."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from brainbot.cli import main
from brainbot.errors import (
    IdentityMismatchError,
    NoIndexError,
    OlderSchemaError,
)
from brainbot.index.indexer import Indexer
from brainbot.search.searcher import Searcher
from brainbot.store import identity
from brainbot.store.sqlite import file as sqlite_file
from brainbot.store.target import open_store

BAD_YAML = "---\ntitle: [unclosed\ntags: [a, b\n---\n# Body\n\nThe body is fine and indexed.\n"


def _index(db, root, embedder):
    with Indexer(db, embedder=embedder) as ix:
        return ix.index_paths([root])


def test_bad_front_matter_is_reported_everywhere(tmp_path, vault, shared_embedder, capsys):
    (vault / "broken.md").write_text(BAD_YAML, encoding="utf-8")
    db = tmp_path / "w.db"
    stats = _index(db, vault, shared_embedder)
    assert [w.path for w in stats.warnings] == ["broken.md"]
    assert "front matter" in stats.warnings[0].reason and "ignored" in stats.warnings[0].reason
    # the note itself is indexed
    assert Searcher(db, embedder=shared_embedder).search("body is fine", 1)[0].path == "broken.md"
    assert main(["status", "--db", str(db), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert [w["path"] for w in status["warnings"]] == ["broken.md"]
    for argv in (["report", str(vault), "--json"], ["report", "--db", str(db), "--json"]):
        assert main(argv) == 0
        out, err = capsys.readouterr()
        assert [w["path"] for w in json.loads(out)["warnings"]] == ["broken.md"]
        assert "warning broken.md" in err
    # a second run still has it on record, though the file was not re-read
    stats = _index(db, vault, shared_embedder)
    assert stats.unchanged == 4 and stats.warnings == []
    with open_store(db) as store:
        assert [d.path for d in store.documents() if d.warnings] == ["broken.md"]


def test_hits_carry_their_char_span(examples_db, shared_embedder):
    from conftest import EXAMPLES

    hits = Searcher(examples_db, embedder=shared_embedder).search("sourdough starter", 5)
    for h in hits:
        text = (EXAMPLES / h.path).read_text(encoding="utf-8")
        assert text[h.start_char:h.end_char] == h.text


def test_reader_needs_model_and_analyzer_writer_needs_everything(tmp_path, vault,
                                                                 shared_embedder):
    db = tmp_path / "i.db"
    _index(db, vault, shared_embedder)
    conn = sqlite_file.connect(db)
    conn.execute("UPDATE meta SET value = 'chunker0' WHERE key = 'chunker'")
    conn.close()
    Searcher(db, embedder=shared_embedder).close()  # a reader does not care
    with pytest.raises(IdentityMismatchError, match="--rebuild") as info:
        _index(db, vault, shared_embedder)
    assert info.value.fix.endswith("--rebuild")
    conn = sqlite_file.connect(db)
    conn.execute("UPDATE meta SET value = 'en-other-v9' WHERE key = 'analyzer'")
    conn.close()
    with pytest.raises(IdentityMismatchError, match="analyzer"):
        Searcher(db, embedder=shared_embedder)
    meta = {"fingerprint": "x", **identity.reader_wants()}
    identity.check(meta, db)  # exactly the reader's fields: fine


def test_empty_file_gets_the_index_advice(tmp_path, capsys):
    db = tmp_path / "empty.db"
    db.write_bytes(b"")
    with pytest.raises(NoIndexError):
        open_store(db)
    assert main(["doctor", "--db", str(db), "--json"]) == 1
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert checks["database"]["fix"] == f"brainbot index NOTES --db {db}"


def _schema_one(db, root: str) -> None:
    """A file as schema 1 left it: one document of a note folder, one of a dataset."""
    conn = sqlite_file.connect(db)
    conn.executescript(sqlite_file.MIGRATIONS[0] + "\nPRAGMA user_version = 1;")
    conn.execute("INSERT INTO documents(root, path, sha256, size, mtime_ns, title, "
                 "indexed_at) VALUES (?, 'a.md', 'x', 1, 1, 'A', 'now'), "
                 "('dataset:nf', 'MED-1', 'y', 1, 0, 'M', 'now')", (root,))
    conn.close()


def test_schema_one_is_migrated_by_a_writer_and_refused_by_a_reader(tmp_path):
    db = tmp_path / "old.db"
    _schema_one(db, str(tmp_path))
    with pytest.raises(OlderSchemaError, match="brainbot index") as info:
        open_store(db)
    assert "NOTES" in info.value.fix
    with open_store(db, write=True) as store:
        docs = {d.path: d for d in store.documents()}
        assert store.generation() == 0
    assert docs["a.md"].kind == "note" and docs["MED-1"].kind == "record"
    conn = sqlite_file.connect(db)
    assert sqlite_file.schema_version(conn) == sqlite_file.SCHEMA_VERSION
    conn.close()


def test_each_commit_bumps_the_generation_and_readers_follow(tmp_path, vault,
                                                            shared_embedder):
    db = tmp_path / "g.db"
    _index(db, vault, shared_embedder)
    searcher = Searcher(db, embedder=shared_embedder)
    before = searcher.store.generation()
    assert searcher.search("zeppelin hangar", 3, mode="bm25") == []
    (vault / "new.md").write_text("# Zeppelin\n\nThe zeppelin hangar is in Friedrichshafen.\n")
    _index(db, vault, shared_embedder)
    assert searcher.store.generation() > before
    for mode in ("bm25", "vector", "hybrid"):
        assert searcher.search("zeppelin hangar", 1, mode=mode)[0].path == "new.md", mode
    assert not searcher.store.refresh()  # nothing new since


def test_a_reused_chunk_id_gets_its_new_vector(tmp_path, shared_embedder):
    """SQLite hands a deleted top row id to the next insert: the reader must not keep
    the old chunk's vector for it."""
    root = tmp_path / "v"
    root.mkdir()
    note = root / "z.md"
    note.write_text("# Tides\n\nSpring tides follow the new and full moon.\n")
    db = tmp_path / "r.db"
    _index(db, root, shared_embedder)
    searcher = Searcher(db, embedder=shared_embedder)
    first = searcher.search("moon tides", 1, mode="vector")[0]
    searcher.store.index.ensure_matrix()
    note.write_text("# Pastry\n\nLaminated dough needs cold butter and patience.\n")
    _index(db, root, shared_embedder)
    hit = searcher.search("laminated dough butter", 1, mode="vector")[0]
    assert hit.rowid == first.rowid  # the id was reused ...
    expected = shared_embedder.embed_query("laminated dough butter") @ \
        shared_embedder.embed([hit.text])[0]
    assert hit.score > 0.5 and abs(hit.score - expected) < 0.15  # ... with the new vector


def test_store_reads_are_exactly_the_index(examples_db, tmp_path):
    copy = tmp_path / "copy.db"
    shutil.copy(examples_db, copy)
    with open_store(copy) as store:
        docs = store.documents()
        assert len(docs) == 32 and all(d.on_disk for d in docs)
        counts = store.counts()
        assert counts["chunks"] == store.chunk_count() == counts["embeddings"]
        some = store.chunks([1, 2, 3])
        assert sorted(some) == [1, 2, 3]
        row = store.chunk_by_public_id(some[1].chunk_id)
        assert row == some[1]
        assert store.document(some[1].path).id == some[1].document.id
        assert store.document("no/such.md") is None
        ids, scores = store.bm25_topk({"sourdough": 1}, 5)
        assert (ids >= 0).all() and np.all(np.diff(scores) <= 0)


def test_a_reader_and_the_writer_in_one_process(tmp_path, vault, shared_embedder):
    """The MCP server with --watch: a long-lived reader and one writer pass after another
    in the same process, and other processes reading between. Releasing the writer lock
    must not drop the POSIX locks SQLite holds for the reader (closing any descriptor of
    the file would): another process closing its connection would then take the file as
    unused, checkpoint and delete the WAL under the reader ("disk I/O error")."""
    import subprocess
    import sys

    db = tmp_path / "one.db"
    _index(db, vault, shared_embedder)
    searcher = Searcher(db, embedder=shared_embedder)
    assert searcher.search("alpha", 1, mode="bm25")
    peek = f"import sqlean; c = sqlean.connect({str(db)!r}); c.execute('SELECT 1 FROM meta'); c.close()"
    for i in range(4):
        (vault / f"n{i}.md").write_text(f"# N{i}\n\nThe word quokka{i} appears here.\n")
        with Indexer(db, embedder=shared_embedder) as ix:
            ix.index_changes(vault, [f"n{i}.md"])
        subprocess.run([sys.executable, "-c", peek], check=True)  # another process reads
        assert searcher.search(f"quokka{i}", 1, mode="bm25")[0].path == f"n{i}.md"
