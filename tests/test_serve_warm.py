"""The servers' warm-up (serve/warmup.py, issue 24 item 5): `brainbot mcp` and `brainbot
serve` preload the common terms' postings and the int8 copy where it pays, a one-shot
`brainbot query` does neither, the answers are the same either way, and a new
generation is warmed again in the background."""

from __future__ import annotations

import logging
import math
import threading

import pytest

from brainbot import cli
from brainbot.index.indexer import Indexer
from brainbot.search.searcher import Searcher
from brainbot.serve import http, mcp, warmup
from brainbot.store.sqlite import arrays
from brainbot.store.sqlite.arrays import KernelIndex
from brainbot.text import lexical

QUERIES = ["how long does the sourdough proof", "feed the starter", "the", "notes on rust",
           "garden tomatoes watering", "meeting decisions and next steps"]


def common_terms(store) -> set[str]:
    """The terms in at least PRELOAD_SHARE of the chunks, read straight from the file."""
    least = max(1, math.ceil(warmup.PRELOAD_SHARE * store.chunk_count()))
    return {t for (t,) in store.db.execute("SELECT term FROM terms WHERE df >= ?", (least,))}


@pytest.fixture
def calls(monkeypatch):
    """Every call of the warm-up's KernelIndex methods, by name."""
    seen: list[str] = []
    for name in ("preload_common", "common_terms", "int8_due", "make_int8"):
        original = getattr(KernelIndex, name)

        def spy(self, *args, _original=original, _name=name):
            seen.append(_name)
            return _original(self, *args)

        monkeypatch.setattr(KernelIndex, name, spy)
    return seen


def test_service_warm_preloads_the_common_terms(examples_db, shared_embedder, calls):
    service = mcp.Service(examples_db, embedder=shared_embedder)
    try:
        service.warm()
        index = service.searcher.store.index
        expected = common_terms(service.searcher.store)
        assert expected and expected <= set(index._postings)
        assert "preload_common" in calls and "int8_due" in calls
        assert service.rewarm.generation == index.generation
    finally:
        service.close()


def test_a_one_shot_cli_query_preloads_nothing(examples_db, calls, capsys):
    assert cli.main(["query", "sourdough starter", "--db", str(examples_db), "--json"]) == 0
    assert '"chunk_id"' in capsys.readouterr().out
    assert calls == []


def test_both_servers_warm_before_they_serve(examples_db, monkeypatch, calls):
    import uvicorn

    served = []

    class Run:  # the transports, stubbed: what was loaded when they would have started
        def __init__(self, *args, **kwargs):
            pass

        def run(self, sockets=None):
            for thread in threading.enumerate():
                if thread.name == "warm-up":  # mcp warms in the background
                    thread.join()
            served.append(list(calls))
            calls.clear()

    brainbot_log = logging.getLogger("brainbot")
    monkeypatch.setattr(brainbot_log, "level", brainbot_log.level)  # serve() sets INFO
    monkeypatch.setattr(mcp, "build", lambda service: Run())
    monkeypatch.setattr(http, "make_app", lambda *args: None)
    monkeypatch.setattr(uvicorn, "Server", Run)
    monkeypatch.setattr(uvicorn, "Config", Run)
    assert mcp.serve(examples_db) == 0
    assert http.serve(examples_db, port=0) == 0
    assert ["preload_common" in seen and "int8_due" in seen for seen in served] == [True, True]


def _answers(searcher: Searcher) -> list:
    out = []
    for mode in ("hybrid", "bm25", "vector"):
        for query in QUERIES:
            hits = searcher.search(query, 10, mode=mode)
            out.append([(h.rowid, h.score) for h in hits])
    return out


@pytest.mark.parametrize("int8", [False, True], ids=["f32", "int8"])
def test_answers_are_the_same_with_and_without_the_preload(examples_db, shared_embedder,
                                                           monkeypatch, int8):
    if int8:  # the copy made at the warm-up against the f32 scans of a cold process
        monkeypatch.setattr(arrays, "INT8_SCAN_MIN_ROWS", 1)
    cold = Searcher(examples_db, embedder=shared_embedder)
    service = mcp.Service(examples_db, embedder=shared_embedder)
    try:
        service.warm()
        index = service.searcher.store.index
        if int8 and index.kernel.backend().startswith("c/"):
            assert index.int8 is not None
        assert _answers(service.searcher) == _answers(cold)
        assert cold.store.index.int8 is None  # the cold one scanned f32, read as asked
        assert set(cold.store.index._postings) <= {t for q in QUERIES
                                                   for t in lexical.query_terms(q)}
    finally:
        service.close()
        cold.close()


def test_a_new_generation_is_warmed_again_in_the_background(tmp_path, vault, shared_embedder,
                                                          monkeypatch):
    monkeypatch.setattr(warmup, "REWARM_QUIET_S", 0.05)
    db = tmp_path / "w.db"
    with Indexer(db, embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    service = mcp.Service(db, embedder=shared_embedder)
    try:
        service.warm()
        first = service.rewarm.generation
        (vault / "delta.md").write_text("# Delta\n\nThe delta note talks about the alpha "
                                        "project and the migration.\n", encoding="utf-8")
        with Indexer(db, embedder=shared_embedder) as ix:
            ix.index_paths([vault])
        def search():  # and what it cached, under the lock, before any re-warm starts
            service.searcher.search("delta", 3, mode="bm25")
            return set(service.searcher.store.index._postings)

        assert service.locked(search) == {"delta"}  # the call read only its own term
        index = service.searcher.store.index
        assert index.generation != first
        service.rewarm.thread.join(timeout=30)
        assert service.rewarm.generation == index.generation
        assert common_terms(service.searcher.store) <= set(index._postings)
    finally:
        service.close()


def test_a_closed_service_stops_its_rewarm(tmp_path, vault, shared_embedder, monkeypatch):
    monkeypatch.setattr(warmup, "REWARM_QUIET_S", 0.5)
    db = tmp_path / "c.db"
    with Indexer(db, embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    service = mcp.Service(db, embedder=shared_embedder)
    service.searcher.search("alpha", 1)  # loaded, never warmed: a call starts a re-warm
    with service.lock:
        service.rewarm.check()
    service.close()
    service.rewarm.thread.join(timeout=30)
    assert not service.rewarm.thread.is_alive() and service.rewarm.generation is None
