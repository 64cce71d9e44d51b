"""brainbot as a service: warm MCP search latency, and how soon a saved note is searchable.

1. Warm `search` through a real MCP client session (the SDK's stdio client spawning
   `brainbot mcp`), hybrid mode including the query embedding, p50/p95 over 60 queries
   after 5 warm-up calls, at 10k and 100k chunks. The indexes are synthetic (texts of
   ~120 words from a Zipf vocabulary, random unit vectors written through the store): the
   latency of a search does not depend on what the vectors mean, and embedding 100k real
   chunks here takes over an hour.
2. Save-to-searchable through `brainbot watch`: a vault of markdown files (~10k chunks of
   the same synthetic text, indexed with stand-in vectors), watched by `brainbot mcp
   --watch`; 20 edits each append a sentence with a new word to a note; the time until a
   search finds it, polled through the MCP session (every 50 ms) and, for 20 more edits,
   with `brainbot query` as a new process each time (as a user at a shell would).

What is not measured: the quality of these results (see `brainbot eval`).

    python benchmarks/bench_serve.py [--quick] [--min-idle 0.8] [--out benchmarks/results/serve.json]
                                     [--baseline DIR [--baseline-label TEXT]]
    python benchmarks/bench_serve.py --transports|--cold [--min-idle 0.8]

``--min-idle F``: before each timed search (or round of them), wait until the CPUs were
at least F idle over 0.5 s (bench_coldstart.wait_for_idle, 120 s at most), so that on a
shared machine each sample is taken in a quiet moment; the idle shares seen and the load
averages (1, 5, 15 min) at the start and end go into the JSON.

``--baseline DIR``: warm search is also timed with the brainbot package in DIR (say ``git
archive BEFORE brainbot | tar -x -C DIR``, plus the built ``_kernel*.so``; it goes first
on the servers' PYTHONPATH), its server and this tree's open at once on the same index and
called query by query in alternating order: before and after under the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
from http.client import RemoteDisconnected
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_coldstart import IDLE_SEEN, wait_for_idle  # noqa: E402 - after the path

VOCAB = 20_000
WORDS_PER_CHUNK = 120


def words(rng, n: int) -> list[str]:
    ranks = np.minimum(rng.zipf(1.2, n), VOCAB)
    return [f"w{r}" for r in ranks]


def fake_vectors(n: int, rng) -> np.ndarray:
    m = rng.standard_normal((n, 384)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def build_synthetic(db: Path, chunks: int, seed: int = 7) -> None:
    """An index of ``chunks`` synthetic chunks, 10 per document, through the store."""
    from brainbot.store.identity import current
    from brainbot.store.records import NewChunk, NewDocument
    from brainbot.store.target import open_store
    from brainbot.text import lexical
    from brainbot.text.chunking import Chunk

    rng = np.random.default_rng(seed)
    with open_store(db, write=True, identity=current()) as store:
        store.record_identity(current())
        for d in range(0, chunks, 1000):
            with store.batch():
                for doc in range(d // 10, min(d + 1000, chunks) // 10):
                    news, vecs = [], fake_vectors(10, rng)
                    for i in range(10):
                        text = " ".join(words(rng, WORDS_PER_CHUNK))
                        c = Chunk(f"{doc:08x}{i:08x}", i, f"n{doc}.md", ("N",), text, text,
                                  i + 1, i + 1, 0, len(text), 150, 150)
                        terms, length = lexical.term_frequencies(text)
                        news.append(NewChunk(c, f"{doc}-{i}", vecs[i], terms, length))
                    store.add_document(NewDocument("/synthetic", f"n{doc}.md", "x", 1, 0,
                                                   "N", {}, "note", [], news))


def server_env(baseline: Path | None = None) -> dict[str, str]:
    """The servers' environment: no API key; PYTHONPATH picks the baseline's package."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC")}
    env.pop("PYTHONPATH", None)
    if baseline is not None:
        env["PYTHONPATH"] = str(baseline)
    return env


def _params(db: Path, *extra: str, baseline: Path | None = None):
    """`brainbot mcp` for the SDK's client. With a baseline it runs in the index's folder,
    which has no brainbot/ to shadow PYTHONPATH (`python -m` puts the cwd first)."""
    from mcp import StdioServerParameters

    return StdioServerParameters(command=sys.executable,
                                 args=["-m", "brainbot", "mcp", "--db", str(db), *extra],
                                 env=server_env(baseline),
                                 cwd=str(db.parent) if baseline is not None else None)


async def _session(db: Path, body, *extra: str):
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    with open(os.devnull, "w") as err:
        async with stdio_client(_params(db, *extra), errlog=err) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                return await body(s)


async def _sessions(db: Path, body, baseline: Path | None):
    """``body({name: session})``: this tree's server and, with ``baseline``, the
    baseline's, both open at once."""
    from contextlib import AsyncExitStack

    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    trees = {"current": None} | ({"baseline": baseline} if baseline is not None else {})
    with open(os.devnull, "w") as err:
        async with AsyncExitStack() as stack:
            sessions = {}
            for name, tree in trees.items():
                read, write = await stack.enter_async_context(
                    stdio_client(_params(db, baseline=tree), errlog=err))
                sessions[name] = await stack.enter_async_context(ClientSession(read, write))
                await sessions[name].initialize()
            return await body(sessions)


def warm_search(db: Path, queries: int = 60, min_idle: float = 0.0,
                baseline: Path | None = None) -> dict:
    """p50/p95 of the timed searches; with ``baseline``, of the baseline's server too
    ("baseline"), the two called query by query in alternating order."""
    import anyio

    rng = np.random.default_rng(11)
    texts = [" ".join(words(rng, 6)) for _ in range(queries + 5)]

    async def body(sessions):
        times = {name: [] for name in sessions}
        for i, text in enumerate(texts):
            for name in list(sessions)[::1 - 2 * (i % 2)]:
                if i >= 5:
                    wait_for_idle(min_idle)
                t0 = time.perf_counter()
                result = await sessions[name].call_tool("search", {"query": text, "k": 10})
                if i >= 5:
                    times[name].append((time.perf_counter() - t0) * 1000)
                assert not result.is_error, result.content
        return times

    times = anyio.run(_sessions, db, body, baseline)
    out = _pcts(times["current"])
    if baseline is not None:
        out["baseline"] = _pcts(times["baseline"])
    return out


def build_vault(folder: Path, db: Path, notes: int, seed: int = 5) -> None:
    """``notes`` markdown files of 5 sections each (~2 chunks), indexed with stand-in
    vectors (embedding 10k chunks for real would take an hour here)."""
    from brainbot.index.indexer import Indexer

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    for n in range(notes):
        body = "\n\n".join(f"## Part {k}\n\n" + " ".join(words(rng, 60)) + "." for k in range(5))
        (folder / f"note{n:05}.md").write_text(f"# Note {n}\n\n{body}\n", encoding="utf-8")

    class StandIn:
        fingerprint = "stand-in"

        def embed(self, texts):
            return fake_vectors(len(texts), np.random.default_rng(len(texts)))

    with Indexer(db, embedder=StandIn()) as ix:
        ix.index_paths([folder])


def save_to_searchable(folder: Path, db: Path, edits: int) -> dict:
    import anyio

    notes = sorted(folder.glob("*.md"))

    def edit(i: int) -> str:
        word = f"zq{i}x{int(time.time() * 1000) % 100000}"
        with open(notes[(i * 37) % len(notes)], "a", encoding="utf-8") as f:
            f.write(f"\nA new sentence about {word}.\n")
        return word

    async def body(s):
        await anyio.sleep(3)  # the watch armed and its first pass done
        mcp_times, cli_times = [], []
        for i in range(edits):
            word, t0 = edit(i), time.perf_counter()
            while not (await s.call_tool("search", {"query": word, "mode": "bm25", "k": 1})
                       ).structured_content["hits"]:
                await anyio.sleep(0.05)
            mcp_times.append(time.perf_counter() - t0)
        for i in range(edits, 2 * edits):
            word, t0 = edit(i), time.perf_counter()
            while True:
                out = subprocess.run([sys.executable, "-m", "brainbot", "query", word, "--db",
                                      str(db), "--mode", "bm25", "-k", "1", "--json"],
                                     capture_output=True, text=True, env=server_env())
                if json.loads(out.stdout or "[]"):
                    break
            cli_times.append(time.perf_counter() - t0)
        return mcp_times, cli_times

    mcp_times, cli_times = anyio.run(_session, db, body, "--watch", str(folder))
    return {"edits": edits, "mcp_median_s": round(statistics.median(mcp_times), 3),
            "mcp_max_s": round(max(mcp_times), 3),
            "cli_median_s": round(statistics.median(cli_times), 3),
            "cli_max_s": round(max(cli_times), 3)}


# -- transports: the same warm search over stdio MCP, HTTP /api/search and HTTP /mcp --------
class StdioMcp:
    """`brainbot mcp` in a child process, spoken to in raw JSON-RPC lines (no SDK client,
    so the client costs the same as the raw HTTP one's)."""

    def __init__(self, db: Path) -> None:
        self.err = tempfile.TemporaryFile()  # the server's stderr, said if it dies
        self.proc = subprocess.Popen([sys.executable, "-m", "brainbot", "mcp", "--db", str(db)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.err, env=server_env())
        self.next_id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "0"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict) -> None:
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"brainbot mcp exited {self.proc.wait()}: {self.stderr()}")
            reply = json.loads(line)
            if reply.get("id") == self.next_id:
                return reply

    def stderr(self) -> str:
        self.err.seek(0)
        return self.err.read().decode(errors="replace")[-2000:].strip()

    def search(self, query: str) -> int:
        reply = self.request("tools/call", {"name": "search",
                                            "arguments": {"query": query, "k": 10}})
        return len(reply["result"]["structuredContent"]["hits"])

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.err.close()


class HttpServe:
    """`brainbot serve` in a child process, one keep-alive connection."""

    def __init__(self, db: Path) -> None:
        import http.client
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "brainbot", "serve", "--db", str(db), "--port",
             str(self.port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=server_env())
        for _ in range(600):
            try:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                self.post("/health", None, "GET")
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("brainbot serve did not start")

    def post(self, path: str, body, method: str = "POST", headers=None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json", **(headers or {})}
        try:
            self.conn.request(method, path, body=data, headers=headers)
            return json.loads(self.conn.getresponse().read())
        except (BrokenPipeError, ConnectionResetError, RemoteDisconnected):
            self.conn.close()  # closed by the server as we sent: once more, on a new one
            self.conn.request(method, path, body=data, headers=headers)
            return json.loads(self.conn.getresponse().read())

    def fresh(self) -> None:
        """Drop the connection when the server has closed it, so that the next request
        opens a new one. uvicorn closes a connection idle for 5 s (its keep-alive
        timeout); writing to it then raised BrokenPipeError, which ended the 100k
        --transports run, where a stdio call plus a --min-idle wait outlast 5 s under
        load. An idle keep-alive socket that is readable has been closed (EOF)."""
        sock = self.conn.sock
        if sock is not None and select.select([sock], [], [], 0)[0]:
            self.conn.close()

    def search(self, query: str) -> int:
        return len(self.post("/api/search", {"query": query, "k": 10})["hits"])

    def mcp_search(self, query: str) -> int:
        reply = self.post("/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                   "params": {"name": "search",
                                              "arguments": {"query": query, "k": 10}}},
                          headers={"Accept": "application/json, text/event-stream"})
        return len(reply["result"]["structuredContent"]["hits"])

    def close(self) -> None:
        self.conn.close()
        self.proc.terminate()
        self.proc.wait(timeout=30)


def _pcts(times: list[float]) -> dict:
    return {"p50_ms": round(statistics.median(times), 2),
            "p95_ms": round(float(np.percentile(times, 95)), 2), "queries": len(times)}


def transports(db: Path, queries: int = 60, min_idle: float = 0.0) -> dict:
    """Warm hybrid search through each transport, the calls interleaved query by query
    (the order rotating), so that the machine's noise falls on all three alike; each
    round after a quiet moment (``min_idle``)."""
    rng = np.random.default_rng(11)
    texts = [" ".join(words(rng, 6)) for _ in range(queries + 5)]
    stdio, served = StdioMcp(db), HttpServe(db)
    try:
        calls = {"stdio MCP": stdio.search, "HTTP /api/search": served.search,
                 "HTTP MCP (/mcp)": served.mcp_search}
        times: dict[str, list[float]] = {name: [] for name in calls}
        for i, text in enumerate(texts):
            names = list(calls)[i % 3:] + list(calls)[:i % 3]
            if i >= 5:
                wait_for_idle(min_idle)
            served.fresh()  # not timed: a reconnect only after the server closed it
            for name in names:
                t0 = time.perf_counter()
                assert calls[name](text) > 0
                if i >= 5:
                    times[name].append((time.perf_counter() - t0) * 1000)
        return {name: _pcts(t) for name, t in times.items()}
    finally:
        stdio.close()
        served.close()


def memory(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of a process in bytes, from /proc (PSS shares shared pages out)."""
    fields = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, value = line.split(":", 1)
        fields[name] = int(value.split()[0]) * 1024
    return fields["Rss"], fields["Pss"]


def resident(db: Path, ns=(1, 3)) -> dict:
    """Memory of one serve answering N clients against N stdio `brainbot mcp` processes,
    each warm (one hybrid search done, so model, vectors and postings are loaded)."""
    out = {}
    for n in ns:
        servers = [StdioMcp(db) for _ in range(n)]
        try:
            for s in servers:
                s.search("warm up the vectors")
            mems = [memory(s.proc.pid) for s in servers]
        finally:
            for s in servers:
                s.close()
        served = HttpServe(db)
        try:
            for _ in range(n):
                served.search("warm up the vectors")
            rss, pss = memory(served.proc.pid)
        finally:
            served.close()
        out[str(n)] = {"mcp_rss_mb": round(sum(m[0] for m in mems) / 2**20, 1),
                       "mcp_pss_mb": round(sum(m[1] for m in mems) / 2**20, 1),
                       "serve_rss_mb": round(rss / 2**20, 1),
                       "serve_pss_mb": round(pss / 2**20, 1)}
    return out


def cold_query(chunks: int = 10_000, runs: int = 7, min_idle: float = 0.0) -> dict:
    """`brainbot query` as a whole new process (the console script), hybrid, --json: with
    a `brainbot serve` of the index running (the CLI sends the search there) and on a copy
    of the same index that no daemon serves (searched in-process); runs interleaved."""
    import shutil

    script = str(Path(sys.executable).parent / "brainbot")
    times: dict[str, list[float]] = {"daemon": [], "in-process": []}
    with tempfile.TemporaryDirectory() as tmp:
        db, alone = Path(tmp) / "c.db", Path(tmp) / "alone.db"
        build_synthetic(db, chunks)
        shutil.copy(db, alone)
        served = HttpServe(db)
        try:
            while not Path(str(db) + ".serve.json").exists():
                time.sleep(0.1)
            for i in range(runs + 1):
                for name, target in (("daemon", db), ("in-process", alone))[::1 - 2 * (i % 2)]:
                    if i:
                        wait_for_idle(min_idle)
                    t0 = time.perf_counter()
                    subprocess.run([script, "query", "w1 w2 w30", "--db", str(target), "--json"],
                                   check=True, capture_output=True, env=server_env())
                    if i:  # the first round warms the page cache
                        times[name].append((time.perf_counter() - t0) * 1000)
        finally:
            served.close()
    return {"chunks": chunks, "runs": runs, **{f"{k}_median_ms": round(statistics.median(v), 1)
                                               for k, v in times.items()}}


def idle_seen() -> dict:
    """The idle shares wait_for_idle saw before the timed rounds (min, median)."""
    if not IDLE_SEEN:
        return {}
    return {"idle_seen_min": round(min(IDLE_SEEN), 3),
            "idle_seen_median": round(statistics.median(IDLE_SEEN), 3)}


def loads() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def main_transports(sizes: list[int], out_path: str, min_idle: float = 0.0) -> int:
    out = {"load_start": os.getloadavg()[0], "loads_start": loads(), "cpu": _cpu(),
           "min_idle": min_idle, "search": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            db = Path(tmp) / f"s{n}.db"
            build_synthetic(db, n)
            out["search"][str(n)] = transports(db, min_idle=min_idle)
            print(f"warm search, hybrid, {n:,} chunks: {out['search'][str(n)]}", flush=True)
        out["memory_chunks"] = sizes[-1]
        out["memory"] = resident(Path(tmp) / f"s{sizes[-1]}.db")
        print(f"memory at {sizes[-1]:,} chunks: {out['memory']}", flush=True)
    out["load_end"], out["loads_end"] = os.getloadavg()[0], loads()
    out.update(idle_seen())
    path = Path(out_path)
    if path.exists() and "cold" in json.loads(path.read_text()):  # --cold's, kept
        out["cold"] = json.loads(path.read_text())["cold"]
    path.write_text(json.dumps(out, indent=2) + "\n")
    return 0


def _cpu() -> str:
    names = [x.split(":", 1)[1].strip() for x in Path("/proc/cpuinfo").read_text().splitlines()
             if x.startswith("model name")]
    return names[0] if names else "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10k chunks only, 5 edits")
    parser.add_argument("--out", default=str(REPO / "benchmarks/results/serve.json"))
    parser.add_argument("--transports", action="store_true",
                        help="only the transports (stdio MCP, HTTP /api/search, HTTP /mcp) "
                             "and the memory of serve vs N mcp processes, to "
                             "benchmarks/results/serve_http.json")
    parser.add_argument("--cold", action="store_true",
                        help="only the cold `brainbot query` with and without a daemon, "
                             "added to benchmarks/results/serve_http.json")
    parser.add_argument("--baseline", type=Path, metavar="DIR",
                        help="also time warm search with the brainbot package in DIR (a "
                             "`git archive` of an earlier commit plus its built _kernel*.so), "
                             "query by query against this tree's")
    parser.add_argument("--baseline-label", default="", metavar="TEXT",
                        help="what the baseline is (say, its commit), recorded in the results")
    parser.add_argument("--min-idle", type=float, default=0.0,
                        help="wait before each timed search (or round) until "
                             "the CPUs were this idle over 0.5 s (e.g. 0.8)")
    args = parser.parse_args()
    if args.cold:
        path = REPO / "benchmarks/results/serve_http.json"
        data = json.loads(path.read_text()) if path.exists() else {}
        data["cold"] = {"load_start": os.getloadavg()[0], "loads_start": loads(),
                        "min_idle": args.min_idle, **cold_query(min_idle=args.min_idle)}
        data["cold"]["load_end"], data["cold"]["loads_end"] = os.getloadavg()[0], loads()
        data["cold"].update(idle_seen())
        path.write_text(json.dumps(data, indent=2) + "\n")
        print(data["cold"])
        return 0
    if args.transports:
        return main_transports([10_000] if args.quick else [10_000, 100_000],
                               str(REPO / "benchmarks/results/serve_http.json"), args.min_idle)
    out = {"load_start": os.getloadavg()[0], "loads_start": loads(), "cpu": _cpu(),
           "min_idle": args.min_idle, "search": {}}
    baseline = args.baseline.resolve() if args.baseline else None
    if baseline is not None:
        out["baseline"] = {"dir": str(baseline), "label": args.baseline_label}
    with tempfile.TemporaryDirectory() as tmp:
        for n in [10_000] if args.quick else [10_000, 100_000]:
            db = Path(tmp) / f"s{n}.db"
            build_synthetic(db, n)
            out["search"][str(n)] = warm_search(db, min_idle=args.min_idle, baseline=baseline)
            print(f"warm MCP search, hybrid, {n:,} chunks: {out['search'][str(n)]}", flush=True)
        folder, db = Path(tmp) / "vault", Path(tmp) / "vault.db"
        build_vault(folder, db, 500 if args.quick else 2000)
        with __import__("brainbot.store.target", fromlist=["open_store"]).open_store(db) as store:
            out["watch_chunks"] = store.chunk_count()
        out["watch"] = save_to_searchable(folder, db, 5 if args.quick else 20)
        print(f"save to searchable, {out['watch_chunks']:,} chunks: {out['watch']}", flush=True)
    out["load_end"], out["loads_end"] = os.getloadavg()[0], loads()
    out.update(idle_seen())
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
