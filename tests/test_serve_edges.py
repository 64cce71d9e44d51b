"""`brainbot serve` at its edges (issue 32): the port and the daemon file (M8), the Host
check (L15), a body over the limit (L16), text that is not UTF-8 (M10), the handshake's
instructions said as the index now is (L14), framing (L19), the token from the
environment and an owner-only daemon file (L20). Each daemon is a real process on a
free port (tests/test_serve.py's Daemon)."""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from conftest import copy_tree
from test_serve import Daemon, offline_env
from wait_kit import wait_until

from brainbot.serve.http import MAX_BODY, Guard


@pytest.fixture(scope="module")
def served(examples_db, tmp_path_factory):
    """A daemon of a copy of the examples index, and that index's path."""
    db = copy_tree(examples_db.parent, tmp_path_factory.mktemp("edges") / "n") / \
        examples_db.name
    d = Daemon(db)
    yield d, db
    assert d.stop() in (0, -15)


def announced(db: Path) -> dict:
    return json.loads(Path(f"{db}.serve.json").read_text())


def serve(db: Path, *argv: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "brainbot", "serve", "--db", str(db),
                             *argv], env=offline_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **kwargs)


# -- M8: the port and the daemon file -----------------------------------------------------
def test_a_busy_port_is_one_line_and_leaves_the_first_daemon_announced(served):
    d, db = served
    before = announced(db)
    assert before["pid"] == d.proc.pid and before["port"] == d.port
    second = serve(db, "--port", str(d.port))
    out, _ = second.communicate(timeout=120)
    assert second.returncode == 2
    assert out == (f"brainbot: error: port {d.port} is in use on 127.0.0.1 (another "
                   "brainbot serve, or another program); pass another --port\n")
    assert announced(db) == before
    assert d.json("GET", "/health") == (200, {"ok": True})


def test_a_second_daemon_of_the_index_leaves_the_first_announced(served):
    """Two daemons of one index on two ports: the file keeps naming the first, whose
    pid is alive and which answers, before and after the second exits."""
    d, db = served
    before = announced(db)
    second = Daemon(db)
    try:
        assert second.json("GET", "/api/status")[0] == 200
        assert announced(db) == before
        assert f"names pid {d.proc.pid} on port {d.port}" in second.output()
    finally:
        assert second.stop() in (0, -15)
    assert announced(db) == before
    assert d.json("GET", "/health") == (200, {"ok": True})


def test_a_dead_daemons_file_is_written_over_and_the_file_is_the_owners_only(
        examples_db, tmp_path):
    db = copy_tree(examples_db.parent, tmp_path / "n") / examples_db.name
    Path(f"{db}.serve.json").write_text(json.dumps(
        {"pid": 2 ** 22 + 12345, "port": 1, "path": os.path.realpath(db)}))
    d = Daemon(db)
    try:
        assert announced(db)["pid"] == d.proc.pid
        assert stat.S_IMODE(os.stat(f"{db}.serve.json").st_mode) == 0o600
    finally:
        assert d.stop() in (0, -15)
    assert not Path(f"{db}.serve.json").exists()


# -- L15: the Host check ------------------------------------------------------------------
def test_port_zero_serves_and_announces_the_port_it_bound(served, tmp_path):
    _, db = served
    alone = tmp_path / "zero.db"
    alone.write_bytes(db.read_bytes())
    proc = serve(alone, "--port", "0")
    try:
        line = proc.stdout.readline()  # the first line: said once the port is bound
        found = re.search(r"serving http://127\.0\.0\.1:(\d+)/", line)
        assert found, line
        port = int(found.group(1))
        assert port != 0
        conn = _get(port, "/api/status", f"127.0.0.1:{port}")
        assert conn[0] == 200, conn
        wait_until(Path(f"{alone}.serve.json").exists, "the daemon announced", timeout=120)
        assert announced(alone)["port"] == port
    finally:
        proc.terminate()
        proc.communicate(timeout=60)


def _get(port: int, path: str, host: str, host_ip: str = "127.0.0.1") -> tuple[int, bytes]:
    import http.client

    conn = http.client.HTTPConnection(host_ip, port, timeout=60)
    try:
        conn.putrequest("GET", path, skip_host=True)
        conn.putheader("Host", host)
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_the_bound_loopback_address_is_a_name_of_the_server(served):
    _, db = served
    d = Daemon(db, host="127.0.0.2")
    try:
        assert _get(d.port, "/api/status", f"127.0.0.2:{d.port}", "127.0.0.2")[0] == 200
        assert _get(d.port, "/api/status", f"127.0.0.3:{d.port}", "127.0.0.2")[0] == 403
    finally:
        assert d.stop() in (0, -15)


def test_port_80_accepts_a_host_without_the_port():
    """A browser leaves :80 out of Host; on another port the port is required."""
    on80, other = Guard(None, 80, None, True), Guard(None, 8765, None, True)
    for host in ("127.0.0.1", "localhost", "127.0.0.1:80", "[::1]"):
        assert on80.refusal({"host": host}) is None, host
    assert on80.refusal({"host": "evil.example"})[0] == 403
    assert other.refusal({"host": "127.0.0.1"})[0] == 403
    assert other.refusal({"host": "127.0.0.1:8765"}) is None


# -- L16: a body over the limit -------------------------------------------------------------
def test_a_body_over_the_limit_is_refused_before_it_is_read(served):
    """A Content-Length over MAX_BODY is answered 413 while the body is still coming (the
    client has sent one byte of it); a chunked one, once MAX_BODY has come in."""
    d, _ = served
    with socket.create_connection(("127.0.0.1", d.port), timeout=60) as sock:
        sock.sendall(f"POST /api/search HTTP/1.1\r\nHost: 127.0.0.1:{d.port}\r\n"
                     "Content-Type: application/json\r\nContent-Length: 30000000\r\n"
                     "\r\n{".encode())
        head = sock.recv(65536).decode("latin-1")
        head += sock.recv(65536).decode("latin-1")  # the body, if not in the first read
    assert head.startswith("HTTP/1.1 413"), head
    assert f"over {MAX_BODY} bytes" in head
    with socket.create_connection(("127.0.0.1", d.port), timeout=60) as sock:
        sock.sendall(f"POST /api/search HTTP/1.1\r\nHost: 127.0.0.1:{d.port}\r\n"
                     "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                     "\r\n".encode())
        piece = b"x" * 1024
        try:
            for _ in range(MAX_BODY // len(piece) + 8):
                sock.sendall(b"400\r\n" + piece + b"\r\n")
        except OSError:  # the server answered and closed: what is asserted below
            pass
        head = sock.recv(65536).decode("latin-1")
    assert head.startswith("HTTP/1.1 413"), head
    assert d.json("GET", "/health") == (200, {"ok": True})


# -- L19: framing ---------------------------------------------------------------------------
def test_the_page_may_not_be_framed(served):
    d, _ = served
    for path in ("/", "/static/app.js"):
        status, headers, _ = d.request("GET", path)
        assert status == 200
        assert "frame-ancestors 'none'" in headers["content-security-policy"]
        assert headers["x-frame-options"] == "DENY"


# -- L20: the token from the environment ----------------------------------------------------
def test_the_token_may_come_from_the_environment(served):
    _, db = served
    d = Daemon(db, host="0.0.0.0", env={"BRAINBOT_TOKEN": "s3cret"})
    d.host = "127.0.0.1"
    try:
        assert d.request("GET", "/health")[0] == 401
        ok = {"Authorization": "Bearer s3cret"}
        assert d.json("GET", "/health", None, ok) == (200, {"ok": True})
        assert "s3cret" not in " ".join(d.proc.args)
    finally:
        assert d.stop() in (0, -15)


# -- M10: text that is not UTF-8 --------------------------------------------------------------
@pytest.mark.parametrize("route,raw,what", [
    ("/api/search", b'{"query": "\\ud800 flour"}', "the query"),
    ("/api/search", b'{"query": "flour", "mode": "vector", "tag": "\\udcff"}', "tag"),
    ("/api/search", b'{"query": "flour", "path": "\\udcff*"}', "path"),
    ("/api/ask", b'{"question": "caf\\udce9 flour"}', "the question"),
])
def test_api_text_that_is_not_utf8_is_a_400(served, route, raw, what):
    d, _ = served
    status, reply = d.json("POST", route, raw)
    assert (status, reply) == (400, {"error": f"{what} is not valid UTF-8"})


@pytest.mark.parametrize("query", [b"\\ud800 flour", b"\xff flour"])
def test_mcp_text_that_is_not_utf8_is_one_line(served, query):
    """Over MCP the SDK's own JSON parser refuses a lone surrogate or a byte that is not
    UTF-8 (a JSON-RPC parse error, before any tool runs: the tool's own refusal is
    tests/test_serve_service.py's); never a 500, and the server goes on."""
    d, _ = served
    call = (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": '
            b'"search", "arguments": {"query": "' + query + b'"}}}')
    status, _, raw = d.request("POST", "/mcp", call,
                               {"Accept": "application/json, text/event-stream"})
    reply = json.loads(raw)
    assert status < 500 and "\n" not in reply["error"]["message"], reply
    assert "unicode" in reply["error"]["message"] or "escape" in reply["error"]["message"]
    assert d.json("POST", "/api/search", {"query": "flour", "k": 1})[0] == 200


# -- L14: the handshake says the index as it now is ------------------------------------------
def test_the_handshake_says_how_far_the_index_is_embedded_now(tmp_path, shared_embedder):
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from test_related import partly_embedded

    from brainbot.index.indexer import Indexer

    db = partly_embedded(tmp_path, shared_embedder)
    d = Daemon(db)

    async def instructions() -> str:
        async with streamable_http_client(f"http://127.0.0.1:{d.port}/mcp") as streams:
            async with ClientSession(streams[0], streams[1]) as s:
                return (await s.initialize()).instructions

    try:
        assert "partly embedded (5 of 6 chunks embedded)" in anyio.run(instructions)
        with Indexer(db, embedder=shared_embedder) as ix:
            ix.embed_missing()
        now = anyio.run(instructions)
        assert "partly embedded" not in now and "brainbot searches" in now
    finally:
        assert d.stop() in (0, -15)
