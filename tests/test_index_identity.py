"""Each index's `index_id` (review H2, M4) on SQLite: written when the index is created (or
first opened by a writer, for a file from before index ids), new after a rebuild, never
copied; and a long-lived reader (the Searcher `brainbot mcp` keeps) that notices when the
file at its path is another one (a `--rebuild`, a `copy --replace`) and reopens it.
Postgres: test_pg_identity.py."""

from __future__ import annotations

import re

import pytest
import sqlean
from reliability_kit import meta_value

from brainbot.index.copying import copy_index
from brainbot.index.indexer import Indexer
from brainbot.search.searcher import Searcher
from brainbot.store.target import open_store


def _index_id(db) -> str | None:
    return meta_value(db, "index_id")


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


def _vector_hits(searcher, query: str) -> list[tuple[str, float]]:
    return [(h.path, h.score) for h in searcher.search(query, 3, mode="vector")]


def test_a_running_reader_embeds_queries_at_the_precision_of_the_rebuilt_index(
        tmp_path, vault, shared_embedder):
    """H2: after a rebuild at another precision, a long-lived Searcher (a daemon's; with
    --watch its embedder is given to it) gives the answer a new in-process one gives, not
    the old precision's."""
    from brainbot.model.embed import Embedder

    db = tmp_path / "n.db"
    _index(db, vault, shared_embedder)
    queries = ("tomatoes in the sun", "when do the results arrive")
    # the given embedder is the fp32 index's (Embedder()'s default is int8 since #33)
    with Searcher(db) as own, Searcher(db, embedder=Embedder("fp32")) as given:
        for searcher in (own, given):
            assert searcher.embedder.precision == "fp32" and _vector_hits(searcher, queries[0])
        with Indexer(db, precision="int8", rebuild=True) as ix:
            ix.index_paths([vault])
        for back in ("int8", "fp32"):
            with Searcher(db) as fresh:
                want = {q: _vector_hits(fresh, q) for q in queries}
            for searcher in (own, given):
                for q in queries:
                    got = _vector_hits(searcher, q)
                    assert [p for p, _ in got] == [p for p, _ in want[q]], (back, q)
                    assert all(abs(a - b) <= 1e-6 for (_, a), (_, b) in
                               zip(got, want[q], strict=True)), (back, q, got, want[q])
                assert searcher.embedder.precision == back
            if back == "int8":  # and back again
                with Indexer(db, precision="fp32", rebuild=True) as ix:
                    ix.index_paths([vault])


def test_a_running_reader_refuses_a_file_it_cannot_read_and_says_so(
        tmp_path, vault, shared_embedder, caplog):
    """M7: a file moved over the path that the reader refuses (another analyzer, not an
    index), or no file at all, fails each call with the reason, logged once; only a file
    whose schema is not written yet (an index being created) leaves the old one answering.
    The old file moved back is served again."""
    import logging
    import os
    import shutil

    from brainbot.errors import IdentityMismatchError, NoIndexError, NotAnIndexError

    db, other, keep = tmp_path / "n.db", tmp_path / "other.db", tmp_path / "keep.db"
    _index(db, vault, shared_embedder)
    _index(other, vault, shared_embedder)
    conn = sqlean.connect(str(other))
    conn.execute("UPDATE meta SET value = 'other-analyzer' WHERE key = 'analyzer'")
    conn.commit()
    conn.close()
    text = tmp_path / "text.db"
    text.write_text("not an index\n", encoding="utf-8")
    empty = tmp_path / "empty.db"
    empty.touch()
    with Searcher(db, embedder=shared_embedder) as searcher:
        assert searcher.search("tomatoes", 1, mode="bm25")
        os.link(db, keep)  # the old file, to move back at the end
        caplog.set_level(logging.WARNING, logger="brainbot.store")
        for replacement, error in ((other, IdentityMismatchError), (text, NotAnIndexError),
                                   (None, NoIndexError)):
            if replacement is None:
                db.unlink()
            else:
                shutil.copyfile(replacement, tmp_path / "next.db")
                os.replace(tmp_path / "next.db", db)
            caplog.clear()
            for _ in range(2):
                with pytest.raises(error):
                    searcher.search("tomatoes", 1, mode="bm25")
            assert len(caplog.records) == 1, caplog.records  # said once, not per call
            assert str(db) in caplog.records[0].getMessage()
        shutil.copyfile(empty, tmp_path / "next.db")
        os.replace(tmp_path / "next.db", db)
        assert searcher.search("tomatoes", 1, mode="bm25")  # being created: the old answers
        os.replace(keep, db)
        assert searcher.search("tomatoes", 1, mode="bm25")
