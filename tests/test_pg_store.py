"""The Postgres store against a real PostgreSQL 18 with pgvector (tests/pg_server.py):
the same results as SQLite, every command through a URL, copy both ways, schema and
identity checks, filters, generations.

examples/notes reach Postgres by `brainbot copy` from the session's SQLite index (the
embedding is paid once); the tiny vault is indexed into Postgres by the indexer itself.
Reliability (kills, concurrent writers and readers, read-only roles, a dying server,
passwords) is in test_pg_reliability.py.
"""

from __future__ import annotations

import json

import pytest
from conftest import EXAMPLES
from fake_anthropic import FakeAnthropic, cite_text, message, search_results, text
from pg_kit import same_hits, store_snapshot

from brainbot.cli import main
from brainbot.errors import (
    IdentityMismatchError,
    InputError,
    NewerSchemaError,
    NoIndexError,
    NotAnIndexError,
    OlderSchemaError,
)
from brainbot.index.copying import copy_index
from brainbot.index.indexer import Indexer
from brainbot.search.searcher import Searcher
from brainbot.store.pg import schema as pg_schema
from brainbot.store.target import open_store
from brainbot.text import lexical

pytestmark = pytest.mark.postgres

QUERIES = ["sourdough starter feeding", "how long does the dough proof", "tomatoes in the garden",
           "kubernetes deployment", "the", "ramen broth", "year goals 2024", "tax return deadline",
           "passport renewal", "sleep"]


def _url_for(pg_server, name: str) -> str:
    return pg_server.fresh_database(name)


@pytest.fixture(scope="module")
def pg_examples(pg_url, examples_db):
    """examples/notes in Postgres: the session's SQLite index, copied."""
    stats = copy_index(examples_db, pg_url)
    assert stats.documents > 20 and stats.chunks > 200
    return pg_url


def test_copied_index_equals_its_source_and_is_up_to_date(pg_examples, examples_db,
                                                          shared_embedder):
    assert store_snapshot(pg_examples) == store_snapshot(examples_db)
    with Indexer(pg_examples, embedder=shared_embedder) as ix:  # same identity: no-op
        stats = ix.index_paths([EXAMPLES])
    assert stats.new == stats.updated == stats.removed == stats.embedded == 0
    with open_store(pg_examples) as store:
        assert store.integrity() == "ok"


@pytest.mark.parametrize("mode", ["bm25", "vector", "hybrid"])
def test_both_stores_rank_alike(pg_examples, examples_db, shared_embedder, mode):
    lite = Searcher(examples_db, embedder=shared_embedder)
    pg = Searcher(pg_examples, embedder=shared_embedder)
    for q in QUERIES:
        a, b = lite.search(q, 10, mode=mode), pg.search(q, 10, mode=mode)
        # on 317 chunks HNSW with ef_search 200 is exact, so all three modes match
        same_hits(a, b, (mode, q))
    lite.close()
    pg.close()


def test_bm25_scores_match_the_reference_bit_for_bit(pg_examples, examples_db):
    with open_store(examples_db) as lite, open_store(pg_examples) as pg:
        for q in QUERIES + ["sourdough sourdough starter", "ramen tonkotsu shoyu miso"]:
            terms = lexical.query_terms(q)
            ia, sa = lite.bm25_topk(terms, 50)
            ib, sb = pg.bm25_topk(terms, 50)
            assert ia.tolist() == ib.tolist() and sa.tobytes() == sb.tobytes(), q


@pytest.mark.parametrize("mode", ["bm25", "vector", "hybrid"])
def test_filters_return_k_hits(pg_examples, examples_db, shared_embedder, mode):
    lite = Searcher(examples_db, embedder=shared_embedder)
    pg = Searcher(pg_examples, embedder=shared_embedder)
    for kwargs in ({"path_glob": "cooking/*"}, {"tags": ["baking"]},
                   {"path_glob": "*.md", "tags": ["baking"]}):
        a = lite.search("bread dough water", 5, mode=mode, **kwargs)
        b = pg.search("bread dough water", 5, mode=mode, **kwargs)
        assert [h.chunk_id for h in a] == [h.chunk_id for h in b], kwargs
        if mode != "bm25":
            assert len(b) == 5, kwargs
    assert pg.search("bread", 5, mode=mode, path_glob="nowhere/*") == []
    lite.close()
    pg.close()


def test_selective_filter_still_fills_k_through_the_index(pg_examples, shared_embedder,
                                                          monkeypatch):
    from brainbot.store.pg import legs as pg_legs

    monkeypatch.setattr(pg_legs, "EXACT_MAX", 0)  # force the HNSW path with a filter
    pg = Searcher(pg_examples, embedder=shared_embedder)
    hits = pg.search("weekly review", 5, mode="vector", path_glob="cooking/ramen.md")
    assert len(hits) == 5 and {h.path for h in hits} == {"cooking/ramen.md"}
    pg.close()


def test_commands_work_on_a_url(pg_examples, examples_db, capsys, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert main(["query", "sourdough starter", "--db", pg_examples, "--json", "-k", "3"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert len(hits) == 3 and hits[0]["path"].endswith(".md")
    assert main(["get", f"{hits[0]['path']}:1:2", "--db", pg_examples]) == 0
    shown = capsys.readouterr().out
    lines = shown.splitlines()  # two lines of the note, then its backlinks
    assert lines[0].split()[0] == "1" and lines[1].split()[0] == "2"
    assert lines[3] == "Backlinks:" and len(lines) > 4
    assert main(["get", f"{hits[0]['path']}:1:2", "--db", str(examples_db)]) == 0
    assert capsys.readouterr().out == shown
    assert main(["get", hits[0]["chunk_id"], "--db", pg_examples]) == 0
    assert capsys.readouterr().out.strip()
    assert main(["ask", "How often do I feed the sourdough starter?", "--db", pg_examples,
                 "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)  # offline: the extractive answer
    assert answer["outcome"] == "answer" and answer["mode"] == "extractive"
    assert [c for c in answer["citations"] if c["verified"] and c["stale"] is False
            and c["path"] == "cooking/sourdough.md" and "twice a day" in c["cited_text"]]
    with FakeAnthropic() as fake:  # and through the Messages API, citing a search result
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        fake.push(lambda body: message(text("Twice a day.", [cite_text(
            body, next(i for i, b in enumerate(search_results(body))
                       if b["source"].startswith("cooking/sourdough.md:")),
            "feed twice a day")])))
        assert main(["ask", "How often do I feed the sourdough starter on the counter?",
                     "--db", pg_examples, "--json"]) == 0
        monkeypatch.delenv("ANTHROPIC_API_KEY")
    answer = json.loads(capsys.readouterr().out)
    assert answer["outcome"] == "answer" and answer["mode"] == "claude" and not answer["dropped"]
    (cite,) = answer["citations"]
    assert cite["verified"] and cite["stale"] is False and cite["path"] == "cooking/sourdough.md"
    assert "feed twice a day" in cite["cited_text"].lower()
    assert main(["status", "--db", pg_examples, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["chunks"] > 200 and status["schema"] == str(pg_schema.SCHEMA_VERSION) and status["size_bytes"] > 0
    assert status["stale"] == {"changed": 0, "missing": 0, "new": 0}
    assert status["sqlite_vec"].startswith("does not apply") and "fusion only" in status["kernel"]
    # neither sqlite-vec nor the C kernel's legs serve a Postgres index: doctor passes
    # without them
    from brainbot import doctor
    from brainbot.store.sqlite import file as sqlite_file

    monkeypatch.setattr(sqlite_file, "load_extension_vec", lambda db: False)
    monkeypatch.setattr(doctor, "kernel_backend", lambda: "numpy")
    assert main(["doctor", "--db", pg_examples, "--json"]) == 0
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert checks["database integrity"]["detail"] == "ok" and checks["vectors"]["ok"]
    assert checks["sqlite-vec"]["detail"].startswith("does not apply")
    assert checks["search kernel"]["detail"].startswith("numpy active for fusion only")
    assert main(["report", "--db", pg_examples, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)


def test_vault_indexed_into_postgres_like_sqlite(pg_server, tmp_path, vault, shared_embedder):
    url = _url_for(pg_server, "vault_index")
    db = tmp_path / "v.db"
    for target in (db, url):
        with Indexer(target, embedder=shared_embedder) as ix:
            assert ix.index_paths([vault]).new == 3
    assert store_snapshot(url) == store_snapshot(db)
    (vault / "gamma.md").write_text("Changed: the results arrive on Monday.\n", encoding="utf-8")
    (vault / "alpha.md").unlink()
    for target in (db, url):
        with Indexer(target, embedder=shared_embedder) as ix:
            stats = ix.index_paths([vault])
        assert (stats.updated, stats.removed) == (1, 1)
    assert store_snapshot(url) == store_snapshot(db)
    with open_store(url) as store:
        assert store.integrity() == "ok"


def test_a_reader_sees_another_writers_commits(pg_server, tmp_path, vault, shared_embedder):
    url = _url_for(pg_server, "generations")
    with Indexer(url, embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    reader = Searcher(url, embedder=shared_embedder)
    before = reader.store.generation()
    assert not [h for h in reader.search("zeppelin hangar", 5, mode="bm25")]
    (vault / "new.md").write_text("# Zeppelin\n\nThe zeppelin hangar opens in May.\n",
                                  encoding="utf-8")
    with Indexer(url, embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    assert reader.store.generation() > before
    hits = reader.search("zeppelin hangar", 5, mode="bm25")
    assert hits and hits[0].path == "new.md"
    assert reader.store.refresh() is False  # nothing new since
    reader.close()


def test_copy_round_trips_and_refuses(pg_server, tmp_path, examples_db, capsys):
    url = _url_for(pg_server, "copy_trip")
    back = tmp_path / "back.db"
    assert main(["copy", "--from", str(examples_db), "--to", url]) == 0
    assert "copied" in capsys.readouterr().out
    assert main(["copy", "--from", url, "--to", str(back), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["chunks"] > 200
    assert store_snapshot(back) == store_snapshot(examples_db)
    # a non-empty target needs --replace, in both directions
    for src, dst in ((examples_db, url), (url, back)):
        assert main(["copy", "--from", str(src), "--to", str(dst)]) == 2
        assert "--replace" in capsys.readouterr().err
    assert main(["copy", "--from", str(examples_db), "--to", url, "--replace"]) == 0
    capsys.readouterr()
    assert store_snapshot(url) == store_snapshot(examples_db)
    with pytest.raises(InputError):
        copy_index(url, url)


def test_copy_refuses_another_chunker(pg_server, examples_db):
    url = _url_for(pg_server, "copy_chunker")
    copy_index(examples_db, url)
    with open_store(url, write=True) as store, store.batch():
        store.conn.execute("UPDATE meta SET value = 'chunker0' WHERE key = 'chunker'")
        store.conn.execute("DELETE FROM documents")
    with pytest.raises(IdentityMismatchError, match="chunker"):
        copy_index(examples_db, url)
    copy_index(examples_db, url, replace=True)  # --replace empties it first


def test_schema_versions_and_foreign_schemas(pg_server, tmp_path, vault, shared_embedder):
    url = _url_for(pg_server, "versions")
    with pytest.raises(NoIndexError):
        open_store(url)
    with Indexer(url, embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    with open_store(url, write=True) as store:
        store.conn.execute("UPDATE meta SET value = '9' WHERE key = 'schema_version'")
    with pytest.raises(NewerSchemaError):
        open_store(url)
    with pytest.raises(NewerSchemaError):
        open_store(url, write=True)
    # an index at schema 2 (before generations): readers refuse, a writer migrates
    old = _url_for(pg_server, "old_schema")
    conn = pg_schema.connect(old)
    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    for step in range(2):
        conn.execute(pg_schema.MIGRATIONS[step])
    conn.execute("INSERT INTO meta VALUES ('schema_version', '2')")
    conn.close()
    with pytest.raises(OlderSchemaError):
        open_store(old)
    with Indexer(old, embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    with open_store(old) as store:
        assert store.meta()["schema_version"] == str(pg_schema.SCHEMA_VERSION)
        assert store.integrity() == "ok"
    # another application's tables: refused, untouched
    foreign = _url_for(pg_server, "other_app")
    conn = pg_schema.connect(foreign)
    conn.execute("CREATE TABLE documents (id int, body text)")
    conn.execute("INSERT INTO documents VALUES (1, 'theirs')")
    conn.close()
    for kwargs in ({}, {"write": True}, {"write": True, "rebuild": True}):
        with pytest.raises(NotAnIndexError):
            open_store(foreign, **kwargs)
    conn = pg_schema.connect(foreign)
    assert conn.execute("SELECT body FROM documents").fetchall() == [("theirs",)]
    conn.close()


def test_an_index_in_its_own_schema(pg_server, vault, shared_embedder):
    url = _url_for(pg_server, "schemas") + "&options=-csearch_path%3Dteam_notes"
    with Indexer(url, embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    with open_store(url) as store:
        assert store.schema == "team_notes" and store.counts()["documents"] == 3
        assert store.bm25_topk(lexical.query_terms("tomatoes"), 3)[0][0] > 0
    public = url.split("&options=")[0]
    with pytest.raises(NoIndexError):  # public holds nothing
        open_store(public)


def test_rebuild_empties_the_index(pg_server, vault, shared_embedder):
    url = _url_for(pg_server, "rebuild")
    with Indexer(url, embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    with open_store(url) as store:
        fresh = store.generation()  # the commits of a first run
    (vault / "gamma.md").unlink()
    with Indexer(url, embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    with open_store(url) as store:
        before = store.generation()
    with Indexer(url, embedder=shared_embedder, rebuild=True) as ix:
        stats = ix.index_paths([vault])
    assert stats.new == 2 and stats.removed == 0
    assert stats.embedded == 0  # the old index's vectors, reused by text hash
    with open_store(url) as store:
        assert store.counts()["documents"] == 2 and store.integrity() == "ok"
        # counted from zero again: the rebuild's lexical commits (no semantic one)
        assert store.generation() < fresh < before


def test_a_nul_past_the_binary_sniff_is_indexed(pg_server, tmp_path, shared_embedder):
    """Postgres text cannot hold NUL; the note is indexed all the same (U+FFFD)."""
    root = tmp_path / "nul"
    root.mkdir()
    body = "# Long\n\n" + "Plain words fill the first block of this note. " * 200
    (root / "n.md").write_text(body + "\n\nThe vault key is \x00 under the mat.\n",
                               encoding="utf-8")
    url = _url_for(pg_server, "nul_char")
    with Indexer(url, embedder=shared_embedder) as ix:
        assert ix.index_paths([root]).new == 1
    hits = Searcher(url, embedder=shared_embedder).search("vault key mat", 1, mode="bm25")
    assert "\ufffd under the mat" in hits[0].text
