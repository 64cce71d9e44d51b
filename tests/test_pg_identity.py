"""The index_id on Postgres (review H2, M4), against the real server of tests/pg_server.py:
`brainbot copy --replace` refuses one database under two URL spellings before it drops
anything, and a long-lived reader notices a rebuild although the generation restarted at
the value it had loaded."""

from __future__ import annotations

import re

import pytest

from brainbot.errors import InputError
from brainbot.index.copying import copy_index
from brainbot.index.indexer import Indexer
from brainbot.search.searcher import Searcher
from brainbot.store.target import open_store

pytestmark = pytest.mark.postgres


def _note(folder, name: str, text: str):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")
    return folder


def _index(url, folder, embedder, **kw) -> None:
    with Indexer(url, embedder=embedder, **kw) as ix:
        ix.index_paths([folder])


def _spellings(url: str) -> list[str]:
    """Other URLs of the same database: another scheme, a parameter more."""
    return [url.replace("postgresql://", "postgres://", 1),
            url + ("&" if "?" in url else "?") + "application_name=other"]


def test_copy_replace_refuses_one_database_under_two_urls(pg_server, vault, tmp_path,
                                                          shared_embedder):
    url = pg_server.fresh_database("identity_copy")
    _index(url, vault, shared_embedder)
    with open_store(url) as store:
        index_id, docs = store.meta()["index_id"], store.counts()["documents"]
    assert re.fullmatch(r"[0-9a-f]{32}", index_id) and docs == 3
    for other in _spellings(url):
        with pytest.raises(InputError, match="same index"):
            copy_index(url, other, replace=True)
        with pytest.raises(InputError, match="same index"):
            copy_index(other, url, replace=True)
    with open_store(url) as store:
        assert store.counts()["documents"] == 3 and store.meta()["index_id"] == index_id
    # another database of the same server is another index: copied, with its own id
    other_db = pg_server.fresh_database("identity_copy_to")
    copy_index(url, other_db)
    with open_store(other_db) as store:
        assert store.counts()["documents"] == 3
        assert store.meta()["index_id"] not in (None, index_id)


def test_a_running_reader_sees_a_rebuild_at_the_same_generation(pg_server, tmp_path,
                                                                shared_embedder):
    """M4: a rebuild restarts the generation; a reader that had loaded that generation
    kept the old index's N, average length and filter caches."""
    url = pg_server.fresh_database("identity_rebuild")
    old = _note(tmp_path / "old", "garden.md", "# Garden\n\nTomatoes need full sun.\n")
    new = _note(tmp_path / "new", "airship.md",
                "# Airship\n\nThe zeppelin hangar is north of the lake, past the old "
                "boathouse and the second zeppelin mast.\n\n## Visits\n\nOpen on Sundays.\n")
    _index(url, old, shared_embedder)
    with Searcher(url, embedder=shared_embedder) as reader:
        assert [h.path for h in reader.search("tomatoes", 3, mode="bm25",
                                              path_glob="*.md")] == ["garden.md"]
        loaded = reader.store.generation()
        _index(url, new, shared_embedder, rebuild=True)
        assert reader.store.generation() == loaded  # what made the old check miss it
        with Searcher(url, embedder=shared_embedder) as fresh:
            for flt in ({}, {"path_glob": "*.md"}):
                got = reader.search("zeppelin hangar", 3, mode="bm25", **flt)
                want = fresh.search("zeppelin hangar", 3, mode="bm25", **flt)
                assert [h.path for h in got] == ["airship.md"], flt
                assert [h.score for h in got] == [h.score for h in want], flt
