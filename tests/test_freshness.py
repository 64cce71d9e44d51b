"""Stale flags on hits and citations, and the refusal that says the index is out of date."""

from __future__ import annotations

import hashlib
import json
import os
import time

import pytest

from brainbot.cli import main
from brainbot.index.freshness import Freshness, out_of_date_note
from brainbot.index.indexer import Indexer
from brainbot.search.searcher import Searcher


def age(vault, seconds: int = 3600) -> None:
    """Make every note look written ``seconds`` ago, long before it is indexed: outside the
    racy window, where a matching stat vouches for the bytes."""
    then = time.time_ns() - seconds * 1_000_000_000
    for path in vault.rglob("*.md"):
        os.utime(path, ns=(then, then))


@pytest.fixture
def indexed(tmp_path, vault, shared_embedder):
    db = tmp_path / "f.db"
    age(vault)
    with Indexer(db, embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    return db


def query_json(capsys, db, text, *extra):
    assert main(["query", text, "--db", str(db), "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_hits_say_whether_their_file_changed(capsys, indexed, vault):
    hits = query_json(capsys, indexed, "alpha project migration risk")
    assert hits and all(h["stale"] is False for h in hits)
    alpha = vault / "alpha.md"
    alpha.write_text(alpha.read_text() + "\nA new line at the end.\n")
    hits = query_json(capsys, indexed, "alpha project migration risk")
    assert {h["path"]: h["stale"] for h in hits}["alpha.md"] is True
    beta = query_json(capsys, indexed, "tomatoes full sun")[0]
    assert beta["path"] == "sub/beta.md" and beta["stale"] is False


def test_touched_file_with_same_bytes_is_not_stale(indexed, vault, monkeypatch):
    gamma = vault / "gamma.md"
    st = gamma.stat()
    os.utime(gamma, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    searcher = Searcher(indexed)
    hashed = []
    real = __import__("brainbot.index.freshness", fromlist=["_sha256"])._sha256
    monkeypatch.setattr("brainbot.index.freshness._sha256", lambda p: hashed.append(p) or real(p))
    hit = searcher.search("Dr. Smith results Friday", 1, mode="bm25")[0]
    assert hit.path == "gamma.md" and hit.stale is False
    assert hashed == [str(gamma)]  # the stat differed, so it was hashed, once
    hashed.clear()
    hit = searcher.search("alpha ships March", 1, mode="bm25")[0]
    assert hit.stale is False and hashed == []  # stat matches: never read


def test_a_deleted_file_is_stale_and_checked_once_per_search(indexed, vault, monkeypatch):
    from brainbot.index import freshness

    (vault / "sub" / "beta.md").unlink()
    hits = Searcher(indexed).search("tomatoes sun watering", 5, mode="bm25")
    assert [h.stale for h in hits if h.path == "sub/beta.md"] == [True]
    stats = []
    real = os.stat
    monkeypatch.setattr(freshness.os, "stat", lambda p, *a, **k: stats.append(p) or real(p))
    twice = hits + hits  # the same files twice over: each must still be looked at once
    freshness.mark(twice)
    roots = {h.root for h in hits}  # each folder is stat'ed once too: is it on this machine?
    assert sorted(p for p in stats if p not in roots) == sorted(
        {os.path.join(h.root, h.path) for h in hits})
    assert sorted(p for p in stats if p in roots) == sorted(roots)
    stats.clear()
    check = Freshness()
    doc = hits[0].document
    assert check.stale(doc) is check.stale(doc) is True and len(stats) == 2


def test_citation_in_a_changed_file_is_kept_and_flagged(capsys, indexed, vault):
    beta = vault / "sub" / "beta.md"
    beta.write_text(beta.read_text() + "\n## Later\n\nAdded after indexing.\n")
    assert main(["ask", "How often do tomatoes need watering?", "--db", str(indexed),
                 "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    cites = [c for c in answer["citations"] if c["path"] == "sub/beta.md"]
    assert cites and all(c["stale"] for c in cites)
    assert main(["ask", "How often do tomatoes need watering?", "--db", str(indexed)]) == 0
    assert "changed since it was indexed" in capsys.readouterr().out


def test_citation_whose_span_changed_is_dropped(capsys, indexed, vault):
    beta = vault / "sub" / "beta.md"
    beta.write_text(beta.read_text().replace("twice a week", "every other day"))
    assert main(["ask", "How often do tomatoes need watering?", "--db", str(indexed),
                 "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert not [c for c in answer["citations"] if c["path"] == "sub/beta.md"]
    assert [d for d in answer["dropped"] if d["source"].startswith("sub/beta.md")
            and d["reason"] == "stale: the note changed on disk since it was indexed"]


def test_refusal_says_when_the_index_is_out_of_date(capsys, indexed, vault):
    question = "What is the capital of Australia?"
    assert main(["ask", question, "--db", str(indexed), "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["refused"] and answer["index_note"] is None
    (vault / "new note.md").write_text("# Canberra\n\nNot indexed yet.\n")
    (vault / "gamma.md").write_text("Changed.\n")
    assert main(["ask", question, "--db", str(indexed)]) == 0
    out = capsys.readouterr().out
    assert "2 notes changed since the last index (1 changed, 1 new)" in out
    assert f"brainbot index {vault}" in out
    with Searcher(indexed).store as store:
        assert out_of_date_note(store).startswith("2 notes changed")


def test_a_racily_clean_edit_is_noticed(tmp_path, vault, shared_embedder, monkeypatch):
    """M10: on a coarse-timestamp filesystem a note can be edited again within the tick it
    was read in, with the same size: its stat then matches the index. A note whose mtime is
    within the racy window of its read is re-hashed (by hits, status and the next index);
    an older one is still trusted by its stat (never read)."""
    from brainbot.index import freshness
    from brainbot.index.freshness import vault_changes
    from brainbot.store.target import open_store

    age(vault)
    gamma = vault / "gamma.md"
    now = time.time_ns()
    os.utime(gamma, ns=(now, now))  # written just now: racily clean when indexed
    db = tmp_path / "r.db"
    with Indexer(db, embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    for note, old, new in ((gamma, "Friday", "Monday"), (vault / "alpha.md", "March", "April")):
        st = note.stat()
        note.write_text(note.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
        os.utime(note, ns=(st.st_atime_ns, st.st_mtime_ns))  # same tick: the indexed mtime
        assert note.stat().st_size == st.st_size
    hashed = []
    real = freshness._sha256
    monkeypatch.setattr(freshness, "_sha256", lambda p: hashed.append(p) or real(p))
    searcher = Searcher(db, embedder=shared_embedder)
    hits = {h.path: h for h in searcher.search("Dr. Smith results Friday alpha ships", 5,
                                               mode="bm25")}
    searcher.close()
    assert hits["gamma.md"].stale is True
    assert hits["alpha.md"].stale is False and hashed == [str(gamma)]  # stat trusted
    with open_store(db) as store:
        assert vault_changes(store)["changed"] == ["gamma.md"]
    with Indexer(db, embedder=shared_embedder) as ix:
        assert ix.index_paths([vault]).updated == 1
    with open_store(db) as store:
        (row,) = store.documents_at("gamma.md")
        assert row.sha256 == hashlib.sha256(gamma.read_bytes()).hexdigest()


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_nul_is_stored_alike_and_its_citations_verify(kind, request, tmp_path,
                                                        shared_embedder):
    """L5: a NUL past the binary sniff becomes U+FFFD on both stores (Postgres text cannot
    hold NUL), so a passage holding it still matches the file: cited, not dropped."""
    from brainbot.ask.citations import check_fresh, is_stale
    from brainbot.ask.tools import Conversation

    root = tmp_path / "nul"
    root.mkdir()
    body = "# Long\n\n" + "Plain words fill the first block of this note. " * 200
    (root / "n.md").write_text(body + "\n\nThe vault key is \x00 under the mat.\n",
                               encoding="utf-8")
    db = (str(tmp_path / "n.db") if kind == "sqlite"
          else request.getfixturevalue("pg_server").fresh_database("bb_nul_alike"))
    with Indexer(db, embedder=shared_embedder) as ix:
        assert ix.index_paths([root]).new == 1
    searcher = Searcher(db, embedder=shared_embedder)
    try:
        (hit,) = searcher.search("vault key mat", 1, mode="bm25")
    finally:
        searcher.close()
    assert "The vault key is \ufffd under the mat." in hit.text and "\x00" not in hit.text
    (passage,) = Conversation.passages_for([hit])
    assert check_fresh(passage) is None and is_stale(passage, Freshness()) is False


def test_one_verdict_and_each_readers_policy(indexed, vault, shared_embedder):
    """S2: freshness says what the file is; hits flag it, `get` reads the current lines,
    read_note refuses, a citation whose span still reads the same is kept and flagged, one
    whose file is gone is dropped."""
    from brainbot.ask.answers import Passage
    from brainbot.ask.citations import check_fresh, is_stale
    from brainbot.ask.tools import Conversation
    from brainbot.errors import NotFoundError
    from brainbot.index import reading
    from brainbot.index.freshness import CHANGED, GONE, SAME

    beta = vault / "sub" / "beta.md"
    searcher = Searcher(indexed, embedder=shared_embedder)
    store = searcher.store
    doc = reading.document(store, "sub/beta.md")
    chunk = store.document_chunks(doc.id)[0]
    src = Passage(doc.path, doc.root, chunk.start_line, chunk.end_line, [], chunk.text,
                  chunk.start_char, chunk.end_char, doc.sha256)
    assert Freshness().state(doc) == SAME and check_fresh(src) is None
    assert reading.stored_lines(store, doc) == beta.read_text(encoding="utf-8").split("\n")
    beta.write_text(beta.read_text(encoding="utf-8") + "\nAdded after indexing.\n",
                    encoding="utf-8")
    assert Freshness().state(doc) == CHANGED and Freshness().stale(doc) is True
    lines, stale = reading.current_lines(store, doc)
    assert stale is True and lines[-2] == "Added after indexing."
    with pytest.raises(NotFoundError, match="changed on disk since it was indexed"):
        reading.stored_lines(store, doc)
    tool = Conversation(searcher, 5).run_tool("read_note", {"path": "sub/beta.md"})
    assert tool["is_error"] and "changed on disk" in tool["content"]
    files = Freshness()
    assert check_fresh(src, files) is None and is_stale(src, files) is True
    beta.unlink()
    files = Freshness()
    assert files.state(doc) == GONE and files.stale(doc) is True
    assert check_fresh(src, files) == "stale: the note is gone from disk since it was indexed"
    with pytest.raises(NotFoundError, match="vanished from disk"):
        reading.current_lines(store, doc)
    searcher.close()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs mkfifo")
def test_a_note_replaced_by_a_fifo_is_gone_and_never_opened(tmp_path, vault, shared_embedder):
    """M5: a note replaced by a FIFO hung every search that checked it (opening a FIFO
    blocks until a writer comes), and took a server's lock with it. Search, get, ask and
    status answer, the note flagged or refused as gone; the FIFO is never opened (each
    command runs in a process of its own, with a limit on a hang, not a measured time)."""
    from reliability_kit import cli_env, run_cli

    db = tmp_path / "f.db"
    with Indexer(db, embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    (vault / "alpha.md").unlink()
    os.mkfifo(vault / "alpha.md")
    env = cli_env(ANTHROPIC_API_KEY="")
    hang = 120  # a hang fails the test at this bound; an answer takes about a second
    for mode in ("bm25", "hybrid"):
        r = run_cli("query", "alpha project SQLite", "--db", db, "--json", "--mode", mode,
                    env=env, timeout=hang)
        assert r.returncode == 0, r.stderr
        hits = json.loads(r.stdout)
        assert hits[0]["path"] == "alpha.md" and hits[0]["stale"] is True
    r = run_cli("get", "alpha.md", "--db", db, env=env, timeout=hang)
    assert r.returncode != 0 and "vanished" in r.stderr
    r = run_cli("ask", "When does the alpha project ship?", "--db", db, "--json", env=env,
                timeout=hang)
    assert r.returncode in (0, 1), r.stderr
    json.loads(r.stdout)
    r = run_cli("status", "--db", db, "--json", env=env, timeout=hang)
    assert r.returncode == 0, r.stderr
    check = Freshness()
    with Searcher(db, embedder=shared_embedder) as searcher:
        doc = searcher.store.document("alpha.md")
        assert check.state(doc) == "gone" and check.read(doc.root, doc.path) is None
