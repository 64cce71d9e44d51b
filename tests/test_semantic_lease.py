"""One semantic phase at a time (issue 32, review M9): two `brainbot index` runs, or
`serve --watch` and a `brainbot index`, each embedded every chunk. The phase that runs the
model holds a lease (index/lease.py); another waits for it, and takes over when its holder
is gone."""

from __future__ import annotations

import json
import os
import threading

from conftest import EXAMPLES, copy_tree
from reliability_kit import check_consistent, connect
from wait_kit import wait_until

from brainbot.index import lease as lease_mod
from brainbot.index.indexer import Indexer


class Recording:
    """An embedder that records what reaches the model; ``hold`` (a condition) keeps its
    first call waiting until it is true."""

    def __init__(self, inner, hold=None) -> None:
        self.inner, self.hold = inner, hold
        self.texts: list[str] = []
        self.started = threading.Event()

    @property
    def fingerprint(self):
        return self.inner.fingerprint

    def embed(self, texts):
        if not self.started.is_set():
            self.started.set()
            if self.hold is not None:
                wait_until(self.hold, "the other semantic phase has looked")
        self.texts.extend(texts)
        return self.inner.embed(texts)

    def embed_query(self, text):
        return self.inner.embed_query(text)


def _lexical_only(tmp_path, embedder):
    vault = tmp_path / "vault"  # a few notes: three or four semantic batches of 16
    for part in ("garden", "reading"):
        copy_tree(EXAMPLES / part, vault / part)
    db = tmp_path / "two.db"
    with Indexer(db, embedder=embedder, embed=False) as ix:
        ix.index_paths([vault])
    return db


def _semantic(db, embedder, results, name, progress=None):
    def run():
        with Indexer(db, embedder=embedder) as ix:
            ix.embed_chunks = 16
            if progress is not None:
                ix.embed_progress = progress
            results[name] = ix.embed_missing()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _meta(db) -> dict:
    conn = connect(db)
    try:
        return dict(conn.execute("SELECT key, value FROM meta"))
    finally:
        conn.close()


def test_two_semantic_phases_embed_each_text_once(tmp_path, shared_embedder):
    db = _lexical_only(tmp_path, shared_embedder)
    second_looked = threading.Event()
    results: dict[str, int] = {}
    threads: list[threading.Thread] = []
    first = Recording(shared_embedder, hold=lambda: second_looked.is_set()
                      or (len(threads) > 1 and not threads[1].is_alive()))
    second = Recording(shared_embedder)
    threads.append(_semantic(db, first, results, "first"))
    wait_until(first.started.is_set, "the first phase runs the model")
    threads.append(_semantic(db, second, results, "second",
                             progress=lambda done, total: second_looked.set()))
    for t in threads:
        t.join(timeout=600)
        assert not t.is_alive()
    texts = first.texts + second.texts
    assert len(texts) == len(set(texts)), "a text was embedded twice"
    assert results["first"] + results["second"] == len(texts) > 0
    assert results["second"] == 0  # it waited, and found nothing left
    check_consistent(db)
    assert lease_mod.KEY not in _meta(db)  # the lease leaves with its holder


def test_a_lease_left_by_a_dead_run_is_taken_over_and_removed(tmp_path, shared_embedder):
    db = _lexical_only(tmp_path, shared_embedder)
    gone = os.fork()
    if gone == 0:  # a pid that existed, and does no more
        os._exit(0)
    os.waitpid(gone, 0)
    stale = {"owner": "killed", "host": lease_mod.HOST, "pid": gone, "until": 4e9}
    conn = connect(db)
    conn.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (lease_mod.KEY, json.dumps(stale)))
    conn.close()
    embedder = Recording(shared_embedder)
    with Indexer(db, embedder=embedder) as ix:
        assert ix.embed_missing() == len(set(embedder.texts)) > 0
    check_consistent(db)
    assert lease_mod.KEY not in _meta(db)
