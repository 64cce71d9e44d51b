"""The servers' index side (serve/service.py), in process: every body answers from the
index as it now is at the path (issue 32, M6), text that is not UTF-8 is refused with one
line wherever it comes in (M10), and the lock is free while an ask waits on the model
(M4; through the daemons: tests/test_serve_asks.py)."""

from __future__ import annotations

import pytest

from brainbot import cli
from brainbot.errors import NotUTF8Error
from brainbot.index.indexer import Indexer
from brainbot.serve.service import Service


@pytest.fixture
def service(tmp_path, vault, shared_embedder):
    db = tmp_path / "s.db"
    with Indexer(db, embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    s = Service(db, embedder=shared_embedder)
    yield s
    s.close()


def test_get_status_and_related_answer_from_a_rebuilt_index_at_once(service, vault,
                                                                       shared_embedder):
    """A rebuild writes a new file at the path; the next get, status and related (no
    search in between) answer from it, not from the deleted one the reader held."""
    before = service.locked(service.status)
    (vault / "fresh.md").write_text("# Fresh\n\nA note written after the server started, "
                                    "about the alpha project.\n", encoding="utf-8")
    with Indexer(service.db, embedder=shared_embedder, rebuild=True) as ix:
        ix.index_paths([vault])
    got = service.locked(service.get, "fresh.md", None)
    assert "written after the server started" in got["text"]
    now = service.locked(service.status)
    assert now["documents"] == before["documents"] + 1
    assert now["generation"] != before["generation"] or now["chunks"] != before["chunks"]
    near = service.locked(service.related, "fresh.md", 3, False)
    assert near["note"] == "fresh.md"


@pytest.mark.parametrize("call,what", [
    (lambda s: s.hits("\udcff flour", 3, "hybrid", None, None, None, None, None),
     "the query"),
    (lambda s: s.hits("\ud800", 3, "vector", None, None, None, None, None), "the query"),
    (lambda s: s.hits("flour", 3, "bm25", None, "\udcff", None, None, None), "tag"),
    (lambda s: s.hits("flour", 3, "bm25", "\udcff*", None, None, None, None), "path"),
    (lambda s: s.get("caf\udce9.md", None), "the note reference"),
    (lambda s: s.related("\udcff", 3, False), "the note"),
    (lambda s: s.answer("caf\udce9 flour"), "the question"),
])
def test_text_that_is_not_utf8_is_one_input_error(service, call, what):
    with pytest.raises(NotUTF8Error) as err:
        service.locked(call, service)
    assert str(err.value) == f"{what} is not valid UTF-8"


def test_the_models_tools_refuse_text_that_is_not_utf8(service):
    from brainbot.ask.tools import Conversation

    talk = Conversation(service.searcher, 3, "q", service.index_lock)
    for name, args, what in (("search_notes", {"query": "\ud800 flour"}, "the query"),
                             ("read_note", {"path": "caf\udce9.md"}, "the path")):
        result = talk.run_tool(name, args)
        assert result == {"content": f"{what} is not valid UTF-8", "is_error": True}
    assert not service.lock.locked()  # each tool call let the lock go


@pytest.mark.parametrize("argv,what", [
    (["query", "\udcff flour"], "the query"),
    (["query", "flour", "--tag", "\udcff"], "--tag"),
    (["query", "flour", "--path", "notes/\udcff*"], "--path"),
    (["ask", "caf\udce9 flour"], "the question"),
    (["get", "caf\udce9.md"], "the note reference"),
    (["related", "\udcff"], "the note"),
])
def test_cli_text_that_is_not_utf8_is_one_line(service, capsys, argv, what):
    """argv bytes that are not UTF-8 reach Python as lone surrogates: one line, exit 2."""
    assert cli.main([*argv, "--db", str(service.db)]) == 2
    err = capsys.readouterr().err
    assert err == f"brainbot: error: {what} is not valid UTF-8\n"


def test_an_ask_holds_the_lock_only_for_its_index_work(service, monkeypatch):
    """The offline answer is all index work, under the lock; the first search and the
    answer of a Claude ask are too, but the model call runs with the lock free."""
    from brainbot.model import claude

    seen = []

    class Client:  # what the loop calls: records whether the lock was held meanwhile
        api_key = "test-key"

        class messages:  # noqa: N801 - the SDK's attribute
            @staticmethod
            def stream(**params):  # every model call streams (issue 42)
                seen.append(service.lock.locked())
                raise RuntimeError("stop here")

    monkeypatch.setattr(claude, "may_have_credentials", lambda: True)
    monkeypatch.setattr(claude, "make_client", lambda: Client())
    with pytest.raises(RuntimeError, match="stop here"):
        service.answer("alpha project migration")
    assert seen == [False]
    assert not service.lock.locked()
