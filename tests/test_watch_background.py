"""The servers never wait for embeddings: `brainbot mcp --watch`, `brainbot serve --watch`
and `brainbot watch` run each pass's lexical phase only and the semantic phase in the
background, batch by batch.

The semantic phase is held mid-way by the reliability harness's hook (BB_TEST_HOLD_EMBED:
k batches, then it waits for a file, or for the server to stop), so "before it finishes"
is a state the test makes, not a race it wins: while it is held the server answers bm25
queries, a changed note's pass still commits, and `status`, `search` and `ask` say the
index is partial. Released, it completes; stopped while held, the server leaves a
consistent index that `brainbot index` completes into the clean one."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from reliability_kit import check_consistent, cli_env, hooked_env, run_cli, snapshot
from test_mcp import server_env, session
from test_watch import next_line
from wait_kit import WAIT_S, until, wait_until

from brainbot.index.indexer import Indexer

NOTES = 12
BATCH = 4  # chunks per semantic batch: 12 notes of one chunk are 3 batches


def small_vault(root: Path) -> Path:
    root.mkdir(parents=True)
    for i in range(NOTES):
        (root / f"n{i:02}.md").write_text(f"# Note {i}\n\nLantern {i} hangs by gate "
                                          f"{i * 7 % 101} of the walled garden.\n")
    (root / "n11.md").write_text("# Note 11\n\nThe marzipan orchard is pruned in winter.\n")
    return root


def held(tmp_path: Path, after: int = 1) -> tuple[dict[str, str], Path]:
    """(the server's environment, the gate): the semantic phase holds after ``after``
    batches of BATCH chunks until the gate file exists (or the server stops)."""
    gate = tmp_path / "gate"
    hooks = hooked_env(tmp_path / "hooks", BB_TEST_EMBED_BATCH=str(BATCH),
                       BB_TEST_HOLD_EMBED=f"{after}:{gate}")
    return hooks, gate


def clean_snapshot(tmp_path: Path, vault: Path) -> dict:
    """A clean index of ``vault`` at a new index's default precision (int8 since #33), the
    one the watch and `brainbot index` wrote the index compared with it."""
    clean = tmp_path / "clean.db"
    with Indexer(clean) as ix:
        ix.index_paths([vault])
    return snapshot(clean)


def is_held(gate: Path):
    async def check():
        return Path(f"{gate}.held").exists()

    return check


def test_mcp_watch_answers_bm25_while_the_semantic_phase_is_held(tmp_path):
    vault = small_vault(tmp_path / "v")
    db = tmp_path / "w.db"
    hooks, gate = held(tmp_path)
    err = tmp_path / "server.err"

    async def call(s, tool, **args):
        return (await s.call_tool(tool, args)).structured_content

    async def body(s):
        await until(is_held(gate), "the semantic phase held after one batch", timeout=180)
        bm25 = await call(s, "search", query="marzipan orchard", mode="bm25")
        hybrid = await call(s, "search", query="lantern gate", k=12)
        status = await call(s, "status")
        asked = await call(s, "ask", question="When is the marzipan orchard pruned?")
        # a change while the embedding is held: its pass commits all the same
        (vault / "late.md").write_text("# Late\n\nA xylophone stands in the greenhouse.\n")

        async def late():
            return (await call(s, "search", query="xylophone greenhouse", mode="bm25"))["hits"]

        late_hits = await until(late, "the changed note's pass, behind a held embedding")
        gate.touch()  # release the semantic phase

        async def whole():
            st = await call(s, "status")
            return st if "partial_index" not in st else None

        done = await until(whole, "the semantic phase completed", timeout=180)
        after = await call(s, "search", query="xylophone greenhouse", k=3)
        return bm25, hybrid, status, asked, late_hits, done, after

    bm25, hybrid, status, asked, late_hits, done, after = session(
        db, body, "--watch", str(vault), errlog=err, env=server_env(**hooks))
    log = err.read_text()
    assert "Traceback" not in log, log
    # held: one batch of BATCH chunks embedded, every note found by bm25
    assert bm25["hits"][0]["path"] == "n11.md" and "partial_index" not in bm25
    assert status["embedded"] == f"{BATCH} of {NOTES} chunks embedded", status
    assert "embedding the rest in the background" in status["partial_index"]
    assert status["watch"]["semantic"]["running"] is True
    assert f"{BATCH} of {NOTES} chunks embedded" in hybrid["partial_index"]
    flags = [h["embedded"] for h in hybrid["hits"]]
    assert len(flags) >= NOTES - 1 and flags.count(True) == BATCH, flags  # n11: no lantern
    assert "partial_index" in asked and asked["outcome"]
    assert late_hits[0]["path"] == "late.md"
    # released: everything embedded, said once in the log
    assert done["embedded"] == f"{NOTES + 1} of {NOTES + 1} chunks embedded"
    assert "partial_index" not in after and after["hits"][0]["path"] == "late.md"
    assert all(h["embedded"] for h in after["hits"])
    assert "semantic phase done" in log and f"{NOTES + 1} of {NOTES + 1}" in log, log
    check_consistent(db)
    assert snapshot(db) == clean_snapshot(tmp_path, vault)


def test_the_instructions_say_the_index_is_partial(tmp_path):
    """At the handshake, an index `index --no-embed` left: the agent is told results may
    improve; a whole index is not called partial."""
    vault = small_vault(tmp_path / "v")
    db = tmp_path / "p.db"
    result = run_cli("index", str(vault), "--db", str(db), "--no-embed", env=cli_env())
    assert result.returncode == 0, result.stderr
    instructions = _instructions(db)
    assert f"partly embedded (0 of {NOTES} chunks embedded)" in instructions, instructions
    assert "`brainbot index` has embedded the rest" in instructions
    asked = run_cli("ask", "When is the marzipan orchard pruned?", "--db", str(db), "--json",
                    env=cli_env())
    assert asked.returncode == 0, asked.stderr
    assert asked.stderr.strip() == (f"note: 0 of {NOTES} chunks embedded; run `brainbot "
                                    "index` to finish (the vector leg sees only embedded "
                                    "chunks)")
    json.loads(asked.stdout)  # stdout is the JSON alone
    assert run_cli("index", str(vault), "--db", str(db), env=cli_env()).returncode == 0
    assert "partly embedded" not in _instructions(db)
    asked = run_cli("ask", "When is the marzipan orchard pruned?", "--db", str(db),
                    env=cli_env())
    assert asked.returncode == 0 and "chunks embedded" not in asked.stderr, asked.stderr


def _instructions(db: Path) -> str:
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "brainbot", "mcp", "--db", str(db)],
                                   env=server_env())

    async def main():
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as s:
                return (await s.initialize()).instructions

    return anyio.run(main)


def test_mcp_exit_mid_semantic_phase_leaves_a_resumable_index(tmp_path):
    """The client leaves while the semantic phase is held after one batch: the server stops
    it between batches (the batch in flight is dropped), closes the writer, and the index
    holds exactly the committed batch; `brainbot index` completes it into the clean one."""
    import sqlean

    vault = small_vault(tmp_path / "v")
    db = tmp_path / "w.db"
    hooks, gate = held(tmp_path)
    err = tmp_path / "server.err"

    async def body(s):
        await until(is_held(gate), "the semantic phase held after one batch", timeout=180)
        return (await s.call_tool("status", {})).structured_content

    status = session(db, body, "--watch", str(vault), errlog=err, env=server_env(**hooks))
    assert status["embedded"] == f"{BATCH} of {NOTES} chunks embedded"
    assert not Path(f"{db}-wal").exists(), err.read_text()  # the writer closed cleanly
    assert "Traceback" not in err.read_text() and "did not stop" not in err.read_text()
    check_consistent(db, complete=False)
    conn = sqlean.connect(str(db))
    try:
        vectors = conn.execute("SELECT count(*) FROM embeddings").fetchone()[0]
        documents = conn.execute("SELECT count(*) FROM documents").fetchone()[0]
    finally:
        conn.close()
    assert (documents, vectors) == (NOTES, BATCH)
    result = run_cli("index", str(vault), "--db", str(db), env=cli_env())
    assert result.returncode == 0, result.stderr
    check_consistent(db)
    assert snapshot(db) == clean_snapshot(tmp_path, vault)


def test_serve_watch_answers_while_the_semantic_phase_is_held(tmp_path, monkeypatch):
    from test_serve import Daemon

    vault = small_vault(tmp_path / "v")
    hooks, gate = held(tmp_path)
    for key, value in hooks.items():
        monkeypatch.setenv(key, value)
    daemon = Daemon(tmp_path / "s.db", "--watch", str(vault))
    try:
        wait_until(lambda: Path(f"{gate}.held").exists(), "the semantic phase held",
                   timeout=180)
        code, found = daemon.json("POST", "/api/search", {"query": "marzipan orchard",
                                                          "mode": "bm25"})
        assert code == 200 and found["hits"][0]["path"] == "n11.md", found
        code, status = daemon.json("GET", "/api/status")
        assert code == 200 and status["embedded"] == f"{BATCH} of {NOTES} chunks embedded"
        assert status["watch"]["semantic"]["running"] is True
        gate.touch()
        wait_until(lambda: daemon.json("GET", "/api/status")[1]["embedded"] ==
                   f"{NOTES} of {NOTES} chunks embedded", "the semantic phase completed",
                   timeout=180)
    finally:
        output = daemon.output()
        assert daemon.stop() in (0, -signal.SIGTERM), output
    assert "Traceback" not in output, output


def test_watch_prints_the_lexical_pass_then_the_semantic_phase(tmp_path):
    """`brainbot watch --json`: the first pass's line comes with nothing embedded yet (the
    pass did not wait), then the semantic phase's end, with every chunk embedded."""
    vault = small_vault(tmp_path / "v")
    db = tmp_path / "w.db"
    env = cli_env(**hooked_env(tmp_path / "hooks", BB_TEST_EMBED_BATCH=str(BATCH)))
    proc = subprocess.Popen([sys.executable, "-m", "brainbot", "watch", str(vault), "--db",
                             str(db), "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = json.loads(next_line(proc.stdout, timeout=180))
        assert first["phase"] == "lexical" and first["new"] == NOTES, first
        assert first["vectors"] == 0 and first["chunks"] == NOTES, first
        semantic = json.loads(next_line(proc.stdout, timeout=180))
        assert semantic["phase"] == "semantic" and semantic["error"] is None, semantic
        assert (semantic["vectors"], semantic["chunks"], semantic["embedded"]) == \
            (NOTES, NOTES, NOTES), semantic
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=WAIT_S) == 0
    assert "Traceback" not in proc.stderr.read()
    check_consistent(db)


def test_sigterm_stops_watch_between_semantic_batches(tmp_path):
    """SIGTERM while the semantic phase is held after two batches: exit 0, the two
    batches kept, the one in flight dropped; the next `brainbot index` completes it."""
    vault = small_vault(tmp_path / "v")
    db = tmp_path / "w.db"
    hooks, gate = held(tmp_path, after=2)
    proc = subprocess.Popen([sys.executable, "-m", "brainbot", "watch", str(vault), "--db",
                             str(db), "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=cli_env(**hooks))
    try:
        assert json.loads(next_line(proc.stdout, timeout=180))["new"] == NOTES
        wait_until(lambda: Path(f"{gate}.held").exists(), "held", timeout=180)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=WAIT_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "Traceback" not in proc.stderr.read()
    check_consistent(db, complete=False)
    assert len(snapshot(db)["chunks"]) == 2 * BATCH  # the chunks with a vector
    assert run_cli("index", str(vault), "--db", str(db), env=cli_env()).returncode == 0
    check_consistent(db)
