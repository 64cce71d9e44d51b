"""A note whose folder and path are past Postgres's btree limit (review M13, the paths
half), against the real server of tests/pg_server.py: it is refused on its own, with the
reason, and every other note of its batch is indexed (the insert used to fail the whole
batch on every run, so `brainbot index` never completed for that vault). SQLite holds it."""

from __future__ import annotations

import random
import string

import pytest

from brainbot.index.indexer import Indexer
from brainbot.store.pg.store import MAX_PATH_BYTES
from brainbot.store.target import open_store

pytestmark = pytest.mark.postgres


def _deep_note(root):
    """A note ~3,000 bytes deep in incompressible folder names (btree entries may be
    compressed, so a repetitive name would fit)."""
    rng = random.Random(7)
    folder = root
    for _ in range(14):
        folder = folder / "".join(rng.choice(string.ascii_lowercase + string.digits)
                                  for _ in range(210))
    folder.mkdir(parents=True)
    note = folder / "deep.md"
    note.write_text("# Deep\n\nA note far down about zeppelins.\n", encoding="utf-8")
    return note.relative_to(root).as_posix()


def test_a_path_past_the_btree_limit_is_refused_per_file(pg_server, tmp_path, vault,
                                                         shared_embedder):
    deep = _deep_note(vault)
    assert len(str(vault).encode()) + len(deep.encode()) > MAX_PATH_BYTES + 300
    url = pg_server.fresh_database("long_paths")
    with Indexer(url, embedder=shared_embedder) as ix:
        stats = ix.index_paths([vault])
    assert stats.new == 3
    assert [(p.path, p.skipped) for p in stats.skipped] == [(deep, True)]
    assert "Postgres" in stats.skipped[0].reason and "bytes" in stats.skipped[0].reason
    with open_store(url) as store:
        assert sorted(d.path for d in store.documents()) == [
            "alpha.md", "gamma.md", "sub/beta.md"]
    with Indexer(url, embedder=shared_embedder) as ix:  # and again: still not a failure
        again = ix.index_paths([vault])
    assert again.unchanged == 3 and [p.path for p in again.skipped] == [deep]
    db = tmp_path / "n.db"
    with Indexer(db, embedder=shared_embedder) as ix:
        assert ix.index_paths([vault]).new == 4  # SQLite has no such limit
