"""Conversations of a Postgres index: two tables in the index's own schema, on the suite's
real PostgreSQL. They survive `index --rebuild`, travel with `copy` either way, are counted
by `status`, and a role that may only read gets its answers with "not saved"."""

from __future__ import annotations

import json

import pytest
from conftest import EXAMPLES, index_copy
from conversation_kit import FOLLOW, STARTER, ask, offline
from reliability_kit import run_cli

from brainbot.index.copying import copy_index
from brainbot.store.target import open_conversations


@pytest.fixture(scope="module")
def clean(examples_db, tmp_path_factory):
    """The examples index without the conversations other tests' asks left beside it."""
    return index_copy(examples_db, tmp_path_factory.mktemp("clean") / "idx")


@pytest.fixture(scope="module")
def pg(pg_url, clean):
    copy_index(clean, pg_url)
    return pg_url


def tables(url: str) -> set[str]:
    import psycopg

    with psycopg.connect(url) as conn:
        return {r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema()")}


def test_a_conversation_lives_in_the_index_schema_and_survives_a_rebuild(pg, tmp_path):
    assert "conversations" not in tables(pg)  # created by the first saved turn
    assert json.loads(run_cli("status", "--db", pg, "--json").stdout)["conversations"] == 0
    first = ask(pg, STARTER)
    cid = first["conversation"]
    follow = ask(pg, "--follow-up", FOLLOW)
    assert follow["conversation"] == cid and follow["turn"] == 2 and "3 months" in follow["answer"]
    assert {"conversations", "conversation_turns"} <= tables(pg)
    assert json.loads(run_cli("status", "--db", pg, "--json").stdout)["conversations"] == 1
    listed = json.loads(run_cli("conversations", "--db", pg, "--json").stdout)
    assert [(c["id"], c["turns"]) for c in listed] == [(cid, 2)]
    r = run_cli("index", EXAMPLES, "--db", pg, "--rebuild")
    assert r.returncode == 0, r.stderr
    assert [t.question for t in open_conversations(pg).turns(cid)] == [STARTER, FOLLOW]
    assert ask(pg, "--conversation", cid, "and the eggs?")["turn"] == 3


def test_copy_carries_conversations_between_sqlite_and_postgres(pg_server, examples_db,
                                                                tmp_path):
    lite = index_copy(examples_db, tmp_path / "lite")
    cid = ask(lite, STARTER)["conversation"]
    ask(lite, "--follow-up", FOLLOW)
    url = pg_server.fresh_database("bb_conversations_copy")
    r = run_cli("copy", "--from", lite, "--to", url, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["conversations"] == 1, r.stderr
    assert [t.n for t in open_conversations(url).turns(cid)] == [1, 2]
    assert ask(url, "--conversation", cid, "and the eggs?")["turn"] == 3
    back = tmp_path / "back.db"
    assert run_cli("copy", "--from", url, "--to", back).returncode == 0
    assert [t.n for t in open_conversations(back).turns(cid)] == [1, 2, 3]


def test_a_role_that_may_only_read_answers_and_says_not_saved(pg_server, clean):
    url = pg_server.fresh_database("bb_conversations_reader")
    copy_index(clean, url)
    cid = ask(url, STARTER)["conversation"]
    dbname = url.split("/")[3].split("?")[0]
    with pg_server.admin() as conn:
        conn.execute("DROP ROLE IF EXISTS bb_talker")
        conn.execute("CREATE ROLE bb_talker LOGIN")
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"GRANT CONNECT ON DATABASE {dbname} TO bb_talker")
        conn.execute("GRANT USAGE ON SCHEMA public TO bb_talker")
        conn.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO bb_talker")
    reader = url.replace("postgres:@", "bb_talker@", 1)
    answer = ask(reader, "--conversation", cid, FOLLOW)
    assert "3 months" in answer["answer"] and answer["turn"] is None
    assert "not saved" in answer["conversation_note"]
    assert json.loads(run_cli("status", "--db", reader, "--json").stdout)["conversations"] == 1
    assert [t.n for t in open_conversations(url).turns(cid)] == [1]


def first_saves(url: str, n: int = 6) -> list[str]:
    """``n`` appends started at once on 2 conversations of ``url``: why any failed."""
    import threading

    from brainbot.errors import StoreError
    from brainbot.store.conversations import Turn

    start, failed = threading.Barrier(n), []

    def save(i: int) -> None:
        start.wait()
        try:
            open_conversations(url).append(f"conv{i % 2}",
                                           Turn(f"q{i}", "a", "answer", "extractive"))
        except StoreError as exc:
            failed.append(str(exc))

    threads = [threading.Thread(target=save, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return failed


def test_concurrent_first_saves_on_a_new_schema_lose_no_turn(pg_server):
    """Six first saves at once on a database without the tables (a daemon, agents and the
    page asking together): all six are stored, numbered without gaps (issue 40, L5:
    concurrent CREATE TABLE IF NOT EXISTS lost 2 to 5 of them)."""
    for round_ in range(4):
        url = pg_server.fresh_database(f"bb_conversations_race{round_}")
        assert first_saves(url) == [], round_
        store = open_conversations(url)
        assert [[t.n for t in store.turns(c)] for c in ("conv0", "conv1")] == [[1, 2, 3]] * 2


def test_a_role_that_may_only_read_hands_out_only_ids_it_can_continue(pg_server, clean):
    """Issue 40, M2 on Postgres: a one-shot ask's unsaved first turn names no conversation;
    MCP (a process that lives on) keeps it in memory and its follow-up continues it."""
    from test_mcp import session

    url = pg_server.fresh_database("bb_conversations_reader_m2")
    copy_index(clean, url)
    ask(url, STARTER)  # the tables exist; this role will not be able to write them
    dbname = url.split("/")[3].split("?")[0]
    with pg_server.admin() as conn:
        conn.execute("DROP ROLE IF EXISTS bb_listener")
        conn.execute("CREATE ROLE bb_listener LOGIN")
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"GRANT CONNECT ON DATABASE {dbname} TO bb_listener")
        conn.execute("GRANT USAGE ON SCHEMA public TO bb_listener")
        conn.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO bb_listener")
    reader = url.replace("postgres:@", "bb_listener@", 1)
    fresh = ask(reader, STARTER)
    assert fresh["conversation"] is None and "not saved" in fresh["conversation_note"]

    async def body(s):
        first = (await s.call_tool("ask", {"question": STARTER})).structured_content
        follow = (await s.call_tool("ask", {"question": FOLLOW,
                                            "conversation": first["conversation"]})
                  ).structured_content
        return first, follow

    first, follow = session(reader, body, env=offline())
    assert first["conversation"] and first["turn"] is None
    assert "kept in memory until this server stops" in first["conversation_note"]
    assert follow["conversation"] == first["conversation"] and "3 months" in follow["answer"]
    assert open_conversations(url).count() == 1  # only the first, saved by the owner
