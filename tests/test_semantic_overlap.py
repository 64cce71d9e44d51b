"""The semantic phase keeps the model busy (issue 43): the model runs in a thread of its own,
the next batch's texts already with it while a batch is written, and it starts during the
lexical phase on the first new texts; the vectors written are the model's, bit for bit,
as when it ran in line. No timing is asserted: each test holds one side until the other
has (or, without the overlap, never has) reached a point."""

from __future__ import annotations

import json
import os
import threading

import numpy as np
import pytest
from conftest import EXAMPLES, copy_tree
from reliability_kit import check_consistent, connect
from wait_kit import wait_until

from brainbot.index import lease as lease_mod
from brainbot.index.indexer import Indexer
from brainbot.index.semantic import Embedding
from brainbot.store.sqlite.store import SQLiteStore
from brainbot.text import documents

# How long a test holds one side for the other: ample on a loaded host (the model's first
# texts, its load included); a run without the overlap fails here after this long.
HOLD_S = 90.0


class Recording:
    """The real embedder, recording every text it is given (from any thread)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.texts: list[str] = []
        self.lock = threading.Lock()

    @property
    def fingerprint(self):
        return self.inner.fingerprint

    @property
    def precision(self):
        return self.inner.precision

    def embed(self, texts):
        with self.lock:
            self.texts.extend(texts)
        return self.inner.embed(texts)

    def embed_query(self, text):
        return self.inner.embed_query(text)


@pytest.fixture
def vault(tmp_path):
    """A few notes: three or four semantic batches of 16 chunks."""
    folder = tmp_path / "vault"
    for part in ("garden", "reading"):
        copy_tree(EXAMPLES / part, folder / part)
    return folder


def _vectors(db) -> dict[str, np.ndarray]:
    conn = connect(db)
    try:
        return {text: np.frombuffer(blob, "<f4") for text, blob in conn.execute(
            "SELECT c.retrieval_text, e.vector FROM chunks c JOIN embeddings e ON e.chunk = c.id")}
    finally:
        conn.close()


def test_the_model_is_a_batch_ahead_of_the_writes(tmp_path, vault, shared_embedder,
                                                   monkeypatch):
    db = tmp_path / "ahead.db"
    with Indexer(db, embedder=shared_embedder, embed=False) as ix:
        ix.index_paths([vault])
    model = Recording(shared_embedder)
    given_at_first_write: list[int] = []
    add_vectors = SQLiteStore.add_vectors

    def held(self, rows):  # the first write waits until the model has the next texts
        if not given_at_first_write:
            given_at_first_write.append(wait_until(lambda: len(model.texts) > len(rows),
                                                   "the model given the next batch",
                                                   timeout=HOLD_S))
        return add_vectors(self, rows)

    monkeypatch.setattr(SQLiteStore, "add_vectors", held)
    with Indexer(db, embedder=model) as ix:
        ix.embed_chunks = 16
        embedded = ix.embed_missing()
    assert given_at_first_write and embedded == len(set(model.texts)) > 32
    check_consistent(db)
    stored = _vectors(db)
    texts = sorted(stored)
    # the model's own vectors for these texts, bit for bit (fp32: a text's vector does
    # not depend on the texts run beside it)
    assert np.array_equal(np.stack([stored[t] for t in texts]), shared_embedder.embed(texts))


def test_the_model_starts_during_the_lexical_phase(tmp_path, vault, shared_embedder,
                                                   monkeypatch):
    db = tmp_path / "head.db"
    model = Recording(shared_embedder)
    given_at_lexical_end: list[int] = []
    publish = SQLiteStore.publish

    def held(self):  # the lexical phase's end waits until the model has had texts
        if not given_at_lexical_end:
            given_at_lexical_end.append(wait_until(lambda: len(model.texts),
                                                   "the model given texts", timeout=HOLD_S))
        return publish(self)

    monkeypatch.setattr(SQLiteStore, "publish", held)
    with Indexer(db, embedder=model) as ix:
        stats = ix.index_paths([vault])
    assert given_at_lexical_end[0] > 0
    assert stats.vectors == stats.chunks and stats.embedded == len(set(model.texts))
    check_consistent(db)


def test_no_head_start_while_another_phase_holds_the_lease(tmp_path, vault, shared_embedder):
    db = tmp_path / "leased.db"
    with Indexer(db, embedder=shared_embedder, embed=False):
        pass
    other = {"owner": "elsewhere", "host": lease_mod.HOST, "pid": os.getppid(), "until": 4e9}
    conn = connect(db)
    conn.execute("INSERT INTO meta(key, value) VALUES (?, ?)",
                 (lease_mod.KEY, json.dumps(other)))
    conn.close()
    model = Recording(shared_embedder)
    with Indexer(db, embedder=model) as ix:  # the lexical phase alone: no finish()
        root = next(iter(documents.roots([vault])))
        ix._index_documents(root.path, ix._changed(root, {}), None, {})
        assert ix._head_start is False and ix._model is None
    assert model.texts == []


def test_a_batch_taken_twice_and_a_failure_in_the_model(shared_embedder):
    """Two batches may claim one text (a text in both): the second still gets it. An
    error in the model's thread is raised by the next take, not lost."""
    embedding = Embedding(shared_embedder, group=2)
    try:
        embedding.submit([("a", "alpha"), ("b", "beta")])
        embedding.submit([("b", "beta"), ("c", "gamma")])
        first = embedding.take(["a", "b"], lambda: False)
        second = embedding.take(["b", "c"], lambda: False)
        assert np.array_equal(first["b"], second["b"])
        assert embedding._done == {} and embedding._asked == set()
    finally:
        embedding.close()

    class Broken:
        def embed(self, texts):
            raise RuntimeError("the model fell over")

    broken = Embedding(Broken())
    broken.submit([("x", "text")])
    try:
        broken.take(["x"], lambda: False)
    except RuntimeError as exc:
        assert "fell over" in str(exc)
    else:
        raise AssertionError("the model's error was lost")
    finally:
        broken.close()
