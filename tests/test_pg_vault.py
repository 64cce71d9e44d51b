"""The vault on Postgres gives what it gives on SQLite: examples/vault indexed into both
holds the same links (as written and as resolved), tags, dates and languages; every
filter (nested tags, dates, linked_to, paths, and their combinations) keeps the same
documents and ranks the same hits; a copy carries the facts both ways; an index written
before migration 4 is filled by the next run without re-embedding.

test_vault.py runs the vault's own tests (expected.json, the commands) on both stores.
"""

from __future__ import annotations

import pytest
from conftest import CountingEmbedder, copy_tree
from pg_kit import same_hits, store_snapshot
from test_vault import EXPECTED, NOTES, VAULT, run

from brainbot.errors import OlderSchemaError
from brainbot.index.copying import copy_index
from brainbot.index.indexer import Indexer
from brainbot.search.searcher import Searcher
from brainbot.store.pg import schema as pg_schema
from brainbot.store.records import Filter
from brainbot.store.target import open_store

pytestmark = pytest.mark.postgres

FILTERS = [
    Filter(tags=("project",)), Filter(tags=("project/heron",)), Filter(tags=("area/health",)),
    Filter(tags=("#Area/Health/",)), Filter(tags=("旅行",)), Filter(tags=("recipe", "vegetarian")),
    Filter(since="2026-02-01", before="2026-03-01"), Filter(since="2026-03-14"),
    Filter(before="2026-01-12"), Filter(linked_to="Heron"), Filter(linked_to="home/Index.md"),
    Filter(path_glob="work/*", tags=("project/heron",)), Filter(path_glob="cjk/*"),
    Filter(path_glob="daily/*", since="2026-02-01", linked_to="Heron"),
    Filter(tags=("nowhere",)),
]


@pytest.fixture(scope="module")
def both(pg_server, tmp_path_factory, shared_embedder):
    """examples/vault indexed by the indexer into a SQLite file and into Postgres."""
    lite = tmp_path_factory.mktemp("pgvault") / "v.db"
    url = pg_server.fresh_database("bb_pg_vault_both")
    for target in (lite, url):
        with Indexer(target, embedder=shared_embedder) as ix:
            ix.index_paths([VAULT])
    return lite, url


def test_the_vault_on_postgres_equals_sqlite(both):
    lite, url = both
    assert store_snapshot(url) == store_snapshot(lite)
    with open_store(lite) as a, open_store(url) as b:
        assert list(b.tag_counts().items()) == list(a.tag_counts().items())
        assert b.tag_counts() == EXPECTED["tags"]
        assert b.unresolved_links() == a.unresolved_links()
        assert b.language_share() == a.language_share() and b.language_share()[0] > 30
        for doc in a.documents():
            other = b.find_note(doc.path)
            assert (other.date, other.date_source) == (doc.date, doc.date_source)
            assert b.links_to(other.id) == a.links_to(doc.id), doc.path
            assert b.links_from(other.id) == a.links_from(doc.id), doc.path
        assert b.find_note("garden plan").path == "home/Garden Plan.md"
        assert b.integrity() == "ok"


def test_every_filter_keeps_the_same_documents(both):
    lite, url = both
    with open_store(lite) as a, open_store(url) as b:
        paths_a = {d.id: d.path for d in a.documents()}
        paths_b = {d.id: d.path for d in b.documents()}
        for flt in FILTERS:
            kept = [paths_b[i] for i in b.filtered_documents(flt)]
            assert sorted(kept) == sorted(paths_a[i] for i in a.filtered_documents(flt)), flt
            if flt.tags != ("nowhere",):
                assert kept, flt  # every filter above keeps something: the test can fail
        assert b.filtered_documents(Filter(linked_to="Heron")) and \
            "work/projects/Heron.md" not in {paths_b[i] for i in
                                             b.filtered_documents(Filter(linked_to="Heron"))}


@pytest.mark.parametrize("mode", ["bm25", "vector", "hybrid"])
def test_filtered_queries_rank_alike_and_fill_k(both, shared_embedder, mode):
    lite, url = both
    a = Searcher(lite, embedder=shared_embedder)
    b = Searcher(url, embedder=shared_embedder)
    full = 0
    for flt in FILTERS:
        kwargs = {"path_glob": flt.path_glob, "tags": list(flt.tags), "since": flt.since,
                  "before": flt.before, "linked_to": flt.linked_to}
        ha = a.search("plans and notes for the week", 5, mode=mode, **kwargs)
        hb = b.search("plans and notes for the week", 5, mode=mode, **kwargs)
        same_hits(hb, ha, flt)  # ids in order, dates too; scores within SCORE_TOLERANCE
        full += len(hb) == 5
    # SQLite's C kernel scans the allowed chunks exactly, so the same ids mean Postgres
    # found k hits wherever the filter lets k chunks through (most filters here do; BM25
    # only where k of them hold a query term)
    assert full >= (5 if mode == "bm25" else 10), full
    a.close()
    b.close()


def test_tags_with_like_wildcards_match_only_themselves(pg_server, tmp_path, shared_embedder):
    """'--tag a_b' is a literal prefix on Postgres too (LIKE's _ and % are escaped)."""
    root = tmp_path / "wild"
    root.mkdir()
    for name, tags in (("one", "a_b"), ("two", "axb/c"), ("three", "a_b/c"), ("four", "a%b"),
                       ("five", "a%bc/d")):
        (root / f"{name}.md").write_text(f"---\ntags: [{tags}]\n---\n# {name}\n\nWords.\n",
                                         encoding="utf-8")
    url = pg_server.fresh_database("bb_pg_vault_wild")
    lite = tmp_path / "w.db"
    for target in (lite, url):
        with Indexer(target, embedder=shared_embedder) as ix:
            ix.index_paths([root])
    for tag, expected in (("a_b", {"one.md", "three.md"}), ("a%b", {"four.md"}),
                          ("axb", {"two.md"}), ("a", set())):
        for target in (lite, url):
            with open_store(target) as store:
                paths = {d.id: d.path for d in store.documents()}
                kept = {paths[i] for i in store.filtered_documents(Filter(tags=(tag,)))}
            assert kept == expected, (tag, target)


def test_copy_carries_the_facts_both_ways(both, pg_server, tmp_path):
    lite, url = both
    there = pg_server.fresh_database("bb_pg_vault_copy")
    back = tmp_path / "back.db"
    copy_index(lite, there)
    copy_index(there, back)
    want = store_snapshot(lite)
    assert want["links"] and any(c[-1] is False for c in want["chunks"])
    assert store_snapshot(there) == want
    assert store_snapshot(back) == want


def _as_schema_three(url: str) -> None:
    """Undo migrations 5 and 4 on a fresh index, as a schema written before them would be."""
    conn = pg_schema.connect(url)
    conn.execute("""
        ALTER TABLE documents DROP COLUMN read_ns;
        DROP TABLE links; DROP TABLE tags;
        ALTER TABLE documents DROP COLUMN date, DROP COLUMN date_source;
        ALTER TABLE chunks DROP COLUMN english;
        DELETE FROM meta WHERE key = 'vault_refresh';
        UPDATE meta SET value = '3' WHERE key = 'schema_version';""")
    conn.close()


def test_migration_fills_links_tags_and_dates_without_re_embedding(pg_server, tmp_path,
                                                                  shared_embedder, capsys):
    vault = copy_tree(VAULT, tmp_path / "vault")
    url = pg_server.fresh_database("bb_pg_vault_migration")
    with Indexer(url, embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    _as_schema_three(url)
    with pytest.raises(OlderSchemaError, match="brainbot index"):
        open_store(url)
    code, _, err = run(capsys, "query", "garden", "--db", url)
    assert code == 1 and "run `brainbot index NOTES" in err and "not a brainbot index" not in err
    counting = CountingEmbedder(shared_embedder)
    with Indexer(url, embedder=counting) as ix:
        stats = ix.index_paths([vault])
    assert counting.texts == [] and stats.unchanged == NOTES and stats.new == 0
    with open_store(url) as store:
        assert store.meta()["schema_version"] == str(pg_schema.SCHEMA_VERSION)
        assert "vault_refresh" not in store.meta()
        assert store.tag_counts() == EXPECTED["tags"]
        assert store.language_share()[1] == store.chunk_count()
        assert store.integrity() == "ok"
    clean = tmp_path / "clean.db"  # what a first index of the same folder holds
    with Indexer(clean, embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    assert store_snapshot(url) == store_snapshot(clean)
    with Indexer(url, embedder=counting) as ix:  # a later run is an ordinary one
        assert ix.index_paths([vault]).unchanged == NOTES and not ix.refreshing
