"""Two indexed folders that both hold README.md (issue 32, H3): an answer cites each
note's sentence by its own folder (root, path and lines), never one note's sentence as
the other's, offline and through Claude, in process and through `brainbot serve`, and a
citation's ROOT::PATH:LINE:COUNT opens that very note. (The page: tests/test_browser.py.)
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest
from fake_anthropic import FakeAnthropic, cite_text, message, search_results, text
from test_serve import Daemon

from brainbot.ask.agent import ask
from brainbot.ask.terminal import format_answer
from brainbot.index.indexer import Indexer
from brainbot.search.searcher import Searcher

# The same heading and sentence lengths, so each sentence sits at the same lines and
# characters of its file (extractive.distinct() once dropped one of them as a repeat):
# only the folder tells the two apart.
V1 = "# Readme\n\nThe shared readme mentions the garden compost and potatoes.\n"
V2 = "# Readme\n\nThe second readme mentions the garden compost and tomatoes.\n"
QUESTION = "what do the readmes say about garden compost and tomatoes?"


@pytest.fixture(scope="module")
def two(tmp_path_factory, shared_embedder):
    top = tmp_path_factory.mktemp("two")
    for name, body in (("v1", V1), ("v2", V2)):
        (top / name).mkdir()
        (top / name / "README.md").write_text(body, encoding="utf-8")
    db = top / "two.db"
    with Indexer(db, embedder=shared_embedder) as ix:
        ix.index_paths([top / "v1", top / "v2"])
    return db, (top / "v1").resolve().as_posix(), (top / "v2").resolve().as_posix()


def sentence(body: str) -> str:
    return body.split("\n")[2]


def by_root(citations) -> dict[str, str]:
    """Each citation's root -> its cited text."""
    return {c["root"] if isinstance(c, dict) else c.root:
            c["cited_text"] if isinstance(c, dict) else c.cited_text for c in citations}


def test_the_offline_answer_cites_each_readme_by_its_own_folder(two, shared_embedder,
                                                                 monkeypatch):
    from fake_anthropic import no_credentials

    db, v1, v2 = two
    no_credentials(monkeypatch, Path(db).parent / "home")
    with Searcher(db, embedder=shared_embedder) as searcher:
        answer = ask(QUESTION, db=db, searcher=searcher)
    assert answer.mode == "extractive" and answer.outcome == "answer", answer.to_dict()
    assert by_root(answer.citations) == {v1: sentence(V1), v2: sentence(V2)}
    assert {(c.path, c.start_line, c.end_line) for c in answer.citations} == {
        ("README.md", 3, 3)}
    out = format_answer(answer)
    assert "v1::README.md:3-3" in out and "v2::README.md:3-3" in out


def test_a_claude_answer_cites_each_readme_by_its_own_folder(two, shared_embedder):
    db, v1, v2 = two

    def reply(body):  # one sentence citing each README.md result it was sent
        results = search_results(body)
        cites = [cite_text(body, i, "garden compost") for i, r in enumerate(results)
                 if r["source"] == "README.md:1-3"]
        assert len(cites) == 2, [r["source"] for r in results]
        return message(text("Both mention the garden compost.", cites))

    with FakeAnthropic() as fake, Searcher(db, embedder=shared_embedder) as searcher:
        fake.push(reply)
        answer = ask(QUESTION, db=db, searcher=searcher, client=fake.client())
    assert answer.mode == "claude" and not answer.dropped, answer.to_dict()
    assert answer.answer == "Both mention the garden compost. [1][2]"
    assert by_root(answer.citations) == {v1: sentence(V1), v2: sentence(V2)}


def test_through_the_daemon_each_citation_opens_its_own_note(two):
    db, v1, v2 = two
    d = Daemon(db)
    try:
        status, answer = d.json("POST", "/api/ask", {"question": QUESTION})
        assert status == 200 and answer["outcome"] == "answer", answer
        assert by_root(answer["citations"]) == {v1: sentence(V1), v2: sentence(V2)}
        for cite in answer["citations"]:
            count = cite["end_line"] - cite["start_line"] + 1
            ref = f"{cite['root']}::{cite['path']}:{cite['start_line']}:{count}"
            status, got = d.json("GET", f"/api/get?ref={quote(ref)}")
            assert status == 200 and got["root"] == cite["root"], got
            assert [x["text"] for x in got["lines"]] == [cite["cited_text"]]
    finally:
        assert d.stop() in (0, -15)
