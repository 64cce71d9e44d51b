"""`brainbot serve`: a real daemon process, driven over HTTP (JSON API, the official MCP
client over Streamable HTTP) and checked for the Host, Origin and token rules."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import quote

import anyio
import pytest
from conftest import EXAMPLES, copy_tree, index_copy
from wait_kit import wait_until

TOOLS = {"search", "get", "status", "ask", "related"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def offline_env() -> dict:
    """This environment without ANTHROPIC_* (no Claude: extractive answers)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC")}


class Daemon:
    """`brainbot serve` in a child process, on a free port, stopped with SIGTERM."""

    def __init__(self, db: Path, *extra: str, host: str = "127.0.0.1",
                 env: dict | None = None) -> None:
        self.port = free_port()
        self.host = host
        env = {**offline_env(), **(env or {})}
        self.log = open(Path(str(db) + f".serve-{self.port}.log"), "w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "brainbot", "serve", "--db", str(db), "--host", host,
             "--port", str(self.port), *extra], env=env, stdout=self.log, stderr=self.log)
        self.wait_ready()

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.output()
            try:
                with socket.create_connection((self.host, self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        raise AssertionError("serve did not start: " + self.output())

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def request(self, method: str, path: str, body=None, headers=None):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        data = json.dumps(body).encode() if body is not None and not isinstance(
            body, bytes) else body
        conn.request(method, path, body=data, headers={"Content-Type": "application/json",
                                                        **(headers or {})})
        resp = conn.getresponse()
        raw = resp.read()
        conn.close()
        return resp.status, dict(resp.getheaders()), raw

    def json(self, method: str, path: str, body=None, headers=None):
        status, _, raw = self.request(method, path, body, headers)
        return status, json.loads(raw)

    def stop(self) -> int:
        self.proc.terminate()
        try:
            return self.proc.wait(timeout=30)
        finally:
            self.log.close()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    from brainbot.index.indexer import Indexer

    folder = tmp_path_factory.mktemp("serve")
    db = folder / "notes.db"
    with Indexer(db) as ix:
        ix.index_paths([EXAMPLES])
    assert ix.precision == "int8"  # a new index's default (#33): the daemon serves int8
    d = Daemon(db)
    yield d
    assert d.stop() in (0, -15)  # uvicorn re-raises the SIGTERM it handled


def test_health_status_search_get_ask(daemon):
    assert daemon.json("GET", "/health") == (200, {"ok": True})
    status, info = daemon.json("GET", "/api/status")
    assert status == 200 and info["documents"] > 0
    status, found = daemon.json("POST", "/api/search", {"query": "sourdough starter", "k": 3})
    assert status == 200 and len(found["hits"]) == 3
    hit = found["hits"][0]
    assert {"chunk_id", "path", "heading_path", "start_line", "end_line", "score", "text",
            "stale"} <= set(hit)
    assert "sourdough" in hit["path"].lower() or "sourdough" in hit["text"].lower()
    status, lines = daemon.json("GET", f"/api/get?ref={hit['path']}:{hit['start_line']}:3")
    assert status == 200 and [x["line"] for x in lines["lines"]] == [
        hit["start_line"], hit["start_line"] + 1, hit["start_line"] + 2]
    status, answer = daemon.json("POST", "/api/ask",
                                 {"question": "How often do I feed the sourdough starter?"})
    assert status == 200 and answer["citations"], answer


def test_same_records_as_cli_json(daemon, tmp_path):
    db = daemon.proc.args[daemon.proc.args.index("--db") + 1]
    out = subprocess.run([sys.executable, "-m", "brainbot", "query", "proofing dough", "-k",
                          "4", "--json", "--db", db], capture_output=True, text=True,
                         check=True).stdout
    status, found = daemon.json("POST", "/api/search", {"query": "proofing dough", "k": 4})
    assert status == 200 and found["hits"] == json.loads(out)


def test_api_related_is_the_cli_record(daemon):
    db = daemon.proc.args[daemon.proc.args.index("--db") + 1]
    out = subprocess.run([sys.executable, "-m", "brainbot", "related", "sourdough", "-k",
                          "4", "--json", "--db", db], capture_output=True, text=True,
                         check=True).stdout
    status, found = daemon.json("GET", "/api/related?note=sourdough&k=4")
    assert status == 200 and found["related"] == json.loads(out) and len(out) > 10
    assert found["note"] not in [r["path"] for r in found["related"]]
    status, hidden = daemon.json("GET", "/api/related?note=sourdough&k=4&unlinked=true")
    assert status == 200 and not any(r["linked"] for r in hidden["related"])
    assert any(r["linked"] for r in found["related"])


@pytest.mark.parametrize("method,path,body,needle", [
    ("GET", "/api/related", None, "give note"),
    ("GET", "/api/related?note=sourdough&k=0", None, "k must be"),
    ("GET", "/api/related?note=sourdough&k=x", None, "k must be"),
    ("GET", "/api/related?note=no%20such%20note", None, "no note named"),
    ("POST", "/api/search", {"query": "x", "k": 0}, "k must be"),
    ("POST", "/api/search", {"query": "x", "mode": "fuzzy"}, "mode"),
    ("POST", "/api/search", {"query": ""}, "query"),
    ("POST", "/api/search", {"query": "x", "k": "3"}, "k must be a int"),
    ("POST", "/api/search", {"query": "x", "nope": 1}, "unknown field"),
    ("POST", "/api/search", b"{not json", "not JSON"),
    ("POST", "/api/search", [1, 2], "must be an object"),
    ("POST", "/api/search", {"query": "x", "since": "3000y"}, ""),
    ("GET", "/api/get?ref=no/such/note.md", None, ""),
    ("GET", "/api/get", None, "ref"),
    ("GET", "/api/get?ref=a.md&count=x", None, "count"),
    ("GET", "/api/get?ref=a.md&count=%C2%B2", None, "count must be"),  # '²' (L13)
    ("GET", "/api/related?note=sourdough&k=%C2%B2", None, "k must be"),
    ("POST", "/api/ask", {"question": 3}, "question"),
])
def test_bad_input_is_a_4xx_with_one_line(daemon, method, path, body, needle):
    status, reply = daemon.json(method, path, body)
    assert 400 <= status < 500, reply
    assert isinstance(reply["error"], str) and "\n" not in reply["error"]
    assert needle in reply["error"]
    assert daemon.json("GET", "/health")[0] == 200  # still serving


def test_foreign_host_and_origin_are_refused(daemon):
    p = daemon.port
    for headers in ({"Host": f"evil.example:{p}"}, {"Host": "127.0.0.1:1"},
                    {"Host": f"attacker.com:{p}"},
                    {"Origin": "http://evil.example"}, {"Origin": f"http://localhost:{p}"},
                    {"Origin": "null"}):
        for path in ("/health", "/api/status", "/mcp", "/"):
            status, hdrs, raw = daemon.request("GET" if path != "/mcp" else "POST", path,
                                               {} if path == "/mcp" else None, headers)
            assert status == 403, (headers, path, status, raw)
            assert "access-control-allow-origin" not in {k.lower() for k in hdrs}
    status, _, _ = daemon.request("GET", "/health", None,
                                  {"Origin": f"http://127.0.0.1:{p}"})
    assert status == 200
    status, _, _ = daemon.request("GET", "/health", None,
                                  {"Host": f"localhost:{p}", "Origin": f"http://localhost:{p}"})
    assert status == 200


def test_no_cors_and_only_package_files(daemon):
    status, hdrs, _ = daemon.request("OPTIONS", "/api/search", None,
                                     {"Access-Control-Request-Method": "POST"})
    assert "access-control-allow-origin" not in {k.lower() for k in hdrs}
    for path in ("/static/../http.py", "/static/..%2fhttp.py", "/static/http.py",
                 "/etc/passwd", "/static/.hidden.js"):
        assert daemon.request("GET", path)[0] == 404, path


def test_non_loopback_host_needs_a_token(examples_db):
    r = subprocess.run([sys.executable, "-m", "brainbot", "serve", "--db", str(examples_db),
                        "--host", "0.0.0.0", "--port", str(free_port())],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--token" in r.stderr and "Traceback" not in r.stderr


def test_token_rule(examples_db, tmp_path):
    db = copy_tree(examples_db.parent, tmp_path / "copy") / examples_db.name
    d = Daemon(db, "--token", "s3cret", host="0.0.0.0")
    d.host = "127.0.0.1"
    try:
        assert d.request("GET", "/health")[0] == 401
        assert d.request("GET", "/health", None, {"Authorization": "Bearer nope"})[0] == 401
        ok = {"Authorization": "Bearer s3cret"}
        assert d.json("GET", "/health", None, ok) == (200, {"ok": True})
        assert d.request("POST", "/api/search", {"query": "bread"}, ok)[0] == 200
    finally:
        assert d.stop() in (0, -15)  # uvicorn re-raises the SIGTERM it handled


def test_official_mcp_client_over_http(daemon):
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def main():
        async with streamable_http_client(f"http://127.0.0.1:{daemon.port}/mcp") as streams:
            async with ClientSession(streams[0], streams[1]) as s:
                await s.initialize()
                tools = {t.name: t for t in (await s.list_tools()).tools}
                found = await s.call_tool("search", {"query": "sourdough starter", "k": 2})
                hit = found.structured_content["hits"][0]
                got = await s.call_tool("get", {"ref": f"{hit['path']}:{hit['start_line']}",
                                                "count": 2})
                status = await s.call_tool("status", {})
                asked = await s.call_tool("ask", {"question": "How often do I feed the "
                                                              "starter?"})
                bad = await s.call_tool("search", {"query": "x", "k": 0})
                near = await s.call_tool("related", {"note": hit["path"], "k": 3})
                return tools, found, got, status, asked, bad, near

    tools, found, got, status, asked, bad, near = anyio.run(main)
    note = quote(found.structured_content["hits"][0]["path"])
    code, api = daemon.json("GET", f"/api/related?note={note}&k=3")
    assert code == 200 and len(api["related"]) == 3
    assert near.structured_content["related"] == api["related"]
    assert set(tools) >= TOOLS
    assert all(t.annotations.read_only_hint for t in tools.values())
    assert not found.is_error and len(found.structured_content["hits"]) == 2
    assert len(got.structured_content["lines"]) == 2
    assert status.structured_content["documents"] > 0
    assert asked.structured_content["citations"]
    assert bad.is_error


def test_concurrent_clients_while_a_watch_reindexes(tmp_path):
    """8 clients x 50 requests while the daemon's own watch indexes a vault that keeps
    changing: every reply is a 200 with a valid record."""
    vault = copy_tree(EXAMPLES, tmp_path / "vault")
    d = Daemon(tmp_path / "w.db", "--watch", str(vault))
    errors: list = []
    stop = threading.Event()

    def churn():
        n = 0
        while not stop.is_set():
            (vault / f"churn-{n % 5}.md").write_text(f"# Churn {n}\n\nzeppelin {n}\n" * 20)
            n += 1
            time.sleep(0.3)

    def client(i):
        for j in range(50):
            try:
                if j % 3 == 2:
                    status, reply = d.json("GET", "/api/status")
                    ok = status == 200 and "documents" in reply
                else:
                    status, reply = d.json("POST", "/api/search",
                                           {"query": ["sourdough", "zeppelin"][j % 2], "k": 3})
                    ok = status == 200 and isinstance(reply.get("hits"), list) and all(
                        "path" in h for h in reply["hits"])
                if not ok:
                    errors.append((i, j, status, reply))
            except Exception as exc:  # noqa: BLE001 - collected, asserted below
                errors.append((i, j, repr(exc)))

    writer = threading.Thread(target=churn)
    writer.start()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        stop.set()
        writer.join()
        assert d.stop() in (0, -15)  # uvicorn re-raises the SIGTERM it handled
    # An index still being created may answer 400 'no documents' at first: only 5xx, a
    # broken reply or a dropped connection are failures.
    real = [e for e in errors if len(e) != 4 or not 400 <= e[2] < 500]
    assert not real, real[:5]


PROBE = ("import sys; from brainbot.cli import main; code = main(sys.argv[1:]); "
         "print('numpy' in sys.modules, 'onnxruntime' in sys.modules, file=sys.stderr); "
         "sys.exit(code)")


def cli(*argv: str, env=None) -> subprocess.CompletedProcess:
    """`brainbot ARGV` in a fresh interpreter, which reports on stderr's last line whether
    numpy and onnxruntime were imported."""
    return subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True,
                          text=True, env=env)


def test_cli_query_uses_the_running_daemon_with_the_same_output(daemon, tmp_path):
    import shutil

    db = daemon.proc.args[daemon.proc.args.index("--db") + 1]
    info = json.loads(Path(db + ".serve.json").read_text())
    assert info["port"] == daemon.port and info["pid"] == daemon.proc.pid
    alone = tmp_path / "alone.db"  # the same index without a daemon: searched in-process
    shutil.copy(db, alone)
    for fmt in ((), ("--json",), ("--jsonl",), ("--path", "cooking/*", "--json")):
        via = cli("query", "proofing dough", "-k", "4", "--db", db, *fmt)
        here = cli("query", "proofing dough", "-k", "4", "--db", str(alone), *fmt)
        assert via.returncode == here.returncode == 0, via.stderr + here.stderr
        assert new_ids(via.stdout) == new_ids(here.stdout) and via.stdout.strip()
        assert via.stderr.splitlines()[-1] == "False False"  # no numpy, no onnxruntime
        assert here.stderr.splitlines()[-1] == "True True"
    # what the daemon's API does not take is searched here
    assert cli("query", "dough", "--explain", "--db", db).stderr.splitlines()[-1] == \
        "True True"


@pytest.mark.parametrize("change", ["pid", "version", "path", "garbage", "nothing"])
def test_a_stale_daemon_file_falls_back_silently(daemon, tmp_path, change):
    """A copy of the daemon's index (a byte copy: the same index_id) with a daemon file
    naming the live daemon: whatever is stale, the CLI searches here and says nothing.
    With nothing stale in the file the daemon itself refuses (409): it serves another
    path, so the same index_id is not enough."""
    import shutil

    db = daemon.proc.args[daemon.proc.args.index("--db") + 1]
    info = json.loads(Path(db + ".serve.json").read_text())
    copy = tmp_path / "copy.db"
    shutil.copy(db, copy)
    info["path"] = os.path.realpath(copy)  # the copy's own: only `change` is stale
    stale = {"pid": 2 ** 22 + 12345, "version": "0.0.0-other", "path": db}
    if change in stale:  # beyond Linux's largest pid; another brainbot; another file
        info[change] = stale[change]
    Path(str(copy) + ".serve.json").write_text(
        "{not json" if change == "garbage" else json.dumps(info))
    run = cli("query", "proofing dough", "-k", "2", "--db", str(copy), "--json")
    assert run.returncode == 0 and len(json.loads(run.stdout)) == 2
    assert run.stderr.splitlines() == ["True True"]  # searched here, nothing said


def test_the_daemon_answers_only_for_the_index_it_serves(daemon):
    """The CLI sends the path and index_id it read from the index file: another index_id
    or path is a 409 (the CLI then searches itself), a malformed one a 400."""
    db = daemon.proc.args[daemon.proc.args.index("--db") + 1]
    info = json.loads(Path(db + ".serve.json").read_text())
    assert info["path"] == os.path.realpath(db) and len(info["index_id"]) == 32
    ours = {"path": info["path"], "index_id": info["index_id"]}
    for body in ({"query": "dough"}, {"question": "How often do I feed the starter?"}):
        route = "/api/search" if "query" in body else "/api/ask"
        assert daemon.json("POST", route, {**body, "index": ours})[0] == 200
        for other in ({**ours, "index_id": "0" * 32}, {**ours, "path": "/elsewhere/n.db"}):
            status, reply = daemon.json("POST", route, {**body, "index": other})
            assert status == 409 and "this server serves" in reply["error"], reply
        status, reply = daemon.json("POST", route, {**body, "index": {"path": 1}})
        assert status == 400 and "index must be" in reply["error"]


def test_a_replaced_index_is_served_as_it_now_is(tmp_path, shared_embedder):
    """`copy --replace` writes another index (a new index_id) at the daemon's path: the
    daemon reopens it, says its new index_id in the file, and the CLI's output through it
    is what an in-process query of the new index prints."""
    import shutil

    from test_related import write_vault

    from brainbot.index.indexer import Indexer

    served, other = tmp_path / "served.db", tmp_path / "other.db"
    with Indexer(served, embedder=shared_embedder) as ix:
        ix.index_paths([write_vault(tmp_path / "vault")])
    with Indexer(other, embedder=shared_embedder) as ix:
        ix.index_paths([EXAMPLES])
    d = Daemon(served)
    try:
        file = Path(str(served) + ".serve.json")
        before = json.loads(file.read_text())["index_id"]
        first = cli("query", "sourdough", "-k", "3", "--db", str(served), "--json")
        assert first.stderr.splitlines()[-1] == "False False"  # through the daemon
        subprocess.run([sys.executable, "-m", "brainbot", "copy", "--from", str(other),
                        "--to", str(served), "--replace"], check=True, capture_output=True)
        alone = tmp_path / "alone.db"
        shutil.copy(served, alone)
        via = cli("query", "sourdough", "-k", "3", "--db", str(served), "--json")
        here = cli("query", "sourdough", "-k", "3", "--db", str(alone), "--json")
        assert via.stdout == here.stdout != first.stdout
        assert via.stderr.splitlines()[-1] == "False False"
        assert {h["path"] for h in json.loads(via.stdout)} <= {
            str(p.relative_to(EXAMPLES)) for p in EXAMPLES.rglob("*.md")}
        after = json.loads(file.read_text())["index_id"]
        assert after != before and len(after) == 32
    finally:
        assert d.stop() in (0, -15)


def test_the_daemon_file_lives_as_long_as_the_daemon(daemon, tmp_path):
    import shutil

    db = tmp_path / "own.db"
    shutil.copy(daemon.proc.args[daemon.proc.args.index("--db") + 1], db)
    d = Daemon(db)
    file = Path(str(db) + ".serve.json")
    announced = wait_until(lambda: json.loads(file.read_text()), "the daemon announced")
    assert announced["port"] == d.port
    assert d.stop() in (0, -15)
    assert not file.exists()


@pytest.fixture(scope="module")
def partial_daemon(tmp_path_factory, shared_embedder):
    """A daemon of test_related's vault with one note indexed but not embedded yet."""
    from test_related import partly_embedded

    d = Daemon(partly_embedded(tmp_path_factory.mktemp("partial"), shared_embedder))
    yield d
    assert d.stop() in (0, -15)


def test_api_says_partial_index_as_the_mcp_tools_do(partial_daemon):
    """/api/search (vector, hybrid), /api/related and /api/ask carry the MCP tools'
    partial_index line while chunks lack a vector; bm25 search does not."""
    d = partial_daemon
    for mode in ("hybrid", "vector"):
        status, found = d.json("POST", "/api/search", {"query": "dough", "mode": mode})
        assert status == 200 and found["hits"], found
        line = found["partial_index"]
        assert "5 of 6 chunks embedded" in line and "`brainbot index` embeds the rest" in line
        assert "vector and hybrid results cover only the embedded chunks" in line
        assert "\n" not in line
        assert found["partial"] and "5 of 6" in found["partial"]  # the CLI's own note, kept
    status, found = d.json("POST", "/api/search", {"query": "dough", "mode": "bm25"})
    assert status == 200 and found["hits"] and "partial_index" not in found
    status, near = d.json("GET", "/api/related?note=sourdough&k=3")
    assert status == 200 and "5 of 6 chunks embedded" in near["partial_index"]
    assert "related notes cover only the embedded chunks" in near["partial_index"]
    status, answer = d.json("POST", "/api/ask", {"question": "What goes on a focaccia?"})
    assert status == 200 and "5 of 6 chunks embedded" in answer["partial_index"]


def test_mcp_related_over_http_says_partial_index(partial_daemon, daemon):
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def main(port):
        async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as streams:
            async with ClientSession(streams[0], streams[1]) as s:
                await s.initialize()
                return (await s.call_tool("related", {"note": "sourdough", "k": 3})
                        ).structured_content

    partial = anyio.run(main, partial_daemon.port)
    assert "5 of 6 chunks embedded" in partial["partial_index"] and partial["related"]
    whole = anyio.run(main, daemon.port)
    assert "partial_index" not in whole and whole["related"]


QUESTION = "How often do I feed the sourdough starter?"


def new_ids(out: str) -> str:
    """``out`` with each new conversation's id (a fresh random one per ask) as ID."""
    import re

    return re.sub(r'"conversation": "[0-9a-f]{12}"', '"conversation": "ID"', out)


def test_cli_ask_uses_the_daemon_with_the_same_output(daemon, tmp_path):
    """Offline (extractive): `ask` and `ask --json` print the same through the daemon as
    in-process; a CLI that would reach Claude (a key set) does not use an offline daemon."""
    import shutil

    db = daemon.proc.args[daemon.proc.args.index("--db") + 1]
    alone = tmp_path / "alone.db"
    shutil.copy(db, alone)
    env = offline_env()
    for fmt in ((), ("--json",), ("-k", "3", "--json")):
        via = cli("ask", QUESTION, "--db", db, *fmt, env=env)
        here = cli("ask", QUESTION, "--db", str(alone), *fmt, env=env)
        assert via.returncode == here.returncode == 0, via.stderr + here.stderr
        assert new_ids(via.stdout) == new_ids(here.stdout) and via.stdout.strip()
        assert via.stderr.splitlines()[:-1] == here.stderr.splitlines()[:-1]
        assert via.stderr.splitlines()[-1] == "False False"  # no numpy, no onnxruntime
        assert here.stderr.splitlines()[-1] == "True True"
    answer = json.loads(cli("ask", QUESTION, "--db", db, "--json", env=env).stdout)
    assert answer["mode"] == "extractive" and answer["citations"]
    keyed = cli("ask", QUESTION, "--db", db, "--json", "--show-context",
                env={**env, "ANTHROPIC_API_KEY": "k"})
    assert keyed.stderr.splitlines()[-1] == "True True"  # an option the API does not take
    keyed = cli("ask", QUESTION, "--db", db, "--json",
                env={**env, "ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"})
    assert keyed.stderr.splitlines()[-1] == "True True"  # another Claude than the daemon's


def test_cli_ask_through_the_daemon_reaches_the_same_claude(examples_db, tmp_path):
    """A daemon pointed at the fake Messages API, and a CLI with the same ANTHROPIC_*
    settings: the same --json with and without the daemon; a CLI without a key answers
    here (extractive)."""
    import shutil

    from fake_anthropic import FakeAnthropic, cite_text, message, search_results, text

    def reply(body):
        i = next(i for i, b in enumerate(search_results(body))
                 if "sourdough" in b["source"])
        return message(text("Twice a day.", [cite_text(body, i, "twice")]))

    db = copy_tree(examples_db.parent, tmp_path / "served") / examples_db.name
    alone = tmp_path / "alone.db"
    shutil.copy(db, alone)
    with FakeAnthropic() as fake:
        claude = {"ANTHROPIC_BASE_URL": fake.url, "ANTHROPIC_API_KEY": "test-key"}
        d = Daemon(db, env=claude)
        try:
            fake.push(reply, reply)
            env = {**offline_env(), **claude}
            via = cli("ask", QUESTION, "--db", str(db), "--json", env=env)
            here = cli("ask", QUESTION, "--db", str(alone), "--json", env=env)
            assert via.returncode == here.returncode == 0, via.stderr + here.stderr
            assert new_ids(via.stdout) == new_ids(here.stdout)
            assert via.stderr.splitlines()[-1] == "False False"
            answer = json.loads(via.stdout)
            assert answer["mode"] == "claude" and answer["citations"][0]["verified"]
            assert len(fake.bodies) == 2  # one call each: the daemon's, then this process's
            offline = cli("ask", QUESTION, "--db", str(db), "--json", env=offline_env())
            assert offline.stderr.splitlines()[-1] == "True True"
            assert json.loads(offline.stdout)["mode"] == "extractive"
        finally:
            assert d.stop() in (0, -15)


def test_api_ask_continues_a_conversation_across_a_daemon_restart(examples_db, tmp_path):
    """POST /api/ask takes "conversation" (or "follow_up") and returns it; a restarted
    daemon continues what the first one saved; the CLI's `ask --follow-up` goes through the
    daemon and continues it too."""
    db = index_copy(examples_db, tmp_path / "served")
    d = Daemon(db)
    try:
        status, first = d.json("POST", "/api/ask", {"question": "How do I make the tare "
                                                     "for my shoyu ramen?"})
        assert status == 200 and isinstance(first["conversation"], str) and first["turn"] == 1
        cid = first["conversation"]
        status, follow = d.json("POST", "/api/ask", {"question": "how long does it keep?",
                                                      "conversation": cid})
        assert status == 200 and follow["conversation"] == cid and follow["turn"] == 2
        assert "3 months" in follow["answer"]
        assert d.json("GET", "/api/status")[1]["conversations"] == 1
        for body, needle in (({"question": "q", "conversation": 7}, "conversation must be"),
                             ({"question": "q", "follow_up": "yes"}, "follow_up must be"),
                             ({"question": "q", "conversation": "nope"}, "no conversation")):
            status, err = d.json("POST", "/api/ask", body)
            assert status == 400 and needle in err["error"] and "\n" not in err["error"]
    finally:
        assert d.stop() in (0, -15)
    d = Daemon(db)
    try:
        status, again = d.json("POST", "/api/ask", {"question": "and the eggs, how long do "
                                                     "they marinate?", "follow_up": True})
        assert status == 200 and again["conversation"] == cid and again["turn"] == 3
        r = cli("ask", "--follow-up", "what about the chashu?", "--db", str(db), "--json",
                env=offline_env())
        assert r.stderr.splitlines()[-1] == "False False", r.stderr  # through the daemon
        assert json.loads(r.stdout)["turn"] == 4
    finally:
        assert d.stop() in (0, -15)
