"""A turn that could not be saved, and a conversations file a killed writer left behind
(issue 40, M2 and M3).

M2: the answer is always given, and names only a conversation that a follow-up finds: a
daemon (the API, plain and streamed, MCP, the CLI through it) and `brainbot chat` keep an
unsaved conversation in memory and continue it; a one-shot `brainbot ask` names none for
an unsaved first turn; conversations that cannot even be read start a new one, saying
why. The media are simulated without root: a folder in place of the conversations file,
a file that is not a database, a store whose append fails (and a read-only bind mount
where this host allows one).

M3: a writer killed inside its commit leaves a hot journal; every reader (`conversations`,
`show`, `ask --follow-up`, the daemon's follow-ups) rolls it back instead of reporting a
permissions problem that does not exist.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from conftest import REPO, index_copy
from conversation_kit import FOLLOW, STARTER, ask, offline
from reliability_kit import one_line_error, run_cli
from test_serve import Daemon
from test_serve_stream import Events

from brainbot.ask import conversation as convo
from brainbot.ask.conversation import Thread, Unsaved
from brainbot.errors import StoreError
from brainbot.store.conversations import Conversations
from brainbot.store.sqlite.conversations import sidecar_path
from brainbot.store.target import open_conversations


@pytest.fixture
def db(examples_db, tmp_path) -> Path:
    return index_copy(examples_db, tmp_path / "idx")


@pytest.fixture
def offline_env(monkeypatch):
    import os

    for name in [n for n in os.environ if n.startswith("ANTHROPIC_")]:
        monkeypatch.delenv(name)  # extractive answers, in this process


def folder_in_place(db: Path) -> Path:
    """A folder where the conversations file goes: neither read nor written."""
    sidecar_path(db).unlink(missing_ok=True)
    sidecar_path(db).mkdir()
    return sidecar_path(db)


# -- the ask layer, in process -----------------------------------------------------------
def test_a_process_that_lives_on_keeps_an_unsaved_conversation(examples_db, searcher, tmp_path,
                                                                offline_env):
    x = tmp_path / "x.db"
    folder_in_place(x)
    kept = Unsaved("until this server stops")
    kw = dict(db=examples_db, searcher=searcher)
    first = Thread.open(x, kept=kept).ask(STARTER, **kw)
    assert first.conversation and first.turn is None
    assert "this turn was not saved" in first.conversation_note
    assert "is a folder" in first.conversation_note
    assert "kept in memory until this server stops" in first.conversation_note
    follow = Thread.open(x, first.conversation, kept=kept)
    assert [t.question for t in follow.turns] == [STARTER]
    answer = follow.ask(FOLLOW, **kw)
    assert "3 months" in answer.answer and answer.conversation == first.conversation
    assert Thread.open(x, follow_up=True, kept=kept).id == first.conversation
    assert [t.n for t in kept.turns(first.conversation)] == [1, 2]
    # without the memory, the id is nowhere: a new conversation, and no id handed out
    alone = Thread.open(x, first.conversation)
    assert alone.id != first.conversation and not alone.turns and "is a folder" in alone.unread
    answer = alone.ask(FOLLOW, **kw)
    assert answer.conversation is None and answer.turn is None
    assert answer.conversation_note.startswith("the conversations could not be read, so "
                                               "this answer starts a new conversation: ")
    assert "this turn was not saved either; there is no conversation to follow up" in \
        answer.conversation_note
    assert "3 months" not in answer.answer


def test_a_one_shot_ask_names_only_a_conversation_a_follow_up_finds(examples_db, searcher,
                                                                    tmp_path, monkeypatch,
                                                                    offline_env):
    x = tmp_path / "x.db"
    kw = dict(db=examples_db, searcher=searcher)
    saved = Thread.open(x).ask(STARTER, **kw)
    assert saved.turn == 1 and saved.conversation_note is None

    def refuse(self, cid, turn):
        raise StoreError(f"{self.target} is read-only (simulated)")

    monkeypatch.setattr(Conversations, "append", refuse)
    follow = Thread.open(x, saved.conversation).ask(FOLLOW, **kw)
    assert follow.conversation == saved.conversation and follow.turn is None
    assert follow.conversation_note == (f"this turn was not saved: {x} is read-only "
                                        "(simulated); a follow-up continues from its saved turns")
    fresh = Thread.open(x).ask(STARTER, **kw)
    assert fresh.conversation is None and fresh.turn is None
    assert fresh.conversation_note.endswith("; there is no conversation to follow up")
    # with a memory, the unsaved turn goes on there; once saving works again the turns go
    # to both, and the memory (which holds the unsaved one too) is what a follow-up reads
    kept = Unsaved("until this chat ends")
    Thread.open(x, saved.conversation, kept=kept).ask(FOLLOW, **kw)
    monkeypatch.undo()
    again = Thread.open(x, saved.conversation, kept=kept).ask("and the eggs?", **kw)
    assert again.turn == 2 and again.conversation_note is None
    assert [t.question for t in kept.turns(saved.conversation)] == [STARTER, FOLLOW,
                                                                    "and the eggs?"]
    assert [t.question for t in open_conversations(x).turns(saved.conversation)] == [
        STARTER, "and the eggs?"]


def test_the_memory_is_bounded(monkeypatch):
    from brainbot.store.conversations import Turn

    monkeypatch.setattr(convo, "KEPT_CONVERSATIONS", 3)
    monkeypatch.setattr(convo, "KEPT_TURNS", 4)
    kept = Unsaved("until this server stops")
    for i in range(6):
        assert kept.add("long", [], Turn(f"q{i}", "a", "answer", "extractive")) == i + 1
    assert [t.question for t in kept.turns("long")] == ["q2", "q3", "q4", "q5"]
    for cid in ("b", "c", "d"):
        kept.add(cid, [], Turn("q", "a", "answer", "extractive"))
    assert "long" not in kept and all(c in kept for c in "bcd")
    assert kept.latest()[1] == "d"


# -- the CLI -----------------------------------------------------------------------------
def test_cli_ask_always_answers_and_hands_out_no_id_it_cannot_continue(db):
    cid = ask(db, STARTER)["conversation"]
    folder_in_place(db)
    fresh = ask(db, STARTER)
    assert fresh["citations"] and fresh["conversation"] is None
    assert "is a folder" in fresh["conversation_note"]
    for how in (("--follow-up",), ("--conversation", cid)):
        answer = ask(db, *how, FOLLOW)
        assert answer["conversation"] is None and answer["turn"] is None
        assert answer["conversation_note"].startswith("the conversations could not be read")
    text = run_cli("ask", "--follow-up", FOLLOW, "--db", db, env=offline())
    assert text.returncode == 0 and "[1]" in text.stdout
    assert "could not be read" in text.stderr and len(text.stderr.splitlines()) == 1
    sidecar_path(db).rmdir()
    sidecar_path(db).write_text("garbage\n")  # a damaged file: the same, and its own words
    answer = ask(db, "--follow-up", FOLLOW)
    assert "is not a conversations file or is damaged" in answer["conversation_note"]
    assert "brainbot index" not in answer["conversation_note"]


def test_chat_keeps_an_unsaved_conversation_until_it_ends(db):
    folder_in_place(db)
    r = subprocess.run([sys.executable, "-m", "brainbot", "chat", "--db", str(db)],
                       input=f"{STARTER}\n{FOLLOW}\n", cwd=REPO, env=offline(),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    answers = r.stdout.split("\n> ")
    assert "kept in memory until this chat ends" in answers[1]
    assert "3 months" in answers[2]  # "it" is still the tare


def test_chat_says_at_once_when_the_conversations_cannot_be_read(db):
    cid = ask(db, STARTER)["conversation"]
    sidecar_path(db).write_text("garbage\n")
    r = subprocess.run([sys.executable, "-m", "brainbot", "chat", "--db", str(db),
                        "--conversation", cid], input="/quit\n", cwd=REPO, env=offline(),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "note: the conversations could not be read, so this is a new conversation" in \
        r.stdout


# -- the daemon: the API (plain and streamed), MCP, the CLI through it -------------------
def mcp_ask(port: int, arguments: dict) -> dict:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def main():
        async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as streams:
            async with ClientSession(streams[0], streams[1]) as s:
                await s.initialize()
                got = await s.call_tool("ask", arguments)
                assert not got.is_error, got.content[0].text
                return got.structured_content

    return anyio.run(main)


def test_a_daemon_continues_what_it_could_not_save(db):
    folder_in_place(db)
    d = Daemon(db)
    try:
        status, first = d.json("POST", "/api/ask", {"question": STARTER})
        assert status == 200 and first["turn"] is None, first
        cid = first["conversation"]
        assert cid and "kept in memory until this server stops" in first["conversation_note"]
        status, plain = d.json("POST", "/api/ask", {"question": FOLLOW, "conversation": cid})
        assert status == 200 and plain["conversation"] == cid and "3 months" in plain["answer"]
        streamed = Events(d, {"question": "and the eggs, how long do they marinate?",
                              "conversation": cid}).rest()  # what the page sends
        name, answer = streamed[-1]
        assert name == "answer" and answer["conversation"] == cid, streamed
        assert any("12 hours" in c["cited_text"] for c in answer["citations"])
        tool = mcp_ask(d.port, {"question": "what about the chashu?", "conversation": cid})
        assert tool["conversation"] == cid and "not saved" in tool["conversation_note"]
        status, latest = d.json("POST", "/api/ask", {"question": FOLLOW, "follow_up": True})
        assert status == 200 and latest["conversation"] == cid
        r = run_cli("ask", "--follow-up", FOLLOW, "--db", db, "--json", env=offline())
        assert r.returncode == 0 and json.loads(r.stdout)["conversation"] == cid, r.stderr
        r = run_cli("ask", "--conversation", "", FOLLOW, "--db", db, env=offline())
        assert r.returncode == 2 and "not an empty one" in one_line_error(r)
    finally:
        assert d.stop() in (0, -15)
    assert sidecar_path(db).is_dir() and not any(sidecar_path(db).iterdir())


# -- a hot journal (M3) ------------------------------------------------------------------
# A writer of the conversations file killed inside its commit: with a one-page cache, the
# transaction's pages spill to the file before COMMIT, so the journal is hot when it dies.
HOT = r'''
import os, sys
import sqlean
db = sqlean.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA cache_size = 1")
db.execute("BEGIN IMMEDIATE")
for i in range(300):
    db.execute("INSERT INTO conversations(id, started, updated) VALUES (?, 'x', 'x')",
               (f"junk{i:04d}" + "y" * 200,))
os._exit(9)
'''


def leave_hot_journal(db: Path) -> None:
    import sqlean

    path = sidecar_path(db)
    subprocess.run([sys.executable, "-c", HOT, str(path)], check=False, timeout=120)
    journal = Path(str(path) + "-journal")
    assert journal.exists() and journal.stat().st_size > 0
    ro = sqlean.connect(f"file:{path}?mode=ro", uri=True)
    try:  # the reproduction holds: a read-only reader cannot read past it
        with pytest.raises(sqlean.OperationalError, match="readonly"):
            ro.execute("SELECT count(*) FROM conversations").fetchone()
    finally:
        ro.close()


def test_a_hot_journal_is_rolled_back_by_the_next_reader(db):
    cid = ask(db, STARTER)["conversation"]
    leave_hot_journal(db)
    listed = run_cli("conversations", "--db", db, "--json")
    assert listed.returncode == 0, listed.stderr
    assert [c["id"] for c in json.loads(listed.stdout)] == [cid]  # the junk rolled back
    assert not Path(str(sidecar_path(db)) + "-journal").exists()
    leave_hot_journal(db)
    shown = run_cli("conversations", "show", cid, "--db", db)
    assert shown.returncode == 0 and STARTER in shown.stdout, shown.stderr
    leave_hot_journal(db)
    follow = ask(db, "--follow-up", FOLLOW)
    assert follow["conversation"] == cid and follow["turn"] == 2 and "3 months" in follow["answer"]


def test_a_daemon_s_follow_ups_survive_a_hot_journal(db):
    d = Daemon(db)
    try:
        status, first = d.json("POST", "/api/ask", {"question": STARTER})
        assert status == 200 and first["turn"] == 1
        leave_hot_journal(db)
        status, follow = d.json("POST", "/api/ask", {"question": FOLLOW,
                                                     "conversation": first["conversation"]})
        assert status == 200 and follow["turn"] == 2 and "3 months" in follow["answer"], follow
        leave_hot_journal(db)
        status, info = d.json("GET", "/api/status")
        assert status == 200 and info["conversations"] == 1
    finally:
        assert d.stop() in (0, -15)


def test_a_hot_journal_on_a_read_only_medium_is_said_as_such(db, tmp_path):
    from test_storage_faults import mounted

    ask(db, STARTER)
    leave_hot_journal(db)
    with mounted("--bind", str(db.parent), target=tmp_path / "ro") as mnt:
        r = subprocess.run(["mount", "-o", "remount,ro,bind", str(mnt)], capture_output=True)
        if r.returncode != 0:
            pytest.skip("cannot remount read-only here")
        line = one_line_error(run_cli("conversations", "--db", mnt / db.name))
        assert "holds a save that was interrupted" in line and "read-only" in line
        answer = ask(mnt / db.name, "--follow-up", FOLLOW)  # answered all the same
        assert "could not be read" in answer["conversation_note"]
