"""Filtered queries on Postgres (review M9) against the real server of tests/pg_server.py:
the legs filter by the allowed documents in SQL, so a query sends the filter's document
ids, never a list of every allowed chunk id; the cache of filters is bounded; and the hits
are SQLite's."""

from __future__ import annotations

import pytest
from pg_kit import same_hits

from brainbot.index.indexer import Indexer
from brainbot.search.searcher import Searcher
from brainbot.store.lru import FILTER_CACHE

pytestmark = pytest.mark.postgres

_SECTION = ("The {w} section talks about sourdough, tomatoes and the zeppelin hangar at "
            "length, with many words about starters, watering and airships. " * 12)


@pytest.fixture
def long_vault(tmp_path):
    """Notes of several chunks each, so a filter's chunks outnumber its documents."""
    root = tmp_path / "long"
    (root / "sub").mkdir(parents=True)
    for name in ("a.md", "b.md", "sub/c.md"):
        (root / name).write_text("".join(f"# Part {w}\n\n{_SECTION.format(w=w)}\n\n"
                                         for w in ("one", "two", "three")), encoding="utf-8")
    return root


class _Recording:
    """The legs' connection, recording the sizes of the list parameters it is sent."""

    def __init__(self, conn) -> None:
        self.conn, self.sizes = conn, []

    def execute(self, query, params=None):
        values = params.values() if isinstance(params, dict) else (params or ())
        self.sizes += [len(v) for v in values if isinstance(v, list)]
        return self.conn.execute(query, params)


def test_pg_filters_send_document_ids_and_match_sqlite(pg_server, tmp_path, long_vault,
                                                       shared_embedder):
    url, db = pg_server.fresh_database("filters"), tmp_path / "n.db"
    for target in (url, db):
        with Indexer(target, embedder=shared_embedder) as ix:
            ix.index_paths([long_vault])
    with Searcher(url, embedder=shared_embedder) as pg, \
            Searcher(db, embedder=shared_embedder) as lite:
        assert pg.store.chunk_count() >= 6  # more chunks than the 3 documents
        pg.search("warm up", 1)
        pg.store.legs.conn = recording = _Recording(pg.store.legs.conn)
        for glob in ("*.md", "sub/*", "a.md", "none/*"):
            for mode in ("bm25", "vector", "hybrid"):
                got = pg.search("zeppelin airships", 5, mode=mode, path_glob=glob)
                same_hits(got, lite.search("zeppelin airships", 5, mode=mode, path_glob=glob),
                          (glob, mode))
        assert recording.sizes and max(recording.sizes) <= 3  # document ids, not chunk ids
        for i in range(FILTER_CACHE + 20):
            pg.search("zeppelin", 3, mode="bm25", path_glob=f"*{i}*")
        assert len(pg.store.legs._filters) == FILTER_CACHE
