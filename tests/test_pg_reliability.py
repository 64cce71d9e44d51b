"""Reliability of the Postgres store: SIGKILL mid-index resumes to a clean index, a second
writer is refused, readers never error during an index, a read-only role reads but cannot
write, a server stopped mid-query is one line through the CLI, and no password is ever
printed.

Kills drive the real CLI in subprocesses through tests/pg_kit.py's harness, as
test_crash.py does for SQLite; a resumed index must equal a clean one (pg_kit's
store-level snapshot: documents, chunk records, vector bytes, terms, df, meta).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import EXAMPLES, REPO
from pg_kit import store_snapshot, write_pg_harness
from pg_server import start_server
from reliability_kit import cli_env, one_line_error, run_cli
from wait_kit import still_running, wait_until

from brainbot.errors import StoreBusyError
from brainbot.index.copying import copy_index
from brainbot.index.indexer import Indexer
from brainbot.search.searcher import Searcher
from brainbot.store.target import open_store

pytestmark = pytest.mark.postgres
LAB_NOTES = 8  # ~80 chunks: a dozen commits at 8 chunks a batch, seconds of embedding


@pytest.fixture(scope="module")
def lab(tmp_path_factory, pg_server):
    """A vault of a few sample notes, its clean index's snapshot, and the harness."""
    work = tmp_path_factory.mktemp("pglab")
    vault = work / "vault"
    for p in sorted(EXAMPLES.rglob("*.md"))[:LAB_NOTES]:
        dst = vault / p.relative_to(EXAMPLES)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(p, dst)
    clean = pg_server.fresh_database("bb_lab_clean")
    with Indexer(clean) as ix:  # the CLI's default precision (int8 since #33), as the runs below
        ix.index_paths([vault])
    return {"work": work, "vault": vault, "clean": store_snapshot(clean),
            "harness": write_pg_harness(work), "server": pg_server}


def _index(lab, url: str, **env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(lab["harness"]), "index", str(lab["vault"]),
                             "--db", url], cwd=REPO, env=cli_env(**env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("kill_at", ["insert:5", "commit:3", "outside"])
def test_sigkill_mid_index_resumes_to_a_clean_index(lab, kill_at):
    url = lab["server"].fresh_database("bb_kill_" + kill_at.replace(":", "_"))
    env = {"BB_TEST_BATCH": "8"}
    if kill_at == "outside":
        proc = _index(lab, url, BB_TEST_PAUSE="0.3", **env)
        def committed() -> bool:  # kill once some batches are committed
            with open_store(url) as store:  # no index yet: StoreError, not yet
                return store.generation() >= 2

        wait_until(committed, "two batches committed", timeout=120,
                   alive=still_running(proc))
        proc.send_signal(signal.SIGKILL)
    else:
        proc = _index(lab, url, BB_TEST_KILL_AT=kill_at, **env)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL, err
    with open_store(url) as store:  # what the killed run committed is consistent
        assert store.integrity() == "ok"
        partial = store.counts()["documents"]
    assert 0 < partial < LAB_NOTES
    done = _index(lab, url)
    _, err = done.communicate(timeout=300)
    assert done.returncode == 0, err
    assert store_snapshot(url) == lab["clean"]
    with open_store(url) as store:
        assert store.integrity() == "ok"


def test_second_writer_is_refused(lab, monkeypatch):
    url = lab["server"].fresh_database("bb_two_writers")
    with open_store(url, write=True) as first:
        with pytest.raises(StoreBusyError, match="another brainbot writer"):
            open_store(url, write=True)
        r = run_cli("index", lab["vault"], "--db", url)
        assert "another brainbot writer" in one_line_error(r)
        del first
    with open_store(url, write=True):  # released by close()
        pass


def test_readers_never_error_during_an_index(lab, shared_embedder):
    url = lab["server"].fresh_database("bb_readers")
    with Indexer(url, embedder=shared_embedder) as ix:  # a first note, so readers can open
        ix.index_paths([next(lab["vault"].rglob("*.md"))])
    proc = _index(lab, url, BB_TEST_BATCH="8", BB_TEST_PAUSE="0.2")
    errors, counts = [], []
    searcher = Searcher(url, embedder=shared_embedder)
    while proc.poll() is None:
        for mode in ("bm25", "vector", "hybrid"):
            try:
                counts.append(len(searcher.search("bread dough garden", 5, mode=mode)))
            except Exception as exc:  # noqa: BLE001 - any error is the failure
                errors.append(repr(exc))
    _, err = proc.communicate()
    searcher.close()
    assert proc.returncode == 0, err
    assert errors == [] and len(counts) > 10 and counts[-1] == 5
    got = {c[1] for c in store_snapshot(url)["chunks"]}
    assert {c[1] for c in lab["clean"]["chunks"]} <= got


def test_read_only_role_queries_but_cannot_index(lab):
    url = lab["server"].fresh_database("bb_read_only")
    copy_index(_sqlite_of(lab), url)
    dbname = url.split("/")[3].split("?")[0]
    with lab["server"].admin() as conn:
        conn.execute("DROP ROLE IF EXISTS bb_reader")
        conn.execute("CREATE ROLE bb_reader LOGIN")
    with open_store(url, write=True) as store:  # grants inside the index's database
        store.conn.execute(f"GRANT CONNECT ON DATABASE {dbname} TO bb_reader")
        store.conn.execute("GRANT USAGE ON SCHEMA public TO bb_reader")
        store.conn.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO bb_reader")
    reader = url.replace("postgres:@", "bb_reader@", 1)
    r = run_cli("query", "bread", "--db", reader, "--mode", "bm25", "--json")
    assert r.returncode == 0 and r.stdout.startswith("["), r.stderr
    assert run_cli("status", "--db", reader).returncode == 0
    line = one_line_error(run_cli("index", lab["vault"], "--db", reader))
    assert "permission denied" in line and "may only read" in line


def _sqlite_of(lab) -> Path:
    db = lab["work"] / "lab.db"
    if not db.exists():
        with Indexer(db) as ix:
            ix.index_paths([lab["vault"]])
    return db


def test_passwords_are_never_printed(lab):
    server = lab["server"]
    url = server.fresh_database("bb_secret")
    copy_index(_sqlite_of(lab), url)
    with server.admin() as conn:
        conn.execute("DROP ROLE IF EXISTS bb_owner")
        conn.execute("CREATE ROLE bb_owner LOGIN SUPERUSER PASSWORD 'Right-horse-42'")
        hba = Path(conn.execute("SHOW hba_file").fetchone()[0])
        text = hba.read_text()
        if "bb_owner" not in text:  # only this role must give a password
            hba.write_text("local all bb_owner scram-sha-256\n" + text)
        conn.execute("SELECT pg_reload_conf()")
    good = url.replace("postgres:@", "bb_owner:Right-horse-42@", 1)
    bad = url.replace("postgres:@", "bb_owner:Wrong-battery-17@", 1)
    nowhere = "postgresql://bb_owner:Staple-secret-9@/x?host=/nonexistent-socket-dir"
    for target in (bad, nowhere):
        for argv in (["query", "bread"], ["status"], ["doctor"], ["index", lab["vault"]]):
            r = run_cli(*argv, "--db", target)
            assert "Wrong-battery-17" not in r.stdout + r.stderr
            assert "Staple-secret-9" not in r.stdout + r.stderr
            if argv[0] != "doctor":
                one_line_error(r)
    r = run_cli("status", "--db", good, "--json")
    assert r.returncode == 0 and "Right-horse-42" not in r.stdout + r.stderr, r.stderr
    bare = url.replace("postgres:@", "bb_owner@", 1)  # the password from elsewhere:
    assert run_cli("query", "bread", "--db", bare,
                   env=cli_env(PGPASSWORD="Right-horse-42")).returncode == 0
    pgpass = lab["work"] / "pgpass"  # libpq ignores a pgpass readable by others
    pgpass.write_text("*:*:*:bb_owner:Right-horse-42\n")
    pgpass.chmod(0o600)
    assert run_cli("query", "bread", "--db", bare,
                   env=cli_env(PGPASSFILE=str(pgpass))).returncode == 0
    assert "no password" in one_line_error(run_cli("query", "bread", "--db", bare))


STOP_WORKER = r'''
import os, sys, time
from brainbot.store.pg.store import PostgresStore
ready, go = sys.argv[1], sys.argv[2]
leg = PostgresStore.bm25_topk
def waiting(self, *a, **k):  # connected and about to query: let the test stop the server
    open(ready, "w").close()
    while not os.path.exists(go):
        time.sleep(0.05)
    return leg(self, *a, **k)
PostgresStore.bm25_topk = waiting
from brainbot.cli import main
sys.exit(main(sys.argv[3:]))
'''


def test_server_stopped_mid_query_is_one_line(tmp_path, vault, shared_embedder):
    db = tmp_path / "v.db"
    with Indexer(db, embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    server = start_server("brainbot-pg-stop-")
    try:
        url = server.url()
        copy_index(db, url)
        ready, go = tmp_path / "ready", tmp_path / "go"
        proc = subprocess.Popen(
            [sys.executable, "-c", STOP_WORKER, str(ready), str(go), "query", "tomatoes",
             "--db", url, "--mode", "bm25"], cwd=REPO, env=cli_env(),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_until(ready.exists, "the query connected", alive=still_running(proc))
        server.stop_immediately()
        go.touch()
        out, err = proc.communicate(timeout=60)
        result = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        assert "lost the database server" in one_line_error(result)
        assert "lost the database server" in one_line_error(run_cli("query", "x", "--db", url))
    finally:
        server.cleanup()


def test_concurrent_threads_share_nothing(lab):
    """Two reader stores in two threads: connections are per store."""
    url = lab["server"].fresh_database("bb_threads")
    copy_index(_sqlite_of(lab), url)
    errors = []

    def loop():
        try:
            with open_store(url) as store:
                from brainbot.text import lexical

                for _ in range(20):
                    store.bm25_topk(lexical.query_terms("bread"), 5)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=loop) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


os.environ.setdefault("NO_COLOR", "1")


def test_the_probe_names_a_backend_killed_by_an_illegal_instruction(monkeypatch):
    """What a pgvector built for a newer CPU does on an older one (SIGILL in the backend),
    done here by signalling the probe's own backend: the session would end with this one
    line instead of forty tracebacks."""
    import pg_server
    import psycopg

    server = start_server("brainbot-pg-sigill-")
    real = psycopg.connect

    def connect(url, **kwargs):
        conn = real(url, **kwargs)
        if "bb_probe" not in url:  # the admin connection that creates the database
            return conn
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        threading.Timer(0.3, os.kill, (pid, signal.SIGILL)).start()
        conn.execute("SELECT pg_sleep(5)")
        return conn

    try:
        monkeypatch.setattr(psycopg, "connect", connect)
        message = pg_server.probe(server)
        monkeypatch.undo()
        assert message == ("the bundled pgvector crashed on this CPU: "
                           "terminated by signal 4: Illegal instruction")
        server.stop_immediately()
    finally:
        server.cleanup()
