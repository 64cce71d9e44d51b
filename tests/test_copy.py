"""`brainbot copy` between two SQLite files (the Postgres directions are in
test_pg_store.py and, with the vault's facts, test_pg_vault.py), and the store interface's additions for it on SQLite: documents and
chunks written with given ids, export_documents, bulk_load; both stores implement every
method of the Protocol."""

from __future__ import annotations

import inspect
import os
import shutil

import pytest
from pg_kit import store_snapshot
from reliability_kit import snapshot

from brainbot.cli import main
from brainbot.errors import IdentityMismatchError, InputError, StoreError
from brainbot.index.copying import copy_index
from brainbot.store.interface import Store
from brainbot.store.target import open_store
from brainbot.text import lexical


def _parameters(function) -> list[tuple]:
    """A method's parameters as they can be called: name, kind and default."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


def test_both_stores_implement_the_whole_protocol():
    """Every method of the Protocol, with its parameters (names, kinds, defaults): a store
    whose method took other arguments than the interface says passed a names-only check."""
    from brainbot.store.pg.store import PostgresStore
    from brainbot.store.sqlite.store import SQLiteStore

    wanted = {n for n in vars(Store) if not n.startswith("_")} | {"__enter__", "__exit__"}
    wanted -= {"target"}  # an attribute set by __init__
    assert len(wanted) > 40
    for cls in (SQLiteStore, PostgresStore):
        assert wanted - set(dir(cls)) == set(), cls.__name__
        for name in sorted(wanted):
            assert callable(getattr(cls, name)), (cls.__name__, name)
            assert _parameters(getattr(cls, name)) == _parameters(getattr(Store, name)), (
                cls.__name__, name)


def test_the_signature_check_sees_a_changed_parameter():
    class Odd:
        def bm25_topk(self, terms, n, flt=None, extra=1): ...

    assert _parameters(Odd.bm25_topk) != _parameters(Store.bm25_topk)


def test_sqlite_copy_keeps_ids_and_content(tmp_path, examples_db):
    dst = tmp_path / "copy.db"
    stats = copy_index(examples_db, dst)
    assert stats.chunks > 200 and stats.target == str(dst)
    assert snapshot(dst) == snapshot(examples_db)
    want = store_snapshot(examples_db)  # with each note's links, tags and date
    assert want["links"] and all(d[-1] != "None" for d in want["documents"])
    assert store_snapshot(dst) == want
    with open_store(examples_db) as a, open_store(dst) as b:
        ids = [d.id for d in a.documents()]
        assert ids == [d.id for d in b.documents()]
        terms = lexical.query_terms("sourdough starter")
        ia, sa = a.bm25_topk(terms, 20)
        ib, sb = b.bm25_topk(terms, 20)
        assert ia.tolist() == ib.tolist() and sa.tobytes() == sb.tobytes()
        assert b.integrity() == "ok"


def test_copy_refusals(tmp_path, examples_db):
    dst = tmp_path / "copy.db"
    copy_index(examples_db, dst)
    with pytest.raises(InputError, match="--replace"):
        copy_index(examples_db, dst)
    with pytest.raises(InputError, match="same index"):
        copy_index(examples_db, examples_db)
    import sqlean

    conn = sqlean.connect(str(dst), isolation_level=None)
    conn.execute("UPDATE meta SET value = 'other-embedder' WHERE key = 'embedder'")
    conn.execute("DELETE FROM documents")
    conn.close()
    with pytest.raises(IdentityMismatchError, match="embedder"):
        copy_index(examples_db, dst)
    copy_index(examples_db, dst, replace=True)
    assert snapshot(dst) == snapshot(examples_db)
    empty = tmp_path / "empty.db"
    with open_store(empty, write=True):
        pass
    with pytest.raises(StoreError, match="nothing to copy"):
        copy_index(empty, tmp_path / "x.db")


def _index_in(tmp_path, examples_db):
    db = tmp_path / "n.db"
    copy_index(examples_db, db)
    return db, snapshot(db)


@pytest.mark.parametrize("spelling", ["dot-slash", "absolute", "symlink", "hard link"])
def test_copy_replace_refuses_its_own_source_under_another_spelling(
        tmp_path, examples_db, monkeypatch, spelling):
    """H2: `brainbot copy --from n.db --to ./n.db --replace` once emptied the index (the
    guard compared strings, and the writer unlinked the file before the copy read it)."""
    db, before = _index_in(tmp_path, examples_db)
    monkeypatch.chdir(tmp_path)
    other = {"dot-slash": "./n.db", "absolute": str(db.resolve())}.get(spelling)
    if spelling == "symlink":
        (tmp_path / "link.db").symlink_to("n.db")
        other = "link.db"
    elif spelling == "hard link":
        os.link(db, tmp_path / "hard.db")
        other = "hard.db"
    for source, target in (("n.db", other), (other, "n.db")):
        with pytest.raises(InputError, match="same index"):
            copy_index(source, target, replace=True)
    assert main(["copy", "--from", "n.db", "--to", other, "--replace"]) == 2
    assert snapshot(db) == before
    with open_store(db) as store:
        assert store.counts()["documents"] == len(before["documents"]) > 20


def test_copy_refuses_a_byte_copy_of_the_same_generation_but_restores_an_older_one(
        tmp_path, examples_db):
    """The index_id travels with the bytes: a byte copy nothing wrote to since is the same
    index (nothing to copy); an older backup (another generation) may be copied back."""
    db, before = _index_in(tmp_path, examples_db)
    backup = tmp_path / "backup.db"
    shutil.copyfile(db, backup)
    with pytest.raises(InputError, match="same index .index_id [0-9a-f]{32}, generation"):
        copy_index(backup, db, replace=True)
    with open_store(db, write=True) as store, store.batch():
        store.delete_documents([store.documents()[0].id])
    copy_index(backup, db, replace=True)
    assert snapshot(db) == before


def test_sqlite_export_round_trips_through_add_document(tmp_path, examples_db):
    """export_documents gives what add_document takes: a copy made by hand is the same."""
    dst = tmp_path / "hand.db"
    with open_store(examples_db) as src:
        meta = src.meta()
        docs = list(src.export_documents())
    from brainbot.index.copying import identity_of

    with open_store(dst, write=True) as store:
        store.record_identity(identity_of(meta, "src"))
        with store.bulk_load(), store.batch():
            for d in docs:
                store.add_document(d)
            store.resolve_links()  # as copy_index does: links travel as written
            for key in ("vault_refresh", "folder_roots", "languages"):
                store.set_meta(key, meta.get(key))
    assert snapshot(dst) == snapshot(examples_db)
    assert store_snapshot(dst) == store_snapshot(examples_db)
