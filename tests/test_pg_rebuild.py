"""A Postgres `--rebuild` is atomic (issue 40): the new index is written into a schema of
its own and swapped in by one transaction (store/pg/rebuild.py).

Killed with SIGKILL at exact code points of the real CLI (in its lexical phase, inside the
swap's transaction, just after its commit), the index's schema holds the old index, whole,
or the new one with every note written; the next `brainbot index` finishes either and
drops the schema a killed rebuild left. Readers answer from the old index until the swap,
and never fail during it. The conversations' tables and the grants of the old tables
survive, an empty rebuild is refused as on SQLite, and only a schema marked as a brainbot
rebuild is ever dropped.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading

import pytest
from conftest import EXAMPLES, REPO
from pg_kit import PG_HARNESS, store_snapshot
from reliability_kit import cli_env, one_line_error, run_cli
from wait_kit import still_running, wait_until

from brainbot.index.copying import copy_index
from brainbot.index.indexer import Indexer
from brainbot.search.searcher import Searcher
from brainbot.store.pg.rebuild import MARK, rebuild_schema
from brainbot.store.target import open_conversations, open_store

pytestmark = pytest.mark.postgres
LAB_NOTES = 8
KITES = ("# Kites\n\nA delta kite flies in light wind; a box kite needs a steady breeze.\n\n"
         "## Lines\n\nBraided dyneema line stretches less than nylon and cuts the hands.\n")

# pg_kit's harness, with two more kill points: "swap" inside the swap's transaction once
# every table is moved (before its commit), "swapped" just after its commit.
HARNESS = PG_HARNESS.replace("from brainbot.cli import main", r'''
from brainbot.store.pg import rebuild as pg_rebuild
seen.update(swap=0, swapped=0)
move_in, swap = pg_rebuild.PgRebuild._move_in, pg_rebuild.PgRebuild.swap
def _move_in(self, conn, wait):
    move_in(self, conn, wait)
    tick("swap")
def _swap(self, conn, target):
    swap(self, conn, target)
    tick("swapped")
pg_rebuild.PgRebuild._move_in, pg_rebuild.PgRebuild.swap = _move_in, _swap

from brainbot.cli import main''')


class Lab:
    """A vault of sample notes; an index of it in SQLite, to seed each trial's database
    with the old index; then a note more, and a clean Postgres index of the new vault."""

    def __init__(self, work, server) -> None:
        self.work, self.server = work, server
        self.harness = work / "pg_rebuild_harness.py"
        self.harness.write_text(HARNESS, encoding="utf-8")
        self.vault = work / "vault"
        for p in sorted(EXAMPLES.rglob("*.md"))[:LAB_NOTES]:
            dst = self.vault / p.relative_to(EXAMPLES)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, dst)
        self.old = work / "old.db"
        with Indexer(self.old) as ix:  # the CLI's default precision, as the runs below
            ix.index_paths([self.vault])
        (self.vault / "kites.md").write_text(KITES, encoding="utf-8")
        clean = server.fresh_database("bb_rebuild_clean")
        self.complete(clean)
        self.new_snapshot = store_snapshot(clean)

    def trial(self, name: str) -> str:
        url = self.server.fresh_database(name)
        copy_index(self.old, url)
        return url

    def index(self, url: str, *extra: str, **hooks: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, str(self.harness), "index", str(self.vault),
                                 "--db", url, *extra], cwd=REPO, env=cli_env(**hooks),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def complete(self, url: str, *extra: str) -> str:
        proc = self.index(url, *extra)
        out, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err
        return out


@pytest.fixture(scope="module")
def lab(tmp_path_factory, pg_server) -> Lab:
    return Lab(tmp_path_factory.mktemp("pgrebuild"), pg_server)


def schemas(url: str) -> set[str]:
    import psycopg

    with psycopg.connect(url) as conn:
        return {r[0] for r in conn.execute("SELECT nspname FROM pg_namespace")}


def save_a_turn(url: str) -> str:
    from brainbot.store.conversations import Turn, new_id

    cid = new_id()
    open_conversations(url).append(cid, Turn(question="how long does the tare keep?",
                                             answer="three months", outcome="answered",
                                             mode="extractive"))
    return cid


KILLS = [("insert:3", "old"), ("commit:2", "old"), ("swap:1", "old"), ("swapped:1", "new")]


@pytest.mark.slow
@pytest.mark.parametrize("kill_at,left", KILLS, ids=[k for k, _ in KILLS])
def test_a_killed_rebuild_leaves_the_old_index_or_the_new_one(lab, kill_at, left):
    url = lab.trial("bb_rebuild_kill_" + kill_at.replace(":", "_"))
    cid = save_a_turn(url)
    old = store_snapshot(url)
    proc = lab.index(url, "--rebuild", BB_TEST_KILL_AT=kill_at, BB_TEST_BATCH="8")
    _, err = proc.communicate(timeout=900)
    assert proc.returncode == -signal.SIGKILL, f"{kill_at} was never reached: {err}"
    with open_store(url) as store:
        assert store.integrity() == "ok"
    if left == "old":
        assert store_snapshot(url) == old
    else:
        got = store_snapshot(url)
        assert got["documents"] == lab.new_snapshot["documents"]  # every note written
        assert [c[:6] for c in got["chunks"]] == [c[:6] for c in lab.new_snapshot["chunks"]]
    assert [t.question for t in open_conversations(url).turns(cid)] == [
        "how long does the tare keep?"]
    # the next run finishes either, and drops the schema the killed one left
    lab.complete(url)
    assert store_snapshot(url) == lab.new_snapshot
    assert rebuild_schema("public") not in schemas(url)
    assert len(open_conversations(url).turns(cid)) == 1


@pytest.mark.slow
def test_readers_answer_from_the_old_index_until_the_swap(lab, shared_embedder):
    """A rebuild slowed down after each commit: a Searcher opened before it and
    `brainbot status` see the old index while the new one is written beside it, two
    reader threads query all along without an error, and the new index answers after."""
    url = lab.trial("bb_rebuild_readers")
    old_documents = len(store_snapshot(url)["documents"])
    stop, errors, answered = threading.Event(), [], [0, 0]

    def read(slot: int) -> None:
        with Searcher(url, embedder=shared_embedder) as searcher:
            while not stop.is_set():
                mode = ("bm25", "hybrid")[answered[slot] % 2]
                try:
                    assert searcher.search("sourdough starter", 5, mode=mode)
                except Exception as exc:  # noqa: BLE001 - any error is the failure
                    errors.append(f"{mode}: {exc!r}")
                answered[slot] += 1

    readers = [threading.Thread(target=read, args=(i,), daemon=True) for i in range(2)]
    with Searcher(url, embedder=shared_embedder) as searcher:
        assert searcher.search("dyneema", 3, mode="bm25") == []
        for t in readers:
            t.start()
        proc = lab.index(url, "--rebuild", BB_TEST_BATCH="8", BB_TEST_PAUSE="0.5")
        try:
            wait_until(lambda: rebuild_schema("public") in schemas(url), "the rebuild writes",
                       alive=still_running(proc))
            status = run_cli("status", "--db", url, "--json")
            assert json.loads(status.stdout)["documents"] == old_documents, status.stderr
            if still_running(proc)():  # else it ended meanwhile: nothing to see mid-way
                assert searcher.search("dyneema", 3, mode="bm25") == []
        finally:
            _, err = proc.communicate(timeout=900)
            stop.set()
            for t in readers:
                t.join(timeout=120)
        assert proc.returncode == 0, err
        assert errors == [] and all(answered)
        hits = searcher.search("dyneema", 3, mode="bm25")
        assert [h.path for h in hits][:1] == ["kites.md"]
    assert rebuild_schema("public") not in schemas(url)


def test_a_long_reader_delays_the_swap_without_stalling_other_readers(lab, shared_embedder,
                                                                     monkeypatch):
    """A reader inside a long transaction holds the old tables: the swap lets go of its
    locks and tries again (NOWAIT) until that reader is done, so the readers that come
    meanwhile are answered, not queued behind a waiting ACCESS EXCLUSIVE request."""
    import psycopg

    from brainbot.store.pg import rebuild as pg_rebuild

    url = lab.trial("bb_rebuild_long_reader")
    tries, move_in = [], pg_rebuild.PgRebuild._move_in

    def counted(self, conn, wait):
        tries.append(wait)
        move_in(self, conn, wait)

    monkeypatch.setattr(pg_rebuild.PgRebuild, "_move_in", counted)
    holder = psycopg.connect(url)  # a transaction open until rollback()
    holder.execute("SELECT count(*) FROM chunks").fetchone()
    done: list = []

    def rebuild() -> None:
        try:
            with Indexer(url, embedder=shared_embedder, rebuild=True) as ix:
                done.append(ix.index_paths([lab.vault]))
        except Exception as exc:  # noqa: BLE001 - reported below
            done.append(exc)

    worker = threading.Thread(target=rebuild)
    worker.start()
    try:
        wait_until(lambda: len(tries) >= 3 or done, "the swap tries again", timeout=300)
        assert not done and True not in tries  # still trying, never waiting in the queue
        with psycopg.connect(url, autocommit=True) as reader:
            reader.execute("SET lock_timeout = '20s'")  # queued behind the swap: an error
            assert reader.execute("SELECT count(*) FROM documents").fetchone()[0] == LAB_NOTES
    finally:
        holder.rollback()
        holder.close()
        worker.join(timeout=600)
    assert len(done) == 1 and not isinstance(done[0], Exception), done
    with open_store(url) as store:
        assert store.counts()["documents"] == LAB_NOTES + 1


def test_a_transaction_left_open_ends_the_rebuild_unpublished(lab, shared_embedder,
                                                              monkeypatch):
    """Past its patience the swap waits in the lock queue, briefly, try after try; a
    reader that never lets go ends the rebuild with one line, the old index whole."""
    import psycopg

    from brainbot.errors import StoreBusyError
    from brainbot.store.pg import rebuild as pg_rebuild

    url = lab.trial("bb_rebuild_left_open")
    old = store_snapshot(url)
    tries, move_in = [], pg_rebuild.PgRebuild._move_in

    def counted(self, conn, wait):
        tries.append(wait)
        move_in(self, conn, wait)

    monkeypatch.setattr(pg_rebuild.PgRebuild, "_move_in", counted)
    monkeypatch.setattr(pg_rebuild, "SWAP_PATIENCE_S", 0.5)
    monkeypatch.setattr(pg_rebuild, "SWAP_GIVE_UP_S", 3.0)
    with psycopg.connect(url) as holder:  # a transaction open until the block ends
        holder.execute("SELECT count(*) FROM meta").fetchone()
        with pytest.raises(StoreBusyError, match="held the index's tables"):
            with Indexer(url, embedder=shared_embedder, rebuild=True) as ix:
                ix.index_paths([lab.vault])
        holder.rollback()
    assert False in tries and True in tries  # NOWAIT first, then waits in the queue
    assert store_snapshot(url) == old and rebuild_schema("public") not in schemas(url)


def test_a_rebuild_keeps_the_old_tables_grants_and_the_conversations(lab, pg_server):
    url = lab.trial("bb_rebuild_grants")
    cid = save_a_turn(url)
    dbname = url.split("/")[3].split("?")[0]
    with pg_server.admin() as conn:
        conn.execute("DROP ROLE IF EXISTS bb_rebuild_reader")
        conn.execute("CREATE ROLE bb_rebuild_reader LOGIN")
    with open_store(url, write=True) as store:
        store.conn.execute(f"GRANT CONNECT ON DATABASE {dbname} TO bb_rebuild_reader")
        store.conn.execute("GRANT USAGE ON SCHEMA public TO bb_rebuild_reader")
        store.conn.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO bb_rebuild_reader")
    reader = url.replace("postgres:@", "bb_rebuild_reader@", 1)
    assert run_cli("query", "bread", "--db", reader, "--mode", "bm25").returncode == 0
    out = lab.complete(url, "--rebuild")
    assert out.startswith("9 new, 0 updated, 0 unchanged, 0 removed"), out
    r = run_cli("query", "dyneema", "--db", reader, "--mode", "bm25", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)[0]["path"] == "kites.md", r.stderr
    assert [t.answer for t in open_conversations(url).turns(cid)] == ["three months"]
    assert store_snapshot(url) == lab.new_snapshot


def test_an_empty_rebuild_is_refused_and_the_index_kept(lab, tmp_path):
    url = lab.trial("bb_rebuild_empty")
    old = store_snapshot(url)
    empty = tmp_path / "empty"
    empty.mkdir()
    line = one_line_error(run_cli("index", empty, "--db", url, "--rebuild"))
    assert f"would replace the {LAB_NOTES} notes of" in line and "--allow-empty" in line
    assert one_line_error(run_cli("index", "--prune", "--rebuild", "--db", url)).endswith(
        "--rebuild starts the index over: give the folders to index")
    assert store_snapshot(url) == old and rebuild_schema("public") not in schemas(url)
    r = run_cli("index", empty, "--db", url, "--rebuild", "--allow-empty", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["removed"] == LAB_NOTES, r.stderr
    with open_store(url) as store:
        assert store.counts()["documents"] == 0 and store.integrity() == "ok"


def test_a_role_that_may_not_create_a_schema_is_told_what_to_grant(lab, pg_server):
    """The rebuild needs CREATE on the database (its schema): a role that owns the index
    but lacks it is refused with the grant to make, before anything is written."""
    url = pg_server.fresh_database("bb_rebuild_no_create")
    dbname = url.split("/")[3].split("?")[0]
    with pg_server.admin() as conn:
        conn.execute("DROP ROLE IF EXISTS bb_rebuild_owner")
        conn.execute("CREATE ROLE bb_rebuild_owner LOGIN")
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"GRANT CONNECT, CREATE ON DATABASE {dbname} TO bb_rebuild_owner")
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")  # a superuser's, once
        conn.execute("GRANT CREATE ON SCHEMA public TO bb_rebuild_owner")
    owner = url.replace("postgres:@", "bb_rebuild_owner@", 1)
    copy_index(lab.old, owner)  # its tables are the role's own
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"REVOKE CREATE ON DATABASE {dbname} FROM bb_rebuild_owner")
    old = store_snapshot(url)
    line = one_line_error(run_cli("index", lab.vault, "--db", owner, "--rebuild"))
    assert "may not create one" in line and "grant it CREATE on the database" in line
    assert store_snapshot(url) == old and rebuild_schema("public") not in schemas(url)


def test_only_a_schema_marked_as_a_rebuild_is_dropped(lab):
    import psycopg

    url = lab.trial("bb_rebuild_squatter")
    name = rebuild_schema("public")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
        conn.execute(f"CREATE TABLE {name}.customers (id int PRIMARY KEY, name text)")
        conn.execute(f"INSERT INTO {name}.customers VALUES (1, 'Ada')")
    lab.complete(url)  # a plain writer leaves it be
    line = one_line_error(run_cli("index", lab.vault, "--db", url, "--rebuild"))
    assert f"schema {name} is in the way of the rebuild" in line
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute(f"SELECT name FROM {name}.customers").fetchall() == [("Ada",)]
        conn.execute(f"COMMENT ON SCHEMA {name} IS '{MARK}public'")  # now it is one
    lab.complete(url)
    assert name not in schemas(url)


def test_a_rebuild_of_a_long_schema_name_uses_a_hashed_one():
    long = "s" * 63
    assert rebuild_schema("notes") == "notes_brainbot_rebuild"
    name = rebuild_schema(long)
    assert name.startswith("brainbot_rebuild_") and len(name) <= 63
    assert name != rebuild_schema("s" * 62)
