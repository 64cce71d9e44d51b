"""Conversations: where they are kept (a file beside a SQLite index), what `ask --json`,
`ask --conversation`, `ask --follow-up`, `brainbot conversations` and `status` say of them,
and that they survive a rebuild, a copy, a kill mid-answer and a read-only medium."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import REPO, index_copy
from reliability_kit import cli_env, one_line_error, run_cli

from brainbot.errors import StoreError, UnknownConversationError
from brainbot.store.conversations import Conversations, Turn
from brainbot.store.sqlite.conversations import sidecar_path
from brainbot.store.target import open_conversations

STARTER = "How do I make the tare for my shoyu ramen?"
FOLLOW = "how long does it keep?"


def offline() -> dict:
    return {k: v for k, v in cli_env().items() if not k.startswith("ANTHROPIC")}


def ask(db, *args, env=None) -> dict:
    r = run_cli("ask", *args, "--db", db, "--json", env=env or offline())
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture
def db(examples_db, tmp_path) -> Path:
    """A private copy of the examples index (its conversations are this test's own)."""
    return index_copy(examples_db, tmp_path / "idx")


def turn(q: str, n: int = 0) -> Turn:
    return Turn(q, f"answer to {q}", "answer", "extractive",
                [{"n": 1, "path": "a.md", "root": "/r", "start_line": 1, "end_line": 2}])


# -- the store ---------------------------------------------------------------------------
def test_turns_are_kept_in_order_and_the_latest_conversation_is_known(tmp_path):
    store = open_conversations(tmp_path / "x.db")
    assert store.count() == 0 and store.listing() == [] and store.latest() is None
    assert not sidecar_path(tmp_path / "x.db").exists()  # reading never creates it
    assert store.append("one", turn("first")) == 1
    assert store.append("two", turn("other")) == 1
    assert store.append("one", turn("second")) == 2
    assert [t.question for t in store.turns("one")] == ["first", "second"]
    assert store.latest() == "one"  # continued last
    listed = store.listing()
    assert [(c.id, c.turns, c.first_question) for c in listed] == [
        ("one", 2, "first"), ("two", 1, "other")]
    assert store.turns("one")[0].cited_paths == [("a.md", "/r")]
    store.delete("two")
    assert store.count() == 1
    with pytest.raises(UnknownConversationError, match="brainbot conversations --db"):
        store.delete("two")
    assert store.clear() == 1 and store.count() == 0


def test_a_turn_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    store = open_conversations(tmp_path / "x.db")
    store.append("kept", turn("first"))

    def fail(self, *args):
        raise StoreError("disk I/O error (simulated, after the conversation row)")

    monkeypatch.setattr(Conversations, "_insert", fail)
    with pytest.raises(StoreError):
        store.append("new", turn("lost"))
    with pytest.raises(StoreError):
        store.append("kept", turn("lost too"))
    monkeypatch.undo()
    assert [c.id for c in store.listing()] == ["kept"]  # no empty conversation left
    assert [t.question for t in store.turns("kept")] == ["first"]


def test_a_foreign_file_of_that_name_is_never_written(tmp_path):
    import sqlean

    index = tmp_path / "x.db"
    foreign = sqlean.connect(str(sidecar_path(index)))
    foreign.execute("CREATE TABLE mine (x)")
    foreign.commit()
    foreign.close()
    before = sidecar_path(index).read_bytes()
    store = open_conversations(index)
    with pytest.raises(StoreError, match="not brainbot's conversations file"):
        store.append("one", turn("q"))
    with pytest.raises(StoreError, match="not brainbot's conversations file"):
        store.count()
    assert sidecar_path(index).read_bytes() == before


def test_updated_never_moves_backwards(tmp_path, monkeypatch):
    """A turn stamped by a clock behind the last turn's (set back, or another process's)
    keeps the conversation's order: its time is the last one's (issue 40, L8)."""
    import brainbot.store.conversations as conversations

    times = iter(f"2026-01-01T00:00:{s:02d}.000Z" for s in range(59, 0, -1))  # backwards
    monkeypatch.setattr(conversations, "now", lambda: next(times))
    store = open_conversations(tmp_path / "x.db")
    store.append("one", turn("first"))
    store.append("two", turn("other"))
    store.append("one", turn("second"))
    stamps = [t.asked_at for t in store.turns("one")]
    assert stamps == sorted(stamps)
    (one,) = [c for c in store.listing() if c.id == "one"]
    assert one.updated == stamps[-1] and store.latest() == "one"


def test_a_turn_is_stamped_once_it_holds_the_write_lock(tmp_path, monkeypatch):
    """An append that waited for another's lock is stamped after it, so under concurrent
    asks the last to commit is the latest (issue 40, L8): the time is taken inside the
    write transaction, never before it."""
    import brainbot.store.conversations as conversations
    from brainbot.store.sqlite.conversations import SidecarConversations

    inside, seen = [], []
    real_writing, real_now = SidecarConversations._writing, conversations.now

    def writing(self):
        with real_writing(self) as db:
            inside.append(True)
            try:
                yield db
            finally:
                inside.pop()

    def stamp():
        seen.append(bool(inside))
        return real_now()

    monkeypatch.setattr(SidecarConversations, "_writing", contextmanager(writing))
    monkeypatch.setattr(conversations, "now", stamp)
    store = open_conversations(tmp_path / "x.db")
    store.append("one", turn("first"))
    store.append("one", turn("second"))
    assert seen and all(seen)


def test_the_conversations_file_has_its_own_messages(db):
    """A folder or a damaged file in its place: said as what it is, with the way out for a
    conversations file (move it away), never an index's rebuild (issue 40, L6)."""
    sidecar_path(db).mkdir()
    line = one_line_error(run_cli("conversations", "--db", db))
    assert f"{sidecar_path(db)} is a folder, not a conversations file; move it away" in line
    sidecar_path(db).rmdir()
    sidecar_path(db).write_text("garbage\n")
    for argv in (("conversations",), ("conversations", "show", "abc")):
        line = one_line_error(run_cli(*argv, "--db", db))
        assert "is not a conversations file or is damaged" in line and "move it away" in line
        assert "brainbot index" not in line and "rebuild" not in line


def test_an_empty_conversation_id_is_refused(db):
    """`--conversation ""` (an unset variable) is refused as the API refuses it, before
    anything is asked or created (issue 40, L9); so is an id that is not UTF-8."""
    for argv in (("ask", "--conversation", "", FOLLOW), ("ask", "--conversation", " ", FOLLOW),
                 ("chat", "--conversation", "")):
        r = run_cli(*argv, "--db", db, env=offline(), input="/quit\n")
        assert r.returncode == 2 and "not an empty one" in one_line_error(r)
    for argv in (("ask", "--conversation", "\udcff", FOLLOW), ("chat", "--conversation",
                 "\udcff"), ("conversations", "show", "\udcff")):  # argv bytes, not UTF-8
        r = run_cli(*argv, "--db", db, env=offline(), input="/quit\n")
        assert r.returncode == 2 and "is not valid UTF-8" in one_line_error(r)
    assert not sidecar_path(db).exists()


# -- the CLI contract --------------------------------------------------------------------
def test_ask_json_names_its_conversation_on_every_outcome(db):
    outcomes = {}
    for question in (STARTER, FOLLOW, "What is the capital of Australia?"):
        answer = ask(db, question)
        assert isinstance(answer["conversation"], str) and answer["conversation"]
        assert answer["turn"] == 1 and answer["conversation_note"] is None
        outcomes[answer["outcome"]] = answer["conversation"]
    assert set(outcomes) == {"answer", "passages", "not_found"}
    assert len(set(outcomes.values())) == 3  # each a new conversation


def test_ask_continues_a_conversation_by_id_or_the_latest(db):
    first = ask(db, STARTER)
    other = ask(db, "What tire pressure should the Subaru run at?")
    follow = ask(db, "--conversation", first["conversation"], FOLLOW)
    assert follow["conversation"] == first["conversation"] and follow["turn"] == 2
    assert "3 months" in follow["answer"]
    assert follow["citations"][0]["path"] == "cooking/ramen.md"
    assert follow["searched"] == f"{STARTER} / {FOLLOW}"
    latest = ask(db, "--follow-up", "and the eggs, how long do they marinate?")
    assert latest["conversation"] == first["conversation"] and latest["turn"] == 3
    assert any("12 hours" in c["cited_text"] for c in latest["citations"])
    alone = ask(db, FOLLOW)
    assert alone["conversation"] not in (first["conversation"], other["conversation"])
    assert "3 months" not in alone["answer"]  # alone, "it" is nothing in particular


def test_an_unknown_conversation_is_one_line_naming_how_to_list_them(db):
    assert not sidecar_path(db).exists()
    line = one_line_error(run_cli("ask", "--conversation", "nope", FOLLOW, "--db", db,
                                  env=offline()))
    assert "no conversation 'nope'" in line and "brainbot conversations --db" in line
    for argv in (("conversations", "show", "nope"), ("conversations", "--delete", "nope")):
        assert "no conversation 'nope'" in one_line_error(run_cli(*argv, "--db", db))
    r = run_cli("ask", "--conversation", "x", "--follow-up", FOLLOW, "--db", db)
    assert r.returncode == 2 and "not allowed with" in r.stderr  # one or the other
    assert not sidecar_path(db).exists()  # nothing was created for it


def test_conversations_lists_shows_and_deletes(db):
    assert run_cli("conversations", "--db", db, "--json").stdout.strip() == "[]"
    first = ask(db, STARTER)["conversation"]
    ask(db, "--follow-up", FOLLOW)
    second = ask(db, "What tire pressure should the Subaru run at?")["conversation"]
    listed = json.loads(run_cli("conversations", "--db", db, "--json").stdout)
    assert [(c["id"], c["turns"], c["first_question"]) for c in listed] == [
        (second, 1, "What tire pressure should the Subaru run at?"), (first, 2, STARTER)]
    assert set(listed[0]) == {"id", "started", "updated", "turns", "first_question"}
    text = run_cli("conversations", "--db", db).stdout.splitlines()
    assert text[1].startswith(first) and "2 turns" in text[1] and STARTER in text[1]
    shown = run_cli("conversations", "show", first, "--db", db)
    assert shown.returncode == 0 and FOLLOW in shown.stdout and "cooking/ramen.md" in shown.stdout
    turns = json.loads(run_cli("conversations", "show", first, "--db", db, "--json").stdout)
    assert [t["n"] for t in turns["turns"]] == [1, 2] and turns["id"] == first
    assert run_cli("conversations", "--delete", second, "--db", db).returncode == 0
    assert [c["id"] for c in json.loads(
        run_cli("conversations", "--db", db, "--json").stdout)] == [first]
    assert run_cli("conversations", "--clear", "--db", db).returncode == 0
    assert run_cli("conversations", "--db", db, "--json").stdout.strip() == "[]"


def test_status_counts_the_conversations(db):
    def count() -> tuple[int, str]:
        info = json.loads(run_cli("status", "--db", db, "--json").stdout)
        line = [x for x in run_cli("status", "--db", db).stdout.splitlines()
                if x.startswith("conversations ")]
        return info["conversations"], line[0].split()[-1]

    assert count() == (0, "0")
    ask(db, STARTER)
    ask(db, "--follow-up", FOLLOW)
    ask(db, "What tire pressure should the Subaru run at?")
    assert count() == (2, "2")


# -- surviving what happens to an index --------------------------------------------------
def test_a_conversation_survives_a_rebuild_and_travels_with_a_copy(db, tmp_path):
    first = ask(db, STARTER)["conversation"]
    r = run_cli("index", REPO / "examples" / "notes", "--db", db, "--rebuild")
    assert r.returncode == 0, r.stderr
    follow = ask(db, "--conversation", first, FOLLOW)
    assert follow["turn"] == 2 and "3 months" in follow["answer"]
    target = tmp_path / "copy.db"
    r = run_cli("copy", "--from", db, "--to", target)
    assert r.returncode == 0 and "1 conversations" in r.stdout, r.stderr
    moved = open_conversations(target)
    assert [t.question for t in moved.turns(first)] == [STARTER, FOLLOW]
    assert ask(target, "--follow-up", "and the eggs?")["turn"] == 3
    # copying again into a target that holds them adds nothing twice
    r = run_cli("copy", "--from", db, "--to", target, "--replace")
    assert r.returncode == 0 and open_conversations(target).count() == 1
    assert len(open_conversations(target).turns(first)) == 3


def test_copy_never_fails_over_conversations_after_the_index_was_copied(db, tmp_path,
                                                                         monkeypatch):
    """Issue 40, L6: a target whose conversations file is damaged is refused before
    anything is written (so a rerun after moving it away works); a source whose
    conversations cannot be read, or a save of them that fails after the index was
    copied, is a warning, and the copy stands."""
    from brainbot.index.copying import copy_index

    cid = ask(db, STARTER)["conversation"]
    target = tmp_path / "cp_to.db"
    sidecar_path(target).write_text("garbage\n")
    line = one_line_error(run_cli("copy", "--from", db, "--to", target))
    assert "nothing was copied" in line and "is not a conversations file" in line
    assert not target.exists()
    sidecar_path(target).rename(tmp_path / "moved-away")
    r = run_cli("copy", "--from", db, "--to", target)
    assert r.returncode == 0 and "1 conversations" in r.stdout, r.stderr
    assert [t.n for t in open_conversations(target).turns(cid)] == [1]

    sidecar_path(db).rename(tmp_path / "kept")
    sidecar_path(db).mkdir()  # the source's cannot be read: the index is copied anyway
    r = run_cli("copy", "--from", db, "--to", tmp_path / "second.db")
    assert r.returncode == 0 and "copied" in r.stdout, r.stderr
    assert r.stderr.startswith("brainbot: warning: the conversations of ")
    assert "were not copied" in r.stderr and "is a folder" in r.stderr
    sidecar_path(db).rmdir()
    (tmp_path / "kept").rename(sidecar_path(db))

    def full(self, conversations):
        raise StoreError("disk full while writing them (simulated)")

    monkeypatch.setattr(Conversations, "absorb", full)
    stats = copy_index(db, tmp_path / "third.db")
    assert stats.documents and stats.conversations == 0
    assert stats.conversations_note.startswith("the index was copied, but not its "
                                               "conversations: disk full")
    monkeypatch.undo()
    again = copy_index(db, tmp_path / "third.db", replace=True)  # a rerun is not refused
    assert again.conversations == 1 and again.conversations_note is None


HOLD = r'''
import sys, threading
from brainbot import cli
from brainbot.ask import extractive
real = extractive.extractive_answer
def held(*args, **kwargs):
    print("answering", flush=True)
    threading.Event().wait()  # killed here, mid-answer
extractive.extractive_answer = held
sys.exit(cli.main(sys.argv[1:]))
'''


def test_a_kill_mid_answer_leaves_the_turns_as_they_were(db):
    first = ask(db, STARTER)["conversation"]
    before = sidecar_path(db).read_bytes()
    proc = subprocess.Popen([sys.executable, "-c", HOLD, "ask", "--conversation", first, FOLLOW,
                             "--db", str(db)], cwd=REPO, env=offline(), stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "answering"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert sidecar_path(db).read_bytes() == before
    assert [t.n for t in open_conversations(db).turns(first)] == [1]
    again = ask(db, "--conversation", first, FOLLOW)
    assert again["turn"] == 2 and "3 months" in again["answer"]


def test_an_index_on_a_read_only_medium_answers_and_says_the_turn_was_not_saved(
        db, tmp_path):
    from test_storage_faults import mounted

    first = ask(db, STARTER)["conversation"]  # saved while the medium was writable
    folder = db.parent
    with mounted("--bind", str(folder), target=tmp_path / "ro") as mnt:
        r = subprocess.run(["mount", "-o", "remount,ro,bind", str(mnt)], capture_output=True)
        if r.returncode != 0:
            pytest.skip("cannot remount read-only here")
        ro = mnt / db.name
        answer = ask(ro, "--conversation", first, FOLLOW)
        assert "3 months" in answer["answer"]  # the earlier turn was read
        assert answer["conversation"] == first and answer["turn"] is None
        assert "not saved" in answer["conversation_note"]
        assert "read-only" in answer["conversation_note"]
        fresh = ask(ro, "What tire pressure should the Subaru run at?")
        assert fresh["conversation"] is None  # nothing a follow-up could find (issue 40, M2)
        assert "not saved" in fresh["conversation_note"]
        assert "there is no conversation to follow up" in fresh["conversation_note"]
        text = run_cli("ask", STARTER, "--db", ro, env=offline())
        assert text.returncode == 0 and "not saved" in text.stderr
        status = json.loads(run_cli("status", "--db", ro, "--json").stdout)
        assert status["conversations"] == 1
    assert [t.n for t in open_conversations(db).turns(first)] == [1]


def test_the_conversations_file_is_named_after_the_index_s_real_path(db, tmp_path):
    link = tmp_path / "link.db"
    link.symlink_to(db)
    first = ask(link, STARTER)["conversation"]
    assert sidecar_path(link) == sidecar_path(db) == Path(str(db.resolve()) + ".conversations")
    assert ask(db, "--follow-up", FOLLOW)["conversation"] == first
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("link")) == [
        "link.db"]
