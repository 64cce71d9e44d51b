"""While asks wait on the model, the servers answer everything else (issue 32, M4).

The fake Messages API holds its replies (``FakeAnthropic.hold``) until the test releases
them, so an ask is stopped inside its model call for as long as the test needs: the
searches, `get`, `status`, `related` and the MCP search made meanwhile must complete
while it is still waiting (a condition on the fake and on the ask's thread, never a
time). Asks past the server's queue are refused at once, and searches still answer.
"""

from __future__ import annotations

import json
import threading
from urllib.parse import quote

import anyio
import pytest
from conftest import copy_tree
from fake_anthropic import cite_text, message, search_results, text
from test_mcp import server_env, session
from test_serve import Daemon, cli
from wait_kit import until, wait_until

from brainbot.serve.service import ASK_QUEUE, ASK_WORKERS

QUESTION = "How often do I feed the sourdough starter?"


def reply(body):
    """The model's answer: one sentence citing the sourdough result it was sent."""
    i = next(i for i, b in enumerate(search_results(body)) if "sourdough" in b["source"])
    return message(text("Twice a day.", [cite_text(body, i, "twice")]))


@pytest.fixture(scope="module")
def claude_daemon(examples_db, tmp_path_factory, fake):
    db = copy_tree(examples_db.parent, tmp_path_factory.mktemp("asks") / "n") / examples_db.name
    d = Daemon(db, env={"ANTHROPIC_BASE_URL": fake.url, "ANTHROPIC_API_KEY": "test-key"})
    yield d
    fake.release()
    assert d.stop() in (0, -15)


def in_thread(fn, *args) -> tuple[threading.Thread, dict]:
    """``fn(*args)`` started in a thread; its result lands in the dict as "result"."""
    out: dict = {}

    def run():
        try:
            out["result"] = fn(*args)
        except Exception as exc:  # noqa: BLE001 - asserted by the caller
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def mcp_http(port: int, name: str, args: dict):
    """One MCP tool call through the official client over Streamable HTTP."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def main():
        async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as streams:
            async with ClientSession(streams[0], streams[1]) as s:
                await s.initialize()
                return await s.call_tool(name, args)

    return anyio.run(main)


def test_everything_else_answers_while_asks_wait_on_the_model(claude_daemon, fake):
    """An ask through /api/ask and one through the MCP ask tool both wait inside the
    model call; meanwhile /api/search, /api/get, /api/status, /api/related, the MCP
    search tool and a `brainbot query` sent to the daemon complete. Then both asks
    finish, cited."""
    d = claude_daemon
    fake.push(reply, reply)
    fake.hold()
    try:
        api_ask, api_out = in_thread(d.json, "POST", "/api/ask", {"question": QUESTION})
        mcp_ask, mcp_out = in_thread(mcp_http, d.port, "ask", {"question": QUESTION})
        fake.wait_held(2)
        status, found = d.json("POST", "/api/search", {"query": "sourdough starter", "k": 2})
        assert status == 200 and found["hits"], found
        hit = found["hits"][0]
        ref = quote(f"{hit['path']}:{hit['start_line']}:2")
        assert d.json("GET", f"/api/get?ref={ref}")[0] == 200
        assert d.json("GET", "/api/status")[0] == 200
        assert d.json("GET", f"/api/related?note={quote(hit['path'])}&k=2")[0] == 200
        searched = mcp_http(d.port, "search", {"query": "sourdough starter", "k": 2})
        assert not searched.is_error and searched.structured_content["hits"]
        db = d.proc.args[d.proc.args.index("--db") + 1]
        query = cli("query", "sourdough starter", "-k", "2", "--json", "--db", db)
        assert query.returncode == 0 and len(json.loads(query.stdout)) == 2
        assert query.stderr.splitlines()[-1] == "False False"  # answered by the daemon
        assert api_ask.is_alive() and mcp_ask.is_alive() and fake.held == 2
    finally:
        fake.release()
    api_ask.join(timeout=120)
    mcp_ask.join(timeout=120)
    status, answer = api_out["result"]
    assert status == 200 and answer["mode"] == "claude" and answer["citations"], answer
    asked = mcp_out["result"]
    assert not asked.is_error and asked.structured_content["citations"]


def test_asks_past_the_queue_are_refused_and_searches_still_answer(claude_daemon, fake):
    """ASK_WORKERS asks in the model, ASK_QUEUE more waiting for a worker (as /api/status
    says): the next ask is a 503 at once, a search still answers, and once the model
    replies every accepted ask gets its answer."""
    d = claude_daemon
    n = ASK_WORKERS + ASK_QUEUE
    fake.push(*[reply] * n)
    fake.hold()
    try:
        asks = [in_thread(d.json, "POST", "/api/ask", {"question": QUESTION})
                for _ in range(n)]
        fake.wait_held(ASK_WORKERS)
        wait_until(lambda: d.json("GET", "/api/status")[1]["asks"] == {
            "answering": ASK_WORKERS, "waiting": ASK_QUEUE}, "the asks queued", timeout=120)
        status, refused = d.json("POST", "/api/ask", {"question": QUESTION})
        assert status == 503 and "ask again shortly" in refused["error"], refused
        status, found = d.json("POST", "/api/search", {"query": "sourdough", "k": 1})
        assert status == 200 and found["hits"]
        assert fake.held == ASK_WORKERS and all(t.is_alive() for t, _ in asks)
    finally:
        fake.release()
    for thread, out in asks:
        thread.join(timeout=120)
        status, answer = out["result"]
        assert status == 200 and answer["citations"], answer
    assert d.json("GET", "/api/status")[1]["asks"] == {"answering": 0, "waiting": 0}


def test_stdio_mcp_searches_while_its_ask_waits_on_the_model(examples_db, tmp_path, fake):
    """`brainbot mcp` takes the next request while the ask tool waits on the model."""
    db = copy_tree(examples_db.parent, tmp_path / "stdio") / examples_db.name
    fake.push(reply)
    fake.hold()

    async def body(s):
        results = {}

        async def ask():
            results["ask"] = await s.call_tool("ask", {"question": QUESTION})

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            async def held():
                return fake.held >= 1

            await until(held, "the ask waits on the model", timeout=120)
            results["search"] = await s.call_tool("search", {"query": "sourdough", "k": 1})
            results["waiting"] = "ask" not in results and fake.held == 1
            fake.release()
        return results

    try:
        results = session(db, body, env=server_env(ANTHROPIC_BASE_URL=fake.url,
                                                   ANTHROPIC_API_KEY="test-key"))
    finally:
        fake.release()
    assert results["waiting"]
    assert not results["search"].is_error and results["search"].structured_content["hits"]
    assert not results["ask"].is_error and results["ask"].structured_content["citations"]
