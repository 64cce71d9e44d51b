"""The servers' partial-index line counts the vectors once per committed state (issue 24
item 5): a warm call on an unchanged index runs no count(*), and the call after a
background embedding batch commits sees the new count."""

from __future__ import annotations

import numpy as np

from brainbot.index.indexer import Indexer
from brainbot.serve.mcp import Service
from brainbot.store.target import open_store


def _statements(store) -> list[str]:
    """The SQL the reader's connection runs from now on (appended as it runs)."""
    seen: list[str] = []
    store.db.set_trace_callback(seen.append)
    return seen


def _embed_one(db) -> None:
    """What one batch of the background semantic phase does: a vector for one chunk,
    committed in a batch (which bumps the generation)."""
    with open_store(db, write=True) as writer:
        chunk_id, text_hash, _ = writer.unembedded_chunks(0, 1)[0]
        vector = np.zeros(384, np.float32)
        vector[0] = 1.0
        with writer.batch():
            writer.add_vectors([(chunk_id, text_hash, vector)])


def test_partial_index_is_counted_once_per_commit(tmp_path, vault, shared_embedder):
    db = tmp_path / "p.db"
    with Indexer(db, embedder=shared_embedder, embed=False) as ix:
        chunks = ix.index_paths([vault]).chunks
    assert chunks >= 3
    service = Service(db, embedder=shared_embedder)
    try:
        assert f"0 of {chunks} chunks embedded" in service.partial_index()
        seen = _statements(service.searcher.store)
        assert f"0 of {chunks} chunks embedded" in service.partial_index()  # warm: cached
        assert not [s for s in seen if "count(" in s.lower()], seen

        _embed_one(db)  # committed by another connection, as the watch's writer does
        assert f"1 of {chunks} chunks embedded" in service.partial_index()
        assert [s for s in seen if "count(" in s.lower()]  # counted again, once
        seen.clear()
        assert service.searcher.coverage() == (1, chunks)
        assert not [s for s in seen if "count(" in s.lower()], seen

        with Indexer(db, embedder=shared_embedder) as ix:  # the rest, as `brainbot index`
            ix.embed_missing()
        assert service.partial_index() is None
        assert service.searcher.coverage() == (chunks, chunks)
    finally:
        service.searcher.close()
