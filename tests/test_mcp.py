"""`brainbot mcp` driven by the official MCP client over stdio, as an agent would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from conftest import EXAMPLES, copy_tree, index_copy
from wait_kit import until

from brainbot.index.indexer import Indexer
from brainbot.store.sqlite.file import SCHEMA_VERSION

TOOLS = {"search", "get", "status", "ask", "related"}


def server_env(**extra: str) -> dict[str, str]:
    """The client passes the server only HOME, PATH and a few more: hand it ours, minus
    any API key (the ask tool must take the offline path here), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC")}
    env["PYTHONUNBUFFERED"] = "1"
    return env | extra


def session(db: Path, body, *extra: str, errlog: Path | None = None,
            env: dict[str, str] | None = None):
    """Run ``body(session)`` against a fresh `brainbot mcp --db db` process."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "brainbot", "mcp", "--db", str(db), *extra],
                                   env=env or server_env())

    async def main():
        with open(errlog or os.devnull, "w") as err:
            async with stdio_client(params, errlog=err) as (read, write):
                async with ClientSession(read, write) as s:
                    await s.initialize()
                    return await body(s)

    return anyio.run(main)


@pytest.fixture(scope="module")
def served(tmp_path_factory, shared_embedder):
    root = tmp_path_factory.mktemp("mcp")
    vault = copy_tree(EXAMPLES, root / "notes")
    db = root / "n.db"
    with Indexer(db, embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    return db, vault


def test_tools_are_listed_read_only_and_each_answers(served, tmp_path):
    db, _ = served

    async def body(s):
        tools = {t.name: t for t in (await s.list_tools()).tools}
        found = await s.call_tool("search", {"query": "sourdough starter feeding", "k": 3})
        hit = found.structured_content["hits"][0]
        got = await s.call_tool("get", {"ref": f"{hit['path']}:{hit['start_line']}",
                                        "count": 2})
        status = await s.call_tool("status", {})
        asked = await s.call_tool("ask", {"question": "How often do I feed the starter?"})
        return tools, found, got, status, asked

    err = tmp_path / "server.err"
    tools, found, got, status, asked = session(db, body, errlog=err)
    assert set(tools) == TOOLS
    for t in tools.values():
        assert t.annotations.read_only_hint is True and t.annotations.destructive_hint is False
        assert len(t.description) > 60 and "\n    " not in t.description
    hits = found.structured_content["hits"]
    assert not found.is_error and len(hits) == 3 and hits[0]["path"] == "cooking/sourdough.md"
    assert {"chunk_id", "path", "heading_path", "start_line", "end_line", "score", "text",
            "stale"} <= set(hits[0]) and hits[0]["stale"] is False
    lines = got.structured_content["lines"]
    assert [x["line"] for x in lines] == [hits[0]["start_line"], hits[0]["start_line"] + 1]
    assert status.structured_content["documents"] == 32
    answer = asked.structured_content
    assert answer["mode"] == "extractive" and not answer["refused"]
    assert "Traceback" not in err.read_text()


def test_bad_arguments_are_tool_errors_and_the_server_survives(served):
    db, _ = served
    bad = [("search", {"query": "starter", "k": 0}, "k must be at least 1"),
           ("search", {"query": "starter", "mode": "fuzzy"}, "unknown mode 'fuzzy'"),
           ("search", {"query": "   "}, "the query is empty"),
           ("get", {"ref": "../../etc/passwd"}, "is not a document of this index"),
           ("get", {"ref": "/etc/passwd:1:3"}, "is not a document of this index"),
           ("get", {"ref": "0123456789abcdef"}, "is not a document of this index"),
           ("get", {"ref": "cooking/sourdough.md:99999"}, "out of range")]

    async def body(s):
        out = [(await s.call_tool(name, args), expected) for name, args, expected in bad]
        after = await s.call_tool("search", {"query": "starter", "k": 1})
        outside = await s.call_tool("search", {"query": "starter", "path": "../*"})
        return out, after, outside

    results, after, outside = session(db, body)
    for result, expected in results:
        text = result.content[0].text
        assert result.is_error and expected in text and "\n" not in text, text
    assert not after.is_error and after.structured_content["hits"]
    assert outside.structured_content["hits"] == []


def test_a_concurrent_index_is_picked_up_without_a_restart(served, tmp_path):
    db, vault = served
    work = tmp_path / "n.db"
    work.write_bytes(db.read_bytes())
    (vault / "zeppelins.md").write_text("# Zeppelins\n\nThe zeppelin hangar at "
                                        "Friedrichshafen is 240 metres long.\n")
    try:
        async def body(s):
            before = await s.call_tool("search", {"query": "zeppelin hangar", "mode": "bm25"})
            indexer = subprocess.Popen([sys.executable, "-m", "brainbot", "index", str(vault),
                                        "--db", str(work)], env=server_env(),
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            during = []
            while indexer.poll() is None:  # searches while the index commits
                during.append(await s.call_tool("search", {"query": "sourdough", "k": 2}))
                await anyio.sleep(0.05)
            assert indexer.returncode == 0, indexer.stderr.read()
            after = await s.call_tool("search", {"query": "zeppelin hangar", "mode": "bm25"})
            return before, during, after

        before, during, after = session(work, body)
    finally:
        (vault / "zeppelins.md").unlink()
    assert before.structured_content["hits"] == []
    assert during and not any(r.is_error for r in during)
    assert after.structured_content["hits"][0]["path"] == "zeppelins.md"


def test_stdout_carries_only_json_rpc(served):
    """Raw JSON-RPC in, raw lines out: every line on stdout must parse as a message."""
    import json

    db, _ = served
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "search", "arguments": {"query": "starter", "k": 1}}},
    ]
    proc = subprocess.Popen([sys.executable, "-m", "brainbot", "mcp", "--db", str(db)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=server_env(), text=True)
    lines = []
    try:
        for r in requests:
            proc.stdin.write(json.dumps(r) + "\n")
            proc.stdin.flush()
            if "id" in r:
                lines.append(proc.stdout.readline())
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    messages = [json.loads(line) for line in lines]
    assert [m["id"] for m in messages] == [1, 2]
    assert messages[1]["result"]["structuredContent"]["hits"]
    assert proc.stdout.read() == ""
    assert proc.returncode == 0


def passes_logged(err: Path) -> list[str]:
    return [line for line in err.read_text().splitlines() if " · " in line]


def hits_for(s, query: str, **args):
    """A coroutine function for ``until``: the bm25 hits of ``query`` (empty: not yet)."""
    async def hits():
        r = await s.call_tool("search", {"query": query, "mode": "bm25", **args})
        return r.structured_content["hits"]

    return hits


def one_note_index(tmp_path: Path, embedder, text: str = "Apples grow in the orchard."):
    """A folder holding a.md and the index of it."""
    vault = tmp_path / "v"
    vault.mkdir()
    (vault / "a.md").write_text(f"# A\n\n{text}\n")
    db = tmp_path / "w.db"
    with Indexer(db, embedder=embedder) as ix:
        ix.index_paths([vault])
    return vault, db


def test_mcp_watch_keeps_the_served_index_fresh(tmp_path, shared_embedder):
    vault, db = one_note_index(tmp_path, shared_embedder)
    err = tmp_path / "server.err"

    async def first_pass():
        return any(": all notes · " in line for line in passes_logged(err))

    async def body(s):
        await until(first_pass, "the first pass in the server's log")  # armed: events now
        (vault / "b.md").write_text("# B\n\nBlueberries need acid soil.\n")
        return await until(hits_for(s, "blueberries acid soil"), "b.md searchable")

    hits = session(db, body, "--watch", str(vault), errlog=err)
    assert hits[0]["path"] == "b.md"
    assert any(": b.md · 1 new" in line for line in passes_logged(err)), err.read_text()


def test_mcp_watch_creates_a_new_index_and_serves_at_once(tmp_path):
    """The README's Claude Code setup on day one: no index yet."""
    vault = copy_tree(EXAMPLES, tmp_path / "notes")
    db = tmp_path / "new.db"

    async def body(s):
        status = (await s.call_tool("status", {})).structured_content
        hits = await until(hits_for(s, "sourdough starter"), "the first batches committed",
                           timeout=180)
        return status, hits

    status, hits = session(db, body, "--watch", str(vault))
    assert status["schema"] == str(SCHEMA_VERSION) and status["watch"]["running"] is True
    assert hits[0]["path"] == "cooking/sourdough.md"


def test_mcp_watch_migrates_an_older_index_first(tmp_path, shared_embedder):
    from test_vault import _as_schema_three

    vault, db = one_note_index(tmp_path, shared_embedder, "Apples grow in the orchard. #fruit")
    _as_schema_three(db)

    async def body(s):
        found = await s.call_tool("search", {"query": "apples orchard", "mode": "bm25"})
        tagged = await until(hits_for(s, "apples", tag="fruit"),  # the first pass fills them
                             "the tags filled")
        return found, tagged, await s.call_tool("status", {})

    found, tagged, status = session(db, body, "--watch", str(vault))
    assert not found.is_error and found.structured_content["hits"][0]["path"] == "a.md"
    assert tagged[0]["path"] == "a.md"
    assert status.structured_content["schema"] == str(SCHEMA_VERSION)


def test_status_reports_a_failing_watch(tmp_path, shared_embedder):
    """The reader accepts an index another chunker built; the watch's writer cannot add
    to it: every pass fails, and status says so (with the watch still running)."""
    import sqlean

    vault, db = one_note_index(tmp_path, shared_embedder)
    conn = sqlean.connect(str(db))
    conn.execute("UPDATE meta SET value = 'chunker0-other' WHERE key = 'chunker'")
    conn.commit()
    conn.close()

    async def body(s):
        async def failing():
            watch = (await s.call_tool("status", {})).structured_content["watch"]
            return watch if watch["failing"] else None

        return await until(failing, "the watch reported failing")

    watch = session(db, body, "--watch", str(vault))
    assert watch["running"] is True and watch["passes"] == 0
    failure = watch["failing"][str(vault)]
    assert "chunker" in failure["error"] and failure["failures"] >= 1 and failure["since"]


def test_a_dead_watch_is_logged_and_shown_in_status(examples_db, caplog, tmp_path):
    import threading

    from brainbot.serve import mcp
    from brainbot.serve.watch import Watcher

    watcher = Watcher([tmp_path], str(examples_db))

    def broken():
        raise RuntimeError("killed")  # as if run() had let something through

    watcher.run = broken
    thread = threading.Thread(target=mcp._watch, args=(watcher, "serve"))
    thread.start()
    thread.join()
    assert "the watch stopped" in caplog.text and "RuntimeError: killed" in caplog.text
    assert "the watch is no longer running" in caplog.text
    assert "restart brainbot serve" in caplog.text  # the command that runs it (L22)
    service = mcp.Service(examples_db)
    try:
        service.watching = (watcher, thread)
        assert service.status()["watch"]["running"] is False
    finally:
        service.searcher.close()


def test_mcp_exit_stops_the_watch_between_transactions(tmp_path, shared_embedder):
    """The client closes the session in the middle of the first pass: the server stops the
    pass at its next transaction and closes the writer before leaving, so the last
    connection to close checkpoints the WAL away (a writer killed by the exit would leave
    it behind) and the index holds whole batches."""
    import sqlean

    vault = tmp_path / "v"
    vault.mkdir()
    for i in range(300):  # ~300 chunks to embed: several seconds of first pass
        (vault / f"n{i:03}.md").write_text(f"# Note {i}\n\nLantern {i} hangs by gate "
                                           f"{i * 7 % 101} of the walled garden.\n")
    db = tmp_path / "w.db"
    with Indexer(db, embedder=shared_embedder):  # an empty index, to watch into
        pass

    def generation() -> int:
        if not db.exists():
            return 0
        conn = sqlean.connect(str(db))
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
            return int(row[0]) if row else 0
        except sqlean.OperationalError:
            return 0
        finally:
            conn.close()

    async def body(s):
        async def committed():
            return generation() >= 1

        await until(committed, "the first batch committed", timeout=120)
        return generation()

    err = tmp_path / "server.err"
    at_close = session(db, body, "--watch", str(vault), errlog=err)
    wal_left = Path(f"{db}-wal").exists()  # before any connection here checkpoints it
    conn = sqlean.connect(str(db))
    try:
        documents = conn.execute("SELECT count(*) FROM documents").fetchone()[0]
        unembedded = conn.execute("SELECT count(*) FROM chunks WHERE id NOT IN "
                                  "(SELECT chunk FROM embeddings)").fetchone()[0]
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    # Two phases: the lexical one writes every note quickly, the semantic one takes the time,
    # so a pass stopped in either leaves notes unwritten or chunks without a vector.
    assert documents < 300 or unembedded > 0, \
        "the pass ended before the client closed: nothing was tested"
    assert not wal_left, err.read_text()
    assert generation() >= at_close and "Traceback" not in err.read_text()


def test_ask_is_open_world_when_a_key_may_send_notes_out(served, tmp_path):
    db, _ = served

    async def body(s):
        return {t.name: t.annotations.open_world_hint for t in (await s.list_tools()).tools}

    home = tmp_path / "home"  # no ~/.config/anthropic there
    home.mkdir()
    offline = session(db, body, env=server_env(HOME=str(home)))
    keyed = session(db, body, env=server_env(HOME=str(home), ANTHROPIC_API_KEY="sk-ant-test",
                                             ANTHROPIC_BASE_URL="http://127.0.0.1:9"))
    assert offline == {"search": False, "get": False, "status": False, "ask": False,
                       "related": False}
    assert keyed == {"search": False, "get": False, "status": False, "ask": True,
                     "related": False}


def test_filter_arguments_through_the_server(tmp_path, shared_embedder):
    """since, before, tag and linked_to reach the searcher as the CLI's flags do: the same
    hits as the Searcher with the same filter; a bad date is a one-line tool error."""
    from test_vault import VAULT

    from brainbot.search.searcher import Searcher

    db = tmp_path / "v.db"
    with Indexer(db, embedder=shared_embedder) as ix:
        ix.index_paths([VAULT])
    cases = [({"tag": "project/heron"}, {"tags": ["project/heron"]}),
             ({"since": "2026-02-01", "before": "2026-03-01"},
              {"since": "2026-02-01", "before": "2026-03-01"}),
             ({"linked_to": "Heron"}, {"linked_to": "Heron"}),
             ({"path": "daily/*", "tag": "travel"}, {"path_glob": "daily/*", "tags": ["travel"]})]

    async def body(s):
        out = []
        for args, _ in cases:
            r = await s.call_tool("search", {"query": "heron travel plan", "mode": "bm25",
                                             "k": 50, **args})
            out.append([h["chunk_id"] for h in r.structured_content["hits"]])
        bad = await s.call_tool("search", {"query": "heron", "since": "3000y"})
        return out, bad

    got, bad = session(db, body)
    with Searcher(db, embedder=shared_embedder) as searcher:
        for (_, kwargs), ids in zip(cases, got, strict=True):
            want = [h.chunk_id for h in searcher.search("heron travel plan", 50, mode="bm25",
                                                        **kwargs)]
            assert ids == want and ids, kwargs
    text = bad.content[0].text
    assert bad.is_error and "YYYY-MM-DD" in text and "\n" not in text, text


def test_get_reads_a_stale_hit_as_the_search_tool_advises(tmp_path, vault, shared_embedder):
    db = tmp_path / "n.db"
    with Indexer(db, embedder=shared_embedder) as ix:
        ix.index_paths([vault])
    note = vault / "alpha.md"
    note.write_text(note.read_text() + "\nThe alpha launch moved to April.\n")

    async def body(s):
        found = await s.call_tool("search", {"query": "alpha project ships", "k": 1,
                                             "mode": "bm25"})
        hit = found.structured_content["hits"][0]
        return hit, await s.call_tool("get", {"ref": hit["path"]})

    hit, got = session(db, body)
    assert hit["stale"] is True and hit["root"] == str(vault)
    assert not got.is_error, got.content[0].text
    assert got.structured_content["stale"] is True
    assert "The alpha launch moved to April." in got.structured_content["text"]


def test_ask_takes_a_conversation_and_returns_it(served, tmp_path):
    """A follow-up through the `ask` tool: the answer names its conversation; passing it
    back continues it (the follow-up is answered about the starter), an unknown one is a
    tool error; `status` counts the conversations."""
    db = index_copy(served[0], tmp_path / "idx")

    async def body(s):
        first = (await s.call_tool("ask", {"question": "How do I make the tare for my "
                                           "shoyu ramen?"})).structured_content
        follow = (await s.call_tool("ask", {"question": "how long does it keep?",
                                            "conversation": first["conversation"]})
                  ).structured_content
        unknown = await s.call_tool("ask", {"question": "and the eggs?",
                                            "conversation": "nope"})
        status = (await s.call_tool("status", {})).structured_content
        return first, follow, unknown, status

    first, follow, unknown, status = session(db, body)
    assert isinstance(first["conversation"], str) and first["turn"] == 1
    assert follow["conversation"] == first["conversation"] and follow["turn"] == 2
    assert "3 months" in follow["answer"]
    assert unknown.is_error and "no conversation 'nope'" in unknown.content[0].text
    assert status["conversations"] == 1
