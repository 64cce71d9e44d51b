"""`brainbot mcp` driven by the official MCP client over stdio, as an agent would."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from conftest import EXAMPLES, copy_tree

from brainbot.index.indexer import Indexer

TOOLS = {"search", "get", "status", "ask"}


def server_env() -> dict[str, str]:
    """The client passes the server only HOME, PATH and a few more: hand it ours, minus
    any API key (the ask tool must take the offline path here)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def session(db: Path, body, *extra: str, errlog: Path | None = None):
    """Run ``body(session)`` against a fresh `brainbot mcp --db db` process."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "brainbot", "mcp", "--db", str(db), *extra],
                                   env=server_env())

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


def test_mcp_watch_keeps_the_served_index_fresh(tmp_path, shared_embedder):
    vault = tmp_path / "v"
    vault.mkdir()
    (vault / "a.md").write_text("# A\n\nApples grow in the orchard.\n")
    db = tmp_path / "w.db"
    with Indexer(db, embedder=shared_embedder) as ix:
        ix.index_paths([vault])

    async def body(s):
        await anyio.sleep(1.5)  # the watch is armed and has done its first pass
        (vault / "b.md").write_text("# B\n\nBlueberries need acid soil.\n")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            r = await s.call_tool("search", {"query": "blueberries acid soil", "mode": "bm25"})
            if r.structured_content["hits"]:
                return r
            await anyio.sleep(0.2)
        return r

    result = session(db, body, "--watch", str(vault))
    assert result.structured_content["hits"][0]["path"] == "b.md"
