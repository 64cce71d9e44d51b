"""A reader on a machine where an indexed folder is not present (H1): a Postgres reader
elsewhere, or a SQLite index whose vault moved away. `get`, read_note, citations and `ask`
read the text the index holds; `stale` is null ("cannot tell"), never true; status and
doctor say the folder is not present here instead of "every note deleted"."""

from __future__ import annotations

import json

import pytest
from fake_anthropic import FakeAnthropic, cite_text, message, search_results, text

from brainbot.ask.agent import ask
from brainbot.ask.tools import Conversation
from brainbot.cli import main
from brainbot.doctor import run_checks, status
from brainbot.index import reading
from brainbot.index.freshness import out_of_date_note
from brainbot.index.indexer import Indexer
from brainbot.search.searcher import Searcher
from brainbot.store.target import open_store


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def away(request, tmp_path, vault, shared_embedder, monkeypatch):
    """(db, the folder as indexed, its notes' text): indexed, then the folder moved away."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    if request.param == "sqlite":
        db = str(tmp_path / "n.db")
    else:
        db = request.getfixturevalue("pg_server").fresh_database("bb_absent_root")
    with Indexer(db, embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    notes = {p.relative_to(vault).as_posix(): p.read_text(encoding="utf-8")
             for p in vault.rglob("*.md")}
    vault.rename(tmp_path / "elsewhere")
    return db, vault.absolute().as_posix(), notes


def test_hits_cannot_tell_and_get_reads_the_indexed_text(capsys, away):
    db, root, notes = away
    assert main(["query", "alpha project migration risk", "--db", db, "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert hits and all(h["stale"] is None for h in hits)
    with open_store(db) as store:
        for path, note in notes.items():
            got = reading.get_lines(store, path)
            assert got.stale is None and got.root == root
            lines = note.split("\n")
            assert got.lines and all(t == lines[n - 1] for n, t in got.lines if t)
            # every line a chunk holds is there, at its own number
            for chunk in store.document_chunks(reading.document(store, path).id):
                assert chunk.text in "\n".join(t for _, t in got.lines)
        assert [t for _, t in reading.get_lines(store, "alpha.md:3:1").lines] == [
            "The alpha project ships in March. It uses SQLite for storage."]
        assert reading.stored_lines(store, reading.document(store, "alpha.md"))[4] == "## Risks"
    assert main(["get", "sub/beta.md", "--db", db]) == 0
    out, err = capsys.readouterr()
    assert "Tomatoes need full sun" in out
    assert f"{root} is not present here" in err


def test_ask_answers_from_the_indexed_text(capsys, away):
    db, _, _ = away
    assert main(["ask", "How often do tomatoes need watering?", "--db", db, "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["outcome"] == "answer" and not answer["dropped"]
    (cite,) = [c for c in answer["citations"] if c["path"] == "sub/beta.md"]
    assert cite["verified"] and cite["stale"] is None and "twice a week" in cite["cited_text"]


def test_claude_citations_and_read_note_use_the_indexed_text(away, shared_embedder):
    db, _, _ = away

    def reply(body):
        i = next(i for i, b in enumerate(search_results(body))
                 if b["source"].startswith("sub/beta.md:"))
        return message(text("Twice a week.", [cite_text(body, i, "watering twice a week")]))

    searcher = Searcher(db, embedder=shared_embedder)
    try:
        with FakeAnthropic() as fake:
            fake.push(reply)
            answer = ask("How often do tomatoes need watering?", db=db, searcher=searcher,
                         client=fake.client())
        assert answer.outcome == "answer" and not answer.dropped
        (c,) = answer.citations
        assert c.path == "sub/beta.md" and c.verified and c.stale is None
        sent = Conversation(searcher, 5).run_tool("read_note", {"path": "sub/beta.md"})
        assert "Tomatoes need full sun" in json.dumps(sent)
    finally:
        searcher.close()


def test_status_and_doctor_say_the_folder_is_not_present(away):
    db, root, notes = away
    info = status(db)
    assert info["stale"] == {"changed": 0, "missing": 0, "new": 0}  # not "3 deleted"
    assert info["missing_roots"][root]["notes"] == len(notes)
    checks = {c["name"]: c for c in run_checks(db)}
    assert checks["stale files"]["ok"]
    assert f"{root} is not present here ({len(notes)} notes" in checks["folders"]["detail"]
    # readers on other machines are what Postgres is for; a SQLite file is local
    assert checks["folders"]["ok"] is db.startswith("postgresql")
    with open_store(db) as store:
        note = out_of_date_note(store)
    assert note.startswith(f"{len(notes)} notes are in a folder not present here")
    assert "deleted" not in note and root not in note
