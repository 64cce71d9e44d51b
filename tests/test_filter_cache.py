"""Filter caches are bounded (review M9): a long-lived reader keeps the masks of the last
FILTER_CACHE distinct filters, not one per filter it was ever asked (an agent varying
path, tag or date filters against a quiet index grew the server without end). The
Postgres side is in test_pg_filters.py."""

from __future__ import annotations

from brainbot.index.indexer import Indexer
from brainbot.search.searcher import Searcher
from brainbot.store.lru import FILTER_CACHE, LRU


def test_lru_keeps_the_most_recently_used():
    cache = LRU(2)
    cache["a"], cache["b"] = 1, 2
    assert cache.get("a") == 1  # a is now the newest
    cache["c"] = 3
    assert list(cache) == ["a", "c"] and cache.get("b") is None


def test_sqlite_filter_masks_are_bounded(tmp_path, vault, shared_embedder):
    db = tmp_path / "n.db"
    with Indexer(db, embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    with Searcher(db, embedder=shared_embedder) as searcher:
        first = [h.path for h in searcher.search("tomatoes", 3, mode="bm25", path_glob="sub/*")]
        assert first == ["sub/beta.md"]
        for i in range(FILTER_CACHE + 40):
            searcher.search("tomatoes", 3, mode="bm25", path_glob=f"*{i}*")
        assert len(searcher.store.index._masks) == FILTER_CACHE
        again = [h.path for h in searcher.search("tomatoes", 3, mode="bm25", path_glob="sub/*")]
        assert again == first  # evicted, then built again alike
